"""The records conflict detection runs over, kept in step with the watches.

Pods are parsed into `PodRecord`s when their event arrives (once), nodes
into `NodeView`s, so a detection pass only groups and sums. The feed parses
each pod once for the view and this store (the view keeps `record.view`,
the same PodView object), and each node once likewise; equal parts of
different pods (a workload's labels, requests, tolerations...) are one
object (webhook.conflicts.canon). A pass works on
a copy taken under the lock; the lock is never held while detecting.
`version` moves on every change, so an unchanged cluster is not re-checked.
Changes are also journalled (the latest state per object) for the
incremental detector, which `take`s them instead of a copy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.conflicts.canon import Canon
from webhook.conflicts.model import PodRecord
from webhook.policy.model import NodeView

log = logging.getLogger(__name__)


Change = tuple[str, str, Any]
"""(kind, key, new state or None when gone): Node/name/NodeView, Pod/uid/PodRecord,
Namespace/name/labels."""


@dataclass(frozen=True)
class StoreDelta:
    """What changed since the last `take` (and, when asked, everything)."""

    version: int
    changes: tuple[Change, ...]
    full: StoreCopy | None


@dataclass(frozen=True)
class StoreCopy:
    version: int
    nodes: Mapping[str, NodeView]
    pods: tuple[PodRecord, ...]
    namespace_labels: Mapping[str, Mapping[str, str]]

    def labels_of(self, namespace: str) -> Mapping[str, str]:
        return self.namespace_labels.get(namespace) or {"kubernetes.io/metadata.name": namespace}


class ConflictStore:
    """Thread-safe records of nodes, pods (bound or rejected) and namespace labels."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeView] = {}
        self._pods: dict[str, PodRecord] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self.version = 0
        self.unparsable = 0
        self._journal: dict[tuple[str, str], Any] = {}
        self._canon = Canon()

    # ---- reading the previous state (the feed compares old and new) ----
    def node(self, name: str) -> NodeView | None:
        with self._lock:
            return self._nodes.get(name)

    def pod(self, uid: str) -> PodRecord | None:
        with self._lock:
            return self._pods.get(uid)

    # ---- feeding -------------------------------------------------------
    def put_node(
        self, node: Mapping[str, Any], view: NodeView | None = None
    ) -> tuple[NodeView | None, NodeView]:
        """Store a node (`view`: its NodeView, when the caller parsed it already);
        returns (previous view, new view)."""
        if view is None:
            view = NodeView.from_dict(node)
        with self._lock:
            old = self._nodes.get(view.name)
            if old != view:
                self._nodes[view.name] = view
                self._journal[("Node", view.name)] = view
                self.version += 1
        return old, view

    def drop_node(self, name: str) -> NodeView | None:
        with self._lock:
            old = self._nodes.pop(name, None)
            if old is not None:
                self._journal[("Node", name)] = None
                self.version += 1
            return old

    def parse_pod(self, pod: Mapping[str, Any]) -> PodRecord | None:
        """The pod's record, or None (logged and counted) when it is not parsable."""
        try:
            return self._canon.record(PodRecord.from_dict(pod))
        except (ValueError, TypeError) as err:
            meta = pod.get("metadata") or {}
            log.warning("pod %s/%s not parsable: %s", meta.get("namespace"), meta.get("name"), err)
            self.unparsable += 1
            return None

    def put_pod(self, pod: Mapping[str, Any]) -> tuple[PodRecord | None, PodRecord | None]:
        """Store a pod; returns (previous record, new record or None when unparsable)."""
        return self.put_record(
            str((pod.get("metadata") or {}).get("uid") or ""), self.parse_pod(pod)
        )

    def put_record(
        self, uid: str, record: PodRecord | None
    ) -> tuple[PodRecord | None, PodRecord | None]:
        """Store pod `uid`'s record (from `parse_pod`: None drops it); (previous, new)."""
        with self._lock:
            old = self._pods.get(uid)
            if record is None:
                self._pods.pop(uid, None)
            elif old != record:
                self._pods[uid] = record
            else:
                return old, record
            self._journal[("Pod", uid)] = record
            self.version += 1
        return old, record

    def drop_pod(self, uid: str) -> PodRecord | None:
        with self._lock:
            old = self._pods.pop(uid, None)
            if old is not None:
                self._journal[("Pod", uid)] = None
                self.version += 1
            return old

    def put_namespace(self, ns: Mapping[str, Any]) -> None:
        meta = ns.get("metadata") or {}
        name = str(meta.get("name") or "")
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        labels.setdefault("kubernetes.io/metadata.name", name)
        with self._lock:
            if self._namespaces.get(name) != labels:
                self._namespaces[name] = labels
                self._journal[("Namespace", name)] = labels
                self.version += 1

    def drop_namespace(self, name: str) -> None:
        with self._lock:
            if self._namespaces.pop(name, None) is not None:
                self._journal[("Namespace", name)] = None
                self.version += 1

    def keep_only(self, kind: str, keys: set[str]) -> None:
        """After a re-list: forget objects of `kind` whose key is not in `keys`."""
        with self._lock:
            table: dict[str, Any]
            if kind == "Node":
                table = self._nodes
            elif kind == "Pod":
                table = self._pods
            else:
                table = self._namespaces
            gone = [k for k in table if k not in keys]
            for k in gone:
                del table[k]
                self._journal[(kind if kind in ("Node", "Pod") else "Namespace", k)] = None
            if gone:
                self.version += 1

    # ---- reading -------------------------------------------------------
    def copy(self) -> StoreCopy:
        with self._lock:
            return StoreCopy(
                self.version, dict(self._nodes), tuple(self._pods.values()), dict(self._namespaces)
            )

    def take(self, full: bool = False) -> StoreDelta:
        """The changes since the last take, emptied; with `full`, a copy of everything too."""
        with self._lock:
            changes = tuple((kind, key, new) for (kind, key), new in self._journal.items())
            self._journal = {}
            copy = None
            if full:
                copy = StoreCopy(
                    self.version, dict(self._nodes), tuple(self._pods.values()),
                    dict(self._namespaces),
                )  # fmt: skip
            return StoreDelta(self.version, changes, copy)

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self._nodes), len(self._pods)
