"""PodAntiAffinity conflicts, kept per pod pair between changes. Pure.

Every conflict is a pair (a pod whose required anti-affinity term matches
another pod in its topology domain). A changed pod, or a pod on a changed
node, drops its pairs and finds them again: as a holder, among the pods of
its terms' domains; as a target, among the holders indexed by the domains
its node is in. Which pod's term a pair names is fixed (the earlier
arrival's first matching term, then the later's), so the incremental
result does not depend on the order changes came in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from webhook.conflicts.model import POD_ANTI_AFFINITY, Conflict, PodRecord, PodRef
from webhook.policy.model import NodeView

__all__ = ["AntiAffinityIndex"]

NamespaceLabels = Callable[[str], Mapping[str, str]]
Pair = tuple[str, str]


def _arrival(rec: PodRecord) -> tuple[bool, str, int, str, str]:
    return rec.arrival


class AntiAffinityIndex:
    """Holders indexed by domain, nodes indexed by domain, and the conflicting pairs."""

    def __init__(
        self,
        nodes: Mapping[str, NodeView],
        pods: Mapping[str, PodRecord],
        by_node: Mapping[str, Mapping[str, PodRecord]],
        namespace_labels: Callable[[], NamespaceLabels],
    ):
        self.nodes, self.pods, self.by_node = nodes, pods, by_node
        self.namespace_labels = namespace_labels
        self._domain_nodes: dict[str, dict[str, set[str]]] = {}  # key -> value -> nodes
        self._holders: dict[tuple[str, str], set[str]] = {}  # (key, value) -> uids
        self._holder_keys: dict[str, list[tuple[str, str]]] = {}
        self._pairs: dict[Pair, Conflict] = {}
        self._pairs_of: dict[str, set[Pair]] = {}
        self._dirty: set[str] = set()
        self._placed: dict[str, PodRecord] = {}  # uid -> counted pod on a known node

    # ---- changes -------------------------------------------------------
    def pod_changed(self, uid: str) -> None:
        self._dirty.add(uid)

    def node_changed(self, name: str, old: NodeView | None) -> None:
        """Re-index the node's domains; its pods move with it."""
        new = self.nodes.get(name)
        for key, values in self._domain_nodes.items():
            was = old.labels.get(key) if old is not None else None
            now = new.labels.get(key) if new is not None else None
            if was != now:
                if was is not None:
                    values[was].discard(name)
                if now is not None:
                    values.setdefault(now, set()).add(name)
        self._dirty.update(self.by_node.get(name, {}))

    def recheck_all(self) -> None:
        """Namespace labels changed (namespaceSelector), or a safety pass."""
        for recs in self.by_node.values():
            self._dirty.update(recs)
        self._dirty.update(self._placed)

    # ---- results -------------------------------------------------------
    def conflicts(self) -> Iterator[Conflict]:
        if self._dirty:
            self._update()
        yield from self._pairs.values()

    def _update(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for uid in dirty:
            for pair in self._pairs_of.pop(uid, set()):
                self._pairs.pop(pair, None)
                other = pair[0] if pair[1] == uid else pair[1]
                self._pairs_of.get(other, set()).discard(pair)
            for hk in self._holder_keys.pop(uid, ()):
                self._holders[hk].discard(uid)
            self._placed.pop(uid, None)
        for uid in dirty:
            rec = self._find(uid)
            if rec is None:
                continue
            self._placed[uid] = rec
            node = self.nodes[str(rec.node)]
            keys = []
            for term in rec.view.required_anti_affinity:
                self._track(term.topology_key)
                value = node.labels.get(term.topology_key)
                if value is not None:
                    keys.append((term.topology_key, value))
                    self._holders.setdefault(keys[-1], set()).add(uid)
            if keys:
                self._holder_keys[uid] = keys
        for uid in dirty:
            rec = self._placed.get(uid)
            if rec is not None:
                self._pair_up(rec)

    def _find(self, uid: str) -> PodRecord | None:
        """The pod as it is now, if it is counted on a node that exists."""
        rec = self.pods.get(uid)
        if rec is None or not rec.counted or rec.node not in self.nodes:
            return None
        return rec

    def _track(self, key: str) -> None:
        if key in self._domain_nodes:
            return
        values: dict[str, set[str]] = {}
        for name, node in self.nodes.items():
            value = node.labels.get(key)
            if value is not None:
                values.setdefault(value, set()).add(name)
        self._domain_nodes[key] = values

    def _pair_up(self, rec: PodRecord) -> None:
        node = self.nodes[str(rec.node)]
        partners: set[str] = set()
        ns_labels = self.namespace_labels()
        for term in rec.view.required_anti_affinity:
            value = node.labels.get(term.topology_key)
            if value is None:
                continue
            for name in self._domain_nodes[term.topology_key].get(value, ()):
                for uid, other in self.by_node.get(name, {}).items():
                    ns = other.view.namespace
                    if uid != rec.uid and term.matches(ns, other.view.labels, ns_labels(ns)):
                        partners.add(uid)
        ns = rec.view.namespace
        labels, own_ns_labels = rec.view.labels, ns_labels(ns)
        for key in self._domain_nodes:
            value = node.labels.get(key)
            if value is None:
                continue
            for uid in self._holders.get((key, value), ()):
                holder = self._placed.get(uid)
                if holder is not None and any(
                    t.topology_key == key and t.matches(ns, labels, own_ns_labels)
                    for t in holder.view.required_anti_affinity
                ):
                    partners.add(uid)
        partners.discard(rec.uid)
        for uid in partners:
            pair = (min(rec.uid, uid), max(rec.uid, uid))
            if pair in self._pairs:
                continue
            mate = self._placed.get(uid)
            if mate is None:
                continue
            found = self._pair(rec, mate, ns_labels)
            if found is not None:
                self._pairs[pair] = found
                self._pairs_of.setdefault(rec.uid, set()).add(pair)
                self._pairs_of.setdefault(uid, set()).add(pair)

    def _pair(self, a: PodRecord, b: PodRecord, ns_labels: NamespaceLabels) -> Conflict | None:
        first, last = sorted((a, b), key=_arrival)
        for holder, other in ((first, last), (last, first)):
            h_labels = self.nodes[str(holder.node)].labels
            o_labels = self.nodes[str(other.node)].labels
            ns = other.view.namespace
            for term in holder.view.required_anti_affinity:
                value = h_labels.get(term.topology_key)
                if value is None or o_labels.get(term.topology_key) != value:
                    continue
                if not term.matches(ns, other.view.labels, ns_labels(ns)):
                    continue
                refs = (PodRef.of(first), PodRef.of(last))
                message = (
                    f"pods {first.view.key} and {last.view.key} share "
                    f"{term.topology_key}={value} against {holder.view.key}'s required "
                    "anti-affinity"
                )
                details: dict[str, Any] = {"topologyKey": term.topology_key, "value": value}
                scope = f"{min(a.uid, b.uid)}+{max(a.uid, b.uid)}"
                return Conflict(POD_ANTI_AFFINITY, str(last.node), message, refs, (refs[1],),
                                refs[1], details, scope)  # fmt: skip
        return None
