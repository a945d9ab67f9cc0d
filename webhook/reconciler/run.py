"""`placement-webhook reconcile`: the threads, and how they hand work to each other.

- informers (nodes, pods, namespaces) -> `Feed` -> view, conflict records, queue;
- the elector renews or acquires the Lease; `is_leader()` gates every bind;
- one scheduling thread pops the queue (leader only, cache synced), decides
  with the policy against the view, reserving the slot, and hands placed
  pods to a small bind pool (kube-scheduler's binding cycle runs async too);
  the pool binds, verifies, writes events and settles the pod in the queue;
- the conflict loop runs detection passes; the endpoint serves the rest.

The scheduling thread waits on the queue's condition, woken by watch
events, finished binds and leadership changes, or by the next backoff
expiry: no blind polling of the API.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from webhook.cluster.informer import Informer
from webhook.cluster.source import WATCHED
from webhook.cluster.view import ClusterView
from webhook.conflicts.report import ConflictLoop, ConflictMetrics, ConflictReporter
from webhook.conflicts.store import ConflictStore
from webhook.events import EventRecorder, failed_scheduling, scheduled
from webhook.kube import Kube, pod_path
from webhook.policy.model import PodView
from webhook.policy.profile import Policy
from webhook.policy.status import Code
from webhook.reconciler import binding
from webhook.reconciler.election import ElectionSettings, LeaderElector, LeaseLock
from webhook.reconciler.endpoints import Endpoints
from webhook.reconciler.feed import Feed, is_gated, is_pending_ours, priority, signature
from webhook.reconciler.metrics import ReconcilerMetrics
from webhook.reconciler.options import DEFAULT_BIND, DEFAULT_LEASE_NAME
from webhook.reconciler.queue import Attempt, BackoffSettings, ClusterEvent, SchedulingQueue
from webhook.serving.endpoints import (
    EndpointServer,
    MetricsSettings,
    check_metrics_settings,
    metrics_server,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileSettings:
    """How the reconcile process runs (the policy is passed separately)."""

    identity: str
    """Lease holder identity; unique per process."""
    lease_namespace: str = "placement-webhook"
    """Namespace of the Lease (the webhook's own)."""
    lease_name: str = DEFAULT_LEASE_NAME
    election: ElectionSettings = field(default_factory=ElectionSettings)
    backoff: BackoffSettings = field(default_factory=BackoffSettings)
    bind_workers: int = 4
    """Concurrent Binding requests."""
    conflict_interval: float = 2.0
    """Seconds between detection passes (a pass runs only when something changed)."""
    max_cache_age: float = 120.0
    """Seconds of watch silence after which the view is not trusted (not ready, no binds)."""
    bind: str = DEFAULT_BIND
    """host:port of the probe endpoint (plain HTTP, /healthz and /readyz)."""
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    """The metrics endpoint (/metrics, /debug/conflicts), callers authorized."""
    pod_condition: bool = True
    """Set PodScheduled=False/Unschedulable on pods that fit nowhere, as kube-scheduler does."""


def default_identity() -> str:
    """host_uuid, as kube-scheduler and kube-controller-manager name themselves."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class Reconciler:
    """The reconcile process minus the HTTP endpoint and signal handling (see `run`)."""

    def __init__(
        self,
        client: Kube,
        policy: Policy,
        settings: ReconcileSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.client, self.policy, self.settings, self.clock = client, policy, settings, clock
        self.view = ClusterView()
        self.store = ConflictStore()
        self.queue = SchedulingQueue(settings.backoff)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self.feed = Feed(
            self.view,
            self.store,
            on_pod=self._on_pod,
            on_event=self._on_event,
            on_relist=self._on_relist,
        )
        self.informers = [Informer(client, self.feed, kind, path) for kind, path in WATCHED]
        self.metrics = ReconcilerMetrics.create()
        self.recorder = EventRecorder(client, instance=settings.identity)
        election = settings.election
        self.elector = LeaderElector(
            LeaseLock(
                client,
                settings.lease_namespace,
                settings.lease_name,
                timeout=max(1.0, election.renew_deadline / 2),
            ),
            settings.identity,
            election,
            on_started=self._started_leading,
            on_stopped=self._stopped_leading,
        )
        self.binder = binding.Binder(
            client, settings.identity, timeout=max(1.0, election.act_margin)
        )
        self.pool = ThreadPoolExecutor(settings.bind_workers, thread_name_prefix="bind")
        self._slots = threading.BoundedSemaphore(settings.bind_workers * 2)
        self.reporter = ConflictReporter(
            self.store,
            ConflictMetrics.create(self.metrics.registry),
            recorder=self.recorder,
            client=client,
            evict=policy.placement.conflict_policy == "evict",
            is_leader=self.elector.is_leader,
        )
        self.conflict_loop = ConflictLoop(self.reporter, interval=settings.conflict_interval)
        self._threads = [
            threading.Thread(target=self._schedule_loop, name="schedule", daemon=True),
            threading.Thread(target=self._housekeeping, name="housekeeping", daemon=True),
        ]

    # ---- lifecycle -----------------------------------------------------
    def start(self) -> None:
        for informer in self.informers:
            informer.start()
        self.elector.start()
        self.conflict_loop.start()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop binding at once, let in-flight binds finish, then release the lease."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self.elector.stop(release=False)
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.elector.release()
        self.conflict_loop.stop()
        for informer in self.informers:
            informer.stop()
        self.recorder.close()

    # ---- reading -------------------------------------------------------
    def synced(self) -> bool:
        state = self.view.sync_state()
        return state.synced and state.age_seconds <= self.settings.max_cache_age

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        with self._cond:
            pending = self.queue.counts()
        info = {
            "identity": self.settings.identity,
            "leader": self.elector.is_leader(),
            "holder": self.elector.holder(),
            "nodes": self.view.node_count(),
            "pending": pending,
        }
        return self.synced(), info

    # ---- feed callbacks (informer threads) -------------------------------
    def _on_pod(self, uid: str, pod: Mapping[str, Any] | None) -> None:
        with self._cond:
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
    def _started_leading(self) -> None:
        self.metrics.leader.set(1)
        with self._cond:
            self.queue.activate_all(self.clock())
            self._cond.notify_all()

    def _stopped_leading(self) -> None:
        self.metrics.leader.set(0)

    # ---- scheduling ----------------------------------------------------
    def _schedule_loop(self) -> None:
        while not self._stop.is_set():
            if not (self.elector.is_leader() and self.synced()):
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
        meta = pod.get("metadata") or {}
        namespace, name, uid = str(meta.get("namespace")), str(meta.get("name")), attempt.key
        try:
            view = PodView.from_dict(pod)
        except (ValueError, TypeError) as err:
            self._unschedulable(attempt, f"pod cannot be evaluated: {err}", (), "error")
            return False
        profile = self.policy.profile_for(view.scheduler_name)
        if profile is None:  # cannot happen for schedulerName placement-webhook
            self._unschedulable(attempt, "no profile for this pod's scheduler", (), "error")
            return False
        ttl = self.policy.placement.reservation_ttl_seconds
        decision, key = self.view.place(view, profile, reserve_for=ttl)
        if decision.placed and decision.node is not None:
            self.metrics.attempts.labels("scheduled").inc()
            self.pool.submit(self._bind, attempt, decision.node, key)
            return True
        if decision.code is Code.Skip:
            message = f"placement-webhook cannot evaluate this pod: {decision.message}"
            self._unschedulable(attempt, message, (), "skipped")
        elif decision.code is Code.Error:
            self.metrics.attempts.labels("error").inc()
            self.recorder.record(failed_scheduling(namespace, name, uid, decision.message))
            with self._cond:
                self.queue.error(attempt.key, self.clock())
        else:
            self._unschedulable(
                attempt, decision.message, tuple(decision.reason_counts), "unschedulable"
            )
        return False

    def _unschedulable(
        self, attempt: Attempt, message: str, reasons: tuple[str, ...], result: str
    ) -> None:
        meta = attempt.pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        self.metrics.attempts.labels(result).inc()
        self.recorder.record(failed_scheduling(namespace, name, attempt.key, message))
        with self._cond:
            self.queue.unschedulable(attempt.key, self.clock(), reasons)
        log.info("%s/%s unschedulable: %s", namespace, name, message)
        if self.settings.pod_condition and not self._stop.is_set():
            self.pool.submit(self._mark_unschedulable, attempt.pod, message)

    def _bind(self, attempt: Attempt, node: str, reservation: str | None) -> None:
        pod = attempt.pod
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        try:
            if not self.elector.is_leader() or self._stop.is_set():
                self._release(reservation)
                self.metrics.binds.labels("not-leader").inc()
                with self._cond:
                    self.queue.give_back(attempt.key, self.clock())
                return
            result = self.binder.bind(pod, node, reservation)
            self.metrics.binds.labels(result.outcome).inc()
            now = self.clock()
            if result.outcome == binding.BOUND:
                self.recorder.record(scheduled(namespace, name, attempt.key, node))
                self.metrics.time_to_bind.observe(now - attempt.first_seen)
                with self._cond:
                    self.queue.done(attempt.key)
                log.info(
                    "bound %s/%s to %s", namespace, name, node,
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
                level, "bind of %s/%s to %s: %s (%s)", namespace, name, node, result.outcome,
                result.message, extra={"boundTo": result.node},
            )  # fmt: skip
        finally:
            self._slots.release()
            with self._cond:
                self._cond.notify()

    def _release(self, reservation: str | None) -> None:
        if reservation is not None:
            self.view.release(reservation)

    def _mark_unschedulable(self, pod: Mapping[str, Any], message: str) -> None:
        """PodScheduled=False, reason Unschedulable, as kube-scheduler sets it (when it changed)."""
        for cond in (pod.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "PodScheduled" and (
                cond.get("status"),
                cond.get("reason"),
                cond.get("message"),
            ) == ("False", "Unschedulable", message):
                return
        meta = pod.get("metadata") or {}
        condition = {
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
                pod_path(str(meta.get("namespace")), str(meta.get("name")), "status"),
                body={"status": {"conditions": [condition]}},
                content_type="application/strategic-merge-patch+json",
                timeout=5.0,
            )
        except Exception as err:
            log.debug("PodScheduled condition not set on %s: %s", meta.get("name"), err)

    # ---- housekeeping --------------------------------------------------
    def _housekeeping(self) -> None:
        while not self._stop.wait(1.0):
            self.view.expire_reservations()
            self.refresh_gauges()

    def refresh_gauges(self) -> None:
        with self._cond:
            counts = self.queue.counts()
        for queue, n in counts.items():
            self.metrics.pending.labels(queue).set(n)
        self.metrics.reservations.set(len(self.view.reservations()))
        self.metrics.cache_synced.set(1 if self.view.sync_state().synced else 0)
        self.metrics.nodes.set(self.view.node_count())
        self.metrics.leader.set(1 if self.elector.is_leader() else 0)


# ------------------------------------------------------------------ entry point


def settings_from_args(args: argparse.Namespace) -> ReconcileSettings:
    try:
        election = ElectionSettings(args.lease_duration, args.renew_deadline, args.retry_period)
        backoff = BackoffSettings(args.initial_backoff, args.max_backoff, args.max_unschedulable)
    except ValueError as err:
        raise SystemExit(f"placement-webhook reconcile: {err}") from None
    return ReconcileSettings(
        identity=args.identity or default_identity(),
        lease_namespace=args.namespace,
        lease_name=args.lease_name,
        election=election,
        backoff=backoff,
        bind_workers=max(1, args.bind_workers),
        conflict_interval=args.conflict_interval,
        max_cache_age=args.max_cache_age,
        bind=args.bind,
        metrics=MetricsSettings(
            bind=args.metrics_bind,
            auth=args.metrics_auth,
            certfile=args.metrics_tls_cert,
            keyfile=args.metrics_tls_key,
        ),
        pod_condition=not args.no_pod_condition,
    )


def run(client: Kube, policy: Policy, settings: ReconcileSettings) -> int:
    """Run until SIGTERM/SIGINT; stop binding, release the lease, return 0."""
    reconciler = Reconciler(client, policy, settings)
    endpoints = Endpoints(
        ready=reconciler.readiness,
        registry=reconciler.metrics.registry,
        conflicts=reconciler.reporter.as_json,
        before_scrape=reconciler.refresh_gauges,
    )
    try:
        check_metrics_settings(settings.metrics, has_client=True)
        server = EndpointServer(settings.bind, endpoints.probes, name="probes")
        metrics = metrics_server(settings.metrics, endpoints.protected, client, name="metrics")
    except (OSError, ValueError) as err:
        raise SystemExit(f"placement-webhook reconcile: endpoints: {err}") from None
    done = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    if metrics is not None:
        metrics.start()
    reconciler.start()
    log.info(
        "reconciler started", extra={"identity": settings.identity, "endpoint": server.port,
                                      "lease": f"{settings.lease_namespace}/{settings.lease_name}",
                                      "conflictPolicy": policy.placement.conflict_policy},
    )  # fmt: skip
    done.wait()
    reconciler.stop()
    server.stop()
    if metrics is not None:
        metrics.stop()
    return 0


def run_from_args(args: argparse.Namespace, policy: Policy) -> int:
    return run(Kube(args.kubeconfig), policy, settings_from_args(args))
