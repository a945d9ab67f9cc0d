"""NodeUnschedulable: reject cordoned nodes (spec.unschedulable) unless the pod
tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from webhook.policy.interface import CycleState, FilterResult, rejected
from webhook.policy.model import Taint, tolerates

NAME: Final = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
_TAINT: Final = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


@dataclass(frozen=True)
class NodeUnschedulable:
    name: str = NAME

    def filter(self, state: CycleState) -> FilterResult | None:
        if tolerates(state.pod.tolerations, _TAINT):
            return None
        fail = state.snapshot.unschedulable[state.slots]
        return FilterResult.from_mask(fail, rejected(ERR_REASON_UNSCHEDULABLE, NAME))


def build(args: Any) -> NodeUnschedulable:
    return NodeUnschedulable()
