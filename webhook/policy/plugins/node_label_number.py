"""NodeLabelNumber (custom example plugin): prefer nodes by a numeric label.

Args: `labelKey` (required) and `preferHigher` (default true). A node's raw
score is the label's base-10 integer value; scores are normalised min-max
over the scored nodes to 0..100 (the best value gets 100). Nodes without the
label, or with a non-integer value, score 0. Score only: it never filters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from webhook.policy.interface import (
    MAX_NODE_SCORE,
    ArgsError,
    CycleState,
    IntArray,
    SlotArray,
    check_fields,
)

NAME: Final = "NodeLabelNumber"
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


@dataclass(frozen=True)
class NodeLabelNumberArgs:
    label_key: str
    prefer_higher: bool = True

    @staticmethod
    def parse(raw: Mapping[str, Any] | None) -> NodeLabelNumberArgs:
        args = check_fields(raw, {"labelKey", "preferHigher"})
        key = args.get("labelKey")
        if not isinstance(key, str) or not key:
            raise ArgsError("labelKey", "is required")
        if not _LABEL_KEY.match(key) or len(key.split("/")[-1]) > 63:
            raise ArgsError("labelKey", f"not a valid label key: {key!r}")
        higher = args.get("preferHigher", True)
        if not isinstance(higher, bool):
            raise ArgsError("preferHigher", f"must be true or false, got {higher!r}")
        return NodeLabelNumberArgs(key, higher)


@dataclass(frozen=True)
class NodeLabelNumber:
    args: NodeLabelNumberArgs
    name: str = NAME

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        col = state.snapshot.label_columns.get(self.args.label_key)
        if col is None:
            return np.zeros(len(slots), dtype=np.int64)
        codes = col.codes[slots]
        nums, ok = col.numbers()
        if len(nums) == 0:
            return np.zeros(len(slots), dtype=np.int64)
        safe = np.where(codes >= 0, codes, 0)
        valid = (codes >= 0) & ok[safe]
        if not valid.any():
            return np.zeros(len(slots), dtype=np.int64)
        vals = nums[safe].astype(np.float64)
        lo = vals[valid].min()
        hi = vals[valid].max()
        if hi == lo:
            return np.where(valid, MAX_NODE_SCORE, 0).astype(np.int64)
        rel = (vals - lo) / (hi - lo) if self.args.prefer_higher else (hi - vals) / (hi - lo)
        scores = np.floor(rel * MAX_NODE_SCORE).astype(np.int64)
        return np.where(valid, np.clip(scores, 0, MAX_NODE_SCORE), 0)

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return scores


def build(args: Mapping[str, Any] | None) -> NodeLabelNumber:
    if args is None:
        raise ArgsError("", "NodeLabelNumber needs args with labelKey")
    return NodeLabelNumber(NodeLabelNumberArgs.parse(args))
