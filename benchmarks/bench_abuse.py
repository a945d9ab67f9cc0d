"""Abuse of the webhook port, measured: stalled connections, and 10,000 fuzzed bodies.

Usage: python benchmarks/bench_abuse.py [stall] [burst] [fuzz] [--pods 200] [--bursts 10]
       [--bodies 10000] [--rounds 2]

stall  A real control plane (etcd + kube-apiserver) and `placement-webhook
       serve` with mutual TLS, as the e2e tests run it. 16 connections stall
       on the webhook port (8 finish the TLS handshake with a valid client
       certificate and send nothing, as Go leaves spare connections idle;
       8 send half a review), plus 16 that present no certificate. Then a
       stream of real pods is created through the API server (20/s): how
       many were placed at admission, and the create round trip p50/p99.

burst  The same, with a second mutating webhook after ours (the sidecar
       injector), so the API server calls ours again for every pod: bursts
       of 40 concurrent pod creates. Counts the calls to ours the API server
       gave up on (its log), pods admitted undecided, and the probe
       endpoint's slowest answer during and after each burst.

fuzz   `serve --snapshot` (1k nodes / 30k pods) with mutual TLS; 4 client
       connections send `--bodies` fuzzed reviews (any JSON anywhere, wrong
       types, 2.9 MB label sets, deep nesting, broken JSON, huge numbers)
       while a fifth sends valid reviews at 20/s. Prints the answers by
       status (5xx must be 0), the valid reviews' p50/p99, and the worker's
       RSS before, after each of `--rounds` passes over the same bodies (a
       leak grows with every pass; an allocator's high-water mark does not),
       and once every reservation has ended and a collection has run.

Client and server share the machine's cores; the figures include that.
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import os
import random
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import reviews  # noqa: E402
from bench_admission import write_snapshot  # noqa: E402
from reviews import admission_review, free_port, review_body  # noqa: E402

import certs  # noqa: E402

# A reservation ends when its pod arrives, or at the caller's timeout (the review's
# timeoutSeconds, 10 s when absent) plus reservationGraceSeconds (3 s by default).
RESERVATION_END_S = 10 + 3


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * p))], 2) if ordered else 0.0


def plain_pod() -> dict[str, Any]:
    return reviews.plain_pod("fuzz-", app="f")


def stall_connections(port: int, context: ssl.SSLContext, anonymous: ssl.SSLContext) -> list[Any]:
    """8 idle after the handshake, 8 with half a review, 16 without a client certificate."""
    held: list[Any] = []
    for i in range(16):
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        tls = context.wrap_socket(raw, server_hostname="localhost")
        if i % 2:
            tls.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 5000\r\n\r\n{\"apiVersion\":")  # fmt: skip
        held.append(tls)
    for _ in range(16):
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            held.append(anonymous.wrap_socket(raw, server_hostname="localhost"))
        except ssl.SSLError:
            held.append(raw)
    return held


def run_stall(pods: int) -> dict[str, dict[str, Any]]:
    from webhook.admission.rules import ENABLED_LABEL
    from webhook.devcluster import DevCluster
    from webhook.devcluster.objects import (
        create_node,
        ensure_namespace,
        node_manifest,
    )
    from webhook.devcluster.webhook import register_webhook, start_webhook, wait_until_effective
    from webhook.kube import Kube

    with (
        tempfile.TemporaryDirectory(prefix="bench-abuse-") as tmp,
        DevCluster.start(Path(tmp) / "cluster") as cluster,
    ):
        kube = Kube(cluster.kubeconfig)
        hook = start_webhook(cluster)
        register_webhook(kube, hook)
        ensure_namespace(kube, "bench", {ENABLED_LABEL: "true"})
        for i in range(10):
            create_node(kube, node_manifest(f"n{i}", cpu="64", memory="256Gi", pods=1000))
        wait_until_effective(kube, "bench")
        context = ssl.create_default_context(cafile=str(hook.tls_dir / "ca.crt"))
        assert hook.client_cert is not None
        context.load_cert_chain(*hook.client_cert)
        anonymous = ssl.create_default_context(cafile=str(hook.tls_dir / "ca.crt"))
        port = int(hook.url.rsplit(":", 1)[1])
        phases = {
            "without stalled connections": stream(kube, pods, "calm"),
        }
        held = stall_connections(port, context, anonymous)
        phases["with 32 stalled connections"] = stream(kube, pods, "stalled")
        for sock in held:
            sock.close()
        decisions = decision_latencies(hook.log, '"pod":"bench/stalled-')
        phases["with 32 stalled connections"]["webhook_decision_p99_ms"] = pct(decisions, 0.99)
        hook.stop()
        kube.close()
    return phases


def stream(kube: Any, pods: int, prefix: str) -> dict[str, Any]:
    """Create `pods` pods at 20/s; how many were placed at admission, create latency."""
    from webhook.admission.patch import SELECTED_NODE
    from webhook.devcluster.objects import pod_manifest

    latencies: list[float] = []
    placed = 0
    started = time.perf_counter()
    for i in range(pods):
        time.sleep(max(0.0, started + i / 20 - time.perf_counter()))
        sent = time.perf_counter()
        pod = kube.create("/api/v1/namespaces/bench/pods",
                          pod_manifest(f"{prefix}-{i}", cpu="10m", memory="16Mi"))  # fmt: skip
        latencies.append((time.perf_counter() - sent) * 1000)
        notes = pod["metadata"].get("annotations") or {}
        placed += bool(pod["spec"].get("nodeName")) and SELECTED_NODE in notes
    return {
        "pods": pods,
        "placed": placed,
        "create_p50_ms": round(statistics.median(latencies), 2),
        "create_p99_ms": pct(latencies, 0.99),
        "create_max_ms": round(max(latencies), 2),
    }


def decision_latencies(log: Path, prefix: str) -> list[float]:
    """latencyMs of the webhook's decision log lines for pods named `prefix`*."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if '"decision"' in line and prefix in line:
            out.append(float(orjson.loads(line)["latencyMs"]))
    return out


