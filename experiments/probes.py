"""Reading the processes: CPU time from /proc, /metrics from the API server.

CPU time is utime + stime of a process and all its descendants (the webhook
and the extender are a gunicorn arbiter and its worker), read from
/proc/<pid>/stat in clock ticks, so a figure is what the kernel charged,
whatever the process did with its threads.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import urllib.request
from pathlib import Path

from webhook.devcluster import DevCluster

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, cpu seconds) of one process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    # fields[0] is state (field 3); utime and stime are fields 14 and 15
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS


def process_table() -> dict[int, tuple[int, float]]:
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (row := _stat(int(entry))) is not None:
            table[int(entry)] = row
    return table


def tree_cpu_seconds(pid: int, table: dict[int, tuple[int, float]] | None = None) -> float:
    """CPU seconds of `pid` and every live descendant."""
    table = table if table is not None else process_table()
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        if current in table:
            total += table[current][1]
        stack.extend(children.get(current, ()))
    return total


def descendants(pid: int, table: dict[int, tuple[int, float]] | None = None) -> list[int]:
    """Live descendants of `pid`, children before grandchildren."""
    table = table if table is not None else process_table()
    out, frontier = [], [pid]
    while frontier:
        parent = frontier.pop(0)
        kids = [child for child, (ppid, _) in table.items() if ppid == parent]
        out.extend(kids)
        frontier.extend(kids)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (a gunicorn worker outlives its arbiter)."""
    for target in [*descendants(pid), pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, signal.SIGKILL)


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds per named process tree, from one consistent read of /proc."""
    table = process_table()
    return {name: tree_cpu_seconds(pid, table) for name, pid in pids.items()}


def apiserver_metrics(cluster: DevCluster, timeout: float = 10.0) -> str:
    """The API server's /metrics, read with the admin identity."""
    context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    context.load_cert_chain(cluster.pki / "admin.crt", cluster.pki / "admin.key")
    with urllib.request.urlopen(f"{cluster.server}/metrics", context=context, timeout=timeout) as r:
        return str(r.read().decode())


#: The control plane's processes; everything that places pods is on the other core.
CONTROL_PLANE = frozenset({"etcd", "kube-apiserver", "kube-controller-manager"})
PLACING = frozenset({"kube-scheduler", "webhook", "webhook-follower", "extender", "reconciler"})


def pin(pid: int, cpus: set[int]) -> None:
    """Run every thread of `pid` and of its descendants on `cpus` (new threads inherit it)."""
    table = process_table()
    for target in [pid, *descendants(pid, table)]:
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{target}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(tid), cpus)


def pin_arm(pids: dict[str, int]) -> dict[str, list[int]]:
    """The control plane on the first allowed CPU, the placing component on the others.

    The same split in every arm, so that CPU per pod and pods/s compare placers
    rather than how the scheduler shared cores with the API server. The load
    generator and hollow kubelets stay unpinned (on every allowed CPU). With a
    single allowed CPU nothing is pinned. Returns the CPUs each process got.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return {}
    control, placing = {cpus[0]}, set(cpus[1:])
    out: dict[str, list[int]] = {}
    for name, pid in pids.items():
        chosen = control if name in CONTROL_PLANE else placing if name in PLACING else None
        if chosen is not None:
            pin(pid, chosen)
            out[name] = sorted(chosen)
    return out
