"""The selectors a pod's default spreading is made of (kube-scheduler's helper.DefaultSelector).

The system default topology spread constraints spread a pod among its
siblings, and kube-scheduler decides who they are from other objects:

1. every Service in the pod's namespace whose (non-empty) selector matches
   the pod's labels: their selectors are merged into one label set;
2. the pod's controller (the ownerReference with `controller: true`), looked
   up by name in the pod's namespace when it is a `v1` ReplicationController
   (its selector map is merged into the set), an `apps/v1` ReplicaSet or an
   `apps/v1` StatefulSet (the requirements of its label selector are added);
   any other owner, or one that is not found, adds nothing.

An empty result means no default spreading for the pod. Only the selectors
are kept, never the objects (no templates, no status): a cluster's Services
and ReplicaSets cost a few kilobytes here instead of their megabytes of JSON.
Services are indexed by (namespace, label, value), so finding the ones that
select a pod looks only at Services sharing a label with it.

Not thread-safe: the caller serialises access (the snapshot's lock).
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.policy.selectors import LabelRequirement, LabelSelector
from webhook.policy.workloads import (
    CONTROLLER_GVKS,
    SERVICE,
    ControllerRef,
    LabelItems,
    WorkloadView,
)

__all__ = ["WorkloadSelectors"]

#: default_selector answers kept (one per pod template in use; forgotten when full).
MAX_ANSWERS = 4096


class WorkloadSelectors:
    """Service and controller selectors by namespace and name, kept up to date by events."""

    def __init__(self) -> None:
        self._services: dict[str, LabelItems] = {}  # ns/name -> selector
        self._service_index: dict[tuple[str, str, str], set[str]] = {}  # (ns, k, v) -> keys
        self._controllers: dict[tuple[str, str], WorkloadView] = {}  # (kind, ns/name)
        self.version = 0
        # default_selector's answers until a workload changes: pods of one template ask
        # the same question on every decision.
        self._answers: dict[
            tuple[str, tuple[tuple[str, str], ...], ControllerRef | None], LabelSelector
        ] = {}
        self._answers_version = 0

    def __len__(self) -> int:
        return len(self._services) + len(self._controllers)

    # ------------------------------------------------------------ feeding

    def upsert(self, workload: WorkloadView) -> None:
        """Store the selector of a Service, ReplicationController, ReplicaSet or StatefulSet."""
        key, kind = workload.key, workload.kind
        if kind == SERVICE:
            items = workload.selector_map
            if self._services.get(key) == items:
                return
            self._drop_service(key)
            if items is not None:
                self._services[key] = items
                namespace = key.split("/", 1)[0]
                for k, v in items:
                    self._service_index.setdefault((namespace, k, v), set()).add(key)
        else:
            if self._controllers.get((kind, key)) == workload:
                return
            self._controllers[(kind, key)] = workload
        self.version += 1

    def remove(self, kind: str, key: str) -> None:
        """Forget the object `key` (namespace/name) of `kind`."""
        if kind == SERVICE:
            if key in self._services:
                self._drop_service(key)
                self.version += 1
        elif self._controllers.pop((kind, key), None) is not None:
            self.version += 1

    def _drop_service(self, key: str) -> None:
        items = self._services.pop(key, None)
        if items is None:
            return
        namespace = key.split("/", 1)[0]
        for k, v in items:
            keys = self._service_index.get((namespace, k, v))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._service_index[(namespace, k, v)]

    # ------------------------------------------------------------ reading

    def services_selecting(self, namespace: str, labels: Mapping[str, str]) -> list[str]:
        """Keys of the Services in `namespace` whose selector matches `labels`."""
        candidates: set[str] = set()
        for k, v in labels.items():
            candidates |= self._service_index.get((namespace, k, v), set())
        return sorted(
            key for key in candidates if all(labels.get(k) == v for k, v in self._services[key])
        )

    def default_selector(
        self, namespace: str, labels: Mapping[str, str], owner: ControllerRef | None
    ) -> LabelSelector:
        """helper.DefaultSelector for a pod; no requirements means no default spreading."""
        if self._answers_version != self.version or len(self._answers) >= MAX_ANSWERS:
            self._answers.clear()
            self._answers_version = self.version
        key = (namespace, tuple(sorted(labels.items())), owner)
        found = self._answers.get(key)
        if found is None:
            found = self._answers[key] = self._default_selector(namespace, labels, owner)
        return found

    def _default_selector(
        self, namespace: str, labels: Mapping[str, str], owner: ControllerRef | None
    ) -> LabelSelector:
        label_set: dict[str, str] = {}
        for key in self.services_selecting(namespace, labels):
            label_set.update(self._services[key])
        added: tuple[LabelRequirement, ...] = ()
        if owner is not None and (owner.api_version, owner.kind) in CONTROLLER_GVKS:
            found = self._controllers.get((owner.kind, f"{namespace}/{owner.name}"))
            if found is not None:
                if found.selector_map is not None:
                    label_set.update(found.selector_map)
                added = found.requirements
        merged = tuple(
            LabelRequirement(k, "In", frozenset((v,))) for k, v in sorted(label_set.items())
        )
        # a requirement given twice (Service and ReplicaSet both app=web) is matched once
        return LabelSelector(tuple(dict.fromkeys(merged + added)))
