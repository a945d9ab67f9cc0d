"""Admission round trip over TLS: a real `placement-webhook serve` at 1k nodes.

Usage: python benchmarks/bench_admission.py [--nodes 1000] [--rates 50,100,200] [--seconds 10]

Starts `placement-webhook serve --snapshot` (gunicorn, TLS, with mutual TLS
as deployed: the client presents a certificate, so the namespace selector
is trusted as the API server's) on a synthetic 1k-node / 30k-pod cluster,
then sends AdmissionReviews for plain pods at a fixed request rate from
client threads with kept-alive HTTPS connections, as the API server does.
Latency is measured from the request's scheduled send time (so a stalled server is not hidden by the
client waiting for it) to the decoded answer. Each request is a real
placement with a reservation. Target: p99 5 ms at 1k nodes.

Client and server share this machine's cores; the figures include that.
"""

from __future__ import annotations

import argparse
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
import uuid
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_policy import make_node, make_pod  # noqa: E402

import certs  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_snapshot(path: Path, nodes: int, pods_per_node: int) -> None:
    rng = random.Random(3)
    items: list[dict[str, Any]] = [make_node(i, rng) for i in range(nodes)]
    names = [n["metadata"]["name"] for n in items]
    for i in range(nodes * pods_per_node):
        items.append(make_pod(f"p-{i}", f"app-{i // 100}", rng.choice(names), rng))
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def review_body(i: int) -> bytes:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "bench-", "namespace": "bench", "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "image": "app:1",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
        },
    }  # fmt: skip
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "bench",
                "operation": "CREATE",
                "object": pod,
                "dryRun": False,
            },
        }
    )


def wait_ready(port: int, context: ssl.SSLContext, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("webhook did not become ready")


def drive(
    port: int, context: ssl.SSLContext, rate: float, seconds: float, threads: int
) -> dict[str, Any]:
    """Send `rate` requests/s for `seconds`, spread over `threads` kept-alive connections."""
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = time.perf_counter() + 0.2
    per_thread = rate / threads

    def worker(k: int) -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
        n = int(per_thread * seconds)
        mine: list[float] = []
        for i in range(n):
            scheduled = start + (i + k / threads) / per_thread
            delay = scheduled - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            body = review_body(i)
            try:
                conn.request("POST", "/mutate", body, {"Content-Type": "application/json"})
                answer = conn.getresponse()
                data = orjson.loads(answer.read())
                if answer.status != 200 or "patch" not in data["response"]:
                    raise RuntimeError(f"HTTP {answer.status}: {str(data)[:120]}")
            except Exception as err:
                with lock:
                    failures.append(str(err))
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
                continue
            mine.append((time.perf_counter() - scheduled) * 1000)
        with lock:
            latencies.extend(mine)

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * p))], 3)

    if not latencies:
        raise RuntimeError(f"every request failed, the first: {failures[0] if failures else '?'}")
    return {
        "target_rps": rate,
        "achieved_rps": round(len(latencies) / elapsed, 1),
        "requests": len(latencies),
        "failures": len(failures),
        "p50_ms": round(statistics.median(latencies), 3),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "max_ms": round(latencies[-1], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--rates", default="50,100,200")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=4, help="client connections")
    parser.add_argument("--out", default="build/bench/admission.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-admission-") as tmp:
        folder = Path(tmp)
        snapshot = folder / "cluster.json"
        write_snapshot(snapshot, args.nodes, args.pods_per_node)
        certs.ensure_serving_pair(folder / "tls", ["localhost"], ["127.0.0.1"])
        client = certs.issue_client_certificate(certs.load_authority(folder / "tls"), "bench")
        (folder / "client.crt").write_bytes(client.cert_pem)
        (folder / "client.key").write_bytes(client.key_pem)
        port = free_port()
        log = open(folder / "serve.log", "wb")  # noqa: SIM115 - closed after the server stops
        server = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--snapshot", str(snapshot),
             "--bind", f"127.0.0.1:{port}", "--tls-cert", str(folder / "tls/tls.crt"),
             "--tls-key", str(folder / "tls/tls.key"), "--threads", "8",
             "--client-ca", str(folder / "tls/ca.crt"),
             "--health-bind", f"127.0.0.1:{free_port()}", "--metrics-bind", ""],
            stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        context = ssl.create_default_context(cafile=str(folder / "tls/ca.crt"))
        context.load_cert_chain(folder / "client.crt", folder / "client.key")
        results = []
        try:
            wait_ready(port, context)
            drive(port, context, 50, 2, args.threads)  # warm-up
            for rate in [float(r) for r in args.rates.split(",")]:
                results.append(drive(port, context, rate, args.seconds, args.threads))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(15)
            log.close()

    pods = args.nodes * args.pods_per_node
    print(f"admission round trip over TLS, {args.nodes} nodes / {pods} pods")
    print(f"{'rate/s':>7} {'achieved':>9} {'requests':>9} {'fail':>5} "
          f"{'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>7}")  # fmt: skip
    for r in results:
        print(f"{r['target_rps']:>7.0f} {r['achieved_rps']:>9} {r['requests']:>9} "
              f"{r['failures']:>5} {r['p50_ms']:>7} {r['p90_ms']:>7} {r['p99_ms']:>7} "
              f"{r['max_ms']:>7}")  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"nodes": args.nodes, "pods_per_node": args.pods_per_node,
                               "threads": args.threads, "results": results}, indent=2))  # fmt: skip
    print(f"figures written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
