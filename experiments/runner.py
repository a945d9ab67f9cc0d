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
from typing import Any, TypeVar

from experiments import kubelets, probes
from experiments.arms import Arm
from experiments.bench import Bench, Components
from experiments.components import (
    start_extender,
    write_scheduler_config,
)
from experiments.figures import columns_of, cpu_spent, measure_metrics, outage_figures
from experiments.load import BindWatcher, PodRecord, create_pods, finish
from experiments.profiling import PROFILED, WindowProfiler
from experiments.promtext import Samples
from experiments.quality import assess
from experiments.scenario import ENABLED_LABEL, Scenario
from experiments.stats import summarize
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

T = TypeVar("T")


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


def start_components(bench: Bench) -> None:
    """Start the arm's webhook, extender and kube-scheduler into `bench.parts`, each ready."""
    arm = bench.arm
    if arm.webhook is not None:
        _start_webhook(bench, arm.webhook)
    entry = _start_extender(bench) if arm.extender else None
    if arm.scheduler:
        _start_scheduler(bench, entry)


def _start_webhook(bench: Bench, mode: str) -> None:
    """The webhook (or its replicas), its cache full and its registration in effect."""
    cluster, arm, parts = bench.cluster, bench.arm, bench.parts
    policy = cluster.workdir / "webhook-policy.yaml"
    policy.write_text(bench.scenario.policy_text(mode, dict(arm.placement)))
    bench.say(f"starting the webhook ({mode} mode, {arm.replicas} replica(s))")
    quiet = ["--log-level", "warning"]
    if arm.replicas > 1:
        replicas = start_replicas(cluster, arm.replicas, policy=policy, extra_args=quiet)
        parts.replicas = replicas
        parts.webhook = replicas.leader()
        served: WebhookProcess | WebhookSet = replicas
    else:
        parts.webhook = served = start_webhook(cluster, policy=policy, extra_args=quiet)
    hook, nodes = parts.webhook, bench.scenario.node_count
    assert hook is not None
    _wait(lambda: hook.get("/readyz")[1].get("nodes") == nodes, 300, "webhook cache")
    register_webhook(bench.kube, served)
    wait_until_effective(bench.kube, bench.scenario.namespace, timeout=60)


def _start_extender(bench: Bench) -> ExtenderEntry:
    """The extender with the scenario's client limits; returns kube-scheduler's entry for it."""
    scenario, arm = bench.scenario, bench.arm
    qps, burst = scenario.client.qps, scenario.client.burst
    policy = bench.cluster.workdir / "extender-policy.yaml"
    policy.write_text(scenario.policy_text())
    bench.say(f"starting the extender (nodeCacheCapable={arm.node_cache_capable})")
    extender = bench.parts.extender = start_extender(
        bench.cluster,
        policy=policy,
        nodes=scenario.node_count,
        timeout=300,
        extra_args=["--log-level", "warning", "--kube-qps", str(qps), "--kube-burst", str(burst)],
    )
    return ExtenderEntry(extender.url, node_cache_capable=arm.node_cache_capable)


def _start_scheduler(bench: Bench, extender: ExtenderEntry | None) -> None:
    """kube-scheduler with the scenario's profile, proven by binding a probe pod."""
    scenario, cluster = bench.scenario, bench.cluster
    config = write_scheduler_config(
        cluster,
        cluster.workdir / "kube-scheduler.yaml",
        scenario.scheduler_config(),
        extender=extender,
        qps=scenario.client.qps,
        burst=scenario.client.burst,
    )
    bench.say("starting kube-scheduler")
    cluster.start_scheduler(config)
    bench.parts.scheduler = True
    _probe_scheduler(bench.kube)


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


@dataclass(frozen=True)
class Setup:
    """What the arm stood on before the window: its nodes, idle figures, pinning, timings."""

    nodes: list[dict[str, Any]]
    idle: dict[str, Any]
    pinning: dict[str, list[int]]
    timings: dict[str, float]


