"""The real `serve` process (gunicorn, BoundedWorker, mutual TLS) against misbehaving connections.

No cluster: `serve --snapshot` decides against a file. Each test opens real
sockets to it, as an attacker or a buggy client would.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

import certs
from webhook.devcluster.cluster import free_port

REPO = Path(__file__).resolve().parents[3]
SNAPSHOT = REPO / "examples" / "policy" / "cluster.json"


@dataclass
class Served:
    port: int
    probes: int
    trusted: ssl.SSLContext
    log: Path

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.trusted, timeout=3)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("serve")
    certs.ensure_serving_pair(folder, ["localhost"], ["127.0.0.1"])
    pair = certs.issue_client_certificate(certs.load_authority(folder), "tester")
    (folder / "client.crt").write_bytes(pair.cert_pem)
    (folder / "client.key").write_bytes(pair.key_pem)
    port, probes = free_port(), free_port()
    log = folder / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--snapshot", str(SNAPSHOT),
             "--bind", f"127.0.0.1:{port}", "--tls-cert", str(folder / "tls.crt"),
             "--tls-key", str(folder / "tls.key"), "--client-ca", str(folder / "ca.crt"),
             "--health-bind", f"127.0.0.1:{probes}", "--metrics-bind", "", "--threads", "4"],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
        )  # fmt: skip
    trusted = ssl.create_default_context(cafile=str(folder / "ca.crt"))
    trusted.load_cert_chain(folder / "client.crt", folder / "client.key")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            probe = http.client.HTTPConnection("127.0.0.1", probes, timeout=1)
            probe.request("GET", "/readyz")
            if probe.getresponse().status == 200:
                break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        pytest.fail(f"serve did not start:\n{log.read_text()}")
    yield Served(port, probes, trusted, log)
    process.terminate()
    process.wait(15)


def review() -> bytes:
    pod = {"metadata": {"name": "p", "namespace": "shop"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}  # fmt: skip
    return orjson.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": "shop",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "object": pod, "dryRun": True},
    })  # fmt: skip


def mutate(conn: http.client.HTTPSConnection, body: bytes) -> tuple[int, bytes]:
    conn.request("POST", "/mutate", body, {"Content-Type": "application/json"})
    answer = conn.getresponse()
    return answer.status, answer.read()


def test_stalled_connections_hold_no_request_thread(served: Served) -> None:
    held = []
    for i in range(12):  # three times the threads: idle after the handshake, or half a review
        raw = socket.create_connection(("127.0.0.1", served.port), timeout=3)
        tls = served.trusted.wrap_socket(raw, server_hostname="localhost")
        if i % 2:
            tls.sendall(b"POST /mutate HTTP/1.1\r\nContent-Length: 900\r\n\r\n{")
        held.append(tls)
    try:
        for _ in range(10):
            conn = served.connect()
            status, body = mutate(conn, review())
            conn.close()
            assert status == 200 and orjson.loads(body)["response"]["allowed"] is True
        probe = http.client.HTTPConnection("127.0.0.1", served.probes, timeout=3)
        probe.request("GET", "/healthz")
        assert probe.getresponse().status == 200
    finally:
        for sock in held:
            sock.close()


def test_kept_alive_and_pipelined_requests_are_all_answered(served: Served) -> None:
    conn = served.connect()
    for _ in range(3):
        assert mutate(conn, review())[0] == 200
    raw = socket.create_connection(("127.0.0.1", served.port), timeout=3)
    with served.trusted.wrap_socket(raw, server_hostname="localhost") as tls:
        one = review()
        request = (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n%s" % (len(one), one))  # fmt: skip
        tls.sendall(request * 2)
        answers = b""
        while answers.count(b'"allowed":true') < 2:
            answers += tls.recv(65536)
    assert answers.count(b"HTTP/1.1 200 OK") == 2


def test_a_chunked_body_is_refused_with_411_and_the_connection_closed(served: Served) -> None:
    raw = socket.create_connection(("127.0.0.1", served.port), timeout=3)
    with served.trusted.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(b"POST /mutate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 411 Length Required")
    assert b"Connection: close" in answer


def test_the_caller_is_named_in_the_decision_log(served: Served) -> None:
    conn = served.connect()
    assert mutate(conn, review())[0] == 200
    time.sleep(0.2)
    decisions = [orjson.loads(line) for line in served.log.read_text().splitlines()
                 if '"msg":"decision"' in line]  # fmt: skip
    assert decisions and decisions[-1]["caller"] == "tester"


def test_an_answer_arrives_whole_in_one_tls_record(served: Served) -> None:
    """The head and the body are sent together: one read of one record has all of it."""
    raw = socket.create_connection(("127.0.0.1", served.port), timeout=3)
    tls = served.trusted.wrap_socket(raw, server_hostname="localhost")
    body = review()
    tls.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)  # fmt: skip
    time.sleep(0.5)  # every byte of the answer has arrived
    first = tls.recv(65536)  # one TLS record at most
    head, _, rest = first.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))  # fmt: skip
    assert head.startswith(b"HTTP/1.1 200") and len(rest) == length
    assert orjson.loads(rest)["response"]["allowed"] is True
    tls.close()
