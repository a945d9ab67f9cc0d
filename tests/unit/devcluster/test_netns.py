"""The cluster's network namespace: the API server's flags for a real node, and the door in.

The forwarder test makes a network namespace of its own (root, as CI is) and
relays real bytes into it; nothing leaves the machine.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import certs
from webhook.devcluster.netns import (
    APISERVER_PORT,
    NODE_IP,
    Forwarder,
    NetworkNamespace,
    NodeNetwork,
    enter_in_this_thread,
)

DEVCLUSTER_FLAGS = [
    "--bind-address=127.0.0.1",
    "--secure-port=40000",
    "--authorization-mode=RBAC",
    "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
    "--event-ttl=1h",
]


def _flags(args: list[str]) -> dict[str, str]:
    names = [a.split("=", 1)[0] for a in args]
    assert len(names) == len(set(names)), names  # each flag once: no repeated slice flags
    return dict(a.split("=", 1) for a in args)


def test_a_real_node_cluster_authorizes_kubelets_and_gives_pods_their_tokens(
    tmp_path: Path,
) -> None:
    ca = certs.new_authority("test-ca")
    certs.write_pem_atomically(tmp_path / "ca.key", ca.key_pem)
    certs.write_pem_atomically(tmp_path / "ca.crt", ca.cert_pem, 0o644)
    network = NodeNetwork(NetworkNamespace("unused"))

    flags = _flags(network.apiserver_args(DEVCLUSTER_FLAGS, tmp_path))

    assert flags["--authorization-mode"] == "Node,RBAC"
    assert "NodeRestriction" in flags["--enable-admission-plugins"].split(",")
    assert "ServiceAccount" not in flags["--disable-admission-plugins"].split(",")
    assert flags["--secure-port"] == str(APISERVER_PORT)
    assert flags["--bind-address"] == "0.0.0.0"
    assert flags["--advertise-address"] == NODE_IP
    assert flags["--enable-aggregator-routing"] == "true"
    assert flags["--event-ttl"] == "1h"  # the rest is kept
    assert Path(flags["--kubelet-client-certificate"]).exists()


def _echo_inside(netns: NetworkNamespace, ready: threading.Event, port: list[int]) -> None:
    enter_in_this_thread(netns.path)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port.append(server.getsockname()[1])
        ready.set()
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data.upper())


def test_the_forwarder_relays_a_host_connection_to_a_server_inside_the_namespace() -> None:
    netns = NetworkNamespace.create("pw-test")
    try:
        ready, port = threading.Event(), []
        threading.Thread(target=_echo_inside, args=(netns, ready, port), daemon=True).start()
        assert ready.wait(5)
        forwarder = Forwarder(netns, ("127.0.0.1", port[0]))
        try:
            with socket.create_connection(("127.0.0.1", forwarder.port), timeout=5) as client:
                client.sendall(b"hello")
                client.shutdown(socket.SHUT_WR)
                answer = b""
                while chunk := client.recv(4096):
                    answer += chunk
        finally:
            forwarder.close()
        assert answer == b"HELLO"
    finally:
        netns.delete()
    assert not netns.exists()
