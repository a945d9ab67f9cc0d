"""The cost of conflict detection at scale: a full pass, one pod change, memory.

Usage: python benchmarks/bench_conflicts.py [--quick] [--out FILE]

Pure (no cluster). A generated cluster: 3 zones, 30 pods per node, pods in
deployments of 50 replicas; a third of the deployments carry a DoNotSchedule
zone spread constraint (maxSkew 1), a sixth a required hostname
anti-affinity, some pods use a host port, 1% of nodes are overcommitted.
Sizes: 1k nodes / 30k pods and 5k nodes / 150k pods (--quick: 200 / 6k).

Printed per size:
- full pass: one detection over the whole cluster (what the first sync and
  the periodic safety pass cost);
- per change: one pod updated (a status change that moves its arrival),
  one pod added, one deleted, then the conflicts read back; with the
  `Detector` this is the incremental cost, without it a full pass;
- memory: tracemalloc peak of a full pass, and what the detector keeps.

Wall-clock on a shared machine: read the spread, not the digits.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import json
import platform
import random
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webhook.conflicts.detect import detect
from webhook.conflicts.model import PodRecord
from webhook.policy.model import NodeView

try:  # without the incremental detector (before it existed): the baseline only
    Detector: Any = importlib.import_module("webhook.conflicts.incremental").Detector
except ImportError:
    Detector = None

REPLICAS = 50


def node_dict(i: int) -> dict[str, Any]:
    name = f"n{i:05d}"
    return {
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"z{i % 3}"}},
        "spec": {"taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}] if i % 50 == 7
                 else []},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    }  # fmt: skip


def pod_dict(i: int, node: str, deploy: int, seq: int, over: bool) -> dict[str, Any]:
    labels = {"app": f"d{deploy}"}
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "c", "resources": {"requests": {
            "cpu": "1100m" if over else "1", "memory": "1Gi"}}}],
    }  # fmt: skip
    if deploy % 3 == 0:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": labels},
        }]  # fmt: skip
    if deploy % 6 == 1:
        term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": labels}}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            term]}}  # fmt: skip
    if deploy % 25 == 2:
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return {
        "metadata": {
            "name": f"p{i}", "namespace": f"ns{deploy % 10}", "uid": f"u{i}",
            "creationTimestamp": f"2024-05-01T{seq // 3600 % 24:02d}:{seq // 60 % 60:02d}:"
                                 f"{seq % 60:02d}Z",
            "resourceVersion": str(1000 + i), "labels": labels,
            "ownerReferences": [{"kind": "ReplicaSet", "name": f"d{deploy}", "uid": f"rs{deploy}",
                                 "controller": True}],
        },
        "spec": spec,
        "status": {"phase": "Running"},
    }  # fmt: skip


def cluster(n_nodes: int, per_node: int, rng: random.Random) -> tuple[list[Any], list[Any]]:
    """Node dicts and pod dicts; deployments' replicas land on random nodes."""
    nodes = [node_dict(i) for i in range(n_nodes)]
    pods = []
    total = n_nodes * per_node
    for i in range(total):
        node = i // per_node
        over = node % 100 == 0 and i % per_node == 0
        deploy = rng.randrange(max(1, total // REPLICAS))
        pods.append(pod_dict(i, f"n{node:05d}", deploy, i, over))
    return nodes, pods


def changes(pods: list[dict[str, Any]], n_nodes: int, rng: random.Random, count: int) -> list[Any]:
    """(kind, record-or-uid) pod changes: updates that move arrival, adds, deletes."""
    out: list[tuple[str, Any]] = []
    base = len(pods)
    for k in range(count):
        what = k % 3
        if what == 0:  # a status change: the pod becomes admitted (its arrival moves)
            p = dict(rng.choice(pods))
            admitted = {"type": "Initialized", "status": "True"}
            running = p["status"]["phase"] == "Running"
            p["status"] = {"phase": "Pending", "conditions": [admitted]} if running else {
                "phase": "Running"}  # fmt: skip
            out.append(("put", PodRecord.from_dict(p)))
        elif what == 1:
            node = f"n{rng.randrange(n_nodes):05d}"
            deploy = rng.randrange(max(1, base // REPLICAS))
            out.append(
                ("put", PodRecord.from_dict(pod_dict(base + k, node, deploy, base + k, False)))
            )
        else:
            out.append(("drop", f"u{rng.randrange(base)}"))
    return out


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def peak_mib(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    tracemalloc.start()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, result


def baseline(
    views: dict[str, NodeView], records: dict[str, PodRecord], todo: list[Any]
) -> dict[str, Any]:
    """No incremental detector: every change is followed by a full `detect()`."""
    full = []
    for _ in range(2):
        start = time.perf_counter()
        found = detect(views, records.values())
        full.append(time.perf_counter() - start)
    per_change = []
    for kind, arg in todo:
        start = time.perf_counter()
        if kind == "put":
            records[arg.uid] = arg
        else:
            records.pop(arg, None)
        detect(views, records.values())
        per_change.append(time.perf_counter() - start)
    mem, _ = peak_mib(lambda: detect(views, records.values()))
    return {"full_pass_ms": median_ms(full), "per_change_ms": median_ms(per_change),
            "per_change_max_ms": max(per_change) * 1000, "changes": len(per_change),
            "full_pass_peak_mib": mem, "conflicts": len(found)}  # fmt: skip


def incremental(
    views: dict[str, NodeView], records: dict[str, PodRecord], todo: list[Any]
) -> dict[str, Any]:
    """The `Detector`: a full build once, then each change re-checks what it touches."""
    assert Detector is not None

    def build() -> Any:
        det = Detector()
        for v in views.values():
            det.put_node(v)
        for r in records.values():
            det.put_pod(r)
        return det, det.conflicts()

    start = time.perf_counter()
    det, found = build()
    build_s = time.perf_counter() - start
    full = []
    for _ in range(2):
        start = time.perf_counter()
        det.full_pass()
        full.append(time.perf_counter() - start)
    per_change = []
    for kind, arg in todo:
        start = time.perf_counter()
        if kind == "put":
            det.put_pod(arg)
        else:
            det.drop_pod(arg)
        det.conflicts()
        per_change.append(time.perf_counter() - start)
    del det
    mem, _ = peak_mib(build)
    return {"build_ms": build_s * 1000, "full_pass_ms": median_ms(full),
            "per_change_ms": median_ms(per_change),
            "per_change_max_ms": max(per_change) * 1000, "changes": len(per_change),
            "detector_peak_mib": mem, "conflicts": len(found)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small cluster")
    parser.add_argument("--changes", type=int, default=30, help="pod changes timed per size")
    parser.add_argument("--out", default="build/bench/conflicts.json")
    args = parser.parse_args()
    sizes = [(200, 30)] if args.quick else [(1000, 30), (5000, 30)]
    results: dict[str, Any] = {"machine": platform.platform(), "python": platform.python_version()}
    for n_nodes, per_node in sizes:
        rng = random.Random(13)
        raw_nodes, raw_pods = cluster(n_nodes, per_node, rng)
        views = {v.name: v for v in map(NodeView.from_dict, raw_nodes)}
        records = {r.uid: r for r in map(PodRecord.from_dict, raw_pods)}
        todo = changes(raw_pods, n_nodes, rng, args.changes)
        key = f"{n_nodes}x{per_node}"
        if Detector is None:
            res = baseline(views, dict(records), todo)
            res["mode"] = "full detect() per change"
        else:
            res = incremental(views, dict(records), todo)
            res["mode"] = "incremental Detector"
            res["baseline_full_pass_ms"] = baseline(views, dict(records), todo[:3])["full_pass_ms"]
        res["pods"] = len(records)
        res["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        results[key] = res
        print(f"{n_nodes:>5} nodes {len(records):>6} pods ({res['mode']}):")
        for k, v in res.items():
            if isinstance(v, float):
                print(f"  {k:24} {v:10.1f}")
            elif k not in ("mode",):
                print(f"  {k:24} {v:>10}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=lambda o: dataclasses.asdict(o)))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
