"""Where the reconcile process's memory goes, by structure, at N nodes / N x 30 pods.

Usage: python benchmarks/reconciler_memory.py [--nodes 5000] [--pods-per-node 30]
           [--apart] [--trace]

In-process, no cluster: the objects bench_reconciler's scale part creates,
shaped as the API server returns them (defaults, tolerations, managedFields,
status), go through the reconcile process's own path: the informer's pages
into `Feed.replace` (the view, the conflict store), then one full detection
pass (the `ConflictReporter`'s incremental detector, built from a full copy),
then the periodic safety pass (a fresh detector while the old one lives).
RSS is printed after each stage; `--apart` fills the view, then the store
(not through the feed), so each gets its own RSS step. With `--trace`
(slow: use 1k nodes), each live allocation is also charged to the innermost
structure on its stack: the view's parse, the view's snapshot indexes, the
conflict store's parse, the detector.

Prints MiB per structure; figures, not assertions.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
import reconciler_scale as scale  # benchmarks/, beside this file

from webhook.cluster.view import ClusterView
from webhook.conflicts.report import ConflictMetrics, ConflictReporter
from webhook.conflicts.store import ConflictStore
from webhook.reconciler.feed import Feed

# The innermost of these on an allocation's stack owns it (most specific first).
OWNERS = (
    ("detector", ("webhook/conflicts/incremental.py", "webhook/conflicts/spread.py",
                  "webhook/conflicts/antiaffinity.py", "webhook/conflicts/nodefit.py")),
    ("view indexes (policy snapshot)", ("webhook/policy/snapshot.py",
                                        "webhook/policy/pod_index.py",
                                        "webhook/policy/workload_index.py",
                                        "webhook/policy/label_column.py")),
    ("conflict store parse", ("webhook/conflicts/store.py",)),
    ("view parse", ("webhook/cluster/view.py",)),
    ("feed", ("webhook/reconciler/feed.py",)),
)  # fmt: skip


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def served(body: bytes, i: int, node: str) -> dict[str, Any]:
    """A pod as the API server answers a list: what it adds to the created body."""
    pod: dict[str, Any] = orjson.loads(body)
    meta, spec = pod["metadata"], pod["spec"]
    meta.update(
        namespace=meta.get("namespace", "x"),
        uid=f"{i:08d}-0000-4000-8000-{i:012d}",
        resourceVersion=str(1000 + i),
        generation=1,
        creationTimestamp=f"2026-12-01T15:{i // 60 % 60:02d}:{i % 60:02d}Z",
    )
    meta["labels"]["topology.kubernetes.io/zone"] = f"zone-{i % 3}"
    fields = {f"f:{k}": {} for k in spec}
    meta["managedFields"] = [
        {"manager": "python", "operation": "Update", "apiVersion": "v1",
         "time": meta["creationTimestamp"], "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:kind": {}}},
                      "f:spec": fields}}
    ]  # fmt: skip
    for c in spec["containers"]:
        c.update(terminationMessagePath="/dev/termination-log",
                 terminationMessagePolicy="File", imagePullPolicy="IfNotPresent")  # fmt: skip
    spec.update(
        restartPolicy="Always", dnsPolicy="ClusterFirst", securityContext={},
        schedulerName="default-scheduler", priority=0, enableServiceLinks=True,
        preemptionPolicy="PreemptLowerPriority",
        tolerations=[
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    )  # fmt: skip
    pod["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
    return pod


def pages(items: Iterator[dict[str, Any]], size: int = 500) -> Iterator[list[dict[str, Any]]]:
    """`items` in lists of `size`, as a paged List returns them."""
    page: list[dict[str, Any]] = []
    for item in items:
        page.append(item)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def served_nodes(nodes: int) -> Iterator[dict[str, Any]]:
    for i in range(nodes):
        create, status = scale.node_body(i, scale.node_name(i))
        node = orjson.loads(create)
        node["metadata"].update(uid=f"node-{i}", resourceVersion=str(i + 1))
        node.update(orjson.loads(status))
        yield node


def served_pods(nodes: int, per_node: int) -> Iterator[dict[str, Any]]:
    for p in range(nodes * per_node):
        w, replica = divmod(p, scale.REPLICAS)
        i = p % nodes
        cpu = "1100m" if scale.overcommitted(i) else "1"
        body = scale.pod_body(w, replica, scale.node_name(i), cpu)
        pod = served(body, p, scale.node_name(i))
        pod["metadata"]["namespace"] = scale.namespace_of(w)
        yield pod


def owner_of(trace: tracemalloc.Trace) -> str:
    for frame in reversed(trace.traceback):  # most recent call first
        for name, files in OWNERS:
            if frame.filename.endswith(files):
                return name
    return "other (imports, interpreter, ...)"


def charge(snapshot: tracemalloc.Snapshot) -> dict[str, float]:
    out: dict[str, float] = {}
    for trace in snapshot.traces:
        owner = owner_of(trace)
        out[owner] = out.get(owner, 0.0) + trace.size / 2**20
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--trace", action="store_true", help="tracemalloc: slow, 1k nodes at most")
    parser.add_argument(
        "--apart", action="store_true", help="fill the view, then the store (RSS per structure)"
    )
    args = parser.parse_args()
    trace = args.trace
    if trace:
        tracemalloc.start(12)
    view, store = ClusterView(), ConflictStore()
    reporter = ConflictReporter(store, ConflictMetrics.create(_registry()))
    gc.collect()
    stages = [("imports", rss_mib())]
    start = time.perf_counter()
    if args.apart:  # each structure on its own, to charge RSS to it
        view.replace("Node", pages(served_nodes(args.nodes)))
        view.replace("Pod", pages(served_pods(args.nodes, args.pods_per_node)))
        gc.collect()
        stages.append(("+ the view (snapshot)", rss_mib()))
        for page in pages(served_nodes(args.nodes)):
            for obj in page:
                store.put_node(obj)
        for page in pages(served_pods(args.nodes, args.pods_per_node)):
            for obj in page:
                store.put_pod(obj)
        gc.collect()
        stages.append(("+ the conflict store", rss_mib()))
    else:  # the reconcile process's own path
        feed = Feed(view, store, on_pod=lambda _uid, _pod: None, on_event=lambda _e: None)
        feed.replace("Node", pages(served_nodes(args.nodes)))
        feed.replace("Pod", pages(served_pods(args.nodes, args.pods_per_node)))
        gc.collect()
        stages.append(("+ listed (view and store)", rss_mib()))
    listed = time.perf_counter() - start
    start = time.perf_counter()
    result = reporter.run_pass()
    detect = time.perf_counter() - start
    gc.collect()
    stages.append(("+ a full detection pass", rss_mib()))
    reporter._since_full = reporter.safety_every  # the periodic safety pass: a fresh detector
    reporter.run_pass()
    gc.collect()
    stages.append(("+ a second (safety) full pass", rss_mib()))
    pods = store.counts()[1]
    print(
        f"{args.nodes} nodes, {pods} pods: listed in {listed:.1f}s, full pass {detect:.1f}s, "
        f"{len(result.conflicts)} conflicts{' (tracemalloc on: slower)' if trace else ''}"
    )
    last = 0.0
    for name, mib in stages:
        print(f"  RSS {name:<30} {mib:8.1f} MiB  ({mib - last:+8.1f})")
        last = mib
    if trace:
        by_owner = charge(tracemalloc.take_snapshot())
        total = sum(by_owner.values())
        print(f"  live Python allocations by structure (tracemalloc, {total:.1f} MiB in all):")
        for name, mib in sorted(by_owner.items(), key=lambda kv: -kv[1]):
            print(f"    {name:<36} {mib:8.1f} MiB")
    return 0


def _registry() -> Any:
    from prometheus_client import CollectorRegistry

    return CollectorRegistry()


if __name__ == "__main__":
    sys.exit(main())
