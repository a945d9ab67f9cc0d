"""Scenarios on hollow kubelets: the nodes, and what the kubelets cost and add.

The scenario's Node manifests stay the one description of node shapes; on a
`kubelets: true` scenario each becomes a hollow kubelet of that size, labels
and taints (hostname and os are the kubelet's own labels). Figures:

- idle: before any pod, IDLE_SECONDS of nothing but the kubelets' own
  traffic (Lease renewals every 10 s, node status checks every 10 s): API
  writes per second and CPU per process, so the cost of the nodes alone is
  known apart from the pods';
- in the measured window: the writes the kubelets made for the pods
  (pods/status patches, nodes/status, Leases; their events are listed, as
  the API server's counters do not say who wrote an event), their CPU time
  together, and their memory (PSS) at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments import probes
from experiments.promtext import Samples, api_writes
from experiments.scenario import HOSTNAME
from webhook.devcluster import DevCluster, KubeletSpec
from webhook.devcluster.kubelets import is_kubelet
from webhook.kube import Kube
from webhook.policy.quantity import quantity_milli

IDLE_SECONDS = 10.0
KUBELET_LABELS = frozenset({HOSTNAME, "kubernetes.io/os", "kubernetes.io/arch"})
"""Labels every kubelet sets on its own Node."""
KUBELET_RESOURCES = ("pods/status", "nodes/status", "nodes", "leases")
"""What the kubelets write besides events (nobody else writes these in a run but the
reconciler's and schedulers' own Leases, which are few)."""


def specs(manifests: Sequence[Mapping[str, Any]]) -> list[KubeletSpec]:
    """A hollow kubelet per Node manifest, of the same size, labels and taints."""
    out = []
    for node in manifests:
        capacity = node["status"]["capacity"]
        labels = {k: v for k, v in node["metadata"]["labels"].items() if k not in KUBELET_LABELS}
        out.append(
            KubeletSpec(
                node["metadata"]["name"],
                cpu=str(quantity_milli(capacity["cpu"]) // 1000),
                memory=capacity["memory"],
                ephemeral_storage=capacity.get("ephemeral-storage", "100Gi"),
                pods=int(capacity["pods"]),
                labels=labels,
                taints=tuple(node["spec"].get("taints") or ()),
            )
        )
    return out


def start(cluster: DevCluster, manifests: Sequence[Mapping[str, Any]]) -> float:
    """Start the scenario's nodes as hollow kubelets; seconds until all were Ready."""
    return cluster.start_kubelets(specs(manifests), timeout=60 + len(manifests))


def kubelet_pids(cluster: DevCluster) -> list[int]:
    return [c.pid for name, c in cluster.components.items() if is_kubelet(name)]


def fold_cpu(cpu: Mapping[str, float]) -> dict[str, float]:
    """Per-process CPU seconds with every kubelet summed into one `kubelets` entry."""
    out = {k: v for k, v in cpu.items() if not is_kubelet(k)}
    kubelets = [v for k, v in cpu.items() if is_kubelet(k)]
    if kubelets:
        out["kubelets"] = round(sum(kubelets), 3)
    return out


def pss_mib(pid: int) -> float | None:
    """Proportional set size of one process (its share of shared pages), MiB."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def idle(
    cluster: DevCluster, pids: Mapping[str, int], say: Callable[[str], None]
) -> dict[str, Any]:
    """The cluster with its kubelets and no pods, for IDLE_SECONDS: writes/s and CPU."""
    say(f"measuring {IDLE_SECONDS:.0f} s of idle kubelets")
    before = Samples.parse(probes.apiserver_metrics(cluster))
    cpu_before = probes.cpu_seconds(dict(pids))
    started = time.monotonic()
    time.sleep(IDLE_SECONDS)
    after = Samples.parse(probes.apiserver_metrics(cluster))
    cpu_after = probes.cpu_seconds(dict(pids))
    seconds = time.monotonic() - started
    cpu = fold_cpu({k: cpu_after.get(k, 0.0) - v for k, v in cpu_before.items()})
    made = api_writes(before, after)
    return {
        "seconds": round(seconds, 2),
        "writesPerSecond": round(sum(made.values()) / seconds, 2),
        "writesByResource": {k: v for k, v in sorted(made.items()) if v},
        "cpuCores": {k: round(v / seconds, 4) for k, v in sorted(cpu.items())},
    }


def events_by_kubelets(kube: Kube, namespace: str) -> int:
    """Events in `namespace` that kubelets wrote (source component kubelet)."""
    path, count, token = f"/api/v1/namespaces/{namespace}/events", 0, ""
    while True:
        page = kube.get(path, limit=500, **({"continue": token} if token else {}))
        count += sum(
            1
            for e in page.get("items") or ()
            if (e.get("source") or {}).get("component") == "kubelet"
        )
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return count


def figures(
    cluster: DevCluster,
    kube: Kube,
    namespace: str,
    made: Mapping[str, int],
    cpu_seconds: float,
    pods: int,
    idle_figures: Mapping[str, Any],
) -> dict[str, Any]:
    """What the kubelets did in the measured window (`made`: writes by resource)."""
    pids = kubelet_pids(cluster)
    sizes = [m for m in map(pss_mib, pids) if m is not None]
    events = events_by_kubelets(kube, namespace)
    status = {r: made.get(r, 0) for r in KUBELET_RESOURCES}
    per_pod = (status["pods/status"] + events) / pods if pods else None
    return {
        "count": len(pids),
        "cpuSeconds": round(cpu_seconds, 3),
        "pssMiB": {
            "mean": round(sum(sizes) / len(sizes), 1) if sizes else None,
            "max": round(max(sizes), 1) if sizes else None,
        },
        "writes": status | {"events": events},
        "podWritesPerPod": None if per_pod is None else round(per_pod, 2),
        "idle": dict(idle_figures),
    }
