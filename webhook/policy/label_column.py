"""One node label key as a column over node slots: a small integer code per value.

Label matching in the snapshot compares codes, not strings, for every node
at once; Gt/Lt compare the values parsed as integers, once per value.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from webhook.policy.selectors import parse_int64

BoolArray = npt.NDArray[np.bool_]


class LabelColumn:
    """One node label key: a value code per node slot (-1 = label absent)."""

    __slots__ = ("_nums", "codes", "index", "values")

    def __init__(self, cap: int) -> None:
        self.codes: npt.NDArray[np.int32] = np.full(cap, -1, dtype=np.int32)
        self.index: dict[str, int] = {}
        self.values: list[str] = []
        self._nums: tuple[int, npt.NDArray[np.int64], BoolArray] | None = None

    def code(self, value: str) -> int:
        c = self.index.get(value)
        if c is None:
            c = len(self.values)
            self.index[value] = c
            self.values.append(value)
        return c

    def numbers(self) -> tuple[npt.NDArray[np.int64], BoolArray]:
        """Per value code: the int64 value and whether it parsed (for Gt/Lt)."""
        if self._nums is None or self._nums[0] != len(self.values):
            parsed = [parse_int64(v) for v in self.values]
            nums = np.array([p if p is not None else 0 for p in parsed], dtype=np.int64)
            ok = np.array([p is not None for p in parsed], dtype=np.bool_)
            self._nums = (len(self.values), nums, ok)
        return self._nums[1], self._nums[2]
