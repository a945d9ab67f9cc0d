"""Array helpers for the decision's hot path.

`np.isin` sorts both arrays on every call, which costs tens of microseconds
even for a hundred values; the decision asks "is this value one of a few"
several times per pod, over small integers (slots, namespace ids, label
codes), where a lookup table answers in one pass.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]

#: Widest range of values a lookup table is built for (larger ranges use np.isin).
MAX_TABLE = 1 << 20


def member_mask(values: npt.NDArray[np.integer], wanted: Collection[int]) -> BoolArray:
    """values[i] in wanted, per i: the same answer as np.isin for integer arrays."""
    if len(values) == 0 or len(wanted) == 0:
        return np.zeros(len(values), dtype=np.bool_)
    if len(wanted) == 1:
        return np.asarray(values == next(iter(wanted)))
    want = np.fromiter(wanted, dtype=np.int64, count=len(wanted))
    lo = min(int(values.min()), int(want.min()))
    hi = max(int(values.max()), int(want.max()))
    if hi - lo >= MAX_TABLE:
        wide: BoolArray = np.isin(values, want)
        return wide
    table = np.zeros(hi - lo + 1, dtype=np.bool_)
    table[want - lo] = True
    found: BoolArray = table[values - lo]
    return found