def run_burst(bursts: int) -> dict[str, Any]:
    """Bursts of 40 pods with a second webhook after ours (so the API server calls ours again)."""
    from webhook.admission.rules import ENABLED_LABEL
    from webhook.devcluster import DevCluster
    from webhook.devcluster.injector import SidecarInjector
    from webhook.devcluster.objects import (
        create_node,
        ensure_namespace,
        node_manifest,
    )
    from webhook.devcluster.webhook import register_webhook, start_webhook, wait_until_effective
    from webhook.kube import Kube

    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-burst-") as tmp,
        DevCluster.start(Path(tmp) / "cluster") as cluster,
    ):
        kube = Kube(cluster.kubeconfig, pool_size=48)
        hook = start_webhook(cluster, extra_args=["--log-level", "warning"])
        register_webhook(kube, hook)
        ensure_namespace(kube, "burst", {ENABLED_LABEL: "true"})
        for i in range(10):
            create_node(kube, node_manifest(f"n{i}", cpu="64", memory="256Gi", pods=1000))
        injector = SidecarInjector(cluster, cpu="10m").start()
        injector.register(kube, "burst")
        wait_until_effective(kube, "burst")
        for run in range(bursts):
            rows.append(one_burst(kube, hook, run, cluster.log_path("kube-apiserver")))
        injector.stop()
        hook.stop()
        kube.close()
    return {
        "bursts": rows,
        "failed_calls": sum(r["failed_calls"] for r in rows),
        "undecided": sum(r["undecided"] for r in rows),
        "probe_max_ms": max(r["probe_max_ms"] for r in rows),
        "slowest_burst_s": max(r["seconds"] for r in rows),
    }


FAILED_OPEN = "Failed calling webhook, failing open pods.placement-webhook.io"


