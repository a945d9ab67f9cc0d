"""`placement-webhook`: serve | reconcile | extender | explain | devcluster.

Flags have environment fallbacks (PLACEMENT_WEBHOOK_<FLAG>) so the same
binary is configured by a Deployment's env or by a command line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.policy.marks import DEFAULT_NAMESPACE

if TYPE_CHECKING:
    from webhook.devcluster.kubelets import KubeletSpec


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"PLACEMENT_WEBHOOK_{name.upper().replace('-', '_')}", default)


def _load_policy(path: str | None):  # type: ignore[no-untyped-def]
    from webhook.policy.policy_file import PolicyError, default_policy, load_policy

    if not path:
        return default_policy()
    try:
        return load_policy(Path(path).read_text(), source=path)
    except OSError as err:
        raise SystemExit(f"placement-webhook: cannot read policy {path}: {err}") from None
    except PolicyError as err:
        raise SystemExit(f"placement-webhook: invalid policy: {err}") from None


def _serve(args: argparse.Namespace) -> int:
    from webhook import logs
    from webhook.admission.placement import PlacerSettings
    from webhook.admission.rules import ENABLED_LABEL
    from webhook.admission.server import ServeSettings, WebhookServer, build_snapshot_app
    from webhook.serving.endpoints import MetricsSettings, check_bindable, check_metrics_settings

    logs.configure(args.log_format, args.log_level)
    policy = _load_policy(args.policy)
    settings = ServeSettings(
        bind=args.bind,
        certfile=args.tls_cert,
        keyfile=args.tls_key,
        threads=args.threads,
        client_ca=args.client_ca or None,
        client_names=tuple(args.client_name or ()),
        health_bind=args.health_bind,
        metrics=MetricsSettings(
            bind=args.metrics_bind,
            auth=args.metrics_auth,
            certfile=args.tls_cert,
            keyfile=args.tls_key,
        ),
    )
    if settings.metrics.auth == "delegated" and args.snapshot and settings.metrics.bind:
        settings = replace(settings, metrics=replace(settings.metrics, auth="none"))
    try:
        check_metrics_settings(settings.metrics, has_client=not args.snapshot)
        for bind in (settings.health_bind, settings.metrics.bind):
            if bind:
                check_bindable(bind)
    except (OSError, ValueError) as err:
        raise SystemExit(f"placement-webhook: {err}") from None
    if settings.client_names and not settings.client_ca:
        raise SystemExit("placement-webhook: --client-name needs --client-ca")
    placer_settings = PlacerSettings(
        own_namespace=args.namespace,
        handoff_unschedulable=args.handoff_unschedulable,
        namespace_selector_is_authority=settings.client_ca is not None,
    )
    if settings.client_ca is None:
        logging.getLogger("webhook.serve").warning(
            "callers of %s are NOT authenticated (no --client-ca): anyone who can reach the port "
            "can submit reviews; only namespaces the cluster view has seen labelled %s are "
            "placed, and the NetworkPolicy is the only guard of the port",
            settings.bind,
            ENABLED_LABEL,
        )
    if not args.snapshot:
        return _serve_live(args, policy, settings, placer_settings)
    from webhook.cluster.source import SnapshotSource

    try:
        source = SnapshotSource(args.snapshot)
    except (OSError, ValueError) as err:
        raise SystemExit(f"placement-webhook: cannot load snapshot: {err}") from None
    try:
        server = WebhookServer(
            settings,
            lambda: build_snapshot_app(source, policy, placer_settings, settings=settings),
        )
    except (OSError, ValueError) as err:
        raise SystemExit(f"placement-webhook: cannot load the TLS files: {err}") from None
    server.run()
    return 0


def _serve_live(args, policy, settings, placer_settings) -> int:  # type: ignore[no-untyped-def]
    """A replica: the admission app on the decision core (Lease, binder, ledger)."""
    from webhook.admission.forward import PeerSettings
    from webhook.admission.server import WebhookServer
    from webhook.kube import Kube
    from webhook.reconciler.authority import AuthoritySettings
    from webhook.reconciler.run import settings_from_args
    from webhook.replica import Replica, build_replica

    advertise = args.advertise_url or _default_advertise_url(args.bind)
    core_settings = settings_from_args(
        args,
        advertise_url=advertise,
        authority=AuthoritySettings(webhook_timeout=args.webhook_timeout),
    )
    peer_ca = args.peer_ca or _sibling(args.tls_cert, "ca.crt")
    peers = PeerSettings(
        identity=core_settings.identity,
        certfile=args.tls_cert,
        keyfile=args.tls_key,
        ca_file=peer_ca,
        peer_name=args.peer_name,
        max_budget=args.forward_budget,
    )
    running: list[Replica] = []

    def load():  # type: ignore[no-untyped-def]
        replica = build_replica(
            Kube(args.kubeconfig), policy, placer_settings, core_settings, peers, settings
        )
        running.append(replica)
        return replica.app

    def on_exit() -> None:
        for replica in running:
            replica.stop()

    try:
        server = WebhookServer(settings, load, on_exit=on_exit)
    except (OSError, ValueError) as err:
        raise SystemExit(f"placement-webhook: cannot load the TLS files: {err}") from None
    server.run()
    return 0


def _default_advertise_url(bind: str) -> str:
    """https://POD_IP:port in a pod (downward API), else the bound address."""
    host, _, port = bind.rpartition(":")
    pod_ip = os.environ.get("POD_IP") or os.environ.get("PLACEMENT_WEBHOOK_POD_IP")
    if pod_ip:
        host = pod_ip
    elif host in ("", "0.0.0.0", "::", "[::]"):
        import socket

        host = socket.gethostname()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"https://{host}:{port}"


