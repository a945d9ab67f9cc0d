"""One arm of one scenario on a fresh local control plane, measured.

Sequence: start etcd + kube-apiserver -> create the nodes -> start the arm's
components (kube-scheduler with the scenario's profile, the webhook with the
same profile and a placement mode, the extender) and wait until they are
ready (their caches hold every node; a probe pod went through the scheduler)
-> scrape metrics and CPU counters -> create the pods at the scenario's
arrival -> wait until every pod is bound or the deadline passes -> wait
until the API server has seen no write for SETTLE_QUIET_SECONDS (events are
written asynchronously) -> scrape again -> list the pods -> stop everything.
Latency and throughput end at the last bind; API writes and CPU time also
cover the settling.

Every API client gets the scenario's qps/burst: kube-scheduler through
clientConnection, the extender's binder through --kube-qps/--kube-burst and
the pod creator through the same token bucket. The webhook has no client
limit to set: its only writes are best-effort Scheduled events.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import kubelets, probes
from experiments.arms import Arm
from experiments.components import (
    ExtenderProcess,
    start_extender,
    write_scheduler_config,
)
from experiments.figures import measure_metrics, outage_figures
from experiments.load import BindWatcher, create_pods, finish
from experiments.profiling import PROFILED, WindowProfiler
from experiments.promtext import Samples
from experiments.quality import assess
from experiments.scenario import ENABLED_LABEL, Scenario
from experiments.stats import Columns, summarize
from webhook.devcluster import DevCluster, DevClusterError
from webhook.devcluster.objects import create_node, ensure_namespace, pod_manifest
from webhook.devcluster.webhook import (
    WebhookProcess,
    WebhookSet,
    register_webhook,
    start_replicas,
    start_webhook,
    wait_until_effective,
)
from webhook.extender.config import ExtenderEntry
from webhook.extender.ratelimit import TokenBucket
from webhook.kube import ApiError, Kube
from webhook.policy.marks import SCHEDULER_NAME

log = logging.getLogger(__name__)

PROBE_NAMESPACE = "probe"
SETTLE_QUIET_SECONDS = 2.0
SETTLE_MAX_SECONDS = 60.0


class Components:
    """What an arm started besides the control plane, and their pids."""

    def __init__(self) -> None:
        self.webhook: WebhookProcess | None = None
        """The webhook, or the leader of `replicas` (whose /metrics the run reads)."""
        self.replicas: WebhookSet | None = None
        self.extender: ExtenderProcess | None = None
        self.scheduler = False
        self.retired_cpu: dict[str, float] = {}
        """CPU seconds of processes stopped during the run (arm F's first webhook)."""

    def pids(self, cluster: DevCluster) -> dict[str, int]:
        pids = {name: c.pid for name, c in cluster.components.items()}
        if self.webhook is not None:
            pids["webhook"] = self.webhook.process.pid
        for member in self.replicas.members if self.replicas is not None else ():
            if member is not self.webhook:
                pids["webhook-follower"] = member.process.pid
        if self.extender is not None:
            pids["extender"] = self.extender.process.pid
        return pids

    def stop(self, grace: float = 2.0) -> None:
        if self.replicas is not None:
            with contextlib.suppress(Exception):
                self.replicas.stop(grace=grace)
        for process in (self.webhook, self.extender):
            if process is not None:
                with contextlib.suppress(Exception):
                    process.stop(grace=grace)


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, ApiError):
            if predicate():
                return
        time.sleep(0.2)
    raise DevClusterError(f"timed out after {timeout:.0f}s waiting for {what}")


def create_nodes(kube: Kube, manifests: list[dict[str, Any]], threads: int = 8) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda m: create_node(kube, m), manifests))


def _probe_scheduler(kube: Kube) -> None:
    """A pod through the scheduler (and extender) proves both are serving; then it goes."""
    ensure_namespace(kube, PROBE_NAMESPACE)
    path = f"/api/v1/namespaces/{PROBE_NAMESPACE}/pods"
    kube.create(path, pod_manifest("probe", cpu="1m", memory="1Mi"))
    _wait(
        lambda: bool(kube.get(f"{path}/probe")["spec"].get("nodeName")),
        120,
        "kube-scheduler to bind the probe pod",
    )
    kube.delete(f"{path}/probe", gracePeriodSeconds=0)


