"""Admission round trip over TLS: a real `placement-webhook serve` at 1k nodes.

Usage: python benchmarks/bench_admission.py [--nodes 1000] [--seconds 10] [--p99-ms 10]
       [--rates 100,200] [--connections 16] [--server-root TREE]

Starts `placement-webhook serve --snapshot` (gunicorn, TLS, with mutual TLS
as deployed: the client presents a certificate, so the namespace selector
is trusted as the API server's) on a synthetic 1k-node / 30k-pod cluster,
then sends AdmissionReviews for plain pods at a fixed request rate over
kept-alive HTTPS connections, as the API server does. Latency is measured
from the request's scheduled send time (so a stalled server is not hidden by
the client waiting for it) to the answer read whole. Each request is a real
placement with a reservation.

By default the rate is ramped (100, 200, ... 3000/s, `--seconds` each) and
stops at the first rate that does not hold: a rate holds when p99 is under
`--p99-ms`, no request failed and the achieved rate is at least 98% of the
target. The last line names the highest rate that held (the issue's target:
1,000/s with p99 under 10 ms). `--rates` runs a fixed list instead, all of it.

On a machine with two or more CPUs the server (gunicorn's arbiter and its
worker) is pinned to CPU 1 and this client to CPU 0, so the figure is the
server's, not the two fighting over a core. The server's CPU time
(/proc/PID/stat, arbiter and worker) is divided by the admissions answered:
CPU ms per admission. The client must not be the ceiling: it is one process
of threads, one per connection, each writing a prebuilt request head and
body (only the uid changes) on a raw TLS socket and reading the answer by
its Content-Length, a fraction of http.client's cost per request. Threads
rather than processes, because the client has one pinned core: more
processes would only share it. Its own CPU use is measured per rate, and a
rate at which the client was busy 90% of its core is marked: past that, the
figure is the client's.

`--server-root` serves another checkout of this project (its `webhook`
package, with this interpreter), so two trees are compared by the same client.

The machine may be shared: the load average is printed with each rate.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_policy import make_node, make_pod  # noqa: E402
from reviews import admission_review, free_port, plain_pod  # noqa: E402

import certs  # noqa: E402

RAMP = (100, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000, 2500, 3000)
#: Share of its core above which the client, not the server, may be the ceiling.
CLIENT_SATURATED = 0.9
_UID = "00000000-0000-4000-8000-000000000000"
_TICK = os.sysconf("SC_CLK_TCK")


def write_snapshot(path: Path, nodes: int, pods_per_node: int) -> None:
    rng = random.Random(3)
    items: list[dict[str, Any]] = [make_node(i, rng) for i in range(nodes)]
    names = [n["metadata"]["name"] for n in items]
    for i in range(nodes * pods_per_node):
        items.append(make_pod(f"p-{i}", f"app-{i // 100}", rng.choice(names), rng))
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def request_parts() -> tuple[bytes, bytes]:
    """A review's HTTP request split around its uid (the uid is always 36 bytes)."""
    pod = plain_pod(memory="16Mi")
    pod["spec"]["schedulerName"] = "default-scheduler"
    body = orjson.dumps(admission_review(pod, uid=_UID))
    head = (
        "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    before, after = body.split(_UID.encode())
    return head + before, after


class Client:
    """One kept-alive TLS connection sending prebuilt requests and reading whole answers."""

    def __init__(self, port: int, context: ssl.SSLContext, timeout: float = 5.0):
        import socket

        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = context.wrap_socket(raw, server_hostname="localhost")
        self.buffer = b""

    def call(self, request: bytes) -> tuple[int, bytes]:
        self.sock.sendall(request)
        buffer = self.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            buffer += self._recv()
        head = buffer[:end].lower()
        status = int(head[9:12])
        at = head.find(b"content-length:")
        if at < 0:
            raise RuntimeError(f"HTTP {status} without Content-Length")
        line_end = head.find(b"\r\n", at)
        length = int(head[at + 15 : line_end if line_end > 0 else len(head)])
        start = end + 4
        while len(buffer) < start + length:
            buffer += self._recv()
        self.buffer = buffer[start + length :]
        if b"connection: close" in head:
            raise RuntimeError(f"HTTP {status}: the server closed the connection")
        return status, buffer[start : start + length]

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed by the server")
        return chunk

    def close(self) -> None:
        self.sock.close()


def wait_ready(port: int, context: ssl.SSLContext, timeout: float = 120) -> None:
    probe = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client = Client(port, context, timeout=2)
            try:
                if client.call(probe)[0] == 200:
                    return
            finally:
                client.close()
        except (OSError, RuntimeError):
            pass
        time.sleep(0.2)
    raise RuntimeError("webhook did not become ready")


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU of these processes so far (/proc/PID/stat fields 14 and 15)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / _TICK


def server_pids(arbiter: int) -> list[int]:
    """gunicorn's arbiter and its worker(s)."""
    children = Path(f"/proc/{arbiter}/task/{arbiter}/children").read_text().split()
    return [arbiter, *(int(c) for c in children)]


def drive(
    port: int,
    context: ssl.SSLContext,
    rate: float,
    seconds: float,
    connections: int,
    pids: list[int],
) -> dict[str, Any]:
    """Send `rate` requests/s for `seconds`, spread over `connections` kept-alive connections."""
    before, after = request_parts()
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    per_conn = rate / connections
    count = int(per_conn * seconds)
    clients = [Client(port, context) for _ in range(connections)]
    load_before = os.getloadavg()[0]
    server_cpu = cpu_seconds(pids)
    own = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter() + 0.1

    def worker(k: int) -> None:
        client = clients[k]
        mine: list[float] = []
        for i in range(count):
            scheduled = start + (i + k / connections) / per_conn
            delay = scheduled - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            uid = f"{k:08x}-{i:04x}-4{i >> 16:03x}-8000-{int(rate):012x}"[:36]
            try:
                status, data = client.call(before + uid.encode() + after)
                if status != 200 or b'"patch"' not in data:
                    raise RuntimeError(f"HTTP {status}: {data[:120]!r}")
            except Exception as err:
                with lock:
                    failures.append(str(err))
                client.close()
                try:
                    client = Client(port, context)
                except OSError:
                    break
                continue
            mine.append((time.perf_counter() - scheduled) * 1000)
        client.close()
        with lock:
            latencies.extend(mine)

    pool = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(connections)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=seconds + 60)
    elapsed = time.perf_counter() - start
    used = resource.getrusage(resource.RUSAGE_SELF)
    server_cpu = cpu_seconds(pids) - server_cpu
    client_cpu = used.ru_utime + used.ru_stime - own.ru_utime - own.ru_stime
    latencies.sort()
    if not latencies:
        raise RuntimeError(f"every request failed, the first: {failures[0] if failures else '?'}")

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * p))], 3)

    return {
        "target_rps": rate,
        "achieved_rps": round(len(latencies) / elapsed, 1),
        "requests": len(latencies),
        "failures": len(failures),
        "first_failure": failures[0][:200] if failures else None,
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "max_ms": round(latencies[-1], 3),
        "server_cpu_ms_per_admission": round(server_cpu * 1000 / len(latencies), 3),
        "server_cpu_share": round(server_cpu / elapsed, 3),
        "client_cpu_share": round(client_cpu / elapsed, 3),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def holds(result: dict[str, Any], p99_ms: float) -> bool:
    return (
        result["p99_ms"] < p99_ms
        and result["failures"] == 0
        and result["achieved_rps"] >= 0.98 * result["target_rps"]
    )


def pin(cpu: int) -> Any:
    """A preexec_fn that pins the child (and what it forks) to `cpu`."""
    return lambda: os.sched_setaffinity(0, {cpu})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--rates", default="", help="a fixed list (default: ramp to the limit)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per rate")
    parser.add_argument("--p99-ms", type=float, default=10.0, help="a rate holds below this")
    parser.add_argument("--connections", type=int, default=16, help="kept-alive connections")
    parser.add_argument("--server-threads", type=int, default=8, help="serve --threads")
    parser.add_argument("--server-root", default=str(ROOT), help="checkout to serve")
    parser.add_argument("--no-pin", action="store_true", help="do not pin server and client")
    parser.add_argument("--out", default="build/bench/admission.json")
    args = parser.parse_args()
    tree = Path(args.server_root).resolve()
    rates = [float(r) for r in args.rates.split(",")] if args.rates else [float(r) for r in RAMP]
    pinned = not args.no_pin and {0, 1} <= os.sched_getaffinity(0)

    with tempfile.TemporaryDirectory(prefix="bench-admission-") as tmp:
        folder = Path(tmp)
        snapshot = folder / "cluster.json"
        write_snapshot(snapshot, args.nodes, args.pods_per_node)
        certs.ensure_serving_pair(folder / "tls", ["localhost"], ["127.0.0.1"])
        client = certs.issue_client_certificate(certs.load_authority(folder / "tls"), "bench")
        (folder / "client.crt").write_bytes(client.cert_pem)
        (folder / "client.key").write_bytes(client.key_pem)
        port = free_port()
        if pinned:
            os.sched_setaffinity(0, {0})
        log = open(folder / "serve.log", "wb")  # noqa: SIM115 - closed after the server stops
        server = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--snapshot", str(snapshot),
             "--bind", f"127.0.0.1:{port}", "--tls-cert", str(folder / "tls/tls.crt"),
             "--tls-key", str(folder / "tls/tls.key"), "--threads", str(args.server_threads),
             "--client-ca", str(folder / "tls/ca.crt"),
             "--health-bind", f"127.0.0.1:{free_port()}", "--metrics-bind", ""],
            stdout=subprocess.DEVNULL, stderr=log, cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            preexec_fn=pin(1) if pinned else None,
        )  # fmt: skip
        context = ssl.create_default_context(cafile=str(folder / "tls/ca.crt"))
        context.load_cert_chain(folder / "client.crt", folder / "client.key")
        results: list[dict[str, Any]] = []
        try:
            wait_ready(port, context)
            pids = server_pids(server.pid)
            placing = ("server pinned to CPU 1, client to CPU 0" if pinned
                       else "server and client not pinned (they share the cores)")  # fmt: skip
            print(f"serving {tree.name} (pids {pids}); {placing}", flush=True)
            drive(port, context, 50, 2, min(args.connections, 4), pids)  # warm-up
            for rate in rates:
                result = drive(port, context, rate, args.seconds, args.connections, pids)
                result["holds"] = holds(result, args.p99_ms)
                result["client_saturated"] = result["client_cpu_share"] >= CLIENT_SATURATED
                results.append(result)
                print(f"  {rate:.0f}/s: p99 {result['p99_ms']} ms, achieved "
                      f"{result['achieved_rps']}, client cpu {result['client_cpu_share']}, "
                      f"load {result['load_after']}", flush=True)  # fmt: skip
                if not args.rates and not result["holds"]:
                    break
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(15)
            log.close()

    pods = args.nodes * args.pods_per_node
    print(f"admission round trip over TLS, {args.nodes} nodes / {pods} pods, "
          f"{args.connections} connections, a rate holds with p99 < {args.p99_ms} ms")  # fmt: skip
    print(f"{'rate/s':>7} {'achieved':>9} {'requests':>9} {'fail':>5} {'p50 ms':>7} "
          f"{'p90 ms':>7} {'p99 ms':>7} {'max ms':>8} {'srv ms/adm':>10} {'srv cpu':>7} "
          f"{'cli cpu':>7} {'load':>5}  holds")  # fmt: skip
    for r in results:
        note = "yes" if r["holds"] else "no"
        if r["client_saturated"]:
            note += " (client saturated: the figure is the client's)"
        print(f"{r['target_rps']:>7.0f} {r['achieved_rps']:>9} {r['requests']:>9} "
              f"{r['failures']:>5} {r['p50_ms']:>7} {r['p90_ms']:>7} {r['p99_ms']:>7} "
              f"{r['max_ms']:>8} {r['server_cpu_ms_per_admission']:>10} "
              f"{r['server_cpu_share']:>7} {r['client_cpu_share']:>7} {r['load_after']:>5}  "
              f"{note}")  # fmt: skip
    held = [r for r in results if r["holds"]]
    best = max(held, key=lambda r: r["target_rps"]) if held else None
    if best is None:
        print(f"highest sustained rate: none of the rates tried (p99 < {args.p99_ms} ms)")
    else:
        print(f"highest sustained rate: {best['target_rps']:.0f} admissions/s "
              f"(p99 {best['p99_ms']} ms)")  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "nodes": args.nodes, "pods_per_node": args.pods_per_node,
        "connections": args.connections, "p99_limit_ms": args.p99_ms, "pinned": pinned,
        "server_root": tree.name, "results": results,
        "highest_sustained_rps": best["target_rps"] if best else None,
        "highest_sustained_p99_ms": best["p99_ms"] if best else None,
    }, indent=2))  # fmt: skip
    print(f"figures written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
