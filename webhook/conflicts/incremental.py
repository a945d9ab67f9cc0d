"""Incremental conflict detection: each change re-checks only what it can affect. Pure.

The `Detector` keeps the nodes, the pods and the conflicts found so far. A
pod change re-checks the node(s) it is and was on (overcommit, host ports,
node fit), the spread groups it is in or counts toward, and its
anti-affinity pairs; a node change re-checks that node, the spread groups
whose node inclusion of it changed, and the pairs of its pods. `detect()`
is a fresh `Detector` fed everything, so the full pass and the incremental
one are one implementation (tests/unit/conflicts/test_incremental.py checks
that they agree over random change sequences).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from webhook.conflicts.antiaffinity import AntiAffinityIndex
from webhook.conflicts.model import Conflict, PodRecord
from webhook.conflicts.nodefit import kubelet_rejection, node_conflicts
from webhook.conflicts.spread import SpreadIndex
from webhook.policy.model import NodeView

__all__ = ["Detector", "NamespaceLabels"]

NamespaceLabels = Callable[[str], Mapping[str, str]]
NS_NAME: Final = "kubernetes.io/metadata.name"


def _arrival(rec: PodRecord) -> tuple[bool, str, int, str, str]:
    return rec.arrival


class Detector:
    """Nodes, pods and namespace labels in; the standing conflicts out (`conflicts()`)."""

    def __init__(self, namespace_labels: NamespaceLabels | None = None):
        self.nodes: dict[str, NodeView] = {}
        self.pods: dict[str, PodRecord] = {}
        self.by_node: dict[str, dict[str, PodRecord]] = {}
        """Counted pods by the node they are bound to (known or not)."""
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._node_results: dict[str, list[Conflict]] = {}
        self._rejected: dict[str, Conflict] = {}
        self._dirty_nodes: set[str] = set()
        self._spread = SpreadIndex(self.nodes)
        # the index reads namespace labels through a function of the table, not of the
        # detector: no reference cycle, so a replaced detector is freed at once
        known = self._namespaces

        def labels_of(namespace: str) -> Mapping[str, str]:
            return known.get(namespace) or {NS_NAME: namespace}

        self.labels_of: NamespaceLabels = labels_of
        fixed_or_known = namespace_labels or labels_of
        self._anti = AntiAffinityIndex(self.nodes, self.pods, self.by_node, lambda: fixed_or_known)
        self._sorted: list[Conflict] | None = None

    # ---- namespaces ----------------------------------------------------

    def put_namespace(self, name: str, labels: Mapping[str, str] | None) -> None:
        """Namespace labels (None: gone); they decide anti-affinity namespaceSelectors."""
        if self._namespaces.get(name) == labels:
            return
        if labels is None:
            self._namespaces.pop(name, None)
        else:
            self._namespaces[name] = labels
        self._anti.recheck_all()
        self._sorted = None

    # ---- nodes and pods ------------------------------------------------
    def put_node(self, view: NodeView) -> None:
        old = self.nodes.get(view.name)
        if old == view:
            return
        self.nodes[view.name] = view
        self._node_changed(view.name, old)

    def drop_node(self, name: str) -> None:
        old = self.nodes.pop(name, None)
        if old is not None:
            self._node_changed(name, old)

    def _node_changed(self, name: str, old: NodeView | None) -> None:
        self._dirty_nodes.add(name)
        self._spread.node_changed(name)
        self._anti.node_changed(name, old)
        self._sorted = None

    def put_pod(self, rec: PodRecord) -> None:
        old = self.pods.get(rec.uid)
        if old == rec:
            return
        if old is not None:
            self._forget(old)
        self.pods[rec.uid] = rec
        if rec.counted:
            self.by_node.setdefault(str(rec.node), {})[rec.uid] = rec
            self._dirty_nodes.add(str(rec.node))
            self._spread.add(rec)
        else:
            found = kubelet_rejection(rec)
            if found is not None:
                self._rejected[rec.uid] = found
        self._anti.pod_changed(rec.uid)
        self._sorted = None

    def drop_pod(self, uid: str) -> None:
        old = self.pods.pop(uid, None)
        if old is not None:
            self._forget(old)
            self._anti.pod_changed(uid)
            self._sorted = None

    def _forget(self, old: PodRecord) -> None:
        self._rejected.pop(old.uid, None)
        if not old.counted:
            return
        name = str(old.node)
        on_node = self.by_node[name]
        del on_node[old.uid]
        if not on_node:
            del self.by_node[name]
        self._dirty_nodes.add(name)
        self._spread.remove(old)

    def apply(self, kind: str, key: str, new: Any) -> None:
        """One journalled change (store.Change): Node, Pod or Namespace, None when gone."""
        if kind == "Node":
            self.put_node(new) if new is not None else self.drop_node(key)
        elif kind == "Pod":
            self.put_pod(new) if new is not None else self.drop_pod(key)
        else:
            self.put_namespace(key, new)

    # ---- results -------------------------------------------------------
    def conflicts(self) -> list[Conflict]:
        """All conflicts, sorted by kind, node and scope; re-checks only what changed."""
        if self._sorted is not None:
            return self._sorted
        for name in self._dirty_nodes:
            node = self.nodes.get(name)
            recs = self.by_node.get(name)
            if node is None or not recs:
                self._node_results.pop(name, None)
                continue
            found = node_conflicts(node, sorted(recs.values(), key=_arrival))
            if found:
                self._node_results[name] = found
            else:
                self._node_results.pop(name, None)
        self._dirty_nodes.clear()
        out = [c for found in self._node_results.values() for c in found]
        out.extend(self._rejected.values())
        out.extend(self._anti.conflicts())
        out.extend(self._spread.conflicts())
        out.sort(key=lambda c: (c.kind, c.node, c.scope, c.key))
        self._sorted = out
        return out

    def full_pass(self) -> list[Conflict]:
        """Re-check everything (the periodic safety pass); the result should not change."""
        self._dirty_nodes = set(self.nodes) | set(self.by_node)
        self._spread.recheck_all()
        self._anti.recheck_all()
        self._sorted = None
        return self.conflicts()
