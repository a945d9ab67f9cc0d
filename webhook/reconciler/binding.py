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
from dataclasses import dataclass
from typing import Final

from webhook import bodies
from webhook.bodies import ObjectRef
from webhook.kube import Requester, pod_path
from webhook.policy.marks import BOUND_BY, RESERVATION, SELECTED_NODE

log = logging.getLogger(__name__)

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


def bind_annotations(node: str, identity: str, reservation: str | None) -> dict[str, str]:
    notes = {SELECTED_NODE: node, BOUND_BY: f"reconciler/{identity}"}
    if reservation:
        notes[RESERVATION] = reservation
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

    def bind(self, pod: ObjectRef, node: str, reservation: str | None) -> BindResult:
        """Bind `pod` (its uid is the precondition) to `node`, then read it back."""
        path = pod_path(pod.namespace, pod.name)
        body = bodies.binding(pod, node, bind_annotations(node, self.identity, reservation))
        try:
            self.client.request("POST", f"{path}/binding", body=body, timeout=self.timeout)
        except Exception as err:
            status = getattr(err, "status", None)
            message = str((getattr(err, "body", None) or {}).get("message") or err)
            outcome = classify_failure(status, message)
            actual = self._current_node(path, pod.uid) if outcome == ALREADY_BOUND else None
            return BindResult(outcome, actual, message)
        return self._verify(path, pod.uid, node)

    def _verify(self, path: str, uid: str, node: str) -> BindResult:
        try:
            stored = self.client.request("GET", path, timeout=self.timeout)
        except Exception as err:
            if getattr(err, "is_not_found", False):
                return BindResult(GONE, None, "bound, then deleted before it could be read back")
            # The API accepted the bind; a failed read does not undo it.
            log.warning("bind of %s accepted but not verified: %s", path, err)
            return BindResult(BOUND, node, f"not verified: {err}")
        actual = bodies.node_name(stored) or None
        if ObjectRef.of(stored).uid != uid:
            return BindResult(GONE, None, "pod replaced by another with the same name")
        if actual != node:
            return BindResult(ALREADY_BOUND, actual, f"read back on {actual}, not {node}")
        return BindResult(BOUND, node)

    def _current_node(self, path: str, uid: str) -> str | None:
        try:
            stored = self.client.request("GET", path, timeout=self.timeout)
        except Exception:
            return None
        if ObjectRef.of(stored).uid != uid:
            return None
        return bodies.node_name(stored) or None
