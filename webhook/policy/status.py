"""Plugin and framework result codes, as in kube-scheduler's framework.Status.

`Skip` has a different meaning here than in kube-scheduler: a decision with
code Skip means the policy cannot evaluate the pod correctly (volumes needing
binding, DRA claims, scheduling gates...), so the caller must leave the pod to
the default scheduler. Plugins use `None` results for "nothing to do".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Code", "Status"]


class Code(enum.Enum):
    Success = "Success"
    Unschedulable = "Unschedulable"
    """The node does not fit now; preemption or other pods leaving might help."""
    UnschedulableAndUnresolvable = "UnschedulableAndUnresolvable"
    """The node cannot fit the pod whatever happens to other pods."""
    Error = "Error"
    Skip = "Skip"


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    @property
    def is_success(self) -> bool:
        return self.code is Code.Success

    @property
    def is_rejected(self) -> bool:
        return self.code in (Code.Unschedulable, Code.UnschedulableAndUnresolvable)