@dataclass(frozen=True)
class Window:
    """The counters at the window's start (t0): every run figure is a difference from them."""

    t0: float
    before: dict[str, Samples]
    cpu_before: dict[str, float]
    self_before: float
    load_before: float
    profiler: WindowProfiler | None


@dataclass(frozen=True)
class Load:
    """The pods' records, when the window ended (last bind) and how long settling took."""

    records: list[PodRecord]
    t_end: float
    settled: float


@dataclass(frozen=True)
class End:
    """The counters after settling and the pods as the API server holds them."""

    after: dict[str, Samples]
    cpu_after: dict[str, float]
    self_after: float
    final: list[dict[str, Any]]


@dataclass(frozen=True)
class Profiling:
    """Where to write each arm's window profile, and how long to profile."""

    out: Path
    seconds: float


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
    profiling = None if profile_dir is None else Profiling(profile_dir, profile_seconds)
    started = time.monotonic()
    say(f"[{scenario.name} / {arm.key}] starting the control plane")
    with DevCluster.start(workdir, bin_dir=bin_dir, profiling=profiling is not None) as cluster:
        timings = {"controlPlaneSeconds": round(time.monotonic() - started, 2)}
        bench = _open_bench(scenario, arm, cluster, say)
        try:
            setup = _set_up(bench, timings)
            manifests = _pod_manifests(bench)
            bench.watcher.start()
            window = _open_window(bench, outage, profiling)
            extra: dict[str, Any] = {}
            load = _run_load(bench, window, manifests, outage, extra)
            end = _collect(bench, window, load, extra)
            return _result(bench, setup, window, load, end, extra)
        finally:
            _close_bench(bench)


def _open_bench(
    scenario: Scenario, arm: Arm, cluster: DevCluster, say: Callable[[str], None]
) -> Bench:
    """The arm's API clients (the creators' pool sized to its threads) and its bind watch."""
    kube = Kube(cluster.kubeconfig, pool_size=max(8, scenario.arrival.clients + 2))
    watch_client = Kube(cluster.kubeconfig, pool_size=2)
    watcher = BindWatcher(watch_client, scenario.namespace, time.monotonic)
    return Bench(
        scenario, arm, cluster, kube, watch_client, watcher, Components(), say, threading.Event()
    )


def _close_bench(bench: Bench) -> None:
    """Stop the watch and every component, release the outage thread, stop the cluster."""
    bench.watcher.stop()
    bench.parts.stop()
    bench.measured.set()
    bench.kube.close()
    bench.watch_client.close()
    bench.cluster.stop(grace=2.0)  # measured already: no need for a graceful shutdown


def _set_up(bench: Bench, timings: dict[str, float]) -> Setup:
    """The namespace, the nodes and the components, each timed; idle figures and pinning."""
    scenario, cluster = bench.scenario, bench.cluster
    ensure_namespace(bench.kube, scenario.namespace, {ENABLED_LABEL: "true"})
    nodes = _timed(timings, "nodesSeconds", lambda: _start_nodes(bench))
    _timed(timings, "componentsSeconds", lambda: start_components(bench))
    pids = bench.parts.pids
    idle = kubelets.idle(cluster, pids(cluster), bench.say) if scenario.kubelets else {}
    return Setup(nodes, idle, probes.pin_arm(pids(cluster)), timings)


def _timed(timings: dict[str, float], key: str, step: Callable[[], T]) -> T:
    """Run `step`, recording its wall time in seconds under `key`."""
    mark = time.monotonic()
    out = step()
    timings[key] = round(time.monotonic() - mark, 2)
    return out


def _start_nodes(bench: Bench) -> list[dict[str, Any]]:
    """The scenario's nodes: hollow kubelets when it runs them, else Node objects alone."""
    nodes = bench.scenario.node_manifests()
    if bench.scenario.kubelets:
        bench.tell(f"starting {len(nodes)} hollow kubelets")
        kubelets.start(bench.cluster, nodes)
    else:
        bench.tell(f"creating {len(nodes)} nodes")
        create_nodes(bench.kube, nodes)
    return nodes


