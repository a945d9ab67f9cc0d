"""Binding a pod through the pods/binding subresource, as kube-scheduler's DefaultBinder does.

The Binding carries the pod's UID as a precondition, so a pod deleted and
recreated under the same name is never bound by mistake, and annotations
that the API server copies onto the pod: the selected node (so every reader
knows this webhook placed it), the reservation id (so our own cluster view
swaps the reservation for the real pod), and which reconciler bound it.

The answer to a Binding POST is a `Status`, not a `Binding` (the reason the
official Python client's `create_namespaced_binding` fails to deserialise
it); we never parse it into a model, and verify the bind by reading the pod
back: bound to the node we asked for, same UID.

Outcomes: `bound`; `already-bound` (409 "already assigned": someone else,
say a webhook replica or a previous leader, was first; normal, not an
error); `gone` (404, UID precondition failed, pod being deleted); `error`
(anything else: back off and retry).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from webhook.conflicts.model import BOUND_BY_ANNOTATION, SELECTED_NODE_ANNOTATION
from webhook.kube import Requester
from webhook.policy import marks

log = logging.getLogger(__name__)

RESERVATION_ANNOTATION: Final = marks.RESERVATION

BOUND: Final = "bound"
ALREADY_BOUND: Final = "already-bound"
GONE: Final = "gone"
ERROR: Final = "error"


@dataclass(frozen=True)
class BindResult:
    outcome: str
    node: str | None
    """Where the pod is bound after the attempt (ours or someone else's choice)."""
    message: str = ""


def binding_body(
    namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
) -> dict[str, Any]:
    """A v1 Binding of pod `namespace/name` (UID precondition `uid`) to `node`."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "annotations": dict(annotations),
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def bind_annotations(node: str, identity: str, reservation: str | None) -> dict[str, str]:
    notes = {SELECTED_NODE_ANNOTATION: node, BOUND_BY_ANNOTATION: f"reconciler/{identity}"}
    if reservation:
        notes[RESERVATION_ANNOTATION] = reservation
    return notes


def classify_failure(status: int | None, message: str) -> str:
    """The outcome of a failed Binding POST, from its HTTP status and Status message."""
    if status == 409 and "already assigned" in message:
        return ALREADY_BOUND
    if status == 404:
        return GONE
    if status == 409 and ("Precondition failed" in message or "being deleted" in message):
        return GONE
    return ERROR


class Binder:
    """POSTs Bindings and reads the pod back."""

    def __init__(self, client: Requester, identity: str, *, timeout: float = 5.0):
        self.client, self.identity, self.timeout = client, identity, timeout

    def bind(self, pod: Mapping[str, Any], node: str, reservation: str | None) -> BindResult:
        meta = pod.get("metadata") or {}
        namespace, name, uid = str(meta["namespace"]), str(meta["name"]), str(meta["uid"])
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        body = binding_body(
            namespace, name, uid, node, bind_annotations(node, self.identity, reservation)
        )
        try:
            self.client.request("POST", f"{path}/binding", body=body, timeout=self.timeout)
        except Exception as err:
            status = getattr(err, "status", None)
            message = str((getattr(err, "body", None) or {}).get("message") or err)
            outcome = classify_failure(status, message)
            actual = self._current_node(path, uid) if outcome == ALREADY_BOUND else None
            return BindResult(outcome, actual, message)
        return self._verify(path, uid, node)

    def _verify(self, path: str, uid: str, node: str) -> BindResult:
        try:
            stored = self.client.request("GET", path, timeout=self.timeout)
        except Exception as err:
            if getattr(err, "is_not_found", False):
                return BindResult(GONE, None, "bound, then deleted before it could be read back")
            # The API accepted the bind; a failed read does not undo it.
            log.warning("bind of %s accepted but not verified: %s", path, err)
            return BindResult(BOUND, node, f"not verified: {err}")
        actual = (stored.get("spec") or {}).get("nodeName")
        if (stored.get("metadata") or {}).get("uid") != uid:
            return BindResult(GONE, None, "pod replaced by another with the same name")
        if actual != node:
            return BindResult(ALREADY_BOUND, actual, f"read back on {actual}, not {node}")
        return BindResult(BOUND, node)

    def _current_node(self, path: str, uid: str) -> str | None:
        try:
            stored = self.client.request("GET", path, timeout=self.timeout)
        except Exception:
            return None
        if (stored.get("metadata") or {}).get("uid") != uid:
            return None
        node = (stored.get("spec") or {}).get("nodeName")
        return str(node) if node else None
