"""Placement quality of a final cluster state, recounted from the objects. Pure.

Independent of the policy code on purpose: it is the check of every arm,
the webhook's included. Requests are summed per node against allocatable
(cpu, memory, pods) to find overcommitted nodes, and every hard constraint
the scenario generator can produce is checked on the final state:

- nodeSelector and untolerated NoSchedule/NoExecute taints, per pod;
- required pod anti-affinity: a pod violates it when another pod matching
  its selector shares its topology domain;
- topology spread (DoNotSchedule): per constraint, over the domains of the
  nodes the pods may use, the pods in excess of min + maxSkew. If every
  placement respected the constraint when it was made, the final state does
  too (the minimum only grows), so any excess is a real violation.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.policy.quantity import quantity_milli, quantity_value

DO_NOT_SCHEDULE = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Quality:
    nodes: int
    nodes_used: int
    pods_bound: int
    cpu_utilization: tuple[float, ...]
    """Requested / allocatable cpu per node, in node-name order."""
    overcommitted: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Node -> resources whose requests exceed allocatable."""
    violations: Mapping[str, int] = field(default_factory=dict)
    """Constraint kind -> pods violating it."""
    examples: tuple[str, ...] = ()

    @property
    def utilization_stdev(self) -> float:
        values = self.cpu_utilization
        return statistics.pstdev(values) if len(values) > 1 else 0.0

    @property
    def utilization_mean(self) -> float:
        return statistics.fmean(self.cpu_utilization) if self.cpu_utilization else 0.0

    @property
    def utilization_max(self) -> float:
        return max(self.cpu_utilization, default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "nodesUsed": self.nodes_used,
            "podsBound": self.pods_bound,
            "cpuUtilization": [round(u, 4) for u in self.cpu_utilization],
            "cpuUtilizationMean": round(self.utilization_mean, 4),
            "cpuUtilizationStdev": round(self.utilization_stdev, 4),
            "cpuUtilizationMax": round(self.utilization_max, 4),
            "overcommittedNodes": len(self.overcommitted),
            "overcommitted": {k: list(v) for k, v in self.overcommitted.items()},
            "violations": dict(self.violations),
            "violationExamples": list(self.examples),
        }


def pod_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(cpu millicores, memory bytes) summed over the app containers."""
    cpu = memory = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        cpu += quantity_milli(requests.get("cpu", 0))
        memory += quantity_value(requests.get("memory", 0))
    return cpu, memory


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    wanted = selector.get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


def _tolerated(taint: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def assess(nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> Quality:
    """Quality of the placement of `pods` (bound ones count) on `nodes`."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    names = sorted(by_name)
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName") in by_name]
    used: dict[str, list[int]] = {name: [0, 0, 0] for name in names}
    for pod in bound:
        cpu, memory = pod_requests(pod)
        row = used[pod["spec"]["nodeName"]]
        row[0] += cpu
        row[1] += memory
        row[2] += 1
    utilization = []
    overcommitted: dict[str, tuple[str, ...]] = {}
    for name in names:
        alloc = (by_name[name].get("status") or {}).get("allocatable") or {}
        limits = (
            quantity_milli(alloc.get("cpu", 0)),
            quantity_value(alloc.get("memory", 0)),
            quantity_value(alloc.get("pods", 0)),
        )
        utilization.append(used[name][0] / limits[0] if limits[0] else 0.0)
        over = tuple(
            r
            for r, u, a in zip(("cpu", "memory", "pods"), used[name], limits, strict=True)
            if u > a
        )
        if over:
            overcommitted[name] = over
    violations: Counter[str] = Counter()
    examples: list[str] = []

    def violate(kind: str, pod: Mapping[str, Any], count: int = 1) -> None:
        violations[kind] += count
        if len(examples) < 10:
            examples.append(f"{kind}: {pod['metadata']['name']} on {pod['spec']['nodeName']}")

    for pod in bound:
        spec = pod["spec"]
        node = by_name[spec["nodeName"]]
        labels = _labels(node)
        if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
            violate("nodeSelector", pod)
        taints = (node.get("spec") or {}).get("taints") or []
        tolerations = spec.get("tolerations") or []
        if any(
            t.get("effect") in DO_NOT_SCHEDULE and not _tolerated(t, tolerations) for t in taints
        ):
            violate("taint", pod)
    _anti_affinity(bound, by_name, violate)
    _spread(bound, by_name, violate)
    return Quality(
        nodes=len(names),
        nodes_used=sum(1 for name in names if used[name][2]),
        pods_bound=len(bound),
        cpu_utilization=tuple(utilization),
        overcommitted=overcommitted,
        violations=dict(violations),
        examples=tuple(examples),
    )


def _domain(node: Mapping[str, Any], key: str) -> str | None:
    return _labels(node).get(key)


def _anti_affinity(
    bound: Sequence[Mapping[str, Any]], nodes: Mapping[str, Any], violate: Any
) -> None:
    """A pod violates its term when another matching pod shares its domain (counted, not paired)."""
    counts: dict[tuple[Any, ...], Counter[str]] = {}
    for pod in bound:
        terms = ((pod["spec"].get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []
        namespace = pod["metadata"].get("namespace")
        for term in terms:
            topology = term.get("topologyKey", "")
            selector = term.get("labelSelector") or {}
            key = (namespace, topology, tuple(sorted((selector.get("matchLabels") or {}).items())))
            if key not in counts:
                counts[key] = Counter(
                    d
                    for other in bound
                    if other["metadata"].get("namespace") == namespace
                    and _matches(selector, _labels(other))
                    and (d := _domain(nodes[other["spec"]["nodeName"]], topology)) is not None
                )
            mine = _domain(nodes[pod["spec"]["nodeName"]], topology)
            if mine is None:
                continue
            others = counts[key][mine] - (1 if _matches(selector, _labels(pod)) else 0)
            if others > 0:
                violate("antiAffinity", pod)
                break


def _spread(bound: Sequence[Mapping[str, Any]], nodes: Mapping[str, Any], violate: Any) -> None:
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for pod in bound:
        for c in pod["spec"].get("topologySpreadConstraints") or []:
            if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            selector = tuple(
                sorted(((c.get("labelSelector") or {}).get("matchLabels") or {}).items())
            )
            node_selector = tuple(sorted((pod["spec"].get("nodeSelector") or {}).items()))
            key = (pod["metadata"].get("namespace"), c["topologyKey"], selector,
                   int(c.get("maxSkew", 1)), node_selector)  # fmt: skip
            groups[key].append(pod)
    for (namespace, topology, selector, max_skew, node_selector), members in groups.items():
        eligible = {
            d
            for n in nodes.values()
            if all(_labels(n).get(k) == v for k, v in node_selector)
            and (d := _domain(n, topology)) is not None
        }
        counts: Counter[str] = Counter({d: 0 for d in eligible})
        wanted = dict(selector)
        for pod in bound:
            if pod["metadata"].get("namespace") != namespace:
                continue
            if not all(_labels(pod).get(k) == v for k, v in wanted.items()):
                continue
            d = _domain(nodes[pod["spec"]["nodeName"]], topology)
            if d is not None and d in counts:
                counts[d] += 1
        if not counts:
            continue
        floor = min(counts.values())
        for d, n in counts.items():
            excess = n - floor - max_skew
            if excess > 0:
                on_domain = [
                    m for m in members if _domain(nodes[m["spec"]["nodeName"]], topology) == d
                ]
                violate("spread", on_domain[0] if on_domain else members[0], excess)
