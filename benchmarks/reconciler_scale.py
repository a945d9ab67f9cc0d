"""bench_reconciler's scale part: the real `placement-webhook reconcile` at 5k nodes / 150k pods.

A local control plane (etcd + kube-apiserver only: every pod is created
bound, `spec.nodeName` set, so no scheduler is needed) is filled as fast as
the API server takes it: Nodes (capacity, zone and hostname labels, status
written through the subresource) and bound pods, from many threads, each
with its own keep-alive HTTPS connection and raw JSON bodies. Workloads of
50 replicas, pod i of the run on node i mod N (so one workload's replicas
land on distinct nodes, cycling the three zones):

- a third carry a DoNotSchedule zone spread constraint (maxSkew 1);
- a sixth a required hostname anti-affinity against their own replicas;
- the rest are plain; 1% of the nodes get 1100m pods instead of 1 cpu, so
  they are overcommitted (30 x 1.1 > 32 cpu): conflicts to find.

Then a `placement-webhook reconcile` process (one per `--reconciler-python`,
one after another on the same cluster: a before/after with two source
trees) takes the Lease and lists everything. Printed: time to /readyz 200
and to the first detection pass; RSS and PSS (/proc/PID/smaps_rollup) after
sync and after some seconds idle (the process has no way to trigger a
collection from outside), VmHWM; then the per-change cost in the live
process: a pod that overcommits a full node, one that crowds a spread
workload's zone, one that lands beside an anti-affine replica, each timed
from its create to the conflict naming it on /debug/conflicts, with the
process's own duration of that detection pass. The reconciler runs with a
short `--conflict-interval` so that the interval does not hide the pass.
Last, 30 s of steady pod churn (20 creates and deletes a second), so that
the periodic safety rebuild comes round: how many passes took over 50 ms,
250 ms and 1 s then, from the process's own pass-duration histogram.

Every loop is bounded in count and time; traffic stays on loopback.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from webhook.devcluster import DevCluster
from webhook.devcluster.cluster import _die_with_parent, free_port

REPLICAS = 50
ZONES = 3
NAMESPACES = 10
ZONE_LABEL = "topology.kubernetes.io/zone"
HOST_LABEL = "kubernetes.io/hostname"
MEMORY_TARGET_MIB = 512.0
CHANGE_TARGET_MS = 50.0


# ------------------------------------------------------------------ a lean raw-JSON client


class Connections:
    """One keep-alive HTTPS connection per thread to the API server, as the admin user."""

    def __init__(self, cluster: DevCluster):
        pki = cluster.pki
        self.host, self.port = "127.0.0.1", cluster.apiserver_port
        self.context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(
                self.host, self.port, context=self.context, timeout=30
            )
            self._local.conn = conn
        return conn

    def send(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if method == "PATCH":
            headers["Content-Type"] = "application/merge-patch+json"
        for attempt in range(3):
            conn = self._conn()
            try:
                conn.request(method, path, body=body, headers=headers)
                answer = conn.getresponse()
                return answer.status, answer.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
                time.sleep(0.2)
        raise AssertionError("unreachable")


def node_body(i: int, name: str) -> tuple[bytes, bytes]:
    labels = {HOST_LABEL: name, ZONE_LABEL: f"zone-{i % ZONES}", "kubernetes.io/os": "linux"}
    meta = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    status = {
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "Hostname", "address": name}],
        }
    }
    return orjson.dumps(meta), orjson.dumps(status)


def workload_kind(w: int) -> str:
    return "spread" if w % 6 in (0, 3) else "anti" if w % 6 == 1 else "plain"


def pod_body(w: int, replica: int, node: str, cpu: str, *, name: str | None = None) -> bytes:
    """A pod of workload `w` bound to `node` (`name` for the probes' extra pods)."""
    app = f"w{w}"
    kind = workload_kind(w)
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [
            {
                "name": "app",
                "image": f"registry.local/{kind}:1.{w % 7}",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {
                    "requests": {"cpu": cpu, "memory": "1Gi"},
                    "limits": {"cpu": cpu, "memory": "1Gi"},
                },
            }
        ],
        "terminationGracePeriodSeconds": 1,
    }
    selector = {"matchLabels": {"app": app}}
    if kind == "spread":
        spec["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": selector}
        ]  # fmt: skip
    elif kind == "anti":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": HOST_LABEL}]}}  # fmt: skip
    meta = {
        "name": name or f"{app}-{replica:03d}",
        "labels": {"app": app, "kind": kind, "pod-template-hash": f"h{w:05d}"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{app}-h{w:05d}",
                "uid": f"00000000-0000-0000-0000-{w:012d}",
                "controller": True,
            }
        ],
    }
    return orjson.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def namespace_of(w: int) -> str:
    return f"scale-{w % NAMESPACES}"


