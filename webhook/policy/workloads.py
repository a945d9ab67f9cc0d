"""Services and workload controllers as the policy reads them, parsed once at the edge.

Only their selectors are kept (webhook.policy.workload_index stores them and
builds the default spreading selector from them), and a pod's controlling
owner reference (`ControllerRef`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from webhook.policy.selectors import LabelRequirement, LabelSelector

__all__ = [
    "CONTROLLER_GVKS",
    "REPLICATION_CONTROLLER",
    "REPLICA_SET",
    "SERVICE",
    "STATEFUL_SET",
    "WORKLOAD_KINDS",
    "ControllerRef",
    "LabelItems",
    "WorkloadView",
    "object_key",
]

SERVICE: Final = "Service"
REPLICATION_CONTROLLER: Final = "ReplicationController"
REPLICA_SET: Final = "ReplicaSet"
STATEFUL_SET: Final = "StatefulSet"
WORKLOAD_KINDS: Final = frozenset({SERVICE, REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET})

# The controller kinds DefaultSelector looks up, by the owner's apiVersion and kind.
CONTROLLER_GVKS: Final = frozenset(
    {("v1", REPLICATION_CONTROLLER), ("apps/v1", REPLICA_SET), ("apps/v1", STATEFUL_SET)}
)

LabelItems = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class ControllerRef:
    """A pod's controlling owner, as written in its ownerReferences."""

    api_version: str
    kind: str
    name: str

    @staticmethod
    def of(meta: Mapping[str, Any]) -> ControllerRef | None:
        """metav1.GetControllerOf: the first ownerReference with controller: true.

        The ~100 pods of a ReplicaSet share one instance (every pod holds one)."""
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, Mapping) and ref.get("controller"):
                return _shared_ref(
                    str(ref.get("apiVersion") or ""),
                    str(ref.get("kind") or ""),
                    str(ref.get("name") or ""),
                )
        return None


@functools.lru_cache(maxsize=1 << 16)
def _shared_ref(api_version: str, kind: str, name: str) -> ControllerRef:
    return ControllerRef(sys.intern(api_version), sys.intern(kind), sys.intern(name))


def object_key(obj: Mapping[str, Any]) -> str:
    """namespace/name, how the store and the cluster view know a namespaced object."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def _items(raw: Any) -> LabelItems | None:
    """A selector map as sorted, interned pairs; None for nil or empty (matches nothing)."""
    if not isinstance(raw, Mapping) or not raw:
        return None
    return tuple(sorted((sys.intern(str(k)), sys.intern(str(v))) for k, v in raw.items()))


def _label_selector(raw: Any) -> tuple[LabelRequirement, ...]:
    """Requirements of a metav1.LabelSelector; none when nil or invalid (DefaultSelector
    adds nothing then: LabelSelectorAsSelector fails or gives Nothing)."""
    if raw is None:
        return ()
    try:
        return LabelSelector.parse(raw).requirements
    except (ValueError, TypeError, AttributeError):
        return ()


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """What default spreading reads of a Service or a controller: its selector, parsed."""

    kind: str
    key: str
    """namespace/name"""
    selector_map: LabelItems | None
    """Service, ReplicationController: a selector map (None: nil or empty, selects nothing)."""
    requirements: tuple[LabelRequirement, ...] = ()
    """ReplicaSet, StatefulSet: the requirements of the label selector."""

    @staticmethod
    def from_dict(kind: str, obj: Mapping[str, Any]) -> WorkloadView:
        """Parse a Service, ReplicationController, ReplicaSet or StatefulSet."""
        spec = obj.get("spec") or {}
        if kind in (SERVICE, REPLICATION_CONTROLLER):
            return WorkloadView(kind, object_key(obj), _items(spec.get("selector")))
        if kind in (REPLICA_SET, STATEFUL_SET):
            return WorkloadView(kind, object_key(obj), None, _label_selector(spec.get("selector")))
        raise ValueError(f"not a workload kind: {kind!r}")
