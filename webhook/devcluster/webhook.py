"""Run our own webhook beside the local control plane and register it.

The API server calls the webhook at https://127.0.0.1:PORT/mutate, trusting
the CA from `certs`, and presents its own client certificate (PORT is one
the cluster reserved for that); the webhook requires it (`--client-ca`,
`--client-name kube-apiserver`). The webhook runs as real `placement-webhook
serve` processes (gunicorn, mutual TLS, probe and metrics endpoints), exactly
as in a cluster, only outside of it: by default as many replicas as
`deploy/` ships, behind a round-robin TCP balancer that stands in for the
Service (the balancer's port is the reserved one), contending for one
decision Lease and forwarding to its holder with their serving certificate.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import certs
from webhook.admission.registration import CONFIGURATION_NAME, webhook_configuration
from webhook.devcluster.balancer import Balancer
from webhook.devcluster.cluster import (
    APISERVER_CLIENT_NAME,
    DevCluster,
    DevClusterError,
    _die_with_parent,
    free_port,
)
from webhook.devcluster.objects import ensure_namespace
from webhook.devcluster.process import ServedProcess, fork_from_long_lived_thread
from webhook.kube import ApiError, Kube

#: What deploy/base ships (the webhook Deployment's replicas).
DEPLOYED_REPLICAS = 2
#: Short lease timings for tests and demos (4 s lease, 3 s renew deadline, 0.5 s retry).
FAST_LEASE = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5")
OWN_NAMESPACE = "placement-webhook"
#: The name in the replicas' serving certificate: what they present to each other.
PEER_NAME = "localhost"


@dataclass
class WebhookProcess(ServedProcess):
    """A running `placement-webhook serve`; its CA is in `tls_dir`."""

    identity: str = ""

    @property
    def tls_dir(self) -> Path:
        assert self.ca_file is not None
        return self.ca_file.parent

    @property
    def replicas(self) -> list[WebhookProcess]:
        return [self]

    def deciding(self) -> bool:
        """Whether this replica holds the decision Lease and decides (its /readyz says)."""
        with contextlib.suppress(OSError, ValueError):
            return bool(self.get("/readyz")[1].get("deciding"))
        return False


@dataclass
class WebhookSet:
    """Replicas of `serve` behind a balancer: what the API server calls, as a Service."""

    members: list[WebhookProcess]
    balancer: Balancer
    url: str
    tls_dir: Path
    log: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def replicas(self) -> list[WebhookProcess]:
        return list(self.members)

    @property
    def ca_file(self) -> Path:
        return self.tls_dir / "ca.crt"

    @property
    def client_cert(self) -> tuple[Path, Path] | None:
        """The e2e client certificate the replicas accept (they share one TLS folder)."""
        return self.members[0].client_cert

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, Any]:
        """GET `path` from the first replica that runs (probes and metrics are per replica)."""
        live = [m for m in self.members if m.process.poll() is None] or self.members
        return live[0].get(path, timeout)

    def leader(self) -> WebhookProcess | None:
        return next((m for m in self.members if m.process.poll() is None and m.deciding()), None)

    def metrics(self) -> str:
        return "\n".join(m.metrics() for m in self.members if m.process.poll() is None)

    def stop(self, sig: int = 15, grace: float = 10.0) -> None:
        for member in self.members:
            member.stop(sig, grace)
        self.balancer.stop()

    def tail_log(self, lines: int = 30) -> str:
        return "\n".join(f"--- {m.identity}\n{m.tail_log(lines)}" for m in self.members)


def start_webhook(
    cluster: DevCluster,
    *,
    name: str = "webhook",
    policy: str | os.PathLike[str] | None = None,
    extra_args: Sequence[str] = (),
    tls_dir: Path | None = None,
    mutual_tls: bool = True,
    timeout: float = 60.0,
    lease_name: str | None = None,
    fast_lease: bool = True,
    wait: bool = True,
    port: int | None = None,
) -> WebhookProcess:
    """Start one `placement-webhook serve` against the cluster and wait until /readyz is ok.

    With `mutual_tls` (the default, as deployed) the webhook port takes only
    the API server's client certificate, the other replicas' serving
    certificate, and that of a client of the webhook's own CA
    (`tls/client.crt`, which tests use to call it directly). It contends for
    the decision Lease `lease_name` (the default one when None) in the
    webhook's own namespace, as a deployed replica does. `port`: where it
    listens (default: a port the API server presents its certificate to).
    """
    tls = tls_dir or cluster.workdir / f"{name}-tls"
    certs.ensure_serving_pair(tls, [PEER_NAME], ["127.0.0.1"])
    kube = Kube(cluster.kubeconfig)
    try:
        ensure_namespace(kube, OWN_NAMESPACE)
    finally:
        kube.close()
    if port is None:
        port = cluster.take_webhook_port() if mutual_tls else free_port()
    probe_port, metrics_port = free_port(), free_port()
    log = cluster.log_path(name)
    client_ca = tls / "client-ca.crt"
    own_client = tls / "client.crt", tls / "client.key"
    security: list[str] = []
    if mutual_tls:
        write_client_bundle(client_ca, cluster.apiserver_client_ca, tls / "ca.crt")
        pair = certs.issue_client_certificate(certs.load_authority(tls), "e2e-client")
        certs.write_pem_atomically(own_client[1], pair.key_pem)
        certs.write_pem_atomically(own_client[0], pair.cert_pem, 0o644)
        names = [APISERVER_CLIENT_NAME, "e2e-client", PEER_NAME]
        security = ["--client-ca", str(client_ca), *(f"--client-name={n}" for n in names)]
    args = [
        sys.executable, "-m", "webhook.cli", "serve",
        "--kubeconfig", str(cluster.kubeconfig),
        "--bind", f"127.0.0.1:{port}",
        "--tls-cert", str(tls / "tls.crt"),
        "--tls-key", str(tls / "tls.key"),
        "--health-bind", f"127.0.0.1:{probe_port}",
        "--metrics-bind", f"127.0.0.1:{metrics_port}",
        "--namespace", OWN_NAMESPACE,
        "--identity", name,
        *(["--lease-name", lease_name] if lease_name else []),
        *(FAST_LEASE if fast_lease else ()),
        *security,
        *(["--policy", str(policy)] if policy else []),
        *extra_args,
    ]  # fmt: skip
    with open(log, "ab") as out:
        process = fork_from_long_lived_thread(
            lambda: subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: SIGKILL takes the worker too
                preexec_fn=_die_with_parent,
            )
        )
    hook = WebhookProcess(
        process,
        f"https://127.0.0.1:{port}",
        log,
        ca_file=tls / "ca.crt",
        probe_url=f"http://127.0.0.1:{probe_port}",
        metrics_url=f"https://127.0.0.1:{metrics_port}",
        token=cluster.metrics_token(),
        client_cert=own_client if mutual_tls else None,
        identity=name,
    )
    if wait:
        wait_ready(hook, timeout)
    return hook


def wait_ready(hook: WebhookProcess, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hook.process.poll() is not None:
            raise DevClusterError(f"webhook exited ({hook.process.returncode}):\n{hook.tail_log()}")
        with contextlib.suppress(OSError):
            status, _ = hook.get("/readyz")
            if status == 200:
                return
        time.sleep(0.2)
    hook.stop()
    raise DevClusterError(f"webhook not ready after {timeout:.0f}s:\n{hook.tail_log()}")


def start_replicas(
    cluster: DevCluster,
    replicas: int = DEPLOYED_REPLICAS,
    *,
    name: str = "webhook",
    policy: str | os.PathLike[str] | None = None,
    extra_args: Sequence[str] = (),
    lease_name: str | None = None,
    fast_lease: bool = True,
    timeout: float = 60.0,
) -> WebhookSet:
    """`replicas` serve processes sharing one certificate and one Lease, behind a balancer.

    Returns once every replica is ready and one of them decides.
    """
    tls = cluster.workdir / f"{name}-tls"
    members = [
        start_webhook(
            cluster,
            name=f"{name}-{i}",
            policy=policy,
            extra_args=extra_args,
            tls_dir=tls,
            lease_name=lease_name,
            fast_lease=fast_lease,
            wait=False,
            port=free_port(),  # the API server calls the balancer, not the replicas
        )
        for i in range(replicas)
    ]
    try:
        for member in members:
            wait_ready(member, timeout)
        backends = [("127.0.0.1", int(m.url.rsplit(":", 1)[1])) for m in members]
        balancer = Balancer(backends, port=cluster.take_webhook_port()).start()
        hooks = WebhookSet(
            members, balancer, f"https://{balancer.address}", tls, cluster.log_path(name)
        )
        deadline = time.monotonic() + timeout
        while hooks.leader() is None:
            if time.monotonic() > deadline:
                raise DevClusterError(f"no replica decides after {timeout:.0f}s")
            time.sleep(0.1)
    except BaseException:
        for member in members:
            member.stop()
        raise
    return hooks


def write_client_bundle(path: Path, *cas: Path) -> None:
    """The --client-ca bundle: the CAs' certificates one after another."""
    certs.write_pem_atomically(path, b"".join(ca.read_bytes() for ca in cas), 0o644)


