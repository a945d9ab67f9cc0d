"""Processes and configuration files an arm needs beside the control plane.

The extender runs as a real `placement-webhook extender` process (gunicorn),
like the webhook runs as `placement-webhook serve`. kube-scheduler is given a
--config file; it ignores its --kubeconfig flag then, so the file names the
kubeconfig DevCluster.start_scheduler writes for that scheduler's name.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from webhook.devcluster import DevCluster, DevClusterError
from webhook.devcluster.cluster import _die_with_parent, free_port
from webhook.devcluster.process import ServedProcess
from webhook.extender.config import ExtenderEntry, dump, scheduler_configuration


class ExtenderProcess(ServedProcess):
    """A running `placement-webhook extender` and how to reach it."""


def start_extender(
    cluster: DevCluster,
    *,
    name: str = "extender",
    policy: str | Path | None = None,
    extra_args: Sequence[str] = (),
    nodes: int | None = None,
    timeout: float = 60.0,
) -> ExtenderProcess:
    """Start the extender against the cluster; wait until /readyz (and `nodes` in its cache)."""
    port = free_port()
    log = cluster.log_path(name)
    args = [
        sys.executable, "-m", "webhook.cli", "extender",
        "--kubeconfig", str(cluster.kubeconfig),
        "--bind", f"127.0.0.1:{port}",
        *(["--policy", str(policy)] if policy else []),
        *extra_args,
    ]  # fmt: skip
    with open(log, "ab") as out:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
    ext = ExtenderProcess(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DevClusterError(f"extender exited ({process.returncode}):\n{ext.tail_log()}")
        with contextlib.suppress(OSError, ValueError):
            status, body = ext.get("/readyz")
            if status == 200 and (nodes is None or int(body.get("nodes", -1)) >= nodes):
                return ext
        time.sleep(0.2)
    ext.stop()
    raise DevClusterError(f"extender not ready after {timeout:.0f}s:\n{ext.tail_log()}")


def scheduler_kubeconfig(cluster: DevCluster, name: str) -> Path:
    """Where DevCluster.start_scheduler(name=...) writes that scheduler's kubeconfig."""
    return cluster.workdir / f"{name}.kubeconfig"


def write_scheduler_config(
    cluster: DevCluster,
    path: Path,
    base: Mapping[str, Any],
    *,
    name: str = "kube-scheduler",
    extender: ExtenderEntry | None = None,
    extender_decides: bool = True,
    qps: float | None = None,
    burst: int | None = None,
) -> Path:
    """A KubeSchedulerConfiguration file for a scheduler started as `name`."""
    kubeconfig = str(scheduler_kubeconfig(cluster, name))
    if extender is not None:
        config = scheduler_configuration(
            extender,
            base=base,
            extender_decides=extender_decides,
            kubeconfig=kubeconfig,
            qps=qps,
            burst=burst,
        )
    else:
        config = dict(base)
        connection = {**(config.get("clientConnection") or {}), "kubeconfig": kubeconfig}
        if qps is not None:
            connection["qps"] = qps
        if burst is not None:
            connection["burst"] = burst
        config["clientConnection"] = connection
    path.write_text(dump(config))
    return path
