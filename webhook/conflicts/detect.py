"""detect(): every placement conflict in one snapshot of nodes and pods. Pure.

What is checked, and why each check looks the way it does:

- Overcommit: the node's counted pods request more than its allocatable of
  some resource, or are more than its `pods`. Culprits are found the way a
  kubelet admits pods: in arrival order, a pod that does not fit in what the
  earlier admitted pods left is rejected and takes nothing. For a node
  overcommitted by one pod that is the last to arrive; it is also the
  smallest set whose removal brings the node back within capacity in that
  order. Extended resources the node does not report are skipped (the
  kubelet drops them before its check); cpu, memory, ephemeral-storage,
  hugepages and pods are always checked.
- HostPort: two counted pods on one node use the same protocol and port
  with overlapping host IPs (0.0.0.0 overlaps every address); the later one
  loses, again in arrival order.
- NodeAffinity: the pod's nodeSelector or required node affinity does not
  match its node (labels changed later, or a scheduler ignored them).
- Taint: the node has a NoSchedule/NoExecute taint the pod does not
  tolerate. `node.kubernetes.io/*` taints are skipped: the control plane
  adds them for node conditions and cordons after placement, which is not a
  scheduler's doing (NoExecute ones evict by themselves).
- PodAntiAffinity: a pod's required anti-affinity term matches another pod
  in the same topology domain; the later of the two loses.
- TopologySpread: a DoNotSchedule constraint's skew (matching pods in the
  domain minus the minimum over eligible domains, which is 0 while fewer than
  minDomains domains exist) exceeds maxSkew; the last arrivals in the
  domain beyond the allowed count lose.
- KubeletRejected: the kubelet refused the pod at admission (phase Failed,
  reason OutOf<resource>, NodeAffinity, NodePorts, TaintToleration...): the
  placement was wrong when it reached the node.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from webhook.conflicts.model import (
    HOST_PORT,
    KUBELET,
    KUBELET_REJECTED,
    NODE_AFFINITY,
    OVERCOMMIT,
    POD_ANTI_AFFINITY,
    TAINT,
    TOPOLOGY_SPREAD,
    Conflict,
    PodRecord,
    PodRef,
)
from webhook.policy.model import HostPort, NodeView, SpreadConstraint, Taint, tolerates

__all__ = ["detect", "format_quantity"]

ALWAYS_CHECKED: Final = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})
KUBELET_REASONS: Final = frozenset(
    {
        "NodeAffinity",
        "NodeName",
        "NodePorts",
        "TaintToleration",
        "PodOSSelectorNodeLabelDoesNotMatch",
        "PodOSNotSupported",
        "UnexpectedAdmissionError",
    }
)
CONDITION_TAINT_PREFIX: Final = "node.kubernetes.io/"
NamespaceLabels = Callable[[str], Mapping[str, str]]


def _default_ns_labels(name: str) -> Mapping[str, str]:
    return {"kubernetes.io/metadata.name": name}


def detect(
    nodes: Mapping[str, NodeView],
    pods: Iterable[PodRecord],
    namespace_labels: NamespaceLabels = _default_ns_labels,
) -> list[Conflict]:
    """All conflicts, sorted by kind, node and scope (deterministic output)."""
    by_node: dict[str, list[PodRecord]] = defaultdict(list)
    rejected: list[PodRecord] = []
    for rec in pods:
        if rec.counted:
            assert rec.node is not None
            by_node[rec.node].append(rec)
        elif rec.node is not None and rec.phase == "Failed" and _kubelet_rejection(rec.reason):
            rejected.append(rec)
    for recs in by_node.values():
        recs.sort(key=lambda r: r.arrival)

    out: list[Conflict] = []
    for name, recs in by_node.items():
        node = nodes.get(name)
        if node is None:
            continue  # bound to a node that is gone: the pod GC's business
        out.extend(_overcommit(node, recs))
        out.extend(_host_ports(node, recs))
        hard = tuple(
            t for t in node.taints
            if t.effect in ("NoSchedule", "NoExecute")
            and not t.key.startswith(CONDITION_TAINT_PREFIX)
        )  # fmt: skip
        for rec in recs:
            view = rec.view
            if rec.provenance.placed_by == KUBELET:
                continue
            if hard or view.node_selector or view.required_node_affinity is not None:
                out.extend(_node_fit(node, hard, rec))
    out.extend(_anti_affinity(nodes, by_node, namespace_labels))
    out.extend(_spread(nodes, by_node))
    for rec in rejected:
        ref = PodRef.of(rec)
        note = f"kubelet rejected the pod on {rec.node}: {rec.reason}"
        if rec.message:
            note += f" ({rec.message})"
        out.append(
            Conflict(KUBELET_REJECTED, str(rec.node), note, (ref,), (ref,), ref,
                     {"reason": rec.reason}, rec.uid)
        )  # fmt: skip
    out.sort(key=lambda c: (c.kind, c.node, c.scope, c.key))
    return out


def _kubelet_rejection(reason: str) -> bool:
    return reason.startswith("OutOf") or reason in KUBELET_REASONS


def _is_extended(resource: str) -> bool:
    return "/" in resource and not resource.startswith("kubernetes.io/")


def format_quantity(resource: str, amount: int) -> str:
    """Millicores as `1500m`, everything else as an integer (bytes, counts)."""
    return f"{amount}m" if resource == "cpu" else str(amount)


# ------------------------------------------------------------ overcommit


def _checked(resource: str, allocatable: Mapping[str, int]) -> bool:
    if resource in ALWAYS_CHECKED or resource.startswith("hugepages-"):
        return True
    return not _is_extended(resource) or resource in allocatable


def _overcommit(node: NodeView, recs: Sequence[PodRecord]) -> list[Conflict]:
    alloc = node.allocatable
    totals: dict[str, int] = defaultdict(int)
    for rec in recs:
        for res, amount in rec.view.requests.items():
            totals[res] += amount
    totals["pods"] = len(recs)
    over = {
        r: v
        for r, v in totals.items()
        if v > 0 and _checked(r, alloc) and v > alloc.get(r, 0)
    }  # fmt: skip
    if not over:
        return []  # the common case: no PodRefs built
    used: dict[str, int] = defaultdict(int)
    losers: list[PodRecord] = []
    for rec in recs:
        need = {**rec.view.requests, "pods": 1}
        short = [
            r for r, v in need.items()
            if v > 0 and _checked(r, alloc) and used[r] + v > alloc.get(r, 0)
        ]  # fmt: skip
        if short:
            losers.append(rec)
            continue
        for r, v in need.items():
            used[r] += v
    details = {r: {"requested": v, "allocatable": alloc.get(r, 0)} for r, v in sorted(over.items())}
    summary = ", ".join(
        f"{r} {format_quantity(r, v)} requested of {format_quantity(r, alloc.get(r, 0))}"
        for r, v in sorted(over.items())
    )
    refs = tuple(PodRef.of(r) for r in recs)
    culprits = tuple(PodRef.of(r) for r in losers)
    message = f"node {node.name} is overcommitted: {summary}"
    return [Conflict(OVERCOMMIT, node.name, message, refs, culprits, refs[-1], details)]


# ------------------------------------------------------------ host ports


def _ports_overlap(a: HostPort, b: HostPort) -> bool:
    if a.protocol != b.protocol or a.port != b.port:
        return False
    return a.ip == b.ip or "0.0.0.0" in (a.ip, b.ip)


def _host_ports(node: NodeView, recs: Sequence[PodRecord]) -> list[Conflict]:
    admitted: list[tuple[HostPort, PodRecord]] = []
    clashes: dict[tuple[str, int], list[tuple[PodRecord, PodRecord]]] = defaultdict(list)
    for rec in recs:
        if not rec.view.host_ports:
            continue
        hits = [
            (hp, other)
            for hp in rec.view.host_ports
            for used, other in admitted
            if _ports_overlap(hp, used)
        ]
        if hits:
            for hp, other in hits:
                clashes[(hp.protocol, hp.port)].append((other, rec))
            continue
        admitted.extend((hp, rec) for hp in rec.view.host_ports)
    out = []
    for (protocol, port), pairs in sorted(clashes.items()):
        involved = sorted({p.uid: p for pair in pairs for p in pair}.values(), key=_arrival)
        losers = sorted({b.uid: b for _, b in pairs}.values(), key=_arrival)
        refs = tuple(PodRef.of(r) for r in involved)
        message = f"host port {protocol}/{port} is used by more than one pod on {node.name}"
        out.append(
            Conflict(HOST_PORT, node.name, message, refs, tuple(PodRef.of(r) for r in losers),
                     refs[-1], {"protocol": protocol, "port": port}, f"{protocol}/{port}")
        )  # fmt: skip
    return out


def _arrival(rec: PodRecord) -> tuple[bool, str, int, str, str]:
    return rec.arrival


# ------------------------------------------------------------ single-pod fit


def _node_fit(node: NodeView, hard_taints: tuple[Taint, ...], rec: PodRecord) -> list[Conflict]:
    out = []
    view = rec.view
    selector_ok = all(node.labels.get(k) == v for k, v in view.node_selector.items())
    affinity_ok = view.required_node_affinity is None or view.required_node_affinity.matches(
        node.name, node.labels
    )
    if not (selector_ok and affinity_ok):
        ref = PodRef.of(rec)
        what = "nodeSelector" if not selector_ok else "required node affinity"
        message = f"pod {view.key} is on {node.name}, which does not match its {what}"
        out.append(Conflict(NODE_AFFINITY, node.name, message, (ref,), (ref,), ref, {}, rec.uid))
    for taint in hard_taints:
        if tolerates(view.tolerations, taint):
            continue
        ref = PodRef.of(rec)
        message = (
            f"pod {view.key} is on {node.name}, which has untolerated taint "
            f"{{{taint.key}: {taint.value}}} ({taint.effect})"
        )
        details = {"key": taint.key, "value": taint.value, "effect": taint.effect}
        out.append(Conflict(TAINT, node.name, message, (ref,), (ref,), ref, details, rec.uid))
        break
    return out


# ------------------------------------------------------------ anti-affinity


def _anti_affinity(
    nodes: Mapping[str, NodeView],
    by_node: Mapping[str, Sequence[PodRecord]],
    namespace_labels: NamespaceLabels,
) -> list[Conflict]:
    holders = [
        (rec, node)
        for name, recs in by_node.items()
        if (node := nodes.get(name)) is not None
        for rec in recs
        if rec.view.required_anti_affinity
    ]
    if not holders:
        return []
    domains: dict[str, dict[str, list[PodRecord]]] = {}

    def members(key: str, value: str) -> list[PodRecord]:
        if key not in domains:
            index: dict[str, list[PodRecord]] = defaultdict(list)
            for name, recs in by_node.items():
                node = nodes.get(name)
                if node is not None and key in node.labels:
                    index[node.labels[key]].extend(recs)
            domains[key] = index
        return domains[key].get(value, [])

    seen: set[tuple[str, str]] = set()
    out = []
    for rec, node in holders:
        for term in rec.view.required_anti_affinity:
            value = node.labels.get(term.topology_key)
            if value is None:
                continue
            for other in members(term.topology_key, value):
                if other.uid == rec.uid:
                    continue
                ns = other.view.namespace
                if not term.matches(ns, other.view.labels, namespace_labels(ns)):
                    continue
                pair = (min(rec.uid, other.uid), max(rec.uid, other.uid))
                if pair in seen:
                    continue
                seen.add(pair)
                first, last = sorted((rec, other), key=_arrival)
                refs = (PodRef.of(first), PodRef.of(last))
                message = (
                    f"pods {first.view.key} and {last.view.key} share "
                    f"{term.topology_key}={value} against {rec.view.key}'s required anti-affinity"
                )
                out.append(
                    Conflict(POD_ANTI_AFFINITY, str(last.node), message, refs, (refs[1],),
                             refs[1], {"topologyKey": term.topology_key, "value": value},
                             f"{pair[0]}+{pair[1]}")
                )  # fmt: skip
    return out


# ------------------------------------------------------------ topology spread


def _eligible(node: NodeView, rec: PodRecord, c: SpreadConstraint) -> bool:
    if c.topology_key not in node.labels:
        return False
    view = rec.view
    if c.node_affinity_policy != "Ignore":
        if any(node.labels.get(k) != v for k, v in view.node_selector.items()):
            return False
        rna = view.required_node_affinity
        if rna is not None and not rna.matches(node.name, node.labels):
            return False
    if c.node_taints_policy == "Honor":
        for taint in node.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(
                view.tolerations, taint
            ):
                return False
    return True


def _selector_text(c: SpreadConstraint) -> str:
    """A readable, deterministic name for a constraint's selector (part of the conflict key)."""
    reqs = sorted(
        f"{r.key} {r.op} {','.join(sorted(r.values))}".strip() for r in c.selector.requirements
    )
    return f"skew{c.max_skew}:" + (";".join(reqs) or "everything")


