"""TopologySpread conflicts, kept per constraint group between changes. Pure.

A group is the pods that carry one DoNotSchedule constraint in one
namespace with the same node inclusion (nodeSelector/affinity when
nodeAffinityPolicy is Honor, tolerations when nodeTaintsPolicy is Honor, and
the pod's other DoNotSchedule topology keys): they count the same pods over
the same nodes. A pod change dirties only the groups it carries or whose
selector matches its labels; a node change only the groups whose node
inclusion or domain of that node changed. Node inclusion and counting are
the PodTopologySpread plugin's rules (nodes carry every constraint key,
`pod_matches_node`, NoSchedule/NoExecute taints, an empty selector counts
nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.conflicts.model import TOPOLOGY_SPREAD, Conflict, PodRecord, PodRef
from webhook.policy.model import NodeView, PodView, SpreadConstraint
from webhook.policy.nodematch import (
    DO_NOT_SCHEDULE_EFFECTS,
    first_untolerated_taint,
    pod_matches_node,
)
from webhook.policy.plugins.pod_topology_spread import DO_NOT_SCHEDULE, counts_toward

__all__ = ["SpreadIndex"]

GroupKey = tuple[Any, ...]
EligKey = tuple[Any, ...]


def _arrival(rec: PodRecord) -> tuple[bool, str, int, str, str]:
    return rec.arrival


def _keys_of(view: PodView) -> Iterator[tuple[GroupKey, EligKey, SpreadConstraint]]:
    cons = [c for c in view.spread_constraints if c.when_unsatisfiable == DO_NOT_SCHEDULE]
    all_keys = frozenset(c.topology_key for c in cons)
    for c in cons:
        honor_affinity = c.node_affinity_policy == "Honor"
        elig = (
            c.topology_key,
            all_keys,
            tuple(sorted(view.node_selector.items())) if honor_affinity else None,
            view.required_node_affinity if honor_affinity else None,
            view.tolerations if c.node_taints_policy == "Honor" else None,
        )
        yield (view.namespace, c, elig), elig, c


@dataclass
class _Eligible:
    """The nodes a group counts over (the plugin's node inclusion), each with its domain."""

    sample: PodView
    domain_of: dict[str, str] = field(default_factory=dict)
    present: Counter[str] = field(default_factory=Counter)
    groups: set[GroupKey] = field(default_factory=set)

    def domain(self, key: EligKey, node: NodeView | None) -> str | None:
        if node is None:
            return None
        topology_key, all_keys, selector, _, tolerations = key
        labels = node.labels
        if any(k not in labels for k in all_keys):
            return None
        if selector is not None and not pod_matches_node(self.sample, node.name, labels):
            return None
        if tolerations is not None and first_untolerated_taint(
            node.taints, tolerations, DO_NOT_SCHEDULE_EFFECTS
        ):
            return None
        return str(labels[topology_key])

    def set(self, name: str, value: str | None) -> bool:
        old = self.domain_of.get(name)
        if old == value:
            return False
        if old is not None:
            self.present[old] -= 1
            if not self.present[old]:
                del self.present[old]
            del self.domain_of[name]
        if value is not None:
            self.domain_of[name] = value
            self.present[value] += 1
        return True


@dataclass
class _Group:
    namespace: str
    constraint: SpreadConstraint
    elig: EligKey
    constrained: dict[str, PodRecord] = field(default_factory=dict)


class SpreadIndex:
    """The counted pods, their spread groups, and each group's conflicts."""

    def __init__(self, nodes: Mapping[str, NodeView]):
        self.nodes = nodes
        self.pods: dict[str, PodRecord] = {}
        self._by_label: dict[tuple[str, str, str], set[str]] = {}
        self._by_ns: dict[str, set[str]] = {}
        self._groups: dict[GroupKey, _Group] = {}
        self._groups_in: dict[tuple[str, str, str] | str, set[GroupKey]] = {}
        """Groups by (namespace, key, value) of one In requirement, else by namespace."""
        self._eligible: dict[EligKey, _Eligible] = {}
        self._results: dict[GroupKey, list[Conflict]] = {}
        self._dirty: set[GroupKey] = set()

    # ---- changes -------------------------------------------------------
    def add(self, rec: PodRecord) -> None:
        """A counted pod (bound, not finished, not terminating) appeared."""
        view = rec.view
        self.pods[rec.uid] = rec
        self._by_ns.setdefault(view.namespace, set()).add(rec.uid)
        for k, v in view.labels.items():
            self._by_label.setdefault((view.namespace, k, v), set()).add(rec.uid)
        for gk, ek, c in _keys_of(view):
            group = self._groups.get(gk)
            if group is None:
                group = self._groups[gk] = _Group(view.namespace, c, ek)
                for where in _where(view.namespace, c):
                    self._groups_in.setdefault(where, set()).add(gk)
                self._track(ek, view).groups.add(gk)
            group.constrained[rec.uid] = rec
        self._touch(view)

    def remove(self, rec: PodRecord) -> None:
        view = rec.view
        if self.pods.pop(rec.uid, None) is None:
            return
        self._by_ns[view.namespace].discard(rec.uid)
        for k, v in view.labels.items():
            self._by_label[(view.namespace, k, v)].discard(rec.uid)
        self._touch(view)
        for gk, ek, _ in _keys_of(view):
            group = self._groups.get(gk)
            if group is None:
                continue
            group.constrained.pop(rec.uid, None)
            if not group.constrained:
                del self._groups[gk]
                for where in _where(view.namespace, group.constraint):
                    self._groups_in[where].discard(gk)
                self._results.pop(gk, None)
                self._dirty.discard(gk)
                elig = self._eligible[ek]
                elig.groups.discard(gk)
                if not elig.groups:
                    del self._eligible[ek]

    def node_changed(self, name: str) -> None:
        """Node `name` was added, changed or removed (`self.nodes` already says which)."""
        node = self.nodes.get(name)
        for ek, elig in self._eligible.items():
            if elig.set(name, elig.domain(ek, node)):
                self._dirty |= elig.groups

    def _track(self, ek: EligKey, sample: PodView) -> _Eligible:
        elig = self._eligible.get(ek)
        if elig is None:
            elig = self._eligible[ek] = _Eligible(sample)
            for name, node in self.nodes.items():
                elig.set(name, elig.domain(ek, node))
        return elig

    def _touch(self, view: PodView) -> None:
        """Dirty the groups this pod is in, or whose selector counts it."""
        ns = view.namespace
        places: list[tuple[str, str, str] | str] = [ns]
        places.extend((ns, k, v) for k, v in view.labels.items())
        for where in places:
            for gk in self._groups_in.get(where, ()):
                if counts_toward(self._groups[gk].constraint.selector, view.labels):
                    self._dirty.add(gk)
        for gk, _, _ in _keys_of(view):
            if gk in self._groups:
                self._dirty.add(gk)

    # ---- results -------------------------------------------------------
    def conflicts(self) -> Iterator[Conflict]:
        for gk in self._dirty:
            self._results[gk] = self._check(self._groups[gk])
        self._dirty.clear()
        for found in self._results.values():
            yield from found

    def recheck_all(self) -> None:
        self._dirty = set(self._groups)

    def _matching(self, namespace: str, c: SpreadConstraint) -> Iterator[PodRecord]:
        sel = c.selector
        if sel.empty or sel.nothing:
            return
        candidates: set[str] | None = None
        for r in sel.requirements:
            if r.op == "In":
                hits: set[str] = set()
                for v in r.values:
                    hits |= self._by_label.get((namespace, r.key, v), set())
                if candidates is None or len(hits) < len(candidates):
                    candidates = hits
        for uid in self._by_ns.get(namespace, set()) if candidates is None else candidates:
            rec = self.pods[uid]
            if counts_toward(sel, rec.view.labels):
                yield rec

    def _check(self, group: _Group) -> list[Conflict]:
        c, namespace = group.constraint, group.namespace
        domain_of = self._eligible[group.elig].domain_of
        if not domain_of:
            return []
        counts: dict[str, int] = dict.fromkeys(self._eligible[group.elig].present, 0)
        for rec in self._matching(namespace, c):
            value = domain_of.get(str(rec.node))
            if value is not None:
                counts[value] += 1
        minimum = min(counts.values()) if len(counts) >= c.min_domains else 0
        out = []
        for value, count in sorted(counts.items()):
            excess = count - minimum - c.max_skew
            if excess <= 0:
                continue
            in_domain = sorted(
                (r for r in group.constrained.values() if domain_of.get(str(r.node)) == value),
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


def _where(namespace: str, c: SpreadConstraint) -> list[tuple[str, str, str] | str]:
    """Where a group is indexed: a pod it counts carries one of these labels."""
    for r in c.selector.requirements:
        if r.op == "In":
            return [(namespace, r.key, v) for v in sorted(r.values)]
    return [namespace]


def _selector_text(c: SpreadConstraint) -> str:
    """A readable, deterministic name for a constraint's selector (part of the conflict key)."""
    reqs = sorted(
        f"{r.key} {r.op} {','.join(sorted(r.values))}".strip() for r in c.selector.requirements
    )
    return f"skew{c.max_skew}:" + (";".join(reqs) or "everything")
