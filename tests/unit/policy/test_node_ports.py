from typing import Any

import pytest
from policy_builders import make_node, make_pod, only, place, snapshot

from webhook.policy.status import Code

NP = only("NodePorts")


def with_ports(name: str, *ports: tuple[str, str, int], node: str | None = None) -> dict[str, Any]:
    pod = make_pod(name, node=node)
    pod["spec"]["containers"][0]["ports"] = [
        {"containerPort": 80, "hostIP": ip, "protocol": proto, "hostPort": port}
        for ip, proto, port in ports
    ]
    return pod


@pytest.mark.parametrize(
    ("existing", "wanted", "fits"),
    [
        ([], [("", "TCP", 8080)], True),
        ([("", "TCP", 8080)], [("", "TCP", 8080)], False),
        ([("", "TCP", 8080)], [("", "UDP", 8080)], True),
        ([("", "TCP", 8080)], [("", "TCP", 8081)], True),
        ([("127.0.0.1", "TCP", 8080)], [("127.0.0.2", "TCP", 8080)], True),
        ([("127.0.0.1", "TCP", 8080)], [("127.0.0.1", "TCP", 8080)], False),
        ([("127.0.0.1", "TCP", 8080)], [("0.0.0.0", "TCP", 8080)], False),
        ([("0.0.0.0", "TCP", 8080)], [("127.0.0.1", "TCP", 8080)], False),
        ([("", "", 8080)], [("", "TCP", 8080)], False),
        ([("127.0.0.1", "UDP", 53)], [("", "TCP", 53), ("127.0.0.1", "UDP", 54)], True),
    ],
)
def test_pod_needs_free_host_ports(
    existing: list[tuple[str, str, int]], wanted: list[tuple[str, str, int]], fits: bool
) -> None:
    pods = [with_ports("e", *existing, node="n")] if existing else []
    d = place(with_ports("p", *wanted), snapshot([make_node("n")], pods), NP)
    assert (d.node == "n") is fits
    if not fits:
        assert d.node_reasons["n"] == (
            "node(s) didn't have free ports for the requested pod ports",
        )
        assert d.code is Code.Unschedulable


def test_ports_free_up_when_the_pod_goes_away() -> None:
    snap = snapshot([make_node("n")], [with_ports("e", ("", "TCP", 80), node="n")])
    snap.remove_pod("uid-default-e")
    assert place(with_ports("p", ("", "TCP", 80)), snap, NP).node == "n"


def test_container_ports_without_host_port_do_not_conflict() -> None:
    existing = make_pod("e", node="n")
    existing["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    pod = make_pod("p")
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    assert place(pod, snapshot([make_node("n")], [existing]), NP).node == "n"