def one_burst(kube: Any, hook: Any, run: int, apiserver_log: Path) -> dict[str, Any]:
    """40 concurrent creates; failed calls, undecided pods, the probe's slowest answer."""
    from webhook.admission.patch import FILTER_RESULT
    from webhook.devcluster.objects import pod_manifest

    before = apiserver_log.read_text(errors="replace").count(FAILED_OPEN)
    created: list[dict[str, Any]] = []
    probes: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            started = time.perf_counter()
            try:
                ok = hook.get("/healthz", timeout=30)[0] == 200
            except OSError:
                ok = False
            probes.append((time.perf_counter() - started) * 1000 if ok else 30_000.0)
            time.sleep(0.05)

    def create(i: int) -> None:
        created.append(kube.create("/api/v1/namespaces/burst/pods",
                                   pod_manifest(f"b{run}-{i}", cpu="10m")))  # fmt: skip

    prober = threading.Thread(target=probe)
    prober.start()
    started = time.perf_counter()
    threads = [threading.Thread(target=create, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    time.sleep(3)  # the stalls of the old worker showed up after bursts too
    done.set()
    prober.join()
    failed = apiserver_log.read_text(errors="replace").count(FAILED_OPEN) - before
    undecided = sum(FILTER_RESULT not in (p["metadata"].get("annotations") or {}) for p in created)
    for pod in created:
        kube.delete(f"/api/v1/namespaces/burst/pods/{pod['metadata']['name']}")
    return {"seconds": round(seconds, 2), "failed_calls": failed, "undecided": undecided,
            "probe_max_ms": round(max(probes), 1)}  # fmt: skip


# ---------------------------------------------------------------- fuzz


def mutations(rng: random.Random, count: int) -> list[tuple[str, bytes, str]]:
    """(kind, body, content type) for `count` bad or odd reviews, deterministic."""
    values: list[Any] = [
        None, True, -1, 2**63 - 1, 1e308, "", "x" * 1000, [], {}, [None],
        {"a": None}, [[[]]], "1e+101", "-5", "\u0000\ud7ff", {"$ref": "#"},
    ]  # fmt: skip
    out: list[tuple[str, bytes, str]] = []
    big_labels = {f"k{i:06d}": "v" * 60 for i in range(44_000)}  # about 2.9 MB
    for n in range(count):
        kind = rng.choice(["replace", "replace", "replace", "labels", "deep", "broken",
                           "number", "type", "generate-name"])  # fmt: skip
        body = admission_review(plain_pod(), dry_run=rng.random() < 0.5)
        content = "application/json"
        if kind == "replace":  # any JSON at any path of the review
            node: Any = body
            path = []
            while isinstance(node, dict | list) and node and rng.random() < 0.8:
                key = rng.choice(list(node) if isinstance(node, dict) else range(len(node)))
                path.append(key)
                node = node[key]
            target = body
            for key in path[:-1]:
                target = target[key]
            if path:
                target[path[-1]] = copy.deepcopy(rng.choice(values))
            data = orjson.dumps(body)
        elif kind == "labels" and n % 50 == 0:  # a few, they are 2.9 MB each
            body["request"]["object"]["metadata"]["labels"] = big_labels
            data = orjson.dumps(body)
        elif kind == "deep":
            data = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
            data += b"[" * rng.randint(60, 5000) + b"]" * 10 + b"}"
        elif kind == "broken":
            whole = orjson.dumps(body)
            data = whole[: rng.randint(0, len(whole) - 1)]
        elif kind == "number":
            data = orjson.dumps(body).replace(b'"10m"', b"1" + b"0" * 400)
        elif kind == "type":
            content = rng.choice(["text/plain", "application/json; charset=utf-16", ""])
            data = orjson.dumps(body)
        else:  # the field that once broke the decision log line
            body["request"]["object"]["metadata"]["generateName"] = rng.choice(values)
            data = orjson.dumps(body)
        out.append((kind, data, content))
    return out


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def run_fuzz(bodies: int, nodes: int, rounds: int = 2) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as tmp:
        folder = Path(tmp)
        write_snapshot(folder / "cluster.json", nodes, 30)
        certs.ensure_serving_pair(folder / "tls", ["localhost"], ["127.0.0.1"])
        ca = certs.load_authority(folder / "tls")
        pair = certs.issue_client_certificate(ca, "bench-client")
        (folder / "client.crt").write_bytes(pair.cert_pem)
        (folder / "client.key").write_bytes(pair.key_pem)
        port, probes = free_port(), free_port()
        log = open(folder / "serve.log", "wb")  # noqa: SIM115 - closed after the server stops
        server = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve",
             "--snapshot", str(folder / "cluster.json"), "--bind", f"127.0.0.1:{port}",
             "--tls-cert", str(folder / "tls/tls.crt"), "--tls-key", str(folder / "tls/tls.key"),
             "--client-ca", str(folder / "tls/ca.crt"),
             "--health-bind", f"127.0.0.1:{probes}", "--metrics-bind", "",
             "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        context = ssl.create_default_context(cafile=str(folder / "tls/ca.crt"))
        context.load_cert_chain(folder / "client.crt", folder / "client.key")
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", probes, timeout=2)
                    conn.request("GET", "/readyz")
                    if conn.getresponse().status == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.3)
            workers = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True,
                                     text=True).stdout.split()  # fmt: skip
            worker = int(workers[0])
            corpus = mutations(random.Random(12), bodies)
            time.sleep(61)  # the first garbage-collector freeze after start-up
            before = rss_mib(worker)
            statuses: Counter[int] = Counter()
            kinds_5xx: Counter[str] = Counter()
            lock = threading.Lock()
            valid_ms: list[float] = []
            done = threading.Event()

            def send(items: list[tuple[str, bytes, str]]) -> None:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
                for kind, data, content in items:
                    try:
                        conn.request("POST", "/mutate", data, {"Content-Type": content})
                        answer = conn.getresponse()
                        answer.read()
                        status = answer.status
                        if answer.getheader("Connection", "").lower() == "close":
                            conn.close()
                    except (OSError, http.client.HTTPException):
                        status = 0  # connection closed by the server (refused framing)
                        conn.close()
                        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context,
                                                           timeout=10)  # fmt: skip
                    with lock:
                        statuses[status] += 1
                        if status >= 500:
                            kinds_5xx[kind] += 1

            def valid() -> None:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
                while not done.is_set():
                    data = review_body(plain_pod(), dry_run=True)
                    started = time.perf_counter()
                    conn.request("POST", "/mutate", data, {"Content-Type": "application/json"})
                    answer = conn.getresponse()
                    answer.read()
                    valid_ms.append((time.perf_counter() - started) * 1000)
                    time.sleep(0.05)

            checker = threading.Thread(target=valid)
            checker.start()
            after: list[float] = []
            started = time.perf_counter()
            for _ in range(rounds):
                senders = [threading.Thread(target=send, args=(corpus[k::4],)) for k in range(4)]
                for t in senders:
                    t.start()
                for t in senders:
                    t.join()
                after.append(rss_mib(worker))
            elapsed = time.perf_counter() - started
            done.set()
            checker.join()
            # every reservation ended, then the next collect-and-freeze pass (every 60 s)
            time.sleep(RESERVATION_END_S + 61)
            settled = rss_mib(worker)
            tracebacks = (folder / "serve.log").read_text(errors="replace").count("Traceback")
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(15)
            log.close()
    return {
        "bodies": bodies * rounds,
        "rounds": rounds,
        "seconds": round(elapsed, 1),
        "statuses": dict(sorted(statuses.items())),
        "5xx": sum(n for s, n in statuses.items() if s >= 500),
        "5xx_kinds": dict(kinds_5xx),
        "tracebacks_logged": tracebacks,
        "valid_reviews": len(valid_ms),
        "valid_p50_ms": round(statistics.median(valid_ms), 2),
        "valid_p99_ms": pct(valid_ms, 0.99),
        "rss_before_mib": before,
        "rss_after_each_round_mib": after,
        "rss_settled_mib": settled,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "parts", nargs="*", default=["stall", "burst", "fuzz"], choices=["stall", "burst", "fuzz"]
    )
    parser.add_argument("--bursts", type=int, default=10)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--bodies", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the fuzzed bodies")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--out", default=str(ROOT / "build" / "bench" / "abuse.json"))
    args = parser.parse_args()
    results: dict[str, Any] = {}
    if "stall" in args.parts:
        results["stall"] = phases = run_stall(args.pods)
        for name, phase in phases.items():
            print(f"stall, {name}: {phase['placed']}/{phase['pods']} real pods placed at "
                  f"admission; create p50 {phase['create_p50_ms']} ms, p99 "
                  f"{phase['create_p99_ms']} ms, max {phase['create_max_ms']} ms"
                  + (f"; webhook decision p99 {phase['webhook_decision_p99_ms']} ms"
                     if "webhook_decision_p99_ms" in phase else ""))  # fmt: skip
    if "burst" in args.parts:
        results["burst"] = burst = run_burst(args.bursts)
        print(f"burst: {args.bursts} bursts of 40 pods with a second webhook after ours: "
              f"{burst['failed_calls']} calls to ours failed open, {burst['undecided']} pods "
              f"undecided, slowest burst {burst['slowest_burst_s']} s, probe max "
              f"{burst['probe_max_ms']} ms")  # fmt: skip
    if "fuzz" in args.parts:
        results["fuzz"] = fuzz = run_fuzz(args.bodies, args.nodes, args.rounds)
        print(f"fuzz: {fuzz['bodies']} bodies in {fuzz['seconds']} s; answers by status "
              f"{fuzz['statuses']} (0: closed by the server); 5xx: {fuzz['5xx']}; tracebacks "
              f"logged: {fuzz['tracebacks_logged']}")  # fmt: skip
        print(f"      valid reviews meanwhile: {fuzz['valid_reviews']}, p50 "
              f"{fuzz['valid_p50_ms']} ms, p99 {fuzz['valid_p99_ms']} ms; worker RSS "
              f"{fuzz['rss_before_mib']} MiB before, {fuzz['rss_after_each_round_mib']} after "
              f"each pass, {fuzz['rss_settled_mib']} once every reservation has ended and "
              "a collection has run")  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
