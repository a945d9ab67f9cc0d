"""Run `placement-webhook reconcile` beside the local control plane.

A real process, as in a cluster: the decision Lease, its own view, binding through
the API server; its probe endpoint (/healthz, /readyz) and its metrics
endpoint (/metrics, /debug/conflicts: HTTPS, a token the API server accepts)
are on free loopback ports. `fast_lease` uses short lease timings (4 s lease, 3 s
renew deadline, 0.5 s retry) so tests and demos do not wait long.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import certs
from webhook.devcluster.cluster import DevCluster, DevClusterError, _die_with_parent, free_port
from webhook.devcluster.process import ServedProcess, fork_from_long_lived_thread
from webhook.reconciler.options import DEFAULT_LEASE_NAME

FAST_LEASE = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5")


@dataclass
class ReconcilerProcess(ServedProcess):
    """A running `placement-webhook reconcile` and its endpoints."""

    identity: str = ""

    def metric(self, name: str, **labels: str) -> float:
        wanted = name + (
            "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
        )
        for line in self.get("/metrics")[1].splitlines():
            if line.startswith(wanted + " "):
                return float(line.split()[-1])
        return 0.0

    def leads(self) -> bool:
        """Holds the Lease (it may still be waiting for its view to be fresh)."""
        with contextlib.suppress(OSError):
            return bool(self.get("/readyz")[1].get("leader"))
        return False

    def decides(self) -> bool:
        """Holds the Lease and its view is fresh past the takeover: it binds."""
        with contextlib.suppress(OSError):
            return bool(self.get("/readyz")[1].get("deciding"))
        return False


def start_reconciler(
    cluster: DevCluster,
    identity: str,
    *,
    lease_name: str = DEFAULT_LEASE_NAME,
    namespace: str = "placement-webhook",
    policy: Path | None = None,
    extra: Sequence[str] = (),
    fast_lease: bool = True,
) -> ReconcilerProcess:
    """Start `placement-webhook reconcile` and wait until its view is synced (/readyz)."""
    port, metrics_port = free_port(), free_port()
    log = cluster.log_path(f"reconciler-{identity}")
    tls = cluster.workdir / "reconciler-tls"
    certs.ensure_serving_pair(tls, ["localhost"], ["127.0.0.1"])
    args = [
        sys.executable, "-m", "webhook.cli", "reconcile",
        "--kubeconfig", str(cluster.kubeconfig),
        "--bind", f"127.0.0.1:{port}",
        "--metrics-bind", f"127.0.0.1:{metrics_port}",
        "--metrics-tls-cert", str(tls / "tls.crt"),
        "--metrics-tls-key", str(tls / "tls.key"),
        "--identity", identity,
        "--namespace", namespace,
        "--lease-name", lease_name,
        "--conflict-interval", "0.5",
        "--log-format", "text",
        *(FAST_LEASE if fast_lease else ()),
        *(["--policy", str(policy)] if policy else []),
        *extra,
    ]  # fmt: skip
    with open(log, "ab") as out:
        process = fork_from_long_lived_thread(
            lambda: subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        )
    rec = ReconcilerProcess(
        process,
        f"http://127.0.0.1:{port}",
        log,
        probe_url=f"http://127.0.0.1:{port}",
        metrics_url=f"https://127.0.0.1:{metrics_port}",
        token=cluster.metrics_token(),
        metrics_ca=tls / "ca.crt",
        identity=identity,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DevClusterError(f"reconciler {identity} exited:\n{rec.tail_log()}")
        with contextlib.suppress(OSError):
            if rec.get("/readyz")[0] == 200:
                return rec
        time.sleep(0.1)
    rec.stop()
    raise DevClusterError(f"reconciler {identity} not ready:\n{rec.tail_log()}")