def _sibling(path: str, name: str) -> str | None:
    candidate = Path(path).parent / name
    return str(candidate) if candidate.exists() else None


def _extender(args: argparse.Namespace) -> int:
    from webhook import logs
    from webhook.extender.config import (
        ExtenderEntry,
        dump,
        scheduler_configuration,
        scheduler_document,
    )
    from webhook.extender.server import ExtenderServer, ExtenderSettings, build_app
    from webhook.extender.verdicts import Scoring

    if args.print_scheduler_config:
        text = Path(args.policy).read_text() if args.policy else None
        scheme = "https" if args.tls_cert else "http"
        url = args.url or f"{scheme}://{args.bind.replace('0.0.0.0', '127.0.0.1')}"
        entry = ExtenderEntry(
            url, node_cache_capable=args.node_cache_capable == "true", bind=not args.no_bind
        )
        print(dump(scheduler_configuration(entry, base=scheduler_document(text))), end="")
        return 0
    from webhook.cluster.source import LiveSource
    from webhook.kube import Kube

    logs.configure(args.log_format, args.log_level)
    policy = _load_policy(args.policy)
    kube = Kube(args.kubeconfig)
    source = LiveSource(kube, max_age_seconds=args.max_cache_age)
    settings = ExtenderSettings(
        bind=args.bind,
        certfile=args.tls_cert,
        keyfile=args.tls_key,
        threads=args.threads,
        scoring=Scoring(args.scores),
        kube_qps=args.kube_qps,
        kube_burst=args.kube_burst,
    )
    binder = None if args.no_bind else kube
    ExtenderServer(settings, lambda: build_app(source, policy, settings, binder)).run()
    return 0


def _reconcile(args: argparse.Namespace) -> int:
    from webhook import logs
    from webhook.reconciler.run import run_from_args

    logs.configure(args.log_format, args.log_level)
    return run_from_args(args, _load_policy(args.policy))


def _devcluster(args: argparse.Namespace) -> int:
    from webhook.devcluster import DevCluster, DevClusterError

    try:
        if args.action == "up":
            cluster = DevCluster.start(
                args.dir,
                scheduler=args.scheduler,
                controller_manager=args.controller_manager,
                own_processes=False,
                progress=lambda msg: print(f"devcluster: {msg}", flush=True),
                kubelets=_kubelet_specs(args),
            )
            print(f"export KUBECONFIG={cluster.kubeconfig}")
        elif args.action == "down":
            DevCluster.attach(args.dir).stop()
            print("devcluster: stopped")
        else:
            cluster = DevCluster.attach(args.dir)
            for name, alive in cluster.status().items():
                print(f"{name:28} {'running' if alive else 'STOPPED'}")
            print(f"kubeconfig: {cluster.kubeconfig}")
            return 0 if all(cluster.status().values()) else 1
    except (DevClusterError, ValueError) as err:
        print(f"devcluster: {err}", file=sys.stderr)
        return 1
    return 0


