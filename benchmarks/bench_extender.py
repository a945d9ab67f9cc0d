"""Extender call cost in-process: decode, decide, encode, for both request forms.

Usage: python benchmarks/bench_extender.py [--quick] [--out FILE] [--sizes 1000,5000]

For a synthetic cluster (~10 pods per node, 3 zones) and a plain pod, times
one /filter and one /prioritize call through the Flask app (test client: no
socket, no TLS) with the candidate share kube-scheduler would send (its
adaptive percentageOfNodesToScore), as names (nodeCacheCapable: true) and
as full Node objects (false), and separately the decision alone. The
difference between the two forms is the price of nodeCacheCapable: false on
the extender's side; kube-scheduler pays the encoding on its side too.
Prints a table; writes JSON (build/bench/extender.json by default).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from webhook.cluster.view import ClusterView
from webhook.extender.app import create_app
from webhook.extender.service import Extender
from webhook.extender.verdicts import filter_nodes, prioritize_nodes
from webhook.policy.dump import build_snapshot
from webhook.policy.framework import num_feasible_nodes_to_find
from webhook.policy.model import PodView
from webhook.policy.policy_file import default_policy


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "200Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
            },
        },
        "spec": {"taints": []},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "Hostname", "address": name}],
        },
    }


def pod(name: str, on: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "img", "resources": {"requests": {"cpu": "250m"}}}],
        "schedulerName": "default-scheduler",
    }
    if on:
        spec["nodeName"] = on
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}", "labels": {}},
        "spec": spec,
        "status": {"phase": "Running" if on else "Pending"},
    }


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered) * 1000, 3),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
    }


def bench(size: int, rounds: int) -> dict[str, Any]:
    nodes = [node(i) for i in range(size)]
    pods = [pod(f"p{i}", nodes[i % size]["metadata"]["name"]) for i in range(size * 10)]
    snapshot = build_snapshot(nodes, pods)
    policy = default_policy()
    profile = policy.default_profile
    view = ClusterView(snapshot, synced=True)
    client = create_app(Extender(view, policy)).test_client()
    candidates = nodes[: num_feasible_nodes_to_find(None, size)]
    names = [n["metadata"]["name"] for n in candidates]
    the_pod = pod("new")
    bodies = {
        "names": orjson.dumps({"Pod": the_pod, "Nodes": None, "NodeNames": names}),
        "objects": orjson.dumps(
            {"Pod": the_pod, "Nodes": {"metadata": {}, "items": candidates}, "NodeNames": None}
        ),
    }
    out: dict[str, Any] = {"nodes": size, "candidates": len(names)}
    view_pod = PodView.from_dict(the_pod)
    for label, fn in (
        ("decide-filter", lambda: filter_nodes(view_pod, snapshot, profile, names)),
        ("decide-prioritize", lambda: prioritize_nodes(view_pod, snapshot, profile, names)),
    ):
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
        out[label] = percentiles(times)
    for form, body in bodies.items():
        out[f"{form}-bytes"] = len(body)
        for verb in ("filter", "prioritize"):
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                answer = client.post(f"/{verb}", data=body, content_type="application/json")
                times.append(time.perf_counter() - started)
                assert answer.status_code == 200
            out[f"{form}-{verb}"] = percentiles(times)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--out", default="build/bench/extender.json")
    args = parser.parse_args()
    rounds = 20 if args.quick else 100
    rows = [bench(int(s), rounds) for s in args.sizes.split(",")]
    header = (
        f"{'nodes':>6} {'cand.':>6} {'decide f/p p50 ms':>18} {'names f/p p50 ms':>17} "
        f"{'objects f/p p50 ms':>19} {'objects body KiB':>17}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['nodes']:>6} {r['candidates']:>6} "
            f"{r['decide-filter']['p50']:>8.2f}/{r['decide-prioritize']['p50']:<9.2f} "
            f"{r['names-filter']['p50']:>8.2f}/{r['names-prioritize']['p50']:<8.2f} "
            f"{r['objects-filter']['p50']:>9.2f}/{r['objects-prioritize']['p50']:<9.2f} "
            f"{r['objects-bytes'] / 1024:>17.0f}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rounds": rounds, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