def node_name(i: int) -> str:
    return f"scale-{i:05d}"


def overcommitted(i: int) -> bool:
    return i % 100 == 50


def run_parallel(
    tasks: Iterator[Callable[[], None]], threads: int, deadline: float
) -> tuple[int, int, bool]:
    """Run the tasks on `threads` workers until done or `deadline`: (done, failed, timed out)."""
    work: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=threads * 4)
    counts = {"done": 0, "failed": 0}
    lock = threading.Lock()
    first_error: list[str] = []

    def worker() -> None:
        while True:
            task = work.get()
            if task is None:
                return
            try:
                task()
                ok = True
            except Exception as err:  # counted and the first one printed
                ok = False
                if not first_error:
                    first_error.append(repr(err))
            with lock:
                counts["done" if ok else "failed"] += 1

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for t in pool:
        t.start()
    timed_out = False
    for task in tasks:
        if time.monotonic() > deadline:
            timed_out = True
            break
        work.put(task)
    for _ in pool:
        work.put(None)
    for t in pool:
        t.join(max(1.0, deadline - time.monotonic() + 60))
    if first_error:
        print(f"  first failure: {first_error[0][:300]}")
    return counts["done"], counts["failed"], timed_out


def populate(
    cluster: DevCluster, nodes: int, per_node: int, threads: int, budget: float
) -> dict[str, Any]:
    """Namespaces, nodes and bound pods; returns counts, seconds and rates."""
    conns = Connections(cluster)

    def check(status: int, body: bytes, what: str) -> None:
        if status >= 300 and status != 409:
            raise RuntimeError(f"{what}: {status} {body[:200]!r}")

    for ns in ["placement-webhook", *(f"scale-{k}" for k in range(NAMESPACES))]:
        body = orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        check(*conns.send("POST", "/api/v1/namespaces", body), ns)

    def node_task(i: int) -> Callable[[], None]:
        def task() -> None:
            name = node_name(i)
            create, status = node_body(i, name)
            check(*conns.send("POST", "/api/v1/nodes", create), name)
            check(*conns.send("PATCH", f"/api/v1/nodes/{name}/status", status), name)

        return task

    out: dict[str, Any] = {"nodes_wanted": nodes, "pods_wanted": nodes * per_node}
    start = time.monotonic()
    done, failed, late = run_parallel((node_task(i) for i in range(nodes)), threads, start + budget)
    out["nodes"], out["node_failures"] = done, failed
    out["node_seconds"] = time.monotonic() - start
    print(
        f"  {done} nodes in {out['node_seconds']:.1f}s ({done / out['node_seconds']:.0f}/s, "
        f"2 requests each){'; TIMED OUT' if late else ''}"
    )

    total = nodes * per_node

    def pod_task(p: int) -> Callable[[], None]:
        def task() -> None:
            w, replica = divmod(p, REPLICAS)
            i = p % nodes
            body = pod_body(w, replica, node_name(i), "1100m" if overcommitted(i) else "1")
            status, answer = conns.send("POST", f"/api/v1/namespaces/{namespace_of(w)}/pods", body)
            check(status, answer, f"pod {p}")

        return task

    start = time.monotonic()
    progress = threading.Event()

    def report() -> None:
        last = 0
        while not progress.wait(30.0):
            with contextlib.suppress(Exception):
                _, body = conns.send("GET", "/api/v1/pods?limit=1")
                left = orjson.loads(body)["metadata"].get("remainingItemCount", 0)
                now = left + 1
                print(f"  ... {now} pods after {time.monotonic() - start:.0f}s "
                      f"({(now - last) / 30:.0f}/s over the last 30 s)", flush=True)  # fmt: skip
                last = now

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    done, failed, late = run_parallel((pod_task(p) for p in range(total)), threads, start + budget)
    progress.set()
    out["pods"], out["pod_failures"], out["pods_timed_out"] = done, failed, late
    out["pod_seconds"] = time.monotonic() - start
    out["pods_per_second"] = done / out["pod_seconds"]
    out["threads"] = threads
    print(
        f"  {done} pods in {out['pod_seconds']:.1f}s ({out['pods_per_second']:.0f} creates/s, "
        f"{threads} threads, {failed} failed){'; TIMED OUT at the budget' if late else ''}"
    )
    return out