def _pod_manifests(bench: Bench) -> list[dict[str, Any]]:
    """The scenario's pods; under an outage, the webhook's fallback binder is their scheduler."""
    manifests = bench.scenario.pod_manifests()
    if bench.arm.outage:
        for manifest in manifests:
            manifest["spec"]["schedulerName"] = SCHEDULER_NAME
    return manifests


def _open_window(bench: Bench, outage: OutagePlan | None, profiling: Profiling | None) -> Window:
    """Scrape the metrics and CPU counters, start the profiler, then start the clock."""
    cluster, parts = bench.cluster, bench.parts
    before = _scrape(cluster, parts)
    if outage is not None:
        before.pop("webhook", None)  # the webhook answering at the end is a new process
    cpu_before = probes.cpu_seconds(parts.pids(cluster))
    self_before = _self_cpu()
    load_before = os.getloadavg()[0]
    profiler = None
    if profiling is not None:
        ours = {k: v for k, v in parts.pids(cluster).items() if k in PROFILED}
        prefix = f"{bench.scenario.name}-{bench.arm.key}"
        profiler = WindowProfiler(cluster, ours, profiling.out, prefix, profiling.seconds)
        profiler.start()
    return Window(bench.clock(), before, cpu_before, self_before, load_before, profiler)


def _run_load(
    bench: Bench,
    window: Window,
    manifests: list[dict[str, Any]],
    outage: OutagePlan | None,
    extra: dict[str, Any],
) -> Load:
    """Create the pods at the scenario's arrival (outage thread alongside); wait, settle."""
    scenario, arm = bench.scenario, bench.arm
    deadline = window.t0 + scenario.deadline_seconds
    bench.tell(f"creating {len(manifests)} pods ({scenario.arrival.mode})")
    progress = Progress()
    if outage is not None:
        job = OutageJob(bench, outage, progress, len(manifests), window, extra)
        threading.Thread(target=_outage, args=(job,), daemon=True).start()
    records = create_pods(
        bench.kube,
        manifests,
        scenario.arrival,
        TokenBucket(scenario.client.qps, scenario.client.burst),
        bench.watcher,
        bench.clock,
        deadline=deadline,
        on_sent=lambda _i: progress.add(),
        wait_bound=arm.binds,
    )
    _wait_placed(bench, records, deadline)
    if outage is not None:
        while "endedAt" not in extra.get("outage", {}) and bench.clock() < deadline:
            time.sleep(0.1)
    t_end = bench.clock()
    return Load(records, t_end, _settle_after(bench, records))


def _wait_placed(bench: Bench, records: list[PodRecord], deadline: float) -> None:
    """Until every pod is bound (and, with kubelets, ran or was refused), or the deadline."""
    if not bench.arm.binds:
        return
    names = [r.name for r in records]
    bench.watcher.wait(names, deadline)
    if bench.scenario.kubelets:
        bench.watcher.wait_started(names, deadline)


def _settle_after(bench: Bench, records: list[PodRecord]) -> float:
    """Fill the records in, wait for the asynchronous writes, stop the watch; the wait."""
    finish(records, bench.watcher)
    everything_bound = all(r.bound is not None for r in records) or not bench.arm.binds
    # asynchronous writes (events) belong to this run; past the deadline, the
    # components are still busy and the window ends now
    settled = _settle(bench.kube, bench.scenario.namespace) if everything_bound else 0.0
    finish(records, bench.watcher)
    bench.watcher.stop()
    return settled


def _collect(bench: Bench, window: Window, load: Load, extra: dict[str, Any]) -> End:
    """The counters after settling, the pods as stored, and the window's profile."""
    cluster, parts, records = bench.cluster, bench.parts, load.records
    cpu_after = probes.cpu_seconds(parts.pids(cluster))
    self_after = _self_cpu()
    after = _scrape(cluster, parts)
    bench.tell(f"{sum(r.bound is not None for r in records)}/{len(records)} bound in "
               f"{load.t_end - window.t0:.1f}s; collecting")  # fmt: skip
    final = bench.kube.get(f"/api/v1/namespaces/{bench.scenario.namespace}/pods")["items"]
    if window.profiler is not None:
        extra["profile"] = window.profiler.finish()
    return End(after, cpu_after, self_after, final)


