"""NodeName: a pod that names its node (spec.nodeName) fits only that node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from webhook.policy.interface import CycleState, FilterResult, rejected

NAME: Final = "NodeName"
ERR_REASON: Final = "node(s) didn't match the requested node name"


@dataclass(frozen=True)
class NodeName:
    name: str = NAME

    def filter(self, state: CycleState) -> FilterResult | None:
        wanted = state.pod.node_name
        if not wanted:
            return None
        slot = state.snapshot.slot_of(wanted)
        fail = state.slots != (-1 if slot is None else slot)
        return FilterResult.from_mask(np.asarray(fail), rejected(ERR_REASON, NAME))


def build(args: Any) -> NodeName:
    return NodeName()
