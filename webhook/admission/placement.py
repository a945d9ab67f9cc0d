"""From an admission request to an outcome: handled or not, decided, patched.

No Flask here: `Placer.review` takes a parsed request and returns an
`Outcome` that the HTTP layer turns into a response, a log line and metrics.
A pod the policy cannot evaluate, or any failure inside the decision, leaves
the pod to the default scheduler: wrong placement is worse than none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.admission import patch as patches
from webhook.admission.review import AdmissionRequest, PatchOperation
from webhook.admission.rules import SCHEDULER_NAME, why_not_handled
from webhook.cluster.view import ClusterView
from webhook.logs import Throttle
from webhook.policy.framework import Decision
from webhook.policy.limits import PodLimits, why_not_evaluable
from webhook.policy.model import PodView
from webhook.policy.profile import Policy
from webhook.policy.status import Code

log = logging.getLogger(__name__)
_failures = Throttle(log, interval=60.0)


@dataclass(frozen=True)
class Outcome:
    """What the webhook did with one request."""

    result: str  # placed | unschedulable | skipped | error
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
        if self.result == "unschedulable":
            return [f"placement-webhook: {self.reason}"]
        return []

    @property
    def audit(self) -> dict[str, str]:
        text = self.node if self.result == "placed" else self.reason
        return {"decision": f"{self.result}: {text}"[:512]}


@dataclass(frozen=True)
class PlacerSettings:
    """How the admission path behaves beyond the policy itself."""

    own_namespace: str = "placement-webhook"
    """Namespace the webhook runs in; its pods are never touched."""
    handoff_unschedulable: bool = True
    """Set schedulerName placement-webhook on pods that fit no node, so the
    reconciler places them when capacity appears. Off: they stay with the
    default scheduler (for clusters that run no reconciler)."""
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
    ):
        self.view, self.policy, self.settings, self.ready = view, policy, settings, ready

    def review(self, request: AdmissionRequest) -> Outcome:
        """The outcome for one request; never raises (a bug leaves the pod untouched).

        Tracebacks are throttled (one a minute): a body that trips a bug can be
        sent at will, and must not become a traceback per pod.
        """
        try:
            return self.decide(request)
        except Exception as err:
            if _failures.allow(type(err).__name__) is not None:
                log.exception("decision failed for a pod in namespace %s", request.namespace)
            return Outcome("error", f"internal error: {type(err).__name__}", "internal-error")

    def decide(self, request: AdmissionRequest) -> Outcome:
        """The outcome for one request; raises on a bug (so tests see it: use `review`)."""
        if not request.is_pod_create or request.obj is None:
            return Outcome("skipped", "not a pod CREATE", "not-pod-create")
        pod = request.obj
        unfit = why_not_evaluable(pod, self.settings.limits)
        if unfit is not None:
            category = "malformed" if unfit.startswith("malformed") else "too-large"
            return Outcome("skipped", unfit, category)
        namespace = request.namespace or (pod.get("metadata") or {}).get("namespace") or ""
        mode = self.policy.placement.mode
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
            mode=mode,
            namespace_labels=labels,
        )
        if skip is None and mode == "nodeAffinity" and patches.is_pinned_by_affinity(pod):
            skip = ("reinvocation", "already pinned by an earlier invocation")
        if skip is not None:
            return Outcome("skipped", skip[1], skip[0])
        if not self.ready():
            return Outcome(
                "skipped", "cluster view not synced (left to the default scheduler)", "not-ready"
            )
        return self._decide(pod, namespace, dry_run=request.dry_run, seed=request.uid)

    def _decide(
        self, pod: Mapping[str, Any], namespace: str, *, dry_run: bool, seed: str
    ) -> Outcome:
        scheduler = (pod.get("spec") or {}).get("schedulerName") or ""
        profile = self.policy.profile_for(scheduler)
        if profile is None:
            return Outcome("skipped", f"no profile for scheduler {scheduler!r}", "no-profile")
        try:
            view = PodView.from_dict(_with_namespace(pod, namespace))
        except ValueError as err:  # quantities and selectors the API server would refuse
            return Outcome("skipped", f"malformed pod: {err}"[:512], "malformed")
        ttl = self.policy.placement.reservation_ttl_seconds
        decision, key = self.view.place(
            view, profile, reserve_for=None if dry_run else ttl, seed=seed
        )
        notes = patches.decision_annotations(decision)
        if decision.code is Code.Skip:
            skipped = {patches.SKIPPED: decision.message[:512]}
            return Outcome(
                "skipped",
                decision.message,
                "not-evaluable",
                patch=patches.annotation_ops(pod, skipped),
                decision=decision,
            )
        if decision.code is Code.Error:
            return Outcome("error", decision.message, decision=decision)
        if decision.node is None:
            notes[patches.UNSCHEDULABLE] = decision.message[:1024]
            ops = patches.annotation_ops(pod, notes)
            if self.settings.handoff_unschedulable and scheduler != SCHEDULER_NAME:
                ops += patches.scheduler_name_ops(SCHEDULER_NAME)
            return Outcome("unschedulable", decision.message, patch=ops, decision=decision)
        if key is not None:
            notes[patches.RESERVATION] = key
        ops = patches.annotation_ops(pod, notes)
        if self.policy.placement.mode == "nodeAffinity":
            ops += patches.node_affinity_ops(pod, decision.node)
        else:
            ops += patches.node_name_ops(decision.node)
        return Outcome(
            "placed",
            f"placed on {decision.node}",
            node=decision.node,
            patch=ops,
            decision=decision,
            reservation=key,
        )


def _with_namespace(pod: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
    """Admission objects may lack metadata.namespace; the request carries it."""
    meta = pod.get("metadata") or {}
    if meta.get("namespace") == namespace:
        return pod
    return {**pod, "metadata": {**meta, "namespace": namespace}}