def _result(
    bench: Bench, setup: Setup, window: Window, load: Load, end: End, extra: dict[str, Any]
) -> dict[str, Any]:
    """The arm's JSON-ready result: per-pod columns, run figures, and `extra`'s sections."""
    scenario, arm, records, t0 = bench.scenario, bench.arm, load.records, window.t0
    columns = columns_of(records, t0, kubelets=scenario.kubelets)
    spent = cpu_spent(window.cpu_before, end.cpu_after, bench.parts.retired_cpu)
    cpu = kubelets.fold_cpu(spent | {"runner": round(end.self_after - window.self_before, 3)})
    if "outage" in extra:
        extra["outage"] |= outage_figures(records, t0, extra["outage"])
    metrics = measure_metrics(window.before, end.after, len(records))
    if scenario.kubelets:
        extra["kubelets"] = kubelets.figures(
            bench.cluster, bench.kube, scenario.namespace, metrics["apiWrites"]["byResource"],
            cpu.get("kubelets", 0.0), len(records), setup.idle,
        )  # fmt: skip
    return {
        "arm": arm.key,
        "title": arm.title,
        "summary": summarize(columns, binds=arm.binds),
        "windowSeconds": round(load.t_end - t0, 3),
        "settleSeconds": round(load.settled, 2),
        "loadAverage": {
            "before": round(window.load_before, 2),
            "after": round(os.getloadavg()[0], 2),
        },
        "cpuSeconds": cpu,
        "pinning": setup.pinning,
        "timings": setup.timings,
        "quality": assess(setup.nodes, end.final).to_dict() if arm.binds else None,
        "pods": columns.to_dict(),
        **metrics,
        **extra,
    }


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


@dataclass(frozen=True)
class OutageJob:
    """What the outage thread works from; it writes its times into `into["outage"]`."""

    bench: Bench
    plan: OutagePlan
    progress: Progress
    total: int
    """Pods in the run: the outage starts once `plan.after` of them are sent."""
    window: Window
    into: dict[str, Any]


def _outage(job: OutageJob) -> None:
    """Kill the webhook mid-run, bring a new one up after `plan.length` seconds.

    Returns only once the bench is `measured`: processes are started with
    PR_SET_PDEATHSIG, which fires when the *thread* that started them exits, so
    the thread that starts the new webhook must outlive the measurement.
    """
    bench, progress, t0 = job.bench, job.progress, job.window.t0
    progress.wait_for(max(1, int(job.plan.after * job.total)), timeout=600)
    _book_retired_cpu(job)
    job.into["outage"] = {"startedAt": round(bench.clock() - t0, 3), "sentBefore": progress.sent}
    bench.say(f"outage: stopping the webhook after {progress.sent} pods")
    hook = bench.parts.webhook
    assert hook is not None
    probes.kill_tree(hook.process.pid)  # the worker too: it would keep serving
    hook.process.wait(10)
    time.sleep(job.plan.length)
    bench.parts.webhook = _restart_webhook(bench)
    job.into["outage"]["endedAt"] = round(bench.clock() - t0, 3)
    bench.say("outage: webhook back and registered")
    bench.measured.wait()


def _book_retired_cpu(job: OutageJob) -> None:
    """Book the webhook's CPU time in the window so far (the process is about to go)."""
    hook = job.bench.parts.webhook
    assert hook is not None
    spent = probes.tree_cpu_seconds(hook.process.pid)
    job.bench.parts.retired_cpu["webhook"] = spent - job.window.cpu_before.get("webhook", 0.0)


def _restart_webhook(bench: Bench) -> WebhookProcess:
    """A new webhook process on the same policy, registered and in effect."""
    fresh = start_webhook(
        bench.cluster,
        name="webhook-restarted",
        policy=bench.cluster.workdir / "webhook-policy.yaml",
        extra_args=["--log-level", "warning"],
    )
    register_webhook(bench.kube, fresh)
    wait_until_effective(bench.kube, bench.scenario.namespace, timeout=60)
    return fresh


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