# ------------------------------------------------------------------ the reconcile process


def proc_memory(pid: int) -> dict[str, float]:
    """RSS, VmHWM (peak RSS) and PSS of a process, in MiB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Pss:", "Pss_Anon:", "Rss:")):
            out["Rollup" + line.split(":")[0]] = int(line.split()[1]) / 1024
    return {"rss": out["VmRSS"], "hwm": out["VmHWM"], "pss": out.get("RollupPss", 0.0),
            "pss_anon": out.get("RollupPss_Anon", 0.0)}  # fmt: skip


def get_json(port: int, path: str, timeout: float = 30.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


class Reconciler:
    """One `placement-webhook reconcile` process with the Lease, metrics on plain HTTP."""

    def __init__(self, cluster: DevCluster, python: str, log: Path, interval: float):
        self.port, self.metrics = free_port(), free_port()
        args = [
            python, "-m", "webhook.cli", "reconcile",
            "--kubeconfig", str(cluster.kubeconfig), "--bind", f"127.0.0.1:{self.port}",
            "--metrics-bind", f"127.0.0.1:{self.metrics}", "--metrics-auth", "none",
            "--identity", "bench-scale", "--log-level", "warning",
            "--conflict-interval", str(interval), "--lease-duration", "5",
            "--renew-deadline", "4", "--retry-period", "1",
        ]  # fmt: skip
        out = open(log, "ab")  # noqa: SIM115 - the child writes to it until it ends
        self.started = time.monotonic()
        # cwd "/": the module comes from the interpreter's own install (a worktree's venv)
        self.process = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent, cwd="/"
        )

    def wait_synced(self, timeout: float) -> tuple[float, float, dict[str, Any]]:
        """(seconds to /readyz 200 as leader, seconds until detection caught up, its
        /debug/conflicts). A pass runs only when the store changed, so caught up means: no
        new pass for max(5 s, 3 x the last pass's duration) after ready (a running pass is
        not visible: at 5k/150k, 1 s was too short; the caught-up time is approximate)."""
        deadline = self.started + timeout
        ready_at = None
        passes, changed_at = -1, 0.0
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"reconciler exited with {self.process.returncode}")
            with contextlib.suppress(OSError, ValueError):
                if ready_at is None:
                    status, info = get_json(self.port, "/readyz", 5)
                    if status == 200 and info.get("leader"):
                        ready_at = time.monotonic()
                else:
                    _, conflicts = get_json(self.metrics, "/debug/conflicts")
                    now = time.monotonic()
                    if conflicts.get("passes", 0) != passes:
                        passes, changed_at = conflicts.get("passes", 0), now
                    quiet = max(5.0, 3 * float(conflicts.get("seconds", 0.0)))
                    if passes > 0 and now - changed_at >= quiet:
                        return ready_at - self.started, changed_at - self.started, conflicts
            time.sleep(0.1)
        raise SystemExit(f"reconciler not synced after {timeout:.0f}s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def probe_pods(nodes: int, per_node: int, count: int) -> list[tuple[str, str, str, bytes]]:
    """(kind, namespace, name, body) of pods that each make one new conflict."""
    workloads = nodes * per_node // REPLICAS
    out: list[tuple[str, str, str, bytes]] = []
    spread = [w for w in range(workloads) if workload_kind(w) == "spread"]
    anti = [w for w in range(workloads) if workload_kind(w) == "anti"]
    full = [i for i in range(nodes) if not overcommitted(i)]
    for k in range(count):
        # overcommit: 30 cpu used of 32, plus 4
        i = full[(k * 37) % len(full)]
        body = pod_body(workloads + k, 0, node_name(i), "4", name=f"probe-over-{k}")
        out.append(("Overcommit", namespace_of(workloads + k), f"probe-over-{k}", body))
        # spread: one more replica in the zone of replica 0 (17 of 50 there): skew 2
        w = spread[(k * 7) % len(spread)]
        i = (w * REPLICAS) % nodes
        body = pod_body(w, 900 + k, node_name(i), "10m", name=f"probe-spread-{k}")
        out.append(("TopologySpread", namespace_of(w), f"probe-spread-{k}", body))
        # anti-affinity: beside replica 0 of an anti-affine workload
        w = anti[(k * 5) % len(anti)]
        i = (w * REPLICAS) % nodes
        body = pod_body(w, 900 + k, node_name(i), "10m", name=f"probe-anti-{k}")
        out.append(("PodAntiAffinity", namespace_of(w), f"probe-anti-{k}", body))
    return out


def names_in(conflicts: dict[str, Any]) -> set[tuple[str, str]]:
    return {(c["kind"], p["name"]) for c in conflicts.get("conflicts", []) for p in c["culprits"]}


def changes(
    cluster: DevCluster, rec: Reconciler, probes: list[tuple[str, str, str, bytes]], wait: float
) -> dict[str, Any]:
    """Create each probe pod, time until its conflict shows, delete it again."""
    conns = Connections(cluster)
    results: dict[str, list[tuple[float, float]]] = {}
    missed: list[str] = []
    for kind, ns, name, body in probes:
        sent = time.monotonic()
        status, _ = conns.send("POST", f"/api/v1/namespaces/{ns}/pods", body)
        if status >= 300:
            missed.append(f"{name}: create {status}")
            continue
        seen = None
        deadline = sent + wait
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            _, last = get_json(rec.metrics, "/debug/conflicts")
            if (kind, name) in names_in(last):
                seen = time.monotonic()
                break
            time.sleep(0.01)
        if seen is None:
            missed.append(f"{name}: no {kind} conflict in {wait:.0f}s")
        else:
            results.setdefault(kind, []).append((seen - sent, float(last.get("seconds", 0.0))))
        conns.send("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
        deadline = time.monotonic() + wait  # the conflict leaves with its pod
        while time.monotonic() < deadline:
            _, last = get_json(rec.metrics, "/debug/conflicts")
            if (kind, name) not in names_in(last):
                break
            time.sleep(0.01)
        time.sleep(0.1)
    out: dict[str, Any] = {"missed": missed}
    for kind, pairs in results.items():
        seen_ms = sorted(s * 1000 for s, _ in pairs)
        pass_ms = sorted(p * 1000 for _, p in pairs)
        out[kind] = {
            "n": len(pairs),
            "create_to_seen_ms_median": statistics.median(seen_ms),
            "create_to_seen_ms_max": seen_ms[-1],
            "pass_ms_median": statistics.median(pass_ms),
            "pass_ms_max": pass_ms[-1],
        }
    return out


PASS_BUCKET = "placement_webhook_conflict_pass_seconds_bucket"


def pass_buckets(rec: Reconciler) -> dict[float, float]:
    """The reconciler's pass-duration histogram: upper bound (s) -> passes at most that long."""
    with urllib.request.urlopen(f"http://127.0.0.1:{rec.metrics}/metrics", timeout=30) as r:
        lines = [ln for ln in r.read().decode().splitlines() if ln.startswith(PASS_BUCKET + "{")]
    return {float(ln.split('le="')[1].split('"')[0]): float(ln.rsplit(" ")[-1]) for ln in lines}


