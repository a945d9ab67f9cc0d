"""Cluster view at scale: sync time and memory for a recorded list+watch stream.

Usage: python benchmarks/bench_cluster.py [--nodes 5000] [--pods-per-node 30] [--out FILE]

A synthetic cluster (the policy benchmark's generator, with the metadata and
status an API server really returns) is recorded as paged List responses and
a watch stream of pod updates, as JSON bytes on disk. The same code path as
production then consumes it: `Informer.relist()` pages through `get()` (which
decodes each page with orjson, as `webhook.kube.Kube` does) into a
`ClusterView`, and `Informer.watch_once()` applies the recorded events.
Reported: sync time per resource, watch events/s, the resident memory the
view adds (RSS delta, after the recording is off the heap), and decision
latency on the synced view. Targets: 5k nodes / 150k pods under 1 GiB and
under 60 s to sync.

The Services, ReplicaSets (four revisions per app) and StatefulSets of the
same apps are listed too, through the same informer path: the view keeps
only their selectors (default spreading). Reported for them: their JSON
size, the RSS the view grows by while taking them, and the bytes the
selector store holds afterwards (tracemalloc, on a store of its own).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_policy import make_node, make_pod, make_workloads

from webhook.cluster.informer import Informer
from webhook.cluster.view import ClusterView
from webhook.policy.model import PodView
from webhook.policy.policy_file import default_policy
from webhook.policy.workload_index import WorkloadSelectors
from webhook.policy.workloads import WorkloadView

PAGE = 500
WORKLOADS = (
    ("Service", "/api/v1/services"),
    ("ReplicaSet", "/apis/apps/v1/replicasets"),
    ("StatefulSet", "/apis/apps/v1/statefulsets"),
)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def as_served(obj: dict[str, Any], i: int) -> dict[str, Any]:
    """Add what an API server returns beyond the spec: metadata and status fields."""
    meta = obj["metadata"]
    meta.setdefault("uid", f"00000000-0000-4000-8000-{i:012d}")
    meta["resourceVersion"] = str(1000 + i)
    meta["creationTimestamp"] = "2026-11-01T10:00:00Z"
    meta["managedFields"] = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-01T10:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {"f:containers": {}}},
        }
    ]
    if obj["kind"] in ("ReplicaSet", "StatefulSet"):
        owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"]}
        meta["ownerReferences"] = [{**owner, "uid": meta["uid"], "controller": True}]
    if obj["kind"] == "Pod":
        obj["spec"].setdefault("restartPolicy", "Always")
        obj["spec"].setdefault("terminationGracePeriodSeconds", 30)
        obj["spec"].setdefault("dnsPolicy", "ClusterFirst")
        obj["status"] = {
            "phase": "Running",
            "podIP": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
            "startTime": "2026-11-01T10:00:01Z",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2026-11-01T10:00:02Z"}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {"name": "main", "ready": True, "restartCount": 0, "image": "app:1",
                 "imageID": "sha256:" + "ab" * 32, "started": True,
                 "state": {"running": {"startedAt": "2026-11-01T10:00:02Z"}}}
            ],
        }  # fmt: skip
    return obj


def record(folder: Path, nodes: int, pods_per_node: int, seed: int) -> dict[str, Any]:
    """Write paged List responses and a watch stream; return counts and sizes."""
    rng = random.Random(seed)
    node_objs = [as_served(make_node(i, rng), i) for i in range(nodes)]
    names = [n["metadata"]["name"] for n in node_objs]
    pod_objs: list[dict[str, Any]] = []
    app = 0
    while len(pod_objs) < nodes * pods_per_node:
        for r in range(rng.randint(20, 200)):
            pod = make_pod(f"app-{app}-{r}", f"app-{app}", rng.choice(names), rng,
                           anti=app % 10 == 0, spread=app % 10 == 1)  # fmt: skip
            pod_objs.append(as_served(pod, len(pod_objs)))
        app += 1
    del pod_objs[nodes * pods_per_node :]
    workload_objs = make_workloads([f"app-{i}" for i in range(app)], rng)
    by_kind = {kind: [as_served(w, i) for i, w in enumerate(workload_objs) if w["kind"] == kind]
               for kind, _ in WORKLOADS}  # fmt: skip
    sizes = {}
    for kind, objs in (("Node", node_objs), ("Pod", pod_objs), *by_kind.items()):
        pages = [objs[i : i + PAGE] for i in range(0, len(objs), PAGE)]
        total = 0
        for k, page in enumerate(pages):
            meta = {"resourceVersion": "999999"}
            if k + 1 < len(pages):
                meta["continue"] = str(k + 1)
            data = orjson.dumps({"kind": f"{kind}List", "metadata": meta, "items": page})
            (folder / f"{kind}-{k}.json").write_bytes(data)
            total += len(data)
        sizes[kind] = total
    with open(folder / "Pod-watch.jsonl", "wb") as stream:
        for k in range(20000):
            pod = pod_objs[rng.randrange(len(pod_objs))]
            pod["metadata"]["resourceVersion"] = str(2_000_000 + k)
            pod["spec"]["nodeName"] = rng.choice(names)
            stream.write(orjson.dumps({"type": "MODIFIED", "object": pod}) + b"\n")
    return {"nodes": len(node_objs), "pods": len(pod_objs), "list_bytes": sizes,
            **{f"{kind.lower()}s": len(objs) for kind, objs in by_kind.items()}}  # fmt: skip


class RecordedSource:
    """Serves the recording through the informer's client interface, decoding like Kube."""

    def __init__(self, folder: Path):
        self.folder = folder

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        kind = next(k for k, p in (("Node", "/api/v1/nodes"), ("Pod", "/api/v1/pods"), *WORKLOADS)
                    if p == path)  # fmt: skip
        page = params.get("continue") or "0"
        return orjson.loads((self.folder / f"{kind}-{page}.json").read_bytes())  # type: ignore[no-any-return]

    def watch(self, path: str, *, resource_version: str, timeout_seconds: int = 300,
              **params: Any) -> Iterator[dict[str, Any]]:  # fmt: skip
        with open(self.folder / "Pod-watch.jsonl", "rb") as stream:
            for line in stream:
                yield orjson.loads(line)