def _kubelet_specs(args: argparse.Namespace) -> list[KubeletSpec]:
    from webhook.devcluster.kubelets import KubeletSpec, parse_pairs, parse_taints

    labels, taints = parse_pairs(args.kubelet_labels), parse_taints(args.kubelet_taints)
    extended = parse_pairs(args.kubelet_extended)
    return [
        KubeletSpec(f"{args.kubelet_prefix}-{i}", cpu=args.kubelet_cpu, memory=args.kubelet_memory,
                    pods=args.kubelet_max_pods, labels=labels, taints=taints, extended=extended)
        for i in range(args.kubelets)
    ]  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="placement-webhook",
        description="Place Kubernetes pods at admission time with a kube-scheduler-style policy.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the mutating admission webhook (gunicorn, TLS)")
    serve.add_argument("--bind", default=_env("bind", "0.0.0.0:8443"), help="host:port")
    serve.add_argument("--tls-cert", default=_env("tls-cert", "tls/tls.crt"))
    serve.add_argument("--tls-key", default=_env("tls-key", "tls/tls.key"))
    serve.add_argument("--threads", type=int, default=int(_env("threads", "8") or 8))
    serve.add_argument(
        "--client-ca",
        default=_env("client-ca"),
        help="PEM bundle(s), comma-separated, of the CAs whose client certificates may call the "
        "webhook port (mutual TLS: the API server's client CA, and this webhook's own CA for "
        "its replicas); without it callers are not authenticated",
    )
    serve.add_argument(
        "--client-name",
        action="append",
        default=[n for n in (_env("client-name") or "").split(",") if n],
        help="the client certificate's CN or a DNS SAN must be one of these (repeatable; env: "
        "comma-separated); default: any certificate --client-ca verifies",
    )
    serve.add_argument(
        "--health-bind",
        default=_env("health-bind", "127.0.0.1:8081"),
        help="host:port of the plain-HTTP probe endpoint, /healthz and /readyz (the kubelet "
        "presents no client certificate); the pod's address in a cluster",
    )
    serve.add_argument(
        "--metrics-bind",
        default=_env("metrics-bind", "127.0.0.1:8082"),
        help="host:port of the HTTPS /metrics endpoint ('' for none)",
    )
    serve.add_argument(
        "--metrics-auth",
        choices=["delegated", "none"],
        default=_env("metrics-auth", "delegated"),
        help="delegated: callers need a bearer token that the API server accepts (TokenReview) "
        "and RBAC get on /metrics (SubjectAccessReview); none: plain HTTP for anyone who "
        "reaches the address (refused on all interfaces; the default with --snapshot)",
    )
    serve.add_argument("--policy", default=_env("policy"), help="policy YAML (default built in)")
    source = serve.add_mutually_exclusive_group()
    source.add_argument("--kubeconfig", default=_env("kubeconfig"), help="default: in-cluster")
    source.add_argument("--snapshot", default=_env("snapshot"), help="kubectl get -o json dump")
    serve.add_argument(
        "--namespace",
        default=_env("namespace", DEFAULT_NAMESPACE),
        help="the webhook's own namespace (never placed)",
    )
    serve.add_argument(
        "--max-cache-age",
        type=float,
        default=120.0,
        help="seconds of watch silence before /readyz fails",
    )
    serve.add_argument(
        "--handoff-unschedulable",
        action=argparse.BooleanOptionalAction,
        default=_env("handoff-unschedulable", "true") == "true",
        help="give pods that fit nowhere (or that no replica could decide in time) "
        "schedulerName placement-webhook, for the fallback binder to place later (default on; "
        "off leaves them to the default scheduler)",
    )
    serve.add_argument("--log-format", choices=["json", "text"], default=_env("log-format", "json"))
    serve.add_argument("--log-level", default=_env("log-level", "info"))
    serve.add_argument(
        "--advertise-url",
        default=_env("advertise-url"),
        help="where the other replicas reach this one when it leads "
        "(default https://$POD_IP:PORT, or the --bind address)",
    )
    serve.add_argument(
        "--peer-ca",
        default=_env("peer-ca"),
        help="CA of the replicas' serving certificates (default: ca.crt beside --tls-cert)",
    )
    serve.add_argument(
        "--peer-name",
        default=_env("peer-name"),
        help="name the leader's certificate must carry (default: the host of its URL; in a "
        "cluster, the Service name, e.g. placement-webhook.placement-webhook.svc)",
    )
    serve.add_argument(
        "--forward-budget",
        type=float,
        default=float(_env("forward-budget", "1.0") or 1.0),
        help="longest a follower waits for the leader before handing a pod off (seconds)",
    )
    serve.add_argument(
        "--webhook-timeout",
        type=float,
        default=float(_env("webhook-timeout", "2") or 2),
        help="the MutatingWebhookConfiguration's timeoutSeconds; a new leader waits this "
        "(plus a grace) before deciding",
    )
    from webhook.reconciler.options import add_arguments as reconcile_arguments

    reconcile_arguments(serve, _env, serve=True)
    serve.set_defaults(func=_serve)

    from webhook.reconciler.options import add_arguments as reconcile_arguments

    reconcile = sub.add_parser(
        "reconcile", help="bind pending pods (leader-elected) and detect placement conflicts"
    )
    reconcile_arguments(reconcile, _env)
    reconcile.set_defaults(func=_reconcile)

    from webhook import explain

    explain_cmd = sub.add_parser("explain", help="where would this pod go, and why (offline)")
    explain.add_arguments(explain_cmd)
    explain_cmd.set_defaults(func=explain.run)

    ext = sub.add_parser(
        "extender", help="serve the policy as a kube-scheduler extender (filter, prioritize, bind)"
    )
    ext.add_argument("--bind", default=_env("extender-bind", "0.0.0.0:8888"), help="host:port")
    ext.add_argument("--tls-cert", default=None, help="serve HTTPS with this certificate")
    ext.add_argument("--tls-key", default=None)
    ext.add_argument("--threads", type=int, default=8)
    ext.add_argument("--policy", default=_env("policy"), help="policy YAML (default built in)")
    ext.add_argument("--kubeconfig", default=_env("kubeconfig"), help="default: in-cluster")
    ext.add_argument(
        "--scores",
        choices=["decisive", "linear"],
        default="decisive",
        help="decisive: the policy's choice gets 10, others at most 9; linear: total scaled 0..10",
    )
    ext.add_argument("--kube-qps", type=float, default=50.0, help="binding writes per second")
    ext.add_argument("--kube-burst", type=int, default=100)
    ext.add_argument("--no-bind", action="store_true", help="leave binding to kube-scheduler")
    ext.add_argument("--max-cache-age", type=float, default=120.0)
    ext.add_argument(
        "--print-scheduler-config",
        action="store_true",
        help="print a KubeSchedulerConfiguration that uses this extender, and exit",
    )
    ext.add_argument("--url", help="urlPrefix for --print-scheduler-config (default from --bind)")
    ext.add_argument("--node-cache-capable", choices=["true", "false"], default="true")
    ext.add_argument("--log-format", choices=["json", "text"], default=_env("log-format", "json"))
    ext.add_argument("--log-level", default=_env("log-level", "info"))
    ext.set_defaults(func=_extender)

    dev = sub.add_parser("devcluster", help="local etcd + kube-apiserver (+ scheduler)")
    dev.add_argument("action", choices=["up", "down", "status"])
    dev.add_argument("--dir", default=".devcluster", help="state folder (default .devcluster)")
    dev.add_argument("--scheduler", action="store_true", help="also start kube-scheduler")
    dev.add_argument(
        "--controller-manager", action="store_true", help="also start kube-controller-manager"
    )
    node = dev.add_argument_group("hollow kubelets (up)")
    node.add_argument(
        "--kubelets", type=int, default=0, metavar="N", help="start N hollow kubelets"
    )
    node.add_argument("--kubelet-prefix", default="node", help="node names PREFIX-0..N-1")
    node.add_argument("--kubelet-cpu", default="4", help="cores per node (whole)")
    node.add_argument("--kubelet-memory", default="8Gi")
    node.add_argument("--kubelet-max-pods", type=int, default=110)
    node.add_argument("--kubelet-labels", default="", help="k=v,...")
    node.add_argument("--kubelet-taints", default="", help="key=value:Effect,...")
    node.add_argument("--kubelet-extended", default="", help="extended resources: name=qty,...")
    dev.set_defaults(func=_devcluster)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