def churn(cluster: DevCluster, rec: Reconciler, nodes: int, seconds: float, rate: float) -> dict:
    """Plain pods created (each deleted 20 creates later) at `rate`/s for `seconds`: passes
    enough for the periodic safety pass to come round, and how long they took, from the
    process's own histogram (a pass held up holds up every change behind it)."""
    conns, w = Connections(cluster), next(w for w in range(6, 100) if workload_kind(w) == "plain")
    path = f"/api/v1/namespaces/{namespace_of(w)}/pods"
    before, start, made = pass_buckets(rec), time.monotonic(), []
    for i in range(int(seconds * rate)):
        time.sleep(max(0.0, start + i / rate - time.monotonic()))
        name, node = f"churn-{i:05d}", node_name((i * 7919) % nodes)
        if conns.send("POST", path, pod_body(w, 0, node, "1m", name=name))[0] < 300:
            made.append(name)
        while len(made) > (20 if i + 1 < seconds * rate else 0):
            conns.send("DELETE", f"{path}/{made.pop(0)}?gracePeriodSeconds=0")
    time.sleep(2.0)
    during = {b: n - before.get(b, 0.0) for b, n in pass_buckets(rec).items()}
    total = during.get(float("inf"), 0.0)
    over = {f"over_{b:g}s": total - during[b] for b in (0.05, 0.25, 1.0) if b in during}
    longest = min((b for b, n in during.items() if n >= total), default=float("inf"))
    return {"seconds": seconds, "rate": rate, "passes": total, **over, "longest_at_most_s": longest}


