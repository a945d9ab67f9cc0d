"""Which counted pods carry which labels: the index selectors are matched against.

Topology spreading and inter-pod affinity ask "which pods match this
selector" on every decision; answering from sets keyed by label key and
value keeps that proportional to the matching pods, never to all pods. The
snapshot owns the pod slots; this index only maps labels, namespaces and
the terminating mark to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from webhook.policy.selectors import LabelSelector

K = TypeVar("K", str, int)


class PodLabelIndex:
    """Pod slots by label (key, value), by key, by namespace id, and the terminating ones."""

    def __init__(self) -> None:
        self._by_value: dict[str, dict[str, set[int]]] = {}
        self._by_key: dict[str, set[int]] = {}
        self._by_namespace: dict[int, set[int]] = {}
        self._all: set[int] = set()
        self._terminating: set[int] = set()

    def add(self, pslot: int, namespace: int, labels: Mapping[str, str], terminating: bool) -> None:
        self._all.add(pslot)
        if terminating:
            self._terminating.add(pslot)
        self._by_namespace.setdefault(namespace, set()).add(pslot)
        for k, v in labels.items():
            self._by_value.setdefault(k, {}).setdefault(v, set()).add(pslot)
            self._by_key.setdefault(k, set()).add(pslot)

    def remove(self, pslot: int, namespace: int, labels: Mapping[str, str]) -> None:
        self._all.discard(pslot)
        self._terminating.discard(pslot)
        _discard(self._by_namespace, namespace, pslot)
        for k, v in labels.items():
            values = self._by_value.get(k)
            if values is not None:
                _discard(values, v, pslot)
                if not values:
                    del self._by_value[k]
            _discard(self._by_key, k, pslot)

    def match(
        self, selector: LabelSelector, namespaces: Iterable[int] | None, terminating: bool
    ) -> set[int]:
        """Slots matching `selector`; from `namespaces` only when the selector has no
        positive requirement (the caller still filters by namespace); `terminating=False`
        leaves out pods being deleted."""
        if selector.nothing:
            return set()
        positive: list[set[int]] = []
        negative: list[set[int]] = []
        for r in selector.requirements:
            if r.op in ("In", "NotIn"):
                values = self._by_value.get(r.key, {})
                if len(r.values) == 1:  # the common case: no copy of a large set
                    union = values.get(next(iter(r.values)), set())
                else:
                    union = set().union(*(values.get(v, set()) for v in r.values))
                (positive if r.op == "In" else negative).append(union)
            else:  # Exists, DoesNotExist
                keyed = self._by_key.get(r.key, set())
                (positive if r.op == "Exists" else negative).append(keyed)
        if positive:
            positive.sort(key=len)
            result = set(positive[0])
            for s in positive[1:]:
                result &= s
                if not result:
                    break
        elif namespaces is not None:
            result = set().union(*(self._by_namespace.get(ns, set()) for ns in namespaces))
        else:
            result = set(self._all)
        for s in negative:
            if result:
                result -= s
        if not terminating and self._terminating and result:
            result -= self._terminating
        return result


def _discard(index: dict[K, set[int]], key: K, pslot: int) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(pslot)
        if not members:
            del index[key]
