"""Flags of `placement-webhook reconcile` (argparse only: imported when the CLI builds its parser).

Every flag has an environment fallback PLACEMENT_WEBHOOK_<FLAG>, like `serve`.
Defaults are kube-scheduler's where it has one (lease 15 s / 10 s / 2 s,
backoff 1 s to 10 s).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from webhook.policy.marks import DEFAULT_NAMESPACE

Env = Callable[..., "str | None"]

DEFAULT_BIND = "127.0.0.1:8081"
DEFAULT_METRICS_BIND = "127.0.0.1:8082"
DEFAULT_LEASE_NAME = "placement-webhook"


def add_arguments(parser: argparse.ArgumentParser, env: Env, *, serve: bool = False) -> None:
    """The decision core's flags; with `serve`, only those `serve` does not define itself."""

    def number(name: str, default: float, text: str) -> None:
        parser.add_argument(
            f"--{name}", type=float, default=float(env(name, str(default)) or default), help=text
        )

    if not serve:
        parser.add_argument("--kubeconfig", default=env("kubeconfig"), help="default: in-cluster")
        parser.add_argument(
            "--policy", default=env("policy"), help="policy YAML (default built in)"
        )
        parser.add_argument(
            "--bind",
            default=env("reconcile-bind", DEFAULT_BIND),
            help="host:port of the plain-HTTP probe endpoint: /healthz /readyz"
            f" (default {DEFAULT_BIND}; the pod's address in a cluster; port 0 picks a free one)",
        )
        parser.add_argument(
            "--metrics-bind",
            default=env("reconcile-metrics-bind", DEFAULT_METRICS_BIND),
            help="host:port of the metrics endpoint: /metrics /debug/conflicts"
            f" (default {DEFAULT_METRICS_BIND}; '' for none)",
        )
        parser.add_argument(
            "--metrics-auth",
            choices=["delegated", "none"],
            default=env("metrics-auth", "delegated"),
            help="delegated: HTTPS, callers need a bearer token the API server accepts and RBAC "
            "get on the path; none: plain HTTP for anyone who reaches the address (never 0.0.0.0)",
        )
        parser.add_argument(
            "--metrics-tls-cert",
            default=env("metrics-tls-cert"),
            help="serving certificate of the metrics endpoint (default: self-signed at start-up)",
        )
        parser.add_argument("--metrics-tls-key", default=env("metrics-tls-key"))
        parser.add_argument(
            "--namespace",
            default=env("namespace", DEFAULT_NAMESPACE),
            help="namespace of the decision Lease (the webhook's own)",
        )
    parser.add_argument("--lease-name", default=env("lease-name", DEFAULT_LEASE_NAME))
    parser.add_argument(
        "--identity", default=env("identity"), help="lease holder identity (default host_uuid)"
    )
    number("lease-duration", 15.0, "seconds a standby waits before taking an unrenewed lease")
    number("renew-deadline", 10.0, "seconds the leader acts without a successful renewal")
    number("retry-period", 2.0, "seconds between renewals and between acquire attempts")
    number("initial-backoff", 1.0, "first retry delay of a pod that failed (doubles per attempt)")
    number("max-backoff", 10.0, "longest retry delay of a pod")
    number("max-unschedulable", 60.0, "retry an unschedulable pod at least this often")
    number("conflict-interval", 2.0, "seconds between conflict detection passes (when changed)")
    if not serve:
        number("max-cache-age", 120.0, "seconds of watch silence before /readyz fails")
    parser.add_argument(
        "--bind-workers",
        type=int,
        default=int(env("bind-workers", "4") or 4),
        help="concurrent binding requests",
    )
    parser.add_argument(
        "--no-pod-condition",
        action="store_true",
        help="do not set PodScheduled=False/Unschedulable on pods that fit nowhere",
    )
    if not serve:
        parser.add_argument(
            "--log-format", choices=["json", "text"], default=env("log-format", "json")
        )
        parser.add_argument("--log-level", default=env("log-level", "info"))
