"""What a hollow kubelet costs: time to Ready, memory and idle CPU per node, and the API load.

Usage: python benchmarks/bench_kubelets.py [--nodes 10,100] [--idle 30] [--out FILE]

For each node count, a fresh local control plane (etcd + kube-apiserver) and
that many hollow kubelets (4 cores, 8Gi each) are started; then, with no pod
anywhere, the cluster idles for `--idle` seconds after a 10 s settle (the
first node status and Lease writes): CPU seconds per process from /proc,
each kubelet's PSS (its share of shared pages, which is what N of them cost
together), and the API server's mutating requests per second.

Prints a table and writes JSON (build/bench/kubelets.json by default).
Wall-clock on a shared machine: compare the load average printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments import probes
from experiments.kubelets import fold_cpu, kubelet_pids, pss_mib
from experiments.promtext import Samples, api_writes
from webhook.devcluster import DevCluster, KubeletSpec

SETTLE_SECONDS = 10.0


def measure(count: int, idle: float) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-kubelets-") as tmp,
        DevCluster.start(Path(tmp) / "c") as cluster,
    ):
        load_before = os.getloadavg()[0]
        specs = [KubeletSpec(f"node-{i:03d}", cpu="4", memory="8Gi") for i in range(count)]
        ready = cluster.start_kubelets(specs, timeout=120 + count)
        time.sleep(SETTLE_SECONDS)
        pids = {name: c.pid for name, c in cluster.components.items()}
        before = Samples.parse(probes.apiserver_metrics(cluster))
        cpu_before = probes.cpu_seconds(pids)
        started = time.monotonic()
        time.sleep(idle)
        seconds = time.monotonic() - started
        cpu_after = probes.cpu_seconds(pids)
        after = Samples.parse(probes.apiserver_metrics(cluster))
        per_kubelet = [
            (cpu_after[n] - cpu_before[n]) / seconds for n in pids if n.startswith("kubelet-")
        ]
        cores = fold_cpu({n: (cpu_after[n] - v) / seconds for n, v in cpu_before.items()})
        sizes = [m for m in map(pss_mib, kubelet_pids(cluster)) if m is not None]
        writes = api_writes(before, after)
        return {
            "nodes": count,
            "readySeconds": round(ready, 2),
            "idleSeconds": round(seconds, 1),
            "pssMiB": {
                "mean": round(statistics.fmean(sizes), 1),
                "max": round(max(sizes), 1),
                "total": round(sum(sizes), 0),
            },
            "idleMillicoresPerKubelet": round(statistics.fmean(per_kubelet) * 1000, 2),
            "idleCores": {k: round(v, 4) for k, v in sorted(cores.items())},
            "apiWritesPerSecond": round(sum(writes.values()) / seconds, 2),
            "apiWritesByResource": {k: v for k, v in sorted(writes.items()) if v},
            "loadAverage": {"before": round(load_before, 2), "after": os.getloadavg()[0]},
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10,100", help="comma-separated node counts")
    parser.add_argument("--idle", type=float, default=30.0, help="idle seconds measured")
    parser.add_argument("--out", default="build/bench/kubelets.json")
    args = parser.parse_args()
    results = [measure(int(n), args.idle) for n in args.nodes.split(",")]
    print(f"{'nodes':>6} {'Ready s':>8} {'PSS MiB/node':>13} {'PSS MiB all':>12} "
          f"{'idle m/node':>12} {'apiserver':>10} {'etcd':>6} {'writes/s':>9} "
          f"{'load':>10}")  # fmt: skip
    for r in results:
        cores = r["idleCores"]
        print(
            f"{r['nodes']:>6} {r['readySeconds']:>8.1f} {r['pssMiB']['mean']:>13.1f} "
            f"{r['pssMiB']['total']:>12.0f} {r['idleMillicoresPerKubelet']:>12.2f} "
            f"{cores.get('kube-apiserver', 0):>10.3f} {cores.get('etcd', 0):>6.3f} "
            f"{r['apiWritesPerSecond']:>9.1f} "
            f"{r['loadAverage']['before']:>4.1f}/{r['loadAverage']['after']:<4.1f}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version()}
    out.write_text(json.dumps({"machine": machine, "results": results}, indent=2))
    print(f"(idle cores: per kubelet in millicores, apiserver/etcd in cores; JSON in {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
