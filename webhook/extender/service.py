"""The extender's verbs over the cached view: filter, prioritize, bind. No Flask here.

Each verb returns the wire answer and a fixed result word for metrics. What
each answer does to kube-scheduler decides the failure handling:

- filter: a pod the policy cannot evaluate (Code.Skip: volumes, DRA, gates),
  or one with no matching profile, passes every node: kube-scheduler's own
  filters still apply, and a wrong rejection is worse than no opinion. A cache
  that is not synced is an in-band Error: the scheduler retries the pod later
  (or skips us when the extender is `ignorable`).
- prioritize: the same neutral cases score every node 0; errors are ignored
  by kube-scheduler anyway.
- a failure inside the policy (a bug) is logged and answered like the
  neutral case, never with a 500: the scheduler's own filters still apply.
- bind: POST pods/NAME/binding with the pod's uid as precondition (a pod
  deleted and re-created under the same name is never bound by mistake). The
  pod is reserved on its node in the view's ledger *before* the write and
  released if the write fails, so the next filter call, which kube-scheduler
  may send while the binding is still in flight, already sees it. The
  Binding carries the reservation key as an annotation (the API server copies
  it onto the pod), so the watch delivering the bound pod ends the
  reservation; one whose pod never shows up ends shortly after the bind's
  timeout (webhook.cluster.ledger).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from webhook import bodies
from webhook.bodies import ObjectRef
from webhook.cluster.ledger import EXTENDER
from webhook.cluster.view import ClusterView
from webhook.extender import wire
from webhook.extender.ratelimit import TokenBucket
from webhook.extender.verdicts import Scoring, filter_nodes, prioritize_nodes
from webhook.policy.marks import RESERVATION
from webhook.policy.model import PodView
from webhook.policy.policy_file import Policy
from webhook.policy.profile import Profile
from webhook.policy.snapshot import ClusterSnapshot

log = logging.getLogger(__name__)

RECENT_PODS = 4096
NOT_SYNCED = "placement-webhook extender: cluster cache not synced"


class BindingClient(Protocol):
    """What bind needs of a Kubernetes client (webhook.kube.Kube provides it)."""

    def create(self, path: str, body: Mapping[str, Any], **params: Any) -> dict[str, Any]: ...


class Extender:
    """The policy behind the extender verbs, deciding against a live (or fixed) view."""

    def __init__(
        self,
        view: ClusterView,
        policy: Policy,
        *,
        binder: BindingClient | None = None,
        scoring: Scoring = Scoring.DECISIVE,
        ready: Callable[[], bool] = lambda: True,
        limiter: TokenBucket | None = None,
        bind_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.view, self.policy, self.binder, self.scoring = view, policy, binder, scoring
        self.ready, self.limiter, self.clock = ready, limiter, clock
        self.hold_for = bind_timeout + policy.placement.reservation_grace_seconds
        self._recent: OrderedDict[str, PodView] = OrderedDict()
        self._lock = threading.Lock()

    # ---- shared --------------------------------------------------------
    def _pod(self, args: wire.ExtenderArgs) -> tuple[PodView | None, Profile | None, str]:
        """The parsed pod and its profile, or the reason the policy has no opinion."""
        try:
            pod = PodView.from_dict(args.pod)
        except Exception as err:  # malformed beyond what the API server would accept
            return None, None, f"pod not understood: {type(err).__name__}: {err}"
        if pod.skip_reason is not None:
            return pod, None, pod.skip_reason
        profile = self.policy.profile_for(pod.scheduler_name)
        if profile is None:
            return pod, None, f"no profile for scheduler {pod.scheduler_name!r}"
        if pod.uid:
            with self._lock:
                self._recent[pod.uid] = pod
                self._recent.move_to_end(pod.uid)
                while len(self._recent) > RECENT_PODS:
                    self._recent.popitem(last=False)
        return pod, profile, ""

    @property
    def assumed(self) -> int:
        """Pods reserved by binds whose bound pod the watch has not delivered yet."""
        return sum(1 for r in self.view.reservations() if r.origin == EXTENDER)

    # ---- verbs ---------------------------------------------------------
    def filter(self, args: wire.ExtenderArgs) -> tuple[wire.FilterResultJSON, str]:
        if not self.ready():
            return wire.filter_error(NOT_SYNCED), "not-ready"
        pod, profile, why = self._pod(args)
        if pod is None or profile is None:
            log.info("filter: no opinion (%s); every node passes", why)
            return wire.filter_result(args, args.node_names), "no-opinion"

        def run(snapshot: ClusterSnapshot) -> Any:
            return filter_nodes(pod, snapshot, profile, args.node_names)

        try:
            verdict = self.view.evaluate(run)
        except Exception:  # a bug must not fail the scheduling cycle: no opinion instead
            log.exception("filter failed for %s/%s", pod.namespace, pod.name)
            return wire.filter_result(args, args.node_names), "error"
        answer = wire.filter_result(args, verdict.passed, verdict.failed, verdict.unresolvable)
        return answer, "passed" if verdict.passed else "none-passed"

    def prioritize(self, args: wire.ExtenderArgs) -> tuple[list[wire.HostPriorityJSON], str]:
        pod, profile, _why = self._pod(args)
        if pod is None or profile is None or not self.ready():
            zero = [(name, 0) for name in args.node_names]
            return wire.host_priorities(zero), "no-opinion"

        def run(snapshot: ClusterSnapshot) -> Any:
            return prioritize_nodes(pod, snapshot, profile, args.node_names, self.scoring)

        try:
            priorities = self.view.evaluate(run)
        except Exception:
            log.exception("prioritize failed for %s/%s", pod.namespace, pod.name)
            return wire.host_priorities([(name, 0) for name in args.node_names]), "error"
        return wire.host_priorities(priorities.hosts), "scored"

    def bind(self, args: wire.BindingArgs) -> tuple[wire.BindingResultJSON, str]:
        if self.binder is None:
            return wire.binding_result("placement-webhook extender: binding is not enabled"), "off"
        with self._lock:
            pod = self._recent.pop(args.pod_uid, None) if args.pod_uid else None
        if pod is None and args.pod_uid:
            pod = self.view.evaluate(lambda snapshot: snapshot.pod(args.pod_uid))
        reservation = None
        if pod is not None:
            reservation = self.view.reserve(
                pod, args.node, hold_for=self.hold_for, origin=EXTENDER
            ).key
        if self.limiter is not None:
            self.limiter.wait()
        ref = ObjectRef(args.pod_namespace, args.pod_name, args.pod_uid)
        notes = {RESERVATION: reservation} if reservation else None
        path = f"/api/v1/namespaces/{args.pod_namespace}/pods/{args.pod_name}/binding"
        try:
            self.binder.create(path, bodies.binding(ref, args.node, notes))
        except Exception as err:
            if reservation is not None:
                self.view.release(reservation)
            status = getattr(err, "status", None)
            log.warning("bind %s/%s to %s failed: %s", args.pod_namespace, args.pod_name,
                        args.node, err)  # fmt: skip
            result = "conflict" if status == 409 else "not-found" if status == 404 else "error"
            return wire.binding_result(f"binding failed: {err}"), result
        return wire.binding_result(), "bound"