def start_components(
    cluster: DevCluster,
    kube: Kube,
    scenario: Scenario,
    arm: Arm,
    say: Callable[[str], None],
) -> Components:
    parts = Components()
    nodes = scenario.node_count
    qps, burst = scenario.client.qps, scenario.client.burst
    workdir = cluster.workdir
    try:
        if arm.webhook is not None:
            policy = workdir / "webhook-policy.yaml"
            policy.write_text(scenario.policy_text(arm.webhook, dict(arm.placement)))
            say(f"starting the webhook ({arm.webhook} mode, {arm.replicas} replica(s))")
            quiet = ["--log-level", "warning"]
            if arm.replicas > 1:
                replicas = start_replicas(cluster, arm.replicas, policy=policy, extra_args=quiet)
                parts.replicas = replicas
                parts.webhook = replicas.leader()
                served: WebhookProcess | WebhookSet = replicas
            else:
                parts.webhook = served = start_webhook(cluster, policy=policy, extra_args=quiet)
            hook = parts.webhook
            assert hook is not None
            _wait(lambda: hook.get("/readyz")[1].get("nodes") == nodes, 300, "webhook cache")
            register_webhook(kube, served)
            wait_until_effective(kube, scenario.namespace, timeout=60)
        entry = None
        if arm.extender:
            policy = workdir / "extender-policy.yaml"
            policy.write_text(scenario.policy_text())
            say(f"starting the extender (nodeCacheCapable={arm.node_cache_capable})")
            parts.extender = start_extender(
                cluster,
                policy=policy,
                nodes=nodes,
                timeout=300,
                extra_args=["--log-level", "warning", "--kube-qps", str(qps),
                            "--kube-burst", str(burst)],
            )  # fmt: skip
            entry = ExtenderEntry(parts.extender.url, node_cache_capable=arm.node_cache_capable)
        if arm.scheduler:
            config = write_scheduler_config(
                cluster,
                workdir / "kube-scheduler.yaml",
                scenario.scheduler_config(),
                extender=entry,
                qps=qps,
                burst=burst,
            )
            say("starting kube-scheduler")
            cluster.start_scheduler(config)
            parts.scheduler = True
            _probe_scheduler(kube)
    except BaseException:
        parts.stop()
        raise
    return parts


def _scrape(cluster: DevCluster, parts: Components) -> dict[str, Samples]:
    out = {"apiserver": Samples.parse(probes.apiserver_metrics(cluster))}
    if parts.webhook is not None:
        out["webhook"] = Samples.parse(parts.webhook.metrics())
    if parts.extender is not None:
        out["extender"] = Samples.parse(parts.extender.metrics())
    return out


def _event_count(kube: Kube, namespace: str) -> int:
    """Events in the namespace, from a one-item list (remainingItemCount + 1)."""
    page = kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", limit=1)
    items = page.get("items") or []
    return len(items) + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


def _settle(kube: Kube, namespace: str) -> float:
    """Wait until no event was written for SETTLE_QUIET_SECONDS; return the wait.

    Placement components write events after the bind, from a queue: those
    writes, and the CPU they take, belong to the run that caused them. Event
    count is the signal, not the storage revision, which leases renewed every
    few seconds keep moving; not /metrics either, which costs the API server
    ~25 ms and this process ~0.4 s of CPU per scrape at this size.
    """
    started = time.monotonic()
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() - started < SETTLE_MAX_SECONDS:
        count = _event_count(kube, namespace)
        if count != last:
            last, quiet_since = count, time.monotonic()
        elif time.monotonic() - quiet_since >= SETTLE_QUIET_SECONDS:
            break
        time.sleep(0.25)
    return time.monotonic() - started


