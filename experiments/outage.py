"""Arm F: arm B with the webhook stopped part way, and the reconciler healing.

The webhook is registered with failurePolicy Ignore, so while it is down the
API server admits pods unplaced. There is no kube-scheduler in this arm: the
reconciler (`placement-webhook reconcile`) is what places the pods the
webhook missed, and it takes the pods whose schedulerName is
`placement-webhook`, so this arm's pods are created with that name (the
webhook places them like any other pod while it is up). Reported: pods
placed at admission, pods placed by the reconciler (and how long they
waited), pods still pending, when the outage started and ended, and the
time to heal (outage end -> every pod bound).

Needs the `reconcile` subcommand (webhook/reconciler); without it the arm is
reported as blocked instead of being run.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from experiments.arms import Arm
from experiments.scenario import Scenario
from webhook.devcluster import DevCluster, DevClusterError
from webhook.devcluster.cluster import _die_with_parent, free_port

LEASE_NAMESPACE = "placement-webhook"
SCHEDULER_NAME = "placement-webhook"


def reconciler_available() -> bool:
    from webhook.cli import build_parser

    parser = build_parser()
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        choices = getattr(action, "choices", None) or {}
        if "reconcile" in choices:
            return True
    return False


@dataclass
class Reconciler:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    metrics_port: int = 0

    def readyz(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=3) as r:
            return dict(orjson.loads(r.read()))

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            return str(r.read().decode())


def start_reconciler(
    cluster: DevCluster, policy: Path, extra: list[str], timeout: float = 120.0
) -> Reconciler:
    """Start `placement-webhook reconcile`; wait until it leads with a synced cache."""
    port, metrics_port = free_port(), free_port()
    log = cluster.log_path("reconciler")
    args = [sys.executable, "-m", "webhook.cli", "reconcile", "--kubeconfig",
            str(cluster.kubeconfig), "--policy", str(policy), "--bind", f"127.0.0.1:{port}",
            "--metrics-bind", f"127.0.0.1:{metrics_port}", "--metrics-auth", "none",
            "--namespace", LEASE_NAMESPACE, *extra]  # fmt: skip
    with open(log, "ab") as out:
        process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )  # fmt: skip
    rec = Reconciler(process, port, log, metrics_port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DevClusterError(f"reconciler exited ({process.returncode}); see {log}")
        with contextlib.suppress(OSError, ValueError):
            if rec.readyz().get("leader"):
                return rec
        time.sleep(0.2)
    process.kill()
    raise DevClusterError(f"reconciler did not lead within {timeout:.0f}s; see {log}")


def run_outage_arm(
    scenario: Scenario,
    arm: Arm,
    workdir: Path,
    *,
    bin_dir: Path | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    if not reconciler_available():
        raise DevClusterError(
            "blocked: arm F needs `placement-webhook reconcile` (webhook/reconciler), "
            "which does not exist yet"
        )
    from experiments.runner import run_outage  # the runner owns the measured sequence

    after = scenario.outage.get("after", 0.3)
    length = scenario.outage.get("for", 5.0)
    say(f"[{scenario.name} / {arm.key}] outage after {after:.0%} of the pods, for {length:g}s")
    started = time.monotonic()
    result = run_outage(
        scenario, arm, workdir, bin_dir=bin_dir, say=say, after=after, length=length
    )
    result.setdefault("timings", {})["armSeconds"] = round(time.monotonic() - started, 2)
    return result
