"""Watch events, fanned out: the cluster view, the conflict records, the pending queue.

One set of informers (cluster.source.WATCHED) feeds everything the
reconcile process keeps, so the policy decides against exactly the cluster
the conflict detector checks. For each event the feed

1. parses a pod once into its conflict record, whose PodView the view keeps
   too (and a node once into its NodeView), and applies it to the
   `ClusterView` (reservations included, shared with the webhook's code path);
2. updates the conflict records, getting the previous record back, from
   which it tells what changed (`pod_event`, `node_event`: pure);
3. tells the reconciler: a pending pod of ours appeared, changed or left
   the queue (`on_pod`), or the cluster changed in a way that may help
   unschedulable pods (`on_event`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import orjson

from webhook.cluster.view import ClusterView
from webhook.conflicts.model import PodRecord
from webhook.conflicts.store import ConflictStore
from webhook.policy import marks
from webhook.policy.model import NodeView, PodView
from webhook.reconciler.queue import ClusterEvent

SCHEDULER_NAME: Final = marks.SCHEDULER_NAME


def is_pending_ours(pod: Mapping[str, Any]) -> bool:
    """schedulerName placement-webhook, not bound, not terminating, not finished."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    return (
        spec.get("schedulerName") == SCHEDULER_NAME
        and not spec.get("nodeName")
        and meta.get("deletionTimestamp") is None
        and phase not in ("Succeeded", "Failed")
    )


def is_gated(pod: Mapping[str, Any]) -> bool:
    """Scheduling gates keep a pod out of the queue until they are removed (PreEnqueue)."""
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def signature(pod: Mapping[str, Any]) -> str:
    """A digest of what scheduling looks at: spec and labels (not status, not versions)."""
    meta = pod.get("metadata") or {}
    data = orjson.dumps(
        {"spec": pod.get("spec") or {}, "labels": meta.get("labels") or {}},
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def priority(pod: Mapping[str, Any]) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return int(value) if isinstance(value, int) else 0


def pod_event(old: PodRecord | None, new: PodRecord | None) -> ClusterEvent | None:
    """What a pod change means for pods waiting to be scheduled."""
    was = old is not None and old.counted
    now = new is not None and new.counted
    if was and not now:
        return ClusterEvent.ASSIGNED_POD_DELETE
    if now and not was:
        return ClusterEvent.ASSIGNED_POD_ADD
    if was and now:
        assert old is not None and new is not None
        if (
            old.node != new.node
            or old.view.requests != new.view.requests
            or old.view.labels != new.view.labels
        ):
            return ClusterEvent.ASSIGNED_POD_UPDATE
    return None


def node_event(old: NodeView | None, new: NodeView | None) -> ClusterEvent | None:
    """NodeViews hold what scheduling reads (no conditions, no heartbeats), so != is a change."""
    if new is None:
        return None
    if old is None:
        return ClusterEvent.NODE_ADD
    return ClusterEvent.NODE_UPDATE if old != new else None


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class Feed:
    """The informers' Store: fans each event out (see the module notes)."""

    def __init__(
        self,
        view: ClusterView,
        store: ConflictStore,
        *,
        on_pod: Callable[[str, Mapping[str, Any] | None], None],
        on_event: Callable[[ClusterEvent], None],
        on_relist: Callable[[set[str]], None] = lambda _keys: None,
    ):
        self.view, self.store = view, store
        self.on_pod, self.on_event, self.on_relist = on_pod, on_event, on_relist

    def _parse(self, kind: str, obj: Mapping[str, Any]) -> PodRecord | NodeView | None:
        """One parse for the view and the store: a pod's record (None when unparsable:
        the view then parses, and fails, as it would alone), a node's view."""
        if kind == "Pod":
            return self.store.parse_pod(obj)
        if kind == "Node":
            return NodeView.from_dict(obj)
        return None

    def replace(self, kind: str, pages: Iterable[list[Mapping[str, Any]]]) -> int:
        """A re-list, page by page: the view takes each page first, then the others see it."""
        keys: set[str] = set()
        node_changed = False
        parsed: dict[int, PodRecord | NodeView | None] = {}  # id(obj) -> parse, this page

        def view_of(obj: Mapping[str, Any]) -> PodView | NodeView | None:
            done = parsed.get(id(obj))
            return done.view if isinstance(done, PodRecord) else done

        def tap() -> Iterator[list[Mapping[str, Any]]]:
            nonlocal node_changed
            for page in pages:
                parsed.clear()
                parsed.update((id(obj), self._parse(kind, obj)) for obj in page)
                yield page
                for obj in page:
                    done = parsed.get(id(obj))
                    if kind == "Node":
                        keys.add(_name(obj))
                        node = done if isinstance(done, NodeView) else None
                        node_changed = (
                            node_event(*self.store.put_node(obj, node)) is not None or node_changed
                        )
                    elif kind == "Pod":
                        uid = _uid(obj)
                        keys.add(uid)
                        self.store.put_record(uid, done if isinstance(done, PodRecord) else None)
                        self.on_pod(uid, obj)
                    elif kind == "Namespace":
                        keys.add(_name(obj))
                        self.store.put_namespace(obj)
            parsed.clear()

        count = self.view.replace(kind, tap(), view_of)
        if kind in ("Node", "Pod", "Namespace"):  # the others only give the view selectors
            self.store.keep_only(kind, keys)
        if kind == "Pod":
            self.on_relist(keys)
            self.on_event(ClusterEvent.ASSIGNED_POD_DELETE)
        elif kind == "Node" and node_changed:
            self.on_event(ClusterEvent.NODE_ADD)
        return count

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        done = None if event == "DELETED" else self._parse(kind, obj)
        self.view.apply(kind, event, obj, done.view if isinstance(done, PodRecord) else done)
        change: ClusterEvent | None = None
        if kind == "Node":
            if event == "DELETED":
                self.store.drop_node(_name(obj))
            else:
                node = done if isinstance(done, NodeView) else None
                change = node_event(*self.store.put_node(obj, node))
        elif kind == "Pod":
            uid = _uid(obj)
            if event == "DELETED":
                change = pod_event(self.store.drop_pod(uid), None)
                self.on_pod(uid, None)
            else:
                record = done if isinstance(done, PodRecord) else None
                change = pod_event(*self.store.put_record(uid, record))
                self.on_pod(uid, obj)
        elif kind != "Namespace":
            pass  # Services and controllers: selectors for the view's default spreading
        elif event == "DELETED":
            self.store.drop_namespace(_name(obj))
        else:
            self.store.put_namespace(obj)
        if change is not None:
            self.on_event(change)

    def touch(self, kind: str, resource_version: str = "") -> None:
        self.view.touch(kind, resource_version)