def measure(
    cluster: DevCluster,
    python: str,
    log: Path,
    *,
    nodes: int,
    per_node: int,
    probes: int,
    interval: float,
    idle: float,
) -> dict[str, Any]:
    rec = Reconciler(cluster, python, log, interval)
    try:
        ready, first_pass, conflicts = rec.wait_synced(timeout=900)
        out: dict[str, Any] = {"python": python, "ready_seconds": ready}
        out["first_pass_seconds"] = first_pass
        out["last_pass_ms"] = float(conflicts.get("seconds", 0)) * 1000
        kinds: dict[str, int] = {}
        for c in conflicts.get("conflicts", []):
            kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
        out["conflicts_at_sync"] = kinds
        out["memory_after_sync"] = proc_memory(rec.process.pid)
        samples = []
        for _ in range(max(1, round(idle))):  # one reading a second: when memory moves
            time.sleep(min(1.0, idle))
            samples.append(round(proc_memory(rec.process.pid)["rss"], 1))
        out["rss_while_idle"] = samples
        out["passes_during_idle"] = (
            get_json(rec.metrics, "/debug/conflicts")[1].get("passes", 0) - conflicts["passes"]
        )
        out["memory_after_idle"] = proc_memory(rec.process.pid)
        out["idle_seconds"] = idle
        out["changes"] = changes(cluster, rec, probe_pods(nodes, per_node, probes), wait=30)
        out["memory_after_changes"] = proc_memory(rec.process.pid)
        out["churn"] = churn(cluster, rec, nodes, seconds=CHURN_SECONDS, rate=CHURN_RATE)
        out["memory_after_churn"] = proc_memory(rec.process.pid)
        return out
    finally:
        rec.stop()


