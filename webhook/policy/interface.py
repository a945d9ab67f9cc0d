"""What plugins see and return: the cycle state and vectorised results.

A scheduling cycle evaluates one pod against every node at once. Node-level
data lives in the snapshot's numpy arrays indexed by node *slot*;
`CycleState.slots` lists the slots taking part, in the deterministic scan
order (node name order). Filters return one verdict per entry of `slots`;
scorers receive the slots of the feasible nodes and return one raw score per
slot, which `normalize` then maps into 0..100.

Plugins share per-cycle computations (for example the pod's required node
affinity mask, used by NodeAffinity and PodTopologySpread) through
`CycleState.memo`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from webhook.policy.model import PodView
from webhook.policy.snapshot import ClusterSnapshot
from webhook.policy.status import Code, Status

__all__ = [
    "MAX_NODE_SCORE",
    "ArgsError",
    "BoolArray",
    "CycleState",
    "FilterPlugin",
    "FilterResult",
    "IntArray",
    "PreFilterResult",
    "ScorePlugin",
    "SlotArray",
    "check_fields",
    "default_normalize",
    "go_div",
]

MAX_NODE_SCORE = 100

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
SlotArray = npt.NDArray[np.int64]

T = TypeVar("T")


class ArgsError(ValueError):
    """Invalid plugin args; `field` is the path inside the args object."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def check_fields(
    raw: Any, allowed: set[str] | frozenset[str], prefix: str = ""
) -> Mapping[str, Any]:
    """Reject non-objects and unknown fields (strict decoding, as kube-scheduler)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ArgsError(prefix, f"must be an object, got {type(raw).__name__}")
    for k in raw:
        if k not in allowed:
            path = f"{prefix}.{k}" if prefix else str(k)
            raise ArgsError(path, f"unknown field {k!r}")
    return raw


def go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@dataclass
class CycleState:
    pod: PodView
    snapshot: ClusterSnapshot
    slots: SlotArray
    """Node slots taking part in the cycle, in scan order."""
    memo: dict[str, Any] = field(default_factory=dict)

    def cached(self, key: str, compute: Callable[[], T]) -> T:
        if key in self.memo:
            return self.memo[key]  # type: ignore[no-any-return]
        value = compute()
        self.memo[key] = value
        return value

    @property
    def namespace_labels(self) -> Mapping[str, str]:
        return self.snapshot.namespace_labels(self.pod.namespace)

    def pod_hash(self) -> int:
        return self.cached("pod_hash", lambda: _hash64(self.memo.get("seed") or _pod_key(self.pod)))


def _pod_key(pod: PodView) -> str:
    return pod.uid or f"{pod.namespace}/{pod.name}"


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


@dataclass(frozen=True)
class FilterResult:
    """Per node of `CycleState.slots`: -1 passes, else an index into `statuses`."""

    status_index: npt.NDArray[np.int32]
    statuses: tuple[Status, ...]

    @staticmethod
    def from_mask(fail: BoolArray, status: Status) -> FilterResult | None:
        if not fail.any():
            return None
        idx = np.where(fail, 0, -1).astype(np.int32)
        return FilterResult(idx, (status,))

    @staticmethod
    def from_codes(
        codes: npt.NDArray[np.int32], statuses: tuple[Status, ...]
    ) -> FilterResult | None:
        if not (codes >= 0).any():
            return None
        return FilterResult(codes.astype(np.int32, copy=False), statuses)


@dataclass(frozen=True)
class PreFilterResult:
    """A pre-filter may restrict the nodes considered, or reject the pod outright."""

    node_names: frozenset[str] | None = None
    status: Status | None = None


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, state: CycleState) -> FilterResult | None: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        """Raw scores for `slots`, or None when the plugin has nothing to say (Skip)."""
        ...

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray: ...


def default_normalize(scores: IntArray, reverse: bool = False) -> IntArray:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)."""
    if len(scores) == 0:
        return scores
    max_count = int(scores.max())
    if max_count <= 0:
        if reverse:
            return np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
        return scores
    # scores are non-negative here, so floor division equals Go's truncation
    out = (MAX_NODE_SCORE * scores) // max_count
    if reverse:
        out = MAX_NODE_SCORE - out
    return out.astype(np.int64, copy=False)


def rejected(reason: str, plugin: str, unresolvable: bool = True) -> Status:
    code = Code.UnschedulableAndUnresolvable if unresolvable else Code.Unschedulable
    return Status(code, (reason,), plugin)


__all__ += ["rejected"]
