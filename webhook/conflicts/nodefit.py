"""The checks of one node's pods: overcommit, host ports, node affinity, taints. Pure.

Each node is checked on its own, so an incremental detector re-checks only
the node(s) a change touches. Where the question is the scheduler's ("does
this pod fit this node"), the policy's own rules answer it (nodematch,
node_ports, node_resources_fit): one source of truth. See detect.py for
what is checked and why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Final

from webhook.conflicts.model import (
    HOST_PORT,
    KUBELET,
    KUBELET_REJECTED,
    NODE_AFFINITY,
    OVERCOMMIT,
    TAINT,
    Conflict,
    PodRecord,
    PodRef,
)
from webhook.policy.model import HostPort, NodeView, Taint
from webhook.policy.nodematch import DO_NOT_SCHEDULE_EFFECTS, first_untolerated_taint
from webhook.policy.nodematch import pod_matches_node as pod_matches_node
from webhook.policy.plugins.node_ports import overlaps
from webhook.policy.plugins.node_resources_fit import is_extended

__all__ = ["format_quantity", "kubelet_rejection", "node_conflicts", "pod_matches_node"]

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


def format_quantity(resource: str, amount: int) -> str:
    """Millicores as `1500m`, everything else as an integer (bytes, counts)."""
    return f"{amount}m" if resource == "cpu" else str(amount)


def _arrival(rec: PodRecord) -> tuple[bool, str, int, str, str]:
    return rec.arrival


def node_conflicts(node: NodeView, recs: Sequence[PodRecord]) -> list[Conflict]:
    """Every single-node conflict among `recs` (the node's counted pods, in arrival order)."""
    out = _overcommit(node, recs)
    out.extend(_host_ports(node, recs))
    hard = tuple(
        t for t in node.taints
        if t.effect in DO_NOT_SCHEDULE_EFFECTS and not t.key.startswith(CONDITION_TAINT_PREFIX)
    )  # fmt: skip
    for rec in recs:
        view = rec.view
        if rec.provenance.placed_by == KUBELET:
            continue
        if hard or view.node_selector or view.required_node_affinity is not None:
            out.extend(_node_fit(node, hard, rec))
    return out


def kubelet_rejection(rec: PodRecord) -> Conflict | None:
    """A Failed pod the kubelet refused at admission: the placement was wrong."""
    if rec.node is None or rec.phase != "Failed":
        return None
    if not (rec.reason.startswith("OutOf") or rec.reason in KUBELET_REASONS):
        return None
    ref = PodRef.of(rec)
    note = f"kubelet rejected the pod on {rec.node}: {rec.reason}"
    if rec.message:
        note += f" ({rec.message})"
    return Conflict(
        KUBELET_REJECTED, str(rec.node), note, (ref,), (ref,), ref, {"reason": rec.reason}, rec.uid
    )


# ------------------------------------------------------------ overcommit


def _checked(resource: str, allocatable: Mapping[str, int]) -> bool:
    """The kubelet drops extended resources its node does not report before it checks."""
    if resource in ALWAYS_CHECKED or resource.startswith("hugepages-"):
        return True
    return not is_extended(resource) or resource in allocatable


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
            if overlaps(hp, used)
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


# ------------------------------------------------------------ single-pod fit


def _node_fit(node: NodeView, taints: tuple[Taint, ...], rec: PodRecord) -> list[Conflict]:
    out = []
    view = rec.view
    if not pod_matches_node(view, node.name, node.labels):
        ref = PodRef.of(rec)
        selector_ok = all(node.labels.get(k) == v for k, v in view.node_selector.items())
        what = "nodeSelector" if not selector_ok else "required node affinity"
        message = f"pod {view.key} is on {node.name}, which does not match its {what}"
        out.append(Conflict(NODE_AFFINITY, node.name, message, (ref,), (ref,), ref, {}, rec.uid))
    taint = first_untolerated_taint(taints, view.tolerations, DO_NOT_SCHEDULE_EFFECTS)
    if taint is not None:
        ref = PodRef.of(rec)
        message = (
            f"pod {view.key} is on {node.name}, which has untolerated taint "
            f"{{{taint.key}: {taint.value}}} ({taint.effect})"
        )
        details = {"key": taint.key, "value": taint.value, "effect": taint.effect}
        out.append(Conflict(TAINT, node.name, message, (ref,), (ref,), ref, details, rec.uid))
    return out
