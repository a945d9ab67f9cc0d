"""What plugins see and return: the extension points, the cycle state, vectorised results.

A scheduling cycle evaluates one pod against every node at once. Node-level
data lives in the snapshot's numpy arrays indexed by node *slot*;
`CycleState.slots` lists the slots taking part, in the deterministic scan
order (node name order). Filters return one verdict per entry of `slots`;
scorers receive the slots of the feasible nodes and return one raw score per
slot, which `normalize` then maps into 0..100.

Each extension point is a protocol of its own, and a profile lists its
plugins per point (webhook.policy.profile.Profile):

- `PreFilterPlugin.pre_filter(pod, snapshot)`: may restrict the nodes or
  reject the pod; it runs before the cycle's nodes are fixed, so it gets no
  CycleState and nothing it computes can go stale when the nodes narrow;
- `FilterPlugin.filter(state)`: a verdict per node of `state.slots`;
- `ScorePlugin.score(state, slots)`, then `normalize(state, scores)`.

What several plugins compute from the pod (its required node affinity mask,
its untolerated taints) is computed once per cycle into the typed fields of
`CycleState.shared`. A plugin's own per-cycle data (what its score leaves for
its normalize) is an instance of a class of its own, from
`CycleState.data(ThatClass)`: no plugin reaches another's data by a key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from webhook.policy.model import PodView, Taint
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
    "PreFilterPlugin",
    "PreFilterResult",
    "ScorePlugin",
    "SharedComputations",
    "SlotArray",
    "check_fields",
    "default_normalize",
    "go_div",
    "rejected",
]

MAX_NODE_SCORE = 100

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
SlotArray = npt.NDArray[np.int64]

D = TypeVar("D")


class ArgsError(ValueError):
    """A bad field in plugin args or a policy document; `field` is its path inside the object."""

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
class SharedComputations:
    """What more than one plugin computes from the pod, once per cycle, for `state.slots`
    (webhook.policy.nodematch fills them)."""

    required_node_affinity: BoolArray | None = None
    """nodeSelector AND required node affinity, per node of the cycle (NodeAffinity's
    filter, PodTopologySpread's node inclusion)."""
    untolerated_taints: list[Taint | None] | None = None
    """Per taint set of the snapshot: the first NoSchedule/NoExecute taint the pod does
    not tolerate, or None (TaintToleration's filter, PodTopologySpread's node inclusion)."""


class CycleState:
    """One pod's scheduling cycle: the pod, the snapshot, the nodes taking part."""

    __slots__ = ("_data", "_pod_hash", "pod", "seed", "shared", "slots", "snapshot")

    def __init__(
        self,
        pod: PodView,
        snapshot: ClusterSnapshot,
        slots: SlotArray,
        *,
        seed: str | None = None,
    ) -> None:
        self.pod = pod
        self.snapshot = snapshot
        self.slots = slots
        """Node slots taking part in the cycle, in scan order."""
        self.seed = seed
        """Breaks ties between equally good nodes (else the pod's uid, else its key)."""
        self.shared = SharedComputations()
        self._data: dict[type[Any], Any] = {}
        self._pod_hash: int | None = None

    def narrow(self, slots: SlotArray) -> None:
        """Make `slots` the nodes taking part (the framework judges the scan in parts);
        what was shared for the old slots is computed again when asked for."""
        self.slots = slots
        self.shared.required_node_affinity = None

    def data(self, kind: type[D]) -> D:
        """The calling plugin's own per-cycle data: one `kind()` per cycle, made on first use."""
        found = self._data.get(kind)
        if found is None:
            found = self._data[kind] = kind()
        return found

    @property
    def namespace_labels(self) -> Mapping[str, str]:
        return self.snapshot.namespace_labels(self.pod.namespace)

    def pod_hash(self) -> int:
        if self._pod_hash is None:
            self._pod_hash = _hash64(self.seed or _pod_key(self.pod))
        return self._pod_hash


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
class PreFilterPlugin(Protocol):
    """Before the cycle: restrict the nodes considered, or reject the pod outright."""

    name: str

    def pre_filter(self, pod: PodView, snapshot: ClusterSnapshot) -> PreFilterResult | None:
        """None when the plugin has nothing to say (every node stays eligible)."""
        ...


class FilterPlugin(Protocol):
    name: str

    def filter(self, state: CycleState) -> FilterResult | None:
        """A verdict per node of `state.slots`; None when every node passes."""
        ...


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
