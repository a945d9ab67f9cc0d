"""From an admission request to an outcome: ours or not, decided, re-checked, patched.

No Flask here. `Placer.triage` applies the cheap rules that leave a pod alone
(every replica runs them); `Placer.decide` makes the decision (only the
replica that holds the decision Lease, or a single process with a fixed
snapshot); `Placer.hand_off` answers for a pod that is ours but cannot be
decided now (no leader reachable in time, a view not yet fresh), leaving it
to the fallback binder. The HTTP layer chooses between them.

A pod the policy cannot evaluate, or one the API server will refuse anyway,
is left untouched and reserves nothing: a wrong placement is worse than none.

Reinvocation: when a later mutating webhook changes a pod we already placed
(a sidecar injector adds a container), the API server calls us again with our
own patch applied. The pod carries our reservation key, so the placement is
re-checked against the changed pod: kept when it still fits (no patch),
moved to another node when it does not, or undone and handed off when no node
fits any more.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook import bodies
from webhook.admission import patch as patches
from webhook.admission.review import AdmissionRequest, PatchOperation
from webhook.admission.rules import why_not_handled
from webhook.bodies import ObjectRef
from webhook.cluster.view import ClusterView, Placement
from webhook.policy.framework import Decision
from webhook.policy.limits import PodLimits, why_not_evaluable
from webhook.policy.marks import (
    HANDED_OFF,
    RESERVATION,
    SCHEDULER_NAME,
    SKIPPED,
    UNSCHEDULABLE,
    placed_by_us,
    without_placement,
)
from webhook.policy.model import PodView
from webhook.policy.placement_policy import Mode
from webhook.policy.policy_file import Policy
from webhook.policy.profile import Profile
from webhook.policy.status import Code
from webhook.policy.validation import invalid_reason

log = logging.getLogger(__name__)

#: The API server's default webhook timeout, used when a request names none.
DEFAULT_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Outcome:
    """What the webhook did with one request."""

    result: str  # placed | kept | unschedulable | handed-off | skipped | error
    reason: str
    category: str = ""  # a fixed word for metrics (skip category); "" for the others
    node: str | None = None
    patch: list[PatchOperation] = field(default_factory=list)
    decision: Decision | None = None
    reservation: str | None = None

    @property
    def warnings(self) -> list[str]:
        if self.result in ("skipped", "error") and self.reason != "not a pod CREATE":
            return [f"placement-webhook: not placed: {self.reason}"]
        if self.result in ("unschedulable", "handed-off"):
            return [f"placement-webhook: {self.reason}"]
        return []

    @property
    def audit(self) -> dict[str, str]:
        plain = self.result in ("placed", "kept") and self.category != "moved"
        text = self.node if plain else self.reason
        return {"decision": f"{self.result}: {text}"[:512]}


@dataclass(frozen=True)
class PlacerSettings:
    """How the admission path behaves beyond the policy itself."""

    own_namespace: str = "placement-webhook"
    """Namespace the webhook runs in; its pods are never touched."""
    handoff_unschedulable: bool = True
    """Set schedulerName placement-webhook on pods that fit no node (or that
    cannot be decided in time), so the fallback binder places them. Off: they
    stay with the default scheduler (for clusters that run no binder)."""
    namespace_selector_is_authority: bool = False
    """True when every caller is authenticated (serve --client-ca): the API server
    already matched the webhook's namespaceSelector, so its answer stands even
    where the view's copy of the namespace lags. False: a namespace the view does
    not know is not opted in (a forged review could name any namespace)."""
    limits: PodLimits = field(default_factory=PodLimits)
    """Pods larger than these are left to the default scheduler (webhook.policy.limits)."""


class Placer:
    """Applies the policy to admission requests against a cluster view."""

    def __init__(
        self,
        view: ClusterView,
        policy: Policy,
        settings: PlacerSettings = PlacerSettings(),
        *,
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] | None = None,
    ):
        self.view, self.policy, self.settings, self.ready = view, policy, settings, ready
        self.clock = clock or view.clock

    # ---- the three entry points ----------------------------------------
    def review(self, request: AdmissionRequest, *, give_up_at: float | None = None) -> Outcome:
        """Triage and decide in this process (a single replica, or `serve --snapshot`).

        Raises on a bug, so tests see it; the HTTP layer turns any exception
        into an allowing answer that leaves the pod untouched.
        """
        return self.triage(request) or self.decide(request, give_up_at=give_up_at)

    def triage(self, request: AdmissionRequest) -> Outcome | None:
        """The outcome for a pod that is not ours to place, or None when it is ours."""
        if not request.is_pod_create or request.obj is None:
            return Outcome("skipped", "not a pod CREATE", "not-pod-create")
        pod = request.obj
        unfit = why_not_evaluable(pod, self.settings.limits)
        if unfit is not None:
            category = "malformed" if unfit.startswith("malformed") else "too-large"
            return Outcome("skipped", unfit, category)
        namespace = _namespace(request)
        if placed_by_us(pod) is not None:
            return None  # a reinvocation: re-checked by decide()
        labels = None
        if not self.settings.namespace_selector_is_authority:
            labels = self.view.namespace_labels(namespace)
            if labels is None:
                return Outcome(
                    "skipped",
                    f"namespace {namespace} is not in the cluster view (callers are not "
                    "authenticated, so only namespaces seen labelled are placed)",
                    "namespace-unknown",
                )
        skip = why_not_handled(
            pod,
            namespace,
            own_namespace=self.settings.own_namespace,
            mode=self.policy.placement.mode,
            namespace_labels=labels,
        )
        if skip is not None:
            return Outcome("skipped", skip[1], skip[0])
        problem = invalid_reason(pod)
        if problem is not None:
            return Outcome("skipped", f"the API server will refuse this pod: {problem}", "invalid")
        return None

    def decide(self, request: AdmissionRequest, *, give_up_at: float | None = None) -> Outcome:
        """Decide (or re-check) a pod that triage found ours. Raises only on a bug."""
        assert request.obj is not None
        pod, namespace = request.obj, _namespace(request)
        if not self.ready():
            return self.hand_off(request, "the cluster view is not synced")
        scheduler = bodies.scheduler_name(pod)
        profile = self.policy.profile_for(scheduler)
        if profile is None:
            return Outcome("skipped", f"no profile for scheduler {scheduler!r}", "no-profile")
        placed = placed_by_us(pod)
        unplaced = without_placement(pod) if placed is not None else pod
        try:
            view = PodView.from_dict(_with_namespace(unplaced, namespace))
        except (ValueError, TypeError, AttributeError) as err:  # what the API server refuses
            return Outcome("skipped", f"malformed pod: {err}"[:512], "malformed")
        hold_for = None if request.dry_run else self._hold_for(request)
        if placed is not None:
            return self._recheck(request, view, profile, placed, hold_for, give_up_at)
        placement = self.view.place(
            view, profile, hold_for=hold_for, seed=request.uid, give_up_at=give_up_at
        )
        return self._answer(pod, unplaced, scheduler, profile, placement)

    def hand_off(self, request: AdmissionRequest, why: str) -> Outcome:
        """Admit a pod of ours unplaced, for the fallback binder (or the default scheduler)."""
        assert request.obj is not None
        pod = request.obj
        if placed_by_us(pod) is not None:
            # A reinvocation we cannot re-check: the placement stays as the
            # first call made it; the conflict detector watches the result.
            return Outcome("kept", f"not re-checked: {why}", "not-rechecked")
        ops = self._to_binder(bodies.scheduler_name(pod))
        if ops:
            reason = f"not placed at admission ({why}); handed to the fallback binder"
        else:
            reason = f"not placed at admission ({why})"
        ops = patches.annotation_ops(pod, {HANDED_OFF: why[:512]}) + ops
        return Outcome("handed-off", reason, "handed-off", patch=ops)

    # ---- internals -----------------------------------------------------
    def _to_binder(self, scheduler: str) -> list[PatchOperation]:
        """The patch that hands a pod of ours to the fallback binder ([] when it stays put)."""
        if self.settings.handoff_unschedulable and scheduler != SCHEDULER_NAME:
            return patches.scheduler_name_ops(SCHEDULER_NAME)
        return []

    def _hold_for(self, request: AdmissionRequest) -> float:
        """How long a reservation waits for its pod: the caller's timeout plus a grace."""
        timeout = request.timeout_seconds or DEFAULT_TIMEOUT_SECONDS
        return timeout + self.policy.placement.reservation_grace_seconds

    def _recheck(
        self,
        request: AdmissionRequest,
        view: PodView,
        profile: Profile,
        placed: tuple[str, str],
        hold_for: float | None,
        give_up_at: float | None,
    ) -> Outcome:
        pod = request.obj
        assert pod is not None
        node, key = placed
        placement = self.view.recheck(
            view, profile, node, key=key, hold_for=hold_for, seed=request.uid,
            give_up_at=give_up_at,
        )  # fmt: skip
        decision = placement.decision
        if placement.held_back == "deadline":
            return Outcome("kept", f"not re-checked: {decision.message}", "not-rechecked")
        if decision.placed and decision.node == node and not placement.held_back:
            return Outcome(
                "kept", f"still fits {node}", node=node, decision=decision, reservation=key
            )
        scheduler = bodies.scheduler_name(pod)
        unplaced = without_placement(pod)
        undo = patches.undo_placement_ops(pod)
        outcome = self._answer(pod, unplaced, scheduler, profile, placement)
        if outcome.result == "placed":
            reason = f"moved from {node} to {outcome.node}: a later webhook changed the pod"
            return Outcome(
                "placed", reason, "moved", outcome.node, undo + outcome.patch,
                decision, outcome.reservation,
            )  # fmt: skip
        why = f"no longer fits {node} after a later webhook changed it; {outcome.reason}"
        return Outcome(outcome.result, why, "undone", None, undo + outcome.patch, decision)

    def _answer(
        self,
        pod: Mapping[str, Any],
        unplaced: Mapping[str, Any],
        scheduler: str,
        profile: Profile,
        placement: Placement,
    ) -> Outcome:
        """The outcome and patch for a fresh decision on `unplaced` (the pod without our marks)."""
        decision = placement.decision
        if placement.held_back:
            why = (
                "the caller's deadline passed"
                if placement.held_back == "deadline"
                else "too many reservations are waiting for their pods"
            )
            return self._deferred(pod, scheduler, why, decision)
        detail = self.policy.placement.decision_annotations
        filters = tuple(f.name for f in profile.filters) if detail == "full" else ()
        notes = patches.decision_annotations(decision, detail, filters)
        if decision.code is Code.Skip:
            skipped = {SKIPPED: decision.message[:512]}
            return Outcome(
                "skipped",
                decision.message,
                "not-evaluable",
                patch=patches.annotation_ops(pod, skipped),
                decision=decision,
            )
        if decision.code is Code.Error:
            return Outcome("error", decision.message, "policy-error", decision=decision)
        if decision.node is None:
            notes[UNSCHEDULABLE] = decision.message[:1024]
            ops = patches.annotation_ops(pod, notes) + self._to_binder(scheduler)
            return Outcome("unschedulable", decision.message, patch=ops, decision=decision)
        if placement.key is not None:
            notes[RESERVATION] = placement.key
        ops = patches.annotation_ops(pod, notes)
        if self.policy.placement.mode is Mode.NODE_AFFINITY:
            ops += patches.node_affinity_ops(unplaced, decision.node)
        else:
            ops += patches.node_name_ops(decision.node)
            if self.policy.placement.copy_topology_labels:
                copied = self.view.node_labels(decision.node, patches.TOPOLOGY_LABELS)
                ops += patches.topology_label_ops(pod, copied)
        return Outcome(
            "placed",
            f"placed on {decision.node}",
            node=decision.node,
            patch=ops,
            decision=decision,
            reservation=placement.key,
        )

    def _deferred(
        self, pod: Mapping[str, Any], scheduler: str, why: str, decision: Decision
    ) -> Outcome:
        ops = patches.annotation_ops(pod, {HANDED_OFF: why}) + self._to_binder(scheduler)
        reason = f"not placed at admission ({why}); handed to the fallback binder"
        return Outcome("handed-off", reason, "held-back", patch=ops, decision=decision)


def _namespace(request: AdmissionRequest) -> str:
    """The request's namespace, else the object's (a review may carry either)."""
    return request.namespace or ObjectRef.of(request.obj or {}).namespace


def _with_namespace(pod: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
    """Admission objects may lack metadata.namespace; the request carries it."""
    meta = bodies.meta(pod)
    if meta.get("namespace") == namespace:
        return pod
    return {**pod, "metadata": {**meta, "namespace": namespace}}