def _spread(
    nodes: Mapping[str, NodeView], by_node: Mapping[str, Sequence[PodRecord]]
) -> list[Conflict]:
    groups: dict[tuple[Any, ...], list[PodRecord]] = defaultdict(list)
    for recs in by_node.values():
        for rec in recs:
            view = rec.view
            for c in view.spread_constraints:
                if c.when_unsatisfiable != "DoNotSchedule":
                    continue
                honor_affinity = c.node_affinity_policy != "Ignore"
                key = (
                    view.namespace,
                    c,
                    tuple(sorted(view.node_selector.items())) if honor_affinity else (),
                    view.required_node_affinity if honor_affinity else None,
                    view.tolerations if c.node_taints_policy == "Honor" else (),
                )
                groups[key].append(rec)
    out = []
    for key, constrained in groups.items():
        namespace, c = key[0], key[1]
        sample = constrained[0]
        domain_of = {
            name: node.labels[c.topology_key]
            for name, node in nodes.items()
            if _eligible(node, sample, c)
        }
        if not domain_of:
            continue
        counts: dict[str, int] = dict.fromkeys(domain_of.values(), 0)
        for name, value in domain_of.items():
            for rec in by_node.get(name, ()):
                if rec.view.namespace == namespace and c.selector.matches(rec.view.labels):
                    counts[value] += 1
        minimum = min(counts.values()) if len(counts) >= c.min_domains else 0
        for value, count in sorted(counts.items()):
            excess = count - minimum - c.max_skew
            if excess <= 0:
                continue
            in_domain = sorted(
                (r for r in constrained if r.node is not None and domain_of.get(r.node) == value),
                key=_arrival,
            )
            if not in_domain:
                continue
            losers = in_domain[-excess:]
            refs = tuple(PodRef.of(r) for r in in_domain)
            message = (
                f"topology spread on {c.topology_key} violated in {namespace}: "
                f"{c.topology_key}={value} has {count} matching pods, the minimum is {minimum}, "
                f"maxSkew {c.max_skew}"
            )
            details = {
                "topologyKey": c.topology_key,
                "value": value,
                "count": count,
                "minimum": minimum,
                "maxSkew": c.max_skew,
            }
            scope = f"{namespace}/{c.topology_key}={value}/{_selector_text(c)}"
            out.append(
                Conflict(TOPOLOGY_SPREAD, str(losers[-1].node), message, refs,
                         tuple(PodRef.of(r) for r in losers), refs[-1], details, scope)
            )  # fmt: skip
    return out