def selector_store_bytes(source: RecordedSource) -> int:
    """What a selector store holds once every Service and controller is in it (tracemalloc)."""
    pages = [
        (kind, source.get(path, **{"continue": token}))
        for kind, path in WORKLOADS
        for token in [None, *(str(k) for k in range(1, 1000))]
        if (source.folder / f"{kind}-{token or 0}.json").exists()
    ]
    gc.collect()
    tracemalloc.start()
    store = WorkloadSelectors()
    before = tracemalloc.get_traced_memory()[0]
    for kind, page in pages:
        for obj in page["items"]:
            store.upsert(WorkloadView.from_dict(kind, obj))
    del pages
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(store) > 0
    return held


def run(nodes: int, pods_per_node: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        recorded = record(folder, nodes, pods_per_node, seed)
        record_s = time.perf_counter() - t0
        gc.collect()
        rss_before = rss_bytes()
        source = RecordedSource(folder)
        view = ClusterView()
        node_informer = Informer(source, view, "Node", "/api/v1/nodes", page_size=PAGE)
        pod_informer = Informer(source, view, "Pod", "/api/v1/pods", page_size=PAGE)
        t1 = time.perf_counter()
        node_informer.relist()
        t2 = time.perf_counter()
        pod_informer.relist()
        t3 = time.perf_counter()
        gc.collect()
        rss_after = rss_bytes()
        pod_informer.watch_once()
        t4 = time.perf_counter()
        gc.collect()
        rss_before_workloads = rss_bytes()
        for kind, path in WORKLOADS:
            Informer(source, view, kind, path, page_size=PAGE).relist()
        t5 = time.perf_counter()
        gc.collect()
        rss_workloads = rss_bytes() - rss_before_workloads
        store_bytes = selector_store_bytes(source)

        profile = default_policy().profile_for("")
        assert profile is not None
        rng = random.Random(seed)
        latencies = []
        for i in range(200):
            pod = PodView.from_dict(make_pod(f"new-{i}", "bench", None, rng))
            s = time.perf_counter()
            view.place(pod, profile, reserve_for=None)
            latencies.append((time.perf_counter() - s) * 1000)
        latencies.sort()
    return {
        **recorded,
        "record_s": round(record_s, 2),
        "sync_nodes_s": round(t2 - t1, 2),
        "sync_pods_s": round(t3 - t2, 2),
        "sync_total_s": round(t3 - t1, 2),
        "view_rss_mib": round((rss_after - rss_before) / 2**20, 1),
        "sync_workloads_s": round(t5 - t4, 2),
        "workloads_rss_mib": round(rss_workloads / 2**20, 1),
        "selector_store_kib": round(store_bytes / 1024),
        "process_rss_mib": round(rss_after / 2**20, 1),
        "watch_events_per_s": round(20000 / (t4 - t3)),
        "decision_p50_ms": round(statistics.median(latencies), 3),
        "decision_p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default="build/bench/cluster.json")
    args = parser.parse_args()
    result = run(args.nodes, args.pods_per_node, args.seed)
    result["machine"] = {"python": platform.python_version(), "cpus": platform.machine()}
    sizes = result["list_bytes"]
    core = (sizes["Node"] + sizes["Pod"]) / 2**20
    others = sum(v for k, v in sizes.items() if k not in ("Node", "Pod")) / 2**20
    print(f"cluster view sync, {result['nodes']} nodes / {result['pods']} pods "
          f"(list: {core:.0f} MiB of JSON)")  # fmt: skip
    print(f"  + {result['services']} Services, {result['replicasets']} ReplicaSets, "
          f"{result['statefulsets']} StatefulSets ({others:.1f} MiB of JSON)")  # fmt: skip
    for key in (
        "sync_nodes_s",
        "sync_pods_s",
        "sync_total_s",
        "view_rss_mib",
        "sync_workloads_s",
        "workloads_rss_mib",
        "selector_store_kib",
        "process_rss_mib",
        "watch_events_per_s",
        "decision_p50_ms",
        "decision_p99_ms",
    ):
        print(f"  {key:<20} {result[key]}")  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"figures written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
