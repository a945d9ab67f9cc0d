"""The affinity terms of counted pods, grouped, and indexed by what they select.

Inter-pod affinity asks, on every decision, which existing pods' terms select
the incoming pod. A term whose selector requires `key In (value)` can only
select a pod carrying that label, so terms are filed under one such
(key, value) and a decision looks only at the terms filed under the pod's own
labels, plus the few terms without such a requirement. The answer is the
same as testing every term; the cost follows the pod's labels, not the
number of distinct terms in the cluster (about 30 per 1,000 nodes in the
benchmarks' workloads).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from webhook.policy.model import AffinityTerm, WeightedAffinityTerm

__all__ = ["TermTable"]

Term = TypeVar("Term", AffinityTerm, WeightedAffinityTerm)
Anchor = tuple[str, str] | None


def _anchor(term: AffinityTerm | WeightedAffinityTerm) -> Anchor:
    """A (key, value) every pod the term selects must carry, or None."""
    selector = term.term.selector if isinstance(term, WeightedAffinityTerm) else term.selector
    for r in selector.requirements:
        if r.op == "In" and len(r.values) == 1:
            return r.key, next(iter(r.values))
    return None


class TermTable(Generic[Term]):
    """term -> Counter(node name -> counted pods carrying it), with the label index."""

    def __init__(self) -> None:
        self._nodes: dict[Term, Counter[str]] = {}
        self._filed: dict[Anchor, dict[Term, Counter[str]]] = {}

    def __len__(self) -> int:
        return len(self._nodes)

    def __bool__(self) -> bool:
        return bool(self._nodes)

    def items(self) -> Iterator[tuple[Term, Counter[str]]]:
        return iter(self._nodes.items())

    def get(self, term: Term) -> Counter[str] | None:
        return self._nodes.get(term)

    def count(self, term: Term, node_name: str, sign: int) -> None:
        """Count (sign 1) or uncount (sign -1) one pod with `term` on `node_name`."""
        nodes = self._nodes.get(term)
        if nodes is None:
            if sign < 0:
                return
            nodes = self._nodes[term] = Counter()
            self._filed.setdefault(_anchor(term), {})[term] = nodes
        nodes[node_name] += sign
        if nodes[node_name] <= 0:
            del nodes[node_name]
            if not nodes:
                del self._nodes[term]
                anchor = _anchor(term)
                filed = self._filed[anchor]
                del filed[term]
                if not filed:
                    del self._filed[anchor]

    def selecting(self, labels: Mapping[str, str]) -> Iterator[tuple[Term, Counter[str]]]:
        """The terms that may select a pod with `labels` (the caller still matches each)."""
        filed = self._filed
        for anchor in labels.items():
            found = filed.get(anchor)
            if found:
                yield from found.items()
        unanchored = filed.get(None)
        if unanchored:
            yield from unanchored.items()
