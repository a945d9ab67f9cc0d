"""The fallback binder: schedules and binds the pods the admission path left pending.

- the feed (webhook.reconciler.feed) tells it which pods are pending ours
  (`on_pod`) and when the cluster changed in a way that may help the
  unschedulable ones (`on_event`);
- one scheduling thread pops the queue (only while `may_act()`: this process
  holds the decision Lease and its view is fresh), decides with the policy
  against the shared view, reserving the slot in the same ledger as
  admission, and hands placed pods to a small bind pool (kube-scheduler's
  binding cycle runs async too); the pool binds, verifies, writes events and
  settles the pod in the queue;
- the conflict loop runs detection passes and, as leader, reports;
- the repair pass (nodeAffinity mode) deletes a pod that we pinned to a node
  that no longer fits it (kube-scheduler has called it Unschedulable) when
  another node fits and its controller recreates it: the new pod comes
  through admission again and is pinned where it fits. Only pods of
  ReplicaSets, StatefulSets and ReplicationControllers are ever pinned (the
  others are only steered with a preferred term), so no pod is lost.

The scheduling thread waits on the queue's condition, woken by watch
events, finished binds and leadership changes, or by the next backoff
expiry: no blind polling of the API.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from webhook import bodies
from webhook.bodies import ObjectRef, PodCondition
from webhook.cluster.ledger import BINDER
from webhook.cluster.view import ClusterView
from webhook.conflicts.report import ConflictLoop, ConflictMetrics, ConflictReporter
from webhook.conflicts.store import ConflictStore
from webhook.events import EventRecorder, failed_scheduling, placement_repaired, scheduled
from webhook.kube import Kube, pod_path
from webhook.policy import marks
from webhook.policy.model import PodView
from webhook.policy.placement_policy import ConflictPolicy
from webhook.policy.policy_file import Policy
from webhook.policy.status import Code
from webhook.reconciler import binding
from webhook.reconciler.feed import Feed, is_gated, is_pending_ours, priority, signature
from webhook.reconciler.metrics import ReconcilerMetrics
from webhook.reconciler.queue import Attempt, ClusterEvent, SchedulingQueue
from webhook.reconciler.settings import ReconcileSettings

log = logging.getLogger(__name__)


class FallbackBinder:
    """Binds pending pods of ours while `may_act()`; reports conflicts while `is_leader()`."""

    def __init__(
        self,
        client: Kube,
        policy: Policy,
        settings: ReconcileSettings,
        *,
        view: ClusterView,
        store: ConflictStore,
        may_act: Callable[[], bool],
        is_leader: Callable[[], bool],
        synced: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ):
        self.client, self.policy, self.settings, self.clock = client, policy, settings, clock
        self.view, self.store = view, store
        self.may_act, self.is_leader, self.synced = may_act, is_leader, synced
        self.queue = SchedulingQueue(settings.backoff)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self.metrics = ReconcilerMetrics.create()
        self.recorder = EventRecorder(client, instance=settings.identity)
        self.binder = binding.Binder(
            client, settings.identity, timeout=max(1.0, settings.election.act_margin)
        )
        self.pool = ThreadPoolExecutor(settings.bind_workers, thread_name_prefix="bind")
        self._slots = threading.BoundedSemaphore(settings.bind_workers * 2)
        self.reporter = ConflictReporter(
            self.store,
            ConflictMetrics.create(self.metrics.registry),
            recorder=self.recorder,
            client=client,
            evict=policy.placement.conflict_policy is ConflictPolicy.EVICT,
            is_leader=is_leader,
        )
        self.conflict_loop = ConflictLoop(self.reporter, interval=settings.conflict_interval)
        self._pinned: dict[str, Mapping[str, Any]] = {}  # pending pods we pinned, by uid
        self._repaired: dict[str, float] = {}  # uid -> when we deleted it
        self._next_repair = 0.0
        self._threads = [
            threading.Thread(target=self._schedule_loop, name="schedule", daemon=True),
            threading.Thread(target=self._housekeeping, name="housekeeping", daemon=True),
        ]

    def feed(self) -> Feed:
        """The informers' store: the view, the conflict records and this binder's queue."""
        return Feed(
            self.view,
            self.store,
            on_pod=self._on_pod,
            on_event=self._on_event,
            on_relist=self._on_relist,
        )

    # ---- lifecycle -----------------------------------------------------
    def start(self) -> None:
        self.conflict_loop.start()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop binding at once and let in-flight binds finish (the caller releases the Lease)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.conflict_loop.stop()
        self.recorder.close()

    # ---- reading -------------------------------------------------------
    def pending(self) -> dict[str, int]:
        with self._cond:
            return self.queue.counts()

    # ---- feed callbacks (informer threads) -------------------------------
    def _on_pod(self, uid: str, pod: Mapping[str, Any] | None) -> None:
        with self._cond:
            if pod is not None and _pending_pinned(pod):
                self._pinned[uid] = pod
            else:
                self._pinned.pop(uid, None)
            if pod is not None and is_pending_ours(pod) and not is_gated(pod):
                self.queue.add(
                    uid, pod, now=self.clock(), priority=priority(pod), signature=signature(pod)
                )
                self._cond.notify()
            else:
                self.queue.delete(uid)

    def _on_relist(self, keys: set[str]) -> None:
        with self._cond:
            for key in list(self.queue.keys()):
                if key not in keys:
                    self.queue.delete(key)

    def _on_event(self, event: ClusterEvent) -> None:
        with self._cond:
            if self.queue.on_event(event, self.clock()):
                self._cond.notify()

    # ---- leadership ----------------------------------------------------
    def wake(self) -> None:
        """Retry every pending pod now (this process just became able to decide)."""
        with self._cond:
            self.queue.activate_all(self.clock())
            self._cond.notify_all()

    # ---- scheduling ----------------------------------------------------
    def _schedule_loop(self) -> None:
        while not self._stop.is_set():
            if not (self.may_act() and self.synced()):
                self._stop.wait(0.05)
                continue
            if not self._slots.acquire(timeout=0.5):
                continue
            with self._cond:
                attempt = self.queue.pop(self.clock())
                if attempt is None:
                    self._slots.release()
                    wait = self.queue.next_ready_in(self.clock())
                    self._cond.wait(timeout=min(wait if wait is not None else 1.0, 1.0))
                    continue
            handed_over = False
            try:
                handed_over = self._attempt(attempt)
            except Exception:  # a bug for one pod must not stop scheduling the others
                log.exception("scheduling attempt failed for %s", attempt.key)
                with self._cond:
                    self.queue.error(attempt.key, self.clock())
            finally:
                if not handed_over:
                    self._slots.release()

    def _attempt(self, attempt: Attempt) -> bool:
        """Decide for one pod; True when a bind was handed to the pool (which frees the slot)."""
        pod = attempt.pod
        ref = ObjectRef.of(pod)
        try:
            view = PodView.from_dict(pod)
        except (ValueError, TypeError) as err:
            self._unschedulable(attempt, ref, f"pod cannot be evaluated: {err}", (), "error")
            return False
        profile = self.policy.profile_for(view.scheduler_name)
        if profile is None:  # cannot happen for schedulerName placement-webhook
            self._unschedulable(attempt, ref, "no profile for this pod's scheduler", (), "error")
            return False
        hold_for = self.binder.timeout + self.policy.placement.reservation_grace_seconds
        placement = self.view.place(view, profile, hold_for=hold_for, origin=BINDER)
        decision = placement.decision
        if placement.held_back:
            self.metrics.attempts.labels("held-back").inc()
            with self._cond:
                self.queue.error(attempt.key, self.clock())
            return False
        if decision.placed and decision.node is not None:
            self.metrics.attempts.labels("scheduled").inc()
            self.pool.submit(self._bind, attempt, ref, decision.node, placement.key)
            return True
        if decision.code is Code.Skip:
            message = f"placement-webhook cannot evaluate this pod: {decision.message}"
            self._unschedulable(attempt, ref, message, (), "skipped")
        elif decision.code is Code.Error:
            self.metrics.attempts.labels("error").inc()
            self.recorder.record(
                failed_scheduling(ref.namespace, ref.name, attempt.key, decision.message)
            )
            with self._cond:
                self.queue.error(attempt.key, self.clock())
        else:
            self._unschedulable(
                attempt, ref, decision.message, tuple(decision.reason_counts), "unschedulable"
            )
        return False

    def _unschedulable(
        self,
        attempt: Attempt,
        ref: ObjectRef,
        message: str,
        reasons: tuple[str, ...],
        result: str,
    ) -> None:
        self.metrics.attempts.labels(result).inc()
        self.recorder.record(failed_scheduling(ref.namespace, ref.name, attempt.key, message))
        with self._cond:
            self.queue.unschedulable(attempt.key, self.clock(), reasons)
        log.info("%s unschedulable: %s", ref, message)
        if self.settings.pod_condition and not self._stop.is_set():
            self.pool.submit(self._mark_unschedulable, attempt.pod, ref, message)

    def _bind(self, attempt: Attempt, ref: ObjectRef, node: str, reservation: str | None) -> None:
        try:
            if not self.may_act() or self._stop.is_set():
                self._release(reservation)
                self.metrics.binds.labels("not-leader").inc()
                with self._cond:
                    self.queue.give_back(attempt.key, self.clock())
                return
            result = self.binder.bind(ref, node, reservation)
            self.metrics.binds.labels(result.outcome).inc()
            now = self.clock()
            if result.outcome == binding.BOUND:
                self.recorder.record(scheduled(ref.namespace, ref.name, attempt.key, node))
                self.metrics.time_to_bind.observe(now - attempt.first_seen)
                with self._cond:
                    self.queue.done(attempt.key)
                log.info(
                    "bound %s to %s", ref, node,
                    extra={"attempts": attempt.attempts + 1,
                           "seconds": round(now - attempt.first_seen, 4)},
                )  # fmt: skip
                return
            self._release(reservation)
            with self._cond:
                if result.outcome == binding.ALREADY_BOUND:
                    self.queue.done(attempt.key)
                elif result.outcome == binding.GONE:
                    self.queue.delete(attempt.key)
                else:
                    self.queue.error(attempt.key, now)
            level = logging.WARNING if result.outcome == binding.ERROR else logging.INFO
            log.log(
                level, "bind of %s to %s: %s (%s)", ref, node, result.outcome,
                result.message, extra={"boundTo": result.node},
            )  # fmt: skip
        finally:
            self._slots.release()
            with self._cond:
                self._cond.notify()

    def _release(self, reservation: str | None) -> None:
        if reservation is not None:
            self.view.release(reservation)

    def _mark_unschedulable(self, pod: Mapping[str, Any], ref: ObjectRef, message: str) -> None:
        """PodScheduled=False, reason Unschedulable, as kube-scheduler sets it (when it changed)."""
        scheduled_now = _pod_scheduled(pod)
        if scheduled_now is not None and (
            scheduled_now.get("status"),
            scheduled_now.get("reason"),
            scheduled_now.get("message"),
        ) == ("False", "Unschedulable", message):
            return
        condition: PodCondition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message[:1024],
            "lastProbeTime": None,
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        try:
            self.client.request(
                "PATCH",
                pod_path(ref.namespace, ref.name, "status"),
                body={"status": {"conditions": [condition]}},
                content_type="application/strategic-merge-patch+json",
                timeout=5.0,
            )
        except Exception as err:
            log.warning("PodScheduled condition not set on %s: %s", ref, err)

    # ---- housekeeping --------------------------------------------------
    def _housekeeping(self) -> None:
        while not self._stop.wait(1.0):
            self.view.expire_reservations()
            self.refresh_gauges()
            if self.may_act():  # pinned pods exist only from nodeAffinity mode, now or before
                try:
                    self.repair_pass()
                except Exception:  # a bug here must not stop expiring reservations
                    log.exception("repair pass failed")

    # ---- nodeAffinity repair -------------------------------------------
    def repair_pass(self) -> int:
        """Delete stranded pinned pods whose controller recreates them; returns how many."""
        now = self.clock()
        with self._cond:
            candidates = [
                (uid, pod) for uid, pod in self._pinned.items()
                if uid not in self._repaired and _declared_unschedulable(pod)
            ]  # fmt: skip
        for uid, when in list(self._repaired.items()):
            if now - when > 600:
                del self._repaired[uid]
        repaired = 0
        for uid, pod in candidates:
            node = marks.pinned_node(pod)
            if node is None or not marks.pin_is_required(pod):
                continue
            unpinned = marks.without_placement(pod)
            try:
                view = PodView.from_dict(unpinned)
            except (ValueError, TypeError):
                continue
            profile = self.policy.profile_for(view.scheduler_name)
            if profile is None:
                continue
            elsewhere = self.view.stranded(uid, view, profile, node)
            if elsewhere is None:
                continue
            if self._delete_for_repair(pod, uid, node, elsewhere):
                self._repaired[uid] = now
                repaired += 1
        return repaired

    def _delete_for_repair(
        self, pod: Mapping[str, Any], uid: str, node: str, elsewhere: str
    ) -> bool:
        ref = ObjectRef.of(pod)
        namespace, name = ref.namespace, ref.name
        kind = marks.controller_kind(pod) or "controller"
        note = (
            f"pinned to {node}, which no longer fits it, while {elsewhere} does; "
            f"deleted so that its {kind} recreates it and admission places it again"
        )
        try:
            self.client.request(
                "DELETE",
                pod_path(namespace, name),
                body={
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    # unchanged since we judged it (not bound meanwhile), same pod
                    "preconditions": {"uid": uid, "resourceVersion": ref.resource_version},
                },
                timeout=5.0,
            )  # fmt: skip
        except Exception as err:
            log.info("repair of %s/%s not done: %s", namespace, name, err)
            return False
        self.metrics.attempts.labels("repaired").inc()
        self.recorder.record(placement_repaired(namespace, name, uid, note))
        log.info("repaired %s/%s: %s", namespace, name, note)
        return True

    def refresh_gauges(self) -> None:
        with self._cond:
            counts = self.queue.counts()
        for queue, n in counts.items():
            self.metrics.pending.labels(queue).set(n)
        self.metrics.reservations.set(len(self.view.reservations()))
        self.metrics.cache_synced.set(1 if self.view.sync_state().synced else 0)
        self.metrics.nodes.set(self.view.node_count())
        self.metrics.leader.set(1 if self.may_act() else 0)


def _pending_pinned(pod: Mapping[str, Any]) -> bool:
    return (
        not bodies.node_name(pod)
        and bodies.meta(pod).get("deletionTimestamp") is None
        and bodies.status(pod).get("phase") not in ("Succeeded", "Failed")
        and marks.pinned_node(pod) is not None
    )


def _pod_scheduled(pod: Mapping[str, Any]) -> PodCondition | None:
    """The pod's PodScheduled condition, if it has one."""
    conditions = bodies.status(pod).get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            return condition  # type: ignore[return-value]
    return None


def _declared_unschedulable(pod: Mapping[str, Any]) -> bool:
    """kube-scheduler tried and found no node for it (PodScheduled False, Unschedulable)."""
    condition = _pod_scheduled(pod)
    return bool(
        condition is not None
        and condition.get("status") == "False"
        and condition.get("reason") == "Unschedulable"
    )