def run_arm(
    scenario: Scenario,
    arm: Arm,
    workdir: Path,
    *,
    bin_dir: Path | None = None,
    say: Callable[[str], None] = lambda _m: None,
    outage: OutagePlan | None = None,
    profile_dir: Path | None = None,
    profile_seconds: float = 10.0,
) -> dict[str, Any]:
    """Run one arm; returns its JSON-ready result (per-pod columns and run figures)."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    say(f"[{scenario.name} / {arm.key}] starting the control plane")
    with DevCluster.start(workdir, bin_dir=bin_dir, profiling=profile_dir is not None) as cluster:
        timings["controlPlaneSeconds"] = round(time.monotonic() - started, 2)
        pool = max(8, scenario.arrival.clients + 2)
        kube = Kube(cluster.kubeconfig, pool_size=pool)
        watch_client = Kube(cluster.kubeconfig, pool_size=2)
        parts = Components()
        measured = threading.Event()  # releases the outage thread (see _outage)
        watcher: BindWatcher | None = None
        try:
            ensure_namespace(kube, scenario.namespace, {ENABLED_LABEL: "true"})
            mark = time.monotonic()
            nodes = scenario.node_manifests()
            if scenario.kubelets:
                say(f"[{scenario.name} / {arm.key}] starting {len(nodes)} hollow kubelets")
                kubelets.start(cluster, nodes)
            else:
                say(f"[{scenario.name} / {arm.key}] creating {len(nodes)} nodes")
                create_nodes(kube, nodes)
            timings["nodesSeconds"] = round(time.monotonic() - mark, 2)
            mark = time.monotonic()
            parts = start_components(cluster, kube, scenario, arm, say)
            timings["componentsSeconds"] = round(time.monotonic() - mark, 2)
            idle = kubelets.idle(cluster, parts.pids(cluster), say) if scenario.kubelets else {}
            pinning = probes.pin_arm(parts.pids(cluster))
            manifests = scenario.pod_manifests()
            if arm.outage:  # the webhook's fallback binder is these pods' scheduler
                for manifest in manifests:
                    manifest["spec"]["schedulerName"] = SCHEDULER_NAME
            clock = time.monotonic
            watcher = BindWatcher(watch_client, scenario.namespace, clock)
            watcher.start()
            limiter = TokenBucket(scenario.client.qps, scenario.client.burst)
            before = _scrape(cluster, parts)
            cpu_before = probes.cpu_seconds(parts.pids(cluster))
            self_before = _self_cpu()
            load_before = os.getloadavg()[0]
            profiler = None
            if profile_dir is not None:
                ours = {k: v for k, v in parts.pids(cluster).items() if k in PROFILED}
                prefix = f"{scenario.name}-{arm.key}"
                profiler = WindowProfiler(cluster, ours, profile_dir, prefix, profile_seconds)
                profiler.start()
            t0 = clock()
            deadline = t0 + scenario.deadline_seconds
            say(f"[{scenario.name} / {arm.key}] creating {len(manifests)} pods "
                f"({scenario.arrival.mode})")  # fmt: skip
            extra: dict[str, Any] = {}
            hook_thread = None
            progress = Progress()
            if outage is not None:
                before.pop("webhook", None)  # the webhook answering at the end is a new process
                hook_thread = threading.Thread(
                    target=_outage,
                    args=(cluster, kube, parts, clock, progress, outage, len(manifests)),
                    kwargs={
                        "t0": t0,
                        "cpu_before": cpu_before,
                        "into": extra,
                        "say": say,
                        "namespace": scenario.namespace,
                        "done": measured,
                    },
                    daemon=True,
                )
                hook_thread.start()
            records = create_pods(
                kube,
                manifests,
                scenario.arrival,
                limiter,
                watcher,
                clock,
                deadline=deadline,
                on_sent=lambda _i: progress.add(),
                wait_bound=arm.binds,
            )
            if arm.binds:
                watcher.wait([r.name for r in records], deadline)
                if scenario.kubelets:  # the kubelets run (or refuse) what was bound
                    watcher.wait_started([r.name for r in records], deadline)
            if hook_thread is not None:
                while "endedAt" not in extra.get("outage", {}) and clock() < deadline:
                    time.sleep(0.1)
            t_end = clock()
            finish(records, watcher)
            everything_bound = all(r.bound is not None for r in records) or not arm.binds
            # asynchronous writes (events) belong to this run; past the deadline, the
            # components are still busy and the window ends now
            settled = _settle(kube, scenario.namespace) if everything_bound else 0.0
            finish(records, watcher)
            watcher.stop()
            cpu_after = probes.cpu_seconds(parts.pids(cluster))
            self_after = _self_cpu()
            after = _scrape(cluster, parts)
            say(f"[{scenario.name} / {arm.key}] {sum(r.bound is not None for r in records)}"
                f"/{len(records)} bound in {t_end - t0:.1f}s; collecting")  # fmt: skip
            final = kube.get(f"/api/v1/namespaces/{scenario.namespace}/pods")["items"]
            if profiler is not None:
                extra["profile"] = profiler.finish()
            columns = Columns(
                names=tuple(r.name for r in records),
                sent=tuple(r.sent - t0 for r in records),
                created=tuple(None if r.created is None else r.created - t0 for r in records),
                bound=tuple(None if r.bound is None else r.bound - t0 for r in records),
                nodes=tuple(r.node for r in records),
                errors=tuple(r.error for r in records),
                running=tuple(None if r.running is None else r.running - t0 for r in records)
                if scenario.kubelets
                else (),
                rejected=tuple(r.rejected for r in records) if scenario.kubelets else (),
            )
            cpu = {
                name: round(cpu_after.get(name, 0.0) - value, 3)
                for name, value in cpu_before.items()
            }
            for name, retired in parts.retired_cpu.items():
                cpu[name] = round(retired + cpu_after.get(name, 0.0), 3)
            cpu["runner"] = round(self_after - self_before, 3)
            cpu = kubelets.fold_cpu(cpu)
            if "outage" in extra:
                extra["outage"] |= outage_figures(records, t0, extra["outage"])
            metrics = measure_metrics(before, after, len(manifests))
            if scenario.kubelets:
                extra["kubelets"] = kubelets.figures(
                    cluster, kube, scenario.namespace, metrics["apiWrites"]["byResource"],
                    cpu.get("kubelets", 0.0), len(manifests), idle,
                )  # fmt: skip
            result: dict[str, Any] = {
                "arm": arm.key,
                "title": arm.title,
                "summary": summarize(columns, binds=arm.binds),
                "windowSeconds": round(t_end - t0, 3),
                "settleSeconds": round(settled, 2),
                "loadAverage": {
                    "before": round(load_before, 2),
                    "after": round(os.getloadavg()[0], 2),
                },
                "cpuSeconds": cpu,
                "pinning": pinning,
                "timings": timings,
                "quality": assess(nodes, final).to_dict() if arm.binds else None,
                "pods": columns.to_dict(),
                **metrics,
                **extra,
            }
            return result
        finally:
            if watcher is not None:
                watcher.stop()
            parts.stop()
            measured.set()
            kube.close()
            watch_client.close()
            cluster.stop(grace=2.0)  # measured already: no need for a graceful shutdown


@dataclass(frozen=True)
class OutagePlan:
    """Stop the webhook once a fraction `after` of the pods is sent; restart `length` s later."""

    after: float
    length: float


class Progress:
    """How many pods have been sent, for a thread waiting to start the outage."""

    def __init__(self) -> None:
        self.sent = 0
        self._cond = threading.Condition()

    def add(self) -> None:
        with self._cond:
            self.sent += 1
            self._cond.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.sent >= count, timeout)


def _outage(
    cluster: DevCluster,
    kube: Kube,
    parts: Components,
    clock: Callable[[], float],
    progress: Progress,
    plan: OutagePlan,
    total: int,
    *,
    t0: float,
    cpu_before: dict[str, float],
    into: dict[str, Any],
    say: Callable[[str], None],
    namespace: str,
    done: threading.Event,
) -> None:
    """Kill the webhook mid-run, bring a new one up after `plan.length` seconds.

    Returns only once `done` is set: processes are started with PR_SET_PDEATHSIG,
    which fires when the *thread* that started them exits, so the thread that
    starts the new webhook must outlive the measurement.
    """
    progress.wait_for(max(1, int(plan.after * total)), timeout=600)
    hook = parts.webhook
    assert hook is not None
    parts.retired_cpu["webhook"] = probes.tree_cpu_seconds(hook.process.pid) - cpu_before.get(
        "webhook", 0.0
    )
    into["outage"] = {"startedAt": round(clock() - t0, 3), "sentBefore": progress.sent}
    say(f"outage: stopping the webhook after {progress.sent} pods")
    probes.kill_tree(hook.process.pid)  # the worker too: it would keep serving
    hook.process.wait(10)
    time.sleep(plan.length)
    fresh = start_webhook(
        cluster,
        name="webhook-restarted",
        policy=cluster.workdir / "webhook-policy.yaml",
        extra_args=["--log-level", "warning"],
    )
    register_webhook(kube, fresh)
    wait_until_effective(kube, namespace, timeout=60)
    parts.webhook = fresh
    into["outage"]["endedAt"] = round(clock() - t0, 3)
    say("outage: webhook back and registered")
    done.wait()


def _self_cpu() -> float:
    """This process's own CPU seconds (threads included, child processes not)."""
    times = os.times()
    return times.user + times.system


def run_outage(
    scenario: Scenario,
    arm: Arm,
    workdir: Path,
    *,
    bin_dir: Path | None,
    say: Callable[[str], None],
    after: float,
    length: float,
) -> dict[str, Any]:
    return run_arm(
        scenario, arm, workdir, bin_dir=bin_dir, say=say, outage=OutagePlan(after, length)
    )
