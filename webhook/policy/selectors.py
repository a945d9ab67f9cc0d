"""Label selectors (metav1.LabelSelector) and node selectors (v1.NodeSelector).

Both are parsed once into frozen, hashable values so that identical terms of
many pods (replicas of one Deployment) collapse into one key in the snapshot's
indexes. Semantics follow apimachinery's `labels.Selector` and
component-helpers' `nodeaffinity`:

- a nil LabelSelector matches nothing, an empty one (`{}`) matches everything;
- NotIn and DoesNotExist match when the key is absent;
- node selector terms are ORed, requirements in a term ANDed, an empty term
  matches nothing; Gt/Lt need both sides to parse as base-10 int64;
- a term with an invalid requirement never matches (kube-scheduler's lazy
  error node selector ignores the error and treats the term as not matching).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "LabelRequirement",
    "LabelSelector",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "parse_int64",
]

_LABEL_OPS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_OPS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_INT_RE: Final = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None when it fails."""
    if not _INT_RE.match(text):
        return None
    v = int(text)
    if v < _INT64_MIN or v > _INT64_MAX:
        return None
    return v


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    op: str  # In | NotIn | Exists | DoesNotExist
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op == "In":
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == "NotIn":
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed metav1.LabelSelector. `nothing` is the nil selector."""

    requirements: tuple[LabelRequirement, ...] = ()
    nothing: bool = False

    @staticmethod
    def parse(raw: Any) -> LabelSelector:
        """Parse a LabelSelector dict; None gives the match-nothing selector."""
        if raw is None:
            return NOTHING
        if not isinstance(raw, Mapping):
            raise ValueError(f"label selector must be an object, got {type(raw).__name__}")
        reqs: list[LabelRequirement] = []
        for k, v in sorted((raw.get("matchLabels") or {}).items()):
            reqs.append(LabelRequirement(str(k), "In", frozenset((str(v),))))
        for expr in raw.get("matchExpressions") or ():
            op = expr.get("operator")
            if op not in _LABEL_OPS:
                raise ValueError(f"invalid label selector operator {op!r}")
            values = frozenset(str(x) for x in (expr.get("values") or ()))
            if op in ("In", "NotIn") and not values:
                raise ValueError(f"label selector operator {op} needs values")
            if op in ("Exists", "DoesNotExist") and values:
                raise ValueError(f"label selector operator {op} takes no values")
            reqs.append(LabelRequirement(str(expr.get("key", "")), op, values))
        return LabelSelector(tuple(reqs))

    @property
    def empty(self) -> bool:
        """True for `{}`: selects everything (labels.Selector.Empty())."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def with_labels(self, extra: Mapping[str, str]) -> LabelSelector:
        """The selector ANDed with key=value requirements (matchLabelKeys merge)."""
        if not extra:
            return self
        reqs = list(self.requirements)
        reqs.extend(LabelRequirement(k, "In", frozenset((v,))) for k, v in sorted(extra.items()))
        return LabelSelector(tuple(reqs), self.nothing)


NOTHING: Final = LabelSelector((), True)
EVERYTHING: Final = LabelSelector((), False)


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    op: str
    values: tuple[str, ...]
    number: int | None = None  # parsed value for Gt/Lt
    valid: bool = True

    def matches_labels(self, labels: Mapping[str, str]) -> bool:
        if not self.valid:
            return False
        op = self.op
        v = labels.get(self.key)
        if op == "In":
            return v is not None and v in self.values
        if op == "NotIn":
            return v is None or v not in self.values
        if op == "Exists":
            return v is not None
        if op == "DoesNotExist":
            return v is None
        if v is None or self.number is None:
            return False
        n = parse_int64(v)
        if n is None:
            return False
        return n > self.number if op == "Gt" else n < self.number

    def matches_field(self, node_name: str) -> bool:
        if not self.valid:
            return False
        if self.op == "In":
            return node_name in self.values
        return node_name not in self.values


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    expressions: tuple[NodeSelectorRequirement, ...]
    fields: tuple[NodeSelectorRequirement, ...]
    valid: bool = True

    @property
    def empty(self) -> bool:
        return not self.expressions and not self.fields

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.valid or self.empty:
            return False
        return all(r.matches_labels(labels) for r in self.expressions) and all(
            r.matches_field(name) for r in self.fields
        )

    @staticmethod
    def parse(raw: Any) -> NodeSelectorTerm:
        if not isinstance(raw, Mapping):
            return NodeSelectorTerm((), (), False)
        exprs = tuple(_parse_node_req(e, False) for e in raw.get("matchExpressions") or ())
        fields = tuple(_parse_node_req(e, True) for e in raw.get("matchFields") or ())
        valid = all(r.valid for r in exprs) and all(r.valid for r in fields)
        return NodeSelectorTerm(exprs, fields, valid)


def _parse_node_req(raw: Any, is_field: bool) -> NodeSelectorRequirement:
    if not isinstance(raw, Mapping):
        return NodeSelectorRequirement("", "In", (), None, False)
    key = str(raw.get("key", ""))
    op = raw.get("operator")
    values = tuple(str(v) for v in raw.get("values") or ())
    if op not in _NODE_OPS:
        return NodeSelectorRequirement(key, str(op), values, None, False)
    if is_field:
        # Only metadata.name with In/NotIn is valid for matchFields.
        ok = key == "metadata.name" and op in ("In", "NotIn") and len(values) == 1
        return NodeSelectorRequirement(key, op, values, None, ok)
    if op in ("In", "NotIn"):
        return NodeSelectorRequirement(key, op, values, None, bool(values))
    if op in ("Exists", "DoesNotExist"):
        return NodeSelectorRequirement(key, op, (), None, not values)
    number = parse_int64(values[0]) if len(values) == 1 else None
    return NodeSelectorRequirement(key, op, values, number, number is not None)


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """v1.NodeSelector: terms are ORed."""

    terms: tuple[NodeSelectorTerm, ...]

    @staticmethod
    def parse(raw: Any) -> NodeSelector:
        terms: Iterable[Any] = ()
        if isinstance(raw, Mapping):
            terms = raw.get("nodeSelectorTerms") or ()
        return NodeSelector(tuple(NodeSelectorTerm.parse(t) for t in terms))

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        return any(t.matches(name, labels) for t in self.terms)
