"""Time-to-bind of pending pods through the reconciler, and the cost of a conflict pass.

Usage: python benchmarks/bench_reconciler.py [--quick] [--out FILE] [--skip-cluster]
       python benchmarks/bench_reconciler.py --scale 5000 [--pods-per-node 30]
           [--reconciler-python PY ...] [--out FILE]

Part 1 (a real local control plane, a real `placement-webhook reconcile`
process, no webhook): pods with `schedulerName: placement-webhook` are
created and a watch in this process notes when each one shows up bound.
Time-to-bind = watch event with spec.nodeName - the moment the create was
sent. Three scenarios:

- steady:   pods created one after another at a fixed rate;
- burst:    pods created by 8 threads as fast as the API takes them;
- unblocked: pods that fit nowhere wait; a node is added; time from the
            node's creation to each bind.

Part 2 (pure): `detect()` over synthetic clusters (30 pods per node, a few
overcommitted nodes), and the cost of parsing pods into records.

Scale part (`--scale N`, instead of parts 1 and 2; benchmarks/reconciler_scale.py):
N bare Nodes and N x 30 bound pods (zone spread, hostname anti-affinity,
plain; 1% of nodes overcommitted) on a local etcd + kube-apiserver, then a
real `placement-webhook reconcile` against them: creation rate, time to
sync, RSS/PSS/peak RSS, and the per-change conflict cost in the live process.

Prints tables and writes JSON (build/bench/reconciler.json by default).
Wall-clock on a shared machine: read the spread, not the digits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import reconciler_scale  # benchmarks/, beside this file

from webhook.conflicts.detect import detect
from webhook.conflicts.model import PodRecord
from webhook.devcluster import DevCluster
from webhook.devcluster.cluster import _die_with_parent, free_port
from webhook.devcluster.objects import create_node, ensure_namespace, node_manifest, pod_manifest
from webhook.kube import Kube
from webhook.policy.model import NodeView


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        "n": len(ordered),
        "p50": at(0.50),
        "p90": at(0.90),
        "p99": at(0.99),
        "max": ordered[-1],
        "mean": statistics.fmean(ordered),
    }


def row(name: str, stats: dict[str, float], unit: float = 1000.0, suffix: str = "ms") -> str:
    return (
        f"{name:<12} n={stats['n']:<5.0f} p50={stats['p50'] * unit:8.1f}{suffix} "
        f"p90={stats['p90'] * unit:8.1f}{suffix} p99={stats['p99'] * unit:8.1f}{suffix} "
        f"max={stats['max'] * unit:8.1f}{suffix}"
    )


# ------------------------------------------------------------------ part 1: a live cluster


class BindWatch:
    """Watches one namespace's pods and notes when each is first seen bound."""

    def __init__(self, kube: Kube, namespace: str):
        self.kube, self.namespace = kube, namespace
        self.bound_at: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self._stop = threading.Event()
        listing = kube.get(f"/api/v1/namespaces/{namespace}/pods")
        self._version = str(listing["metadata"]["resourceVersion"])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                for event in self.kube.watch(path, resource_version=self._version):
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    self._version = str(meta.get("resourceVersion") or self._version)
                    node = (obj.get("spec") or {}).get("nodeName")
                    name = str(meta.get("name"))
                    if node and name not in self.bound_at:
                        self.bound_at[name] = time.monotonic()
                        self.node_of[name] = node
                    if self._stop.is_set():
                        return

    def wait(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(n in self.bound_at for n in names):
                return
            time.sleep(0.02)
        missing = [n for n in names if n not in self.bound_at]
        raise SystemExit(f"{len(missing)} pods not bound after {timeout:.0f}s: {missing[:5]}")

    def stop(self) -> None:
        self._stop.set()


def start_reconciler(
    cluster: DevCluster, log: Path, bind_workers: int
) -> tuple[subprocess.Popen[bytes], int]:
    """The reconciler, and the port of its metrics (plain HTTP on loopback, no auth)."""
    port, metrics = free_port(), free_port()
    args = [
        sys.executable, "-m", "webhook.cli", "reconcile",
        "--kubeconfig", str(cluster.kubeconfig), "--bind", f"127.0.0.1:{port}",
        "--metrics-bind", f"127.0.0.1:{metrics}", "--metrics-auth", "none",
        "--identity", "bench", "--log-level", "warning", "--bind-workers", str(bind_workers),
    ]  # fmt: skip
    out = open(log, "ab")  # noqa: SIM115 - the child writes to it until it ends
    process = subprocess.Popen(
        args, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        url = f"http://127.0.0.1:{port}/readyz"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
            if json.loads(r.read()).get("leader"):
                return process, metrics
        time.sleep(0.1)
    process.kill()
    raise SystemExit("reconciler did not become ready and leader")


def create(kube: Kube, namespace: str, name: str, cpu: str, sent: dict[str, float]) -> None:
    sent[name] = time.monotonic()
    kube.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest(name, cpu=cpu, memory="64Mi", scheduler_name="placement-webhook"),
    )


def steady(kube: Kube, ns: str, count: int, rate: float) -> dict[str, float]:
    watch = BindWatch(kube, ns)
    sent: dict[str, float] = {}
    names = [f"steady-{i}" for i in range(count)]
    for i, name in enumerate(names):
        create(kube, ns, name, "100m", sent)
        delay = (i + 1) / rate - (time.monotonic() - sent[names[0]])
        if delay > 0:
            time.sleep(delay)
    watch.wait(names, 120)
    watch.stop()
    return percentiles([watch.bound_at[n] - sent[n] for n in names])


def burst(kube: Kube, ns: str, count: int, threads: int = 8) -> tuple[dict[str, float], float]:
    watch = BindWatch(kube, ns)
    sent: dict[str, float] = {}
    names = [f"burst-{i}" for i in range(count)]
    chunks = [names[i::threads] for i in range(threads)]

    def create_all(chunk: list[str]) -> None:
        for name in chunk:
            create(kube, ns, name, "100m", sent)

    workers = [threading.Thread(target=create_all, args=(chunk,)) for chunk in chunks]
    start = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    watch.wait(names, 300)
    watch.stop()
    elapsed = max(watch.bound_at[n] for n in names) - start
    return percentiles([watch.bound_at[n] - sent[n] for n in names]), count / elapsed


def unblocked(kube: Kube, ns: str, count: int) -> dict[str, float]:
    watch = BindWatch(kube, ns)
    sent: dict[str, float] = {}
    names = [f"wait-{i}" for i in range(count)]
    for name in names:
        create(kube, ns, name, "40", sent)  # bigger than any node so far
    time.sleep(3.0)  # every pod tried and found unschedulable at least once
    added = time.monotonic()
    create_node(kube, node_manifest("bench-big", cpu=str(40 * count + 8), memory="512Gi"))
    watch.wait(names, 120)
    watch.stop()
    return percentiles([watch.bound_at[n] - added for n in names])


SCRAPED = (
    "placement_webhook_reconciler_schedule_attempts_total",
    "placement_webhook_reconciler_binds_total",
    "placement_webhook_reconciler_time_to_bind_seconds_sum",
    "placement_webhook_reconciler_time_to_bind_seconds_count",
)


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(SCRAPED):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def live(quick: bool, bind_workers: int) -> dict[str, Any]:
    steady_n, burst_n, wait_n = (60, 150, 20) if quick else (200, 500, 50)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, DevCluster.start(Path(tmp) / "dc") as cluster:
        kube = Kube(cluster.kubeconfig, pool_size=16)
        ensure_namespace(kube, "placement-webhook")
        ensure_namespace(kube, "bench")
        for i in range(20):
            create_node(kube, node_manifest(f"bench-{i:02d}", cpu="32", memory="128Gi"))
        process, port = start_reconciler(cluster, Path(tmp) / "reconciler.log", bind_workers)
        try:
            results["steady"] = steady(kube, "bench", steady_n, rate=40.0)
            print(row("steady 40/s", results["steady"]))
            results["burst"], rate = burst(kube, "bench", burst_n)
            results["burst"]["binds_per_second"] = rate
            print(row("burst 8x", results["burst"]) + f"  ({rate:.0f} binds/s)")
            results["unblocked"] = unblocked(kube, "bench", wait_n)
            print(row("node added", results["unblocked"]) + "  (from the node's creation)")
            results["reconciler_metrics"] = scrape(port)
        finally:
            process.terminate()
            process.wait(15)
            kube.close()
    return results


# ------------------------------------------------------------------ part 2: detect()


def synthetic(
    nodes: int, per_node: int, rng: random.Random
) -> tuple[dict[str, NodeView], list[PodRecord], float]:
    views: dict[str, NodeView] = {}
    records: list[dict[str, Any]] = []
    for i in range(nodes):
        name = f"n{i:05d}"
        views[name] = NodeView.from_dict(
            {"metadata": {"name": name, "labels": {"zone": f"z{i % 5}"}},
             "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}}
        )  # fmt: skip
        over = i % 100 == 0  # 1% of nodes overcommitted by one pod
        for j in range(per_node + (1 if over else 0)):
            cpu = "1100m" if over else "1"
            pod = {
                "metadata": {
                    "name": f"p{i}-{j}", "namespace": f"ns{j % 20}", "uid": f"u{i}-{j}",
                    "creationTimestamp": f"2024-05-01T10:{j // 60:02d}:{j % 60:02d}Z",
                    "resourceVersion": str(i * 100 + j), "labels": {"app": f"a{j % 7}"},
                    "annotations": {"placement-webhook.io/selected-node": name} if j % 2 else {},
                },
                "spec": {
                    "nodeName": name,
                    "containers": [{"name": "c", "resources": {
                        "requests": {"cpu": cpu, "memory": f"{rng.randint(1, 3)}Gi"}}}],
                },
                "status": {"phase": "Running"},
            }  # fmt: skip
            records.append(pod)
    start = time.perf_counter()
    parsed = [PodRecord.from_dict(p) for p in records]
    parse = time.perf_counter() - start
    return views, parsed, parse


def detection(quick: bool) -> dict[str, Any]:
    sizes = [(100, 30), (1000, 30)] if quick else [(100, 30), (1000, 30), (5000, 30)]
    out: dict[str, Any] = {}
    rng = random.Random(7)
    for nodes, per_node in sizes:
        views, records, parse = synthetic(nodes, per_node, rng)
        times: list[float] = []
        found: list[Any] = []
        for _ in range(3 if nodes >= 5000 else 5):
            start = time.perf_counter()
            found = detect(views, records)
            times.append(time.perf_counter() - start)
        key = f"{nodes}x{per_node}"
        out[key] = {
            "pods": len(records),
            "parse_seconds": parse,
            "parse_us_per_pod": parse / len(records) * 1e6,
            "detect_seconds_median": statistics.median(times),
            "conflicts": len(found),
        }
        print(
            f"detect {nodes:>5} nodes {len(records):>6} pods: "
            f"{statistics.median(times) * 1000:8.1f} ms per pass, {len(found)} conflicts; "
            f"parse {parse / len(records) * 1e6:.1f} us/pod"
        )
    return out


DEFAULT_OUT = "build/bench/reconciler.json"
SCALE_OUT = "build/bench/reconciler-scale.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer pods, smaller clusters")
    parser.add_argument("--skip-cluster", action="store_true", help="only the pure detect() part")
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--bind-workers", type=int, default=4, help="the reconciler's flag")
    parser.add_argument(
        "--scale",
        type=int,
        default=0,
        metavar="NODES",
        help="the scale part at NODES nodes (5000; 1000 for a quick check)",
    )
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--threads", type=int, default=24, help="scale: creating threads")
    parser.add_argument(
        "--budget",
        type=float,
        default=900.0,
        help="scale: seconds allowed for creating the pods (stops there)",
    )
    parser.add_argument("--probes", type=int, default=10, help="scale: changes per conflict kind")
    parser.add_argument(
        "--conflict-interval",
        type=float,
        default=0.05,
        help="scale: the reconciler's --conflict-interval",
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=30.0,
        help="scale: seconds idle between the two memory readings",
    )
    parser.add_argument(
        "--reconciler-python",
        action="append",
        default=[],
        metavar="PY",
        help="scale: interpreter whose install runs the reconciler (repeatable: "
        "one run each on the same cluster; default this one)",
    )
    args = parser.parse_args()  # fmt: skip
    results: dict[str, Any] = {"machine": platform.platform(), "python": platform.python_version()}
    if args.scale:
        results["load_before"] = os.getloadavg()
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            results["scale"] = reconciler_scale.scale(
                args.scale, args.pods_per_node, pythons=args.reconciler_python or [sys.executable],
                threads=args.threads, budget=args.budget, probes=args.probes,
                interval=args.conflict_interval, idle=args.idle, workdir=Path(tmp),
            )  # fmt: skip
        results["load_after"] = os.getloadavg()
        print(f"load average before {results['load_before']}, after {results['load_after']}")
        return write(results, args.out if args.out != DEFAULT_OUT else SCALE_OUT)
    if not args.skip_cluster:
        print(
            "time-to-bind (create sent -> bound pod seen on a watch), 20 nodes, 1 reconciler "
            f"with {args.bind_workers} bind workers:"
        )
        results["time_to_bind"] = live(args.quick, args.bind_workers)
        results["time_to_bind"]["bind_workers"] = args.bind_workers
    print("conflict detection, one pass (pure):")
    results["detect"] = detection(args.quick)
    return write(results, args.out)


def write(results: dict[str, Any], path: str) -> int:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
