"""Policy decision latency and throughput at 100, 1k, 5k and 10k nodes.

Usage: python benchmarks/bench_policy.py [--quick] [--out FILE] [--sizes 100,1000]

Builds a synthetic cluster (~30 pods per node, Deployments of 20-200
replicas with their ReplicaSets and Services, some with required
anti-affinity or zone spread, tainted GPU nodes, 5 zones), then times
`schedule()` for three pods (all owned by a ReplicaSet, so kube-scheduler's
default spreading applies):

- plain:  requests only (the common case);
- anti:   required pod anti-affinity on kubernetes.io/hostname against its app;
- spread: DoNotSchedule zone topology spread (maxSkew 1) on its app.

Prints a table and writes the figures as JSON (build/bench/policy.json by
default). Budget (p99, DESIGN.md and issue 13), the same for every kind of
pod: 0.5 ms at 1k nodes / 30k pods, 1 ms at 5k / 150k. Times are wall-clock
on one core, with the garbage collector running as in `serve` (the view frozen, decisions' garbage
collected as it comes); the workload is the same in every run (seeded, no
salted hashes). The snapshot build and the incremental update cost are
reported too.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webhook.policy.dump import build_snapshot
from webhook.policy.framework import schedule
from webhook.policy.model import NodeView, PodView
from webhook.policy.policy_file import default_policy
from webhook.policy.snapshot import ClusterSnapshot
from webhook.policy.workloads import WorkloadView

ZONES = ["zone-a", "zone-b", "zone-c", "zone-d", "zone-e"]
BUDGET_MS = {1000: 0.5, 5000: 1.0}


def make_node(i: int, rng: random.Random) -> dict[str, Any]:
    name = f"node-{i:05d}"
    gpu = i % 50 == 0
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "200Gi"}
    if gpu:
        alloc["nvidia.com/gpu"] = "8"
    node: dict[str, Any] = {
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
                "node.kubernetes.io/instance-type": rng.choice(["m5.8xl", "c5.9xl", "r5.8xl"]),
                "pool": "gpu" if gpu else rng.choice(["general", "general", "batch"]),
            },
        },
        "spec": {},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "images": [
                {"names": [f"registry.example/app-{k}:1"], "sizeBytes": 200 * 1024 * 1024}
                for k in rng.sample(range(200), 5)
            ],
        },
    }
    if gpu:
        node["spec"]["taints"] = [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
        ]
    return node


def namespace_of(app: str) -> str:
    """One of 20 namespaces, the same in every run (str hash() is salted per process)."""
    return f"ns-{zlib.crc32(app.encode()) % 20}"


def make_workloads(apps: list[str], rng: random.Random) -> list[dict[str, Any]]:
    """The objects default spreading reads: per app its ReplicaSet "<app>-h" (the pods'
    owner) and three scaled-down older revisions, a Service for most, and a
    StatefulSet for one app in twenty (served-like: templates and status included)."""
    out: list[dict[str, Any]] = []
    for app in apps:
        ns = namespace_of(app)
        for revision in ("h", "r1", "r2", "r3"):
            labels = {"app": app, "pod-template-hash": f"{app}-{revision}"}
            out.append({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": f"{app}-{revision}", "namespace": ns, "labels": labels,
                             "annotations": {"deployment.kubernetes.io/revision": "4"}},
                "spec": {"replicas": 30 if revision == "h" else 0,
                         "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                             "name": "main", "image": f"registry.example/{app}:1",
                             "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                             "ports": [{"containerPort": 8080}]}]}}},
                "status": {"replicas": 30, "readyReplicas": 30, "availableReplicas": 30,
                           "fullyLabeledReplicas": 30, "observedGeneration": 4},
            })  # fmt: skip
        if rng.random() < 0.8:
            out.append({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": app, "namespace": ns, "labels": {"app": app}},
                "spec": {"selector": {"app": app}, "clusterIP": "10.96.0.10",
                         "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]},
            })  # fmt: skip
        if rng.random() < 0.05:
            out.append({
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": f"{app}-db", "namespace": ns},
                "spec": {"replicas": 3, "serviceName": app,
                         "selector": {"matchLabels": {"app": f"{app}-db"}},
                         "template": {"metadata": {"labels": {"app": f"{app}-db"}},
                                      "spec": {"containers": [{"name": "db", "image": "db:1"}]}}},
            })  # fmt: skip
    return out


def make_pod(
    name: str,
    app: str,
    node: str | None,
    rng: random.Random,
    anti: bool = False,
    spread: bool = False,
    preferred: bool = False,
) -> dict[str, Any]:
    labels = {"app": app, "pod-template-hash": f"{app}-h"}
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "containers": [
            {
                "name": "main",
                "image": f"registry.example/{app}:1",
                "resources": {
                    "requests": {
                        "cpu": f"{rng.choice([50, 100, 200, 250, 500])}m",
                        "memory": f"{rng.choice([64, 128, 256, 512, 1024])}Mi",
                    }
                },
                "ports": [{"containerPort": 8080}],
            }
        ],
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
        ],
    }
    if node:
        spec["nodeName"] = node
    aff: dict[str, Any] = {}
    if anti:
        aff["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": app}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    if preferred:
        aff["podAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"tier": "cache"}},
                        "topologyKey": "topology.kubernetes.io/zone",
                    },
                }
            ]
        }
    if aff:
        spec["affinity"] = aff
    if spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace_of(app),
            "uid": f"uid-{name}",
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-h",
                    "uid": f"rs-{app}",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": {"phase": "Running"},
    }


def build_cluster(
    n_nodes: int, pods_per_node: int, seed: int = 1
) -> tuple[ClusterSnapshot, dict[str, float]]:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    nodes = [make_node(i, rng) for i in range(n_nodes)]
    node_names = [n["metadata"]["name"] for n in nodes]
    pods: list[dict[str, Any]] = []
    total = n_nodes * pods_per_node
    app_i = 0
    while len(pods) < total:
        replicas = rng.randint(20, 200)
        app = f"app-{app_i}"
        kind = rng.random()
        anti = kind < 0.1
        spread = 0.1 <= kind < 0.2
        preferred = 0.2 <= kind < 0.25
        hosts = rng.sample(node_names, min(replicas, n_nodes)) if anti else None
        for r in range(replicas):
            if len(pods) >= total:
                break
            node = hosts[r % len(hosts)] if hosts else rng.choice(node_names)
            pods.append(make_pod(f"{app}-{r}", app, node, rng, anti, spread, preferred))
        app_i += 1
    t1 = time.perf_counter()
    snap = build_snapshot(nodes, pods)
    for workload in make_workloads([f"app-{i}" for i in range(app_i)], rng):
        snap.workloads.upsert(WorkloadView.from_dict(workload["kind"], workload))
    t2 = time.perf_counter()
    # incremental update cost: re-upsert changed pods and nodes
    sample = pods[:2000]
    moved = []
    for p in sample:
        q = json.loads(json.dumps(p))
        q["spec"]["nodeName"] = rng.choice(node_names)
        moved.append(q)
    t3 = time.perf_counter()
    for q in moved:
        snap.upsert_pod(PodView.from_dict(q))
    t4 = time.perf_counter()
    for p in sample:
        snap.upsert_pod(PodView.from_dict(p))
    sample_nodes = [json.loads(json.dumps(n)) for n in nodes[:200]]
    for n in sample_nodes:
        n["metadata"]["labels"]["example.com/drain"] = "soon"
    t5 = time.perf_counter()
    for n in sample_nodes:
        snap.upsert_node(NodeView.from_dict(n))
    t6 = time.perf_counter()
    stats = {
        "generate_s": t1 - t0,
        "snapshot_build_s": t2 - t1,
        "pods": float(len(pods)),
        "pod_upsert_us": (t4 - t3) / len(moved) * 1e6,
        "node_upsert_us": (t6 - t5) / len(sample_nodes) * 1e6,
    }
    return snap, stats


def scenario_pods(kind: str, count: int) -> list[PodView]:
    rng = random.Random(42)
    out = []
    for i in range(count):
        app = f"app-{rng.randint(0, 50)}"
        raw = make_pod(
            f"bench-{kind}-{i}", app, None, rng, anti=kind == "anti", spread=kind == "spread"
        )
        raw["metadata"]["uid"] = ""
        del raw["metadata"]["name"]
        raw["metadata"]["generateName"] = f"{app}-h-"
        out.append(PodView.from_dict(raw))
    return out


def measure(snap: ClusterSnapshot, pods: list[PodView], warmup: int = 5) -> dict[str, float]:
    profile = default_policy().default_profile
    for p in pods[:warmup]:
        schedule(p, snap, profile, seed="warm")
    times = []
    placed = 0
    # As `serve` runs (webhook.serving.memory): the view collected and frozen, the
    # collector on. Its pauses for the decisions' own garbage are part of the figures.
    gc.collect()
    gc.freeze()
    for i, p in enumerate(pods):
        t0 = time.perf_counter()
        d = schedule(p, snap, profile, seed=str(i))
        times.append(time.perf_counter() - t0)
        placed += d.node is not None
    times.sort()
    n = len(times)
    return {
        "p50_ms": statistics.median(times) * 1e3,
        "p99_ms": times[min(n - 1, int(n * 0.99))] * 1e3,
        "max_ms": times[-1] * 1e3,
        "mean_ms": statistics.fmean(times) * 1e3,
        "throughput_per_s": n / sum(times),
        "decisions": float(n),
        "placed": float(placed),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and decisions (CI smoke run)")
    ap.add_argument(
        "--out", default="build/bench/policy.json", help="where to write the JSON figures"
    )
    ap.add_argument("--sizes", help="comma-separated node counts (default 100,1000,5000,10000)")
    ap.add_argument("--pods-per-node", type=int, default=30)
    args = ap.parse_args(argv)

    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    else:
        sizes = [100, 1000] if args.quick else [100, 1000, 5000, 10000]
    decisions = 50 if args.quick else 300
    results: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "pods_per_node": args.pods_per_node,
        "decisions_per_scenario": decisions,
        "sizes": {},
    }
    rows = []
    for n in sizes:
        snap, build = build_cluster(n, args.pods_per_node)
        entry: dict[str, Any] = {"build": build, "scenarios": {}}
        for kind in ("plain", "anti", "spread"):
            m = measure(snap, scenario_pods(kind, decisions))
            entry["scenarios"][kind] = m
            budget = BUDGET_MS.get(n)
            ok = "" if budget is None else ("ok" if m["p99_ms"] <= budget else f"OVER {budget:g}ms")
            rows.append(
                (n, int(build["pods"]), kind, m["p50_ms"], m["p99_ms"], m["throughput_per_s"], ok)
            )
            print(
                f"  {n:>6} nodes {kind:<6} p50 {m['p50_ms']:7.3f} ms  p99 {m['p99_ms']:7.3f} ms",
                file=sys.stderr,
            )
        results["sizes"][str(n)] = entry
        del snap
        gc.unfreeze()
        gc.collect()

    print(
        f"{'nodes':>6} {'pods':>7} {'pod':<7} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'decisions/s':>12}  budget"
    )
    for n, pods, kind, p50, p99, tput, ok in rows:
        print(f"{n:>6} {pods:>7} {kind:<7} {p50:8.3f} {p99:8.3f} {tput:12.0f}  {ok}")
    print()
    print(f"{'nodes':>6} {'snapshot build s':>17} {'pod upsert us':>14} {'node upsert us':>15}")
    for n in sizes:
        b = results["sizes"][str(n)]["build"]
        print(
            f"{n:>6} {b['snapshot_build_s']:17.2f} {b['pod_upsert_us']:14.1f}"
            f" {b['node_upsert_us']:15.1f}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