#: The churn phase: at the short pass interval, the safety pass (every 150th) comes round.
CHURN_SECONDS, CHURN_RATE = 30.0, 20.0


def print_figures(result: dict[str, Any]) -> None:
    sync, idle = result["memory_after_sync"], result["memory_after_idle"]
    print(f"  reconcile ({result['python']}):")
    print(
        f"    ready (listed, leader) {result['ready_seconds']:.1f}s after start; detection "
        f"caught up at {result['first_pass_seconds']:.1f}s (that pass {result['last_pass_ms']:.0f}"
        f" ms); conflicts at sync: {result['conflicts_at_sync']}"
    )
    for label, m in (("after sync", sync), (f"after {result['idle_seconds']:.0f}s idle", idle)):
        print(
            f"    memory {label:<16} RSS {m['rss']:7.1f} MiB  PSS {m['pss']:7.1f} MiB  "
            f"(target {MEMORY_TARGET_MIB:.0f} MiB: "
            f"{'under' if m['pss'] < MEMORY_TARGET_MIB else 'OVER'})"
        )
    peak = result["memory_after_changes"]["hwm"]
    print(f"    peak RSS (VmHWM) {peak:.1f} MiB")
    for kind, stats in result["changes"].items():
        if kind == "missed":
            continue
        print(
            f"    change -> {kind:<16} n={stats['n']:<3} detection pass median "
            f"{stats['pass_ms_median']:6.1f} ms max {stats['pass_ms_max']:6.1f} ms "
            f"(target {CHANGE_TARGET_MS:.0f} ms); create -> seen on /debug/conflicts median "
            f"{stats['create_to_seen_ms_median']:6.1f} ms max {stats['create_to_seen_ms_max']:6.1f}"
        )
    if result["changes"]["missed"]:
        print(f"    missed: {result['changes']['missed'][:5]}")
    c = result["churn"]
    print(
        f"    churn {c['rate']:.0f} pods/s for {c['seconds']:.0f}s: {c['passes']:.0f} passes, "
        f"{c['over_0.05s']:.0f} over 50 ms, {c['over_0.25s']:.0f} over 250 ms, "
        f"{c['over_1s']:.0f} over 1 s; the longest at most {c['longest_at_most_s']:g} s; "
        f"RSS after {result['memory_after_churn']['rss']:.1f} MiB"
    )


def scale(
    nodes: int,
    per_node: int,
    *,
    pythons: list[str],
    threads: int,
    budget: float,
    probes: int,
    interval: float,
    idle: float,
    workdir: Path,
) -> dict[str, Any]:
    with DevCluster.start(workdir / "dc", timeout=120) as cluster:
        print(f"populating {nodes} nodes x {per_node} pods (budget {budget:.0f}s):", flush=True)
        results: dict[str, Any] = {"populate": populate(cluster, nodes, per_node, threads, budget)}
        made = results["populate"]
        real_nodes, real_pods = made["nodes"], made["pods"]
        results["runs"] = []
        for python in pythons:
            print(f"reconcile at {real_nodes} nodes / {real_pods} pods:", flush=True)
            run = measure(
                cluster, python, workdir / f"reconcile-{len(results['runs'])}.log",
                nodes=nodes, per_node=per_node, probes=probes, interval=interval, idle=idle,
            )  # fmt: skip
            print_figures(run)
            results["runs"].append(run)
        etcd = sum(f.stat().st_size for f in (workdir / "dc" / "etcd").rglob("*") if f.is_file())
        results["etcd_mib"] = etcd / 2**20
        print(f"  etcd data {results['etcd_mib']:.0f} MiB", flush=True)
    return results


if __name__ == "__main__":
    sys.exit("run benchmarks/bench_reconciler.py --scale N")