def register_webhook(
    kube: Kube,
    hook: WebhookProcess | WebhookSet,
    *,
    name: str = CONFIGURATION_NAME,
    timeout_seconds: int = 2,
) -> None:
    """Create (or replace) the MutatingWebhookConfiguration pointing at `hook` (or the set)."""
    bundle = certs.ca_bundle((hook.tls_dir / "ca.crt").read_bytes())
    body = webhook_configuration(
        ca_bundle=bundle, url=hook.url, name=name, timeout_seconds=timeout_seconds
    )
    path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    with contextlib.suppress(ApiError):
        kube.delete(f"{path}/{name}")
    kube.create(path, body)


def unregister_webhook(kube: Kube, name: str = CONFIGURATION_NAME) -> None:
    path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    with contextlib.suppress(ApiError):
        kube.delete(f"{path}/{name}")


def wait_until_effective(kube: Kube, namespace: str, timeout: float = 30.0) -> None:
    """Wait until the API server calls the webhook (its configuration informer lags).

    Probes with server-side dry-run creates, which the webhook answers without
    reserving anything, until one comes back decided: placed (selected-node, which
    every detail of decisionAnnotations writes) or found unschedulable. A handed-off
    or skipped probe does not count: the webhook answered but did not decide yet.
    """
    from webhook.devcluster.objects import pod_manifest
    from webhook.policy.marks import FILTER_RESULT, SELECTED_NODE, UNSCHEDULABLE

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = pod_manifest(generate_name="webhook-probe-", cpu="1m", memory="1Mi")
        created = kube.create(f"/api/v1/namespaces/{namespace}/pods", probe, dryRun="All")
        notes = (created.get("metadata") or {}).get("annotations") or {}
        if any(key in notes for key in (SELECTED_NODE, FILTER_RESULT, UNSCHEDULABLE)):
            return
        time.sleep(0.2)
    raise DevClusterError(f"the API server did not call the webhook within {timeout:.0f}s")
