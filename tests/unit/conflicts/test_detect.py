"""detect(): each kind of conflict is found, with the pods that lost, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.conflicts.builders import node, nodes, pod, records
from webhook.conflicts.detect import detect
from webhook.conflicts.model import (
    DIRECT,
    HOST_PORT,
    KUBE_SCHEDULER,
    KUBELET_REJECTED,
    NODE_AFFINITY,
    OVERCOMMIT,
    POD_ANTI_AFFINITY,
    TAINT,
    TOPOLOGY_SPREAD,
    WEBHOOK,
    Conflict,
)


def at(second: int) -> str:
    return f"2024-05-01T10:00:{second:02d}Z"


def only(conflicts: list[Conflict], kind: str) -> list[Conflict]:
    return [c for c in conflicts if c.kind == kind]


def culprits(conflict: Conflict) -> list[str]:
    return [p.name for p in conflict.culprits]


# ------------------------------------------------------------ overcommit


def test_node_within_capacity_has_no_conflict() -> None:
    found = detect(nodes(node("n1", cpu="2")), records(pod("a", "n1"), pod("b", "n1")))
    assert found == []


def test_node_over_its_cpu_names_the_last_pod_to_arrive() -> None:
    pods = records(
        pod("a", "n1", at=at(1), by="webhook"),
        pod("c", "n1", at=at(3), by="binding"),
        pod("b", "n1", at=at(2), by="direct"),
    )
    (conflict,) = detect(nodes(node("n1", cpu="2")), pods)
    assert conflict.kind == OVERCOMMIT
    assert conflict.node == "n1"
    assert culprits(conflict) == ["c"]
    assert conflict.last_arrived.name == "c"
    assert conflict.culprits[0].placed_by == KUBE_SCHEDULER
    assert conflict.details["cpu"] == {"requested": 3000, "allocatable": 2000}
    assert [p.name for p in conflict.pods] == ["a", "b", "c"]
    assert "cpu 3000m requested of 2000m" in conflict.message


def test_the_pods_a_kubelet_would_reject_in_arrival_order_are_the_culprits() -> None:
    # 4 cpu: a(2) fits, b(3) does not, c(1) still fits after a: b lost, though c came last.
    pods = records(
        pod("a", "n1", cpu="2", at=at(1)),
        pod("b", "n1", cpu="3", at=at(2)),
        pod("c", "n1", cpu="1", at=at(3)),
    )
    (conflict,) = detect(nodes(node("n1", cpu="4")), pods)
    assert culprits(conflict) == ["b"]
    assert conflict.last_arrived.name == "c"


def test_a_pod_the_kubelet_admitted_is_not_the_culprit_though_its_status_raised_its_version() -> (
    None
):
    # Same second; the kubelet's status writes put the running pod's version above the
    # one bound after it, which it will reject: that one is the culprit, not the running one.
    pods = records(
        pod("running", "n1", cpu="2", at=at(1), rv=300, phase="Running"),
        pod("arriving", "n1", cpu="2", at=at(1), rv=200, phase="Pending", by="direct"),
    )
    (conflict,) = detect(nodes(node("n1", cpu="3")), pods)
    assert culprits(conflict) == ["arriving"]


def test_kubelet_conditions_mark_a_pod_admitted_before_it_runs() -> None:
    admitted = pod("admitted", "n1", cpu="2", at=at(1), rv=300, phase="Pending")
    admitted["status"]["conditions"] = [{"type": "PodReadyToStartContainers", "status": "False"}]
    waiting = pod("waiting", "n1", cpu="2", at=at(1), rv=200, phase="Pending")
    (conflict,) = detect(nodes(node("n1", cpu="3")), records(admitted, waiting))
    assert culprits(conflict) == ["waiting"]


def test_without_a_kubelet_pending_pods_lose_in_arrival_order() -> None:
    pods = records(
        pod("first", "n1", cpu="2", at=at(1), rv=300, phase="Pending"),
        pod("second", "n1", cpu="2", at=at(2), rv=200, phase="Pending"),
    )
    (conflict,) = detect(nodes(node("n1", cpu="3")), pods)
    assert culprits(conflict) == ["second"]


def test_too_many_pods_is_an_overcommit_of_pods() -> None:
    pods = records(*(pod(f"p{i}", "n1", cpu="10m", at=at(i)) for i in range(4)))
    (conflict,) = detect(nodes(node("n1", pods="3")), pods)
    assert conflict.details["pods"] == {"requested": 4, "allocatable": 3}
    assert culprits(conflict) == ["p3"]


def test_memory_is_checked_like_cpu() -> None:
    pods = records(pod("a", "n1", memory="3Gi", at=at(1)), pod("b", "n1", memory="3Gi", at=at(2)))
    (conflict,) = detect(nodes(node("n1", memory="4Gi")), pods)
    assert list(conflict.details) == ["memory"]


def test_extended_resource_the_node_does_not_report_is_ignored_like_the_kubelet_does() -> None:
    gpu: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]
    }
    assert detect(nodes(node("n1")), records(pod("a", "n1", **gpu))) == []
    (conflict,) = detect(
        nodes(node("n1", extra={"example.com/gpu": "1"})),
        records(pod("a", "n1", at=at(1), **gpu), pod("b", "n1", at=at(2), **gpu)),
    )
    assert culprits(conflict) == ["b"]


def test_terminating_and_finished_pods_free_their_share() -> None:
    pods = records(
        pod("a", "n1", at=at(1)),
        pod("b", "n1", at=at(2), terminating=True),
        pod("c", "n1", at=at(3), phase="Succeeded"),
    )
    assert detect(nodes(node("n1", cpu="1")), pods) == []


def test_pods_on_a_node_that_is_gone_are_not_reported() -> None:
    assert detect(nodes(node("n1", cpu="1")), records(pod("a", "n9"), pod("b", "n9"))) == []


def test_the_conflict_key_is_stable_while_the_same_pods_lose() -> None:
    pods = records(pod("a", "n1", at=at(1)), pod("b", "n1", at=at(2)))
    (first,) = detect(nodes(node("n1", cpu="1")), pods)
    (again,) = detect(nodes(node("n1", cpu="1")), list(reversed(pods)))
    assert first.key == again.key


# ------------------------------------------------------------ host ports


def with_port(port: int, ip: str = "") -> dict[str, Any]:
    p: dict[str, Any] = {"containerPort": 80, "hostPort": port}
    if ip:
        p["hostIP"] = ip
    return {"containers": [{"name": "c", "ports": [p]}]}


@pytest.mark.parametrize(
    ("first_ip", "second_ip", "clash"),
    [("", "", True), ("10.0.0.1", "", True), ("10.0.0.1", "10.0.0.1", True),
     ("10.0.0.1", "10.0.0.2", False)],
)  # fmt: skip
def test_two_pods_on_one_host_port_clash_unless_their_ips_differ(
    first_ip: str, second_ip: str, clash: bool
) -> None:
    pods = records(
        pod("a", "n1", at=at(1), **with_port(8080, first_ip)),
        pod("b", "n1", at=at(2), **with_port(8080, second_ip)),
    )
    found = only(detect(nodes(node("n1")), pods), HOST_PORT)
    assert bool(found) is clash
    if clash:
        assert culprits(found[0]) == ["b"]
        assert found[0].details == {"protocol": "TCP", "port": 8080}


def test_same_port_on_different_nodes_is_fine() -> None:
    pods = records(pod("a", "n1", **with_port(8080)), pod("b", "n2", **with_port(8080)))
    assert detect(nodes(node("n1"), node("n2")), pods) == []


# ------------------------------------------------------------ node affinity and taints


def test_pod_on_a_node_outside_its_node_selector_is_reported() -> None:
    pods = records(pod("a", "n1", nodeSelector={"disk": "ssd"}))
    (conflict,) = detect(nodes(node("n1", labels={"disk": "hdd"})), pods)
    assert conflict.kind == NODE_AFFINITY
    assert culprits(conflict) == ["a"]
    assert "nodeSelector" in conflict.message


def test_pod_on_a_node_outside_its_required_node_affinity_is_reported() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    good, bad = node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"})
    found = detect(nodes(good, bad), records(pod("x", "n1", affinity=affinity),
                                             pod("y", "n2", affinity=affinity)))  # fmt: skip
    assert [(c.kind, culprits(c)) for c in found] == [(NODE_AFFINITY, ["y"])]


@pytest.mark.parametrize(
    ("effect", "tolerations", "reported"),
    [
        ("NoSchedule", [], True),
        ("NoExecute", [], True),
        ("PreferNoSchedule", [], False),
        ("NoSchedule", [{"key": "dedicated", "operator": "Exists"}], False),
    ],
)
def test_pod_on_a_node_with_an_untolerated_hard_taint_is_reported(
    effect: str, tolerations: list[dict[str, str]], reported: bool
) -> None:
    tainted = node("n1", taints=[{"key": "dedicated", "value": "gpu", "effect": effect}])
    found = detect(nodes(tainted), records(pod("a", "n1", tolerations=tolerations)))
    assert [c.kind for c in found] == ([TAINT] if reported else [])
    if reported:
        assert "{dedicated: gpu}" in found[0].message


def test_static_pods_on_a_tainted_control_plane_node_are_the_kubelets_not_a_conflict() -> None:
    control_plane = node(
        "cp", taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    )
    static = pod("kube-apiserver-cp", "cp", by="direct", owner=None)
    static["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "abc"
    assert detect(nodes(control_plane), records(static)) == []


def test_condition_taints_added_by_the_control_plane_are_not_placement_conflicts() -> None:
    cordoned = node(
        "n1", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    )
    assert detect(nodes(cordoned), records(pod("a", "n1"))) == []


# ------------------------------------------------------------ anti-affinity


def anti(app: str, key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_two_pods_against_each_others_anti_affinity_on_one_node_are_reported_once() -> None:
    pods = records(
        pod("a", "n1", at=at(1), labels={"app": "db"}, affinity=anti("db")),
        pod("b", "n1", at=at(2), labels={"app": "db"}, affinity=anti("db"), by="binding"),
    )
    (conflict,) = only(detect(nodes(node("n1")), pods), POD_ANTI_AFFINITY)
    assert culprits(conflict) == ["b"]
    assert [p.name for p in conflict.pods] == ["a", "b"]


def test_anti_affinity_of_an_earlier_pod_makes_the_later_one_lose() -> None:
    pods = records(
        pod("guard", "n1", at=at(1), affinity=anti("web")),
        pod("web", "n1", at=at(2), labels={"app": "web"}, by="direct"),
    )
    (conflict,) = only(detect(nodes(node("n1")), pods), POD_ANTI_AFFINITY)
    assert culprits(conflict) == ["web"]
    assert conflict.culprits[0].placed_by == DIRECT


def test_anti_affinity_holds_per_topology_domain() -> None:
    zone_a1, zone_a2 = node("a1", labels={"zone": "a"}), node("a2", labels={"zone": "a"})
    zone_b = node("b1", labels={"zone": "b"})
    spread = records(
        pod("x", "a1", at=at(1), labels={"app": "db"}, affinity=anti("db", "zone")),
        pod("y", "b1", at=at(2), labels={"app": "db"}, affinity=anti("db", "zone")),
    )
    assert only(detect(nodes(zone_a1, zone_a2, zone_b), spread), POD_ANTI_AFFINITY) == []
    same_zone = records(
        pod("x", "a1", at=at(1), labels={"app": "db"}, affinity=anti("db", "zone")),
        pod("y", "a2", at=at(2), labels={"app": "db"}, affinity=anti("db", "zone")),
    )
    (conflict,) = only(detect(nodes(zone_a1, zone_a2, zone_b), same_zone), POD_ANTI_AFFINITY)
    assert (conflict.node, culprits(conflict)) == ("a2", ["y"])


def test_anti_affinity_only_matches_pods_in_the_terms_namespaces() -> None:
    pods = records(
        pod("a", "n1", at=at(1), namespace="one", labels={"app": "db"}, affinity=anti("db")),
        pod("b", "n1", at=at(2), namespace="two", labels={"app": "db"}),
    )
    assert only(detect(nodes(node("n1")), pods), POD_ANTI_AFFINITY) == []


# ------------------------------------------------------------ topology spread


def spread(max_skew: int = 1, when: str = "DoNotSchedule") -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": "zone",
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]


def zones() -> dict[str, Any]:
    return nodes(node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"}))


def web(name: str, on: str, second: int, **kw: Any) -> dict[str, Any]:
    return pod(name, on, at=at(second), labels={"app": "web"}, cpu="10m",
               topologySpreadConstraints=kw.pop("constraints", spread()), **kw)  # fmt: skip


def test_balanced_spread_is_fine() -> None:
    pods = records(web("w1", "a1", 1), web("w2", "b1", 2), web("w3", "a1", 3))
    assert detect(zones(), pods) == []


def test_skew_beyond_max_skew_names_the_last_arrivals_in_the_crowded_domain() -> None:
    pods = records(web("w1", "a1", 1), web("w2", "a1", 2), web("w3", "a1", 3), web("w4", "b1", 4))
    (conflict,) = detect(zones(), pods)
    assert conflict.kind == TOPOLOGY_SPREAD
    assert culprits(conflict) == ["w3"]
    assert conflict.details["count"] == 3 and conflict.details["minimum"] == 1


def test_schedule_anyway_constraints_are_not_checked() -> None:
    pods = records(
        *(web(f"w{i}", "a1", i, constraints=spread(when="ScheduleAnyway")) for i in range(4))
    )
    assert detect(zones(), pods) == []


def test_min_domains_counts_missing_domains_as_empty() -> None:
    constraint = [{**spread()[0], "minDomains": 3}]
    pods = records(web("w1", "a1", 1, constraints=constraint),
                   web("w2", "b1", 2, constraints=constraint),
                   web("w3", "b1", 3, constraints=constraint))  # fmt: skip
    (conflict,) = detect(zones(), pods)
    assert (conflict.details["minimum"], culprits(conflict)) == (0, ["w3"])


def test_an_empty_spread_selector_counts_no_pod_as_kube_scheduler_does() -> None:
    crowded = [web(f"w{i}", "a1", i) for i in range(1, 4)]
    assert [c.kind for c in detect(zones(), records(*crowded))] == [TOPOLOGY_SPREAD]
    everything = [{**spread()[0], "labelSelector": {}}]
    pods = records(*(web(f"w{i}", "a1", i, constraints=everything) for i in range(1, 4)))
    assert detect(zones(), pods) == []


def test_spread_counts_only_nodes_that_carry_every_do_not_schedule_key_of_the_pod() -> None:
    racked = nodes(node("a1", labels={"zone": "a", "rack": "r1"}), node("b1", labels={"zone": "b"}))
    both = [spread()[0], {**spread(max_skew=5)[0], "topologyKey": "rack"}]
    pods = records(*(web(f"w{i}", "a1", i, constraints=both) for i in range(1, 4)))
    assert detect(racked, pods) == []  # b1 has no rack: zone b is not a domain of these pods
    zone_only = records(*(web(f"w{i}", "a1", i) for i in range(1, 4)))
    assert [c.kind for c in detect(racked, zone_only)] == [TOPOLOGY_SPREAD]


# ------------------------------------------------------------ kubelet rejections


@pytest.mark.parametrize("reason", ["OutOfcpu", "OutOfmemory", "OutOfpods", "NodeAffinity",
                                    "OutOfexample.com/gpu", "TaintToleration"])  # fmt: skip
def test_pod_the_kubelet_rejected_is_reported_on_its_node(reason: str) -> None:
    (conflict,) = detect(nodes(node("n1")), records(pod("a", "n1", phase="Failed", reason=reason)))
    assert (conflict.kind, conflict.node, culprits(conflict)) == (KUBELET_REJECTED, "n1", ["a"])
    assert conflict.culprits[0].placed_by == WEBHOOK
    assert reason in conflict.message


def test_pod_that_failed_for_another_reason_is_not_a_conflict() -> None:
    failed = records(pod("a", "n1", phase="Failed", reason="Evicted"))
    assert detect(nodes(node("n1")), failed) == []


def test_output_is_sorted_and_deterministic() -> None:
    pods = records(
        pod("a", "n2", at=at(1)), pod("b", "n2", at=at(2)),
        pod("c", "n1", at=at(1)), pod("d", "n1", at=at(2)),
        pod("e", "n1", phase="Failed", reason="OutOfcpu"),
    )  # fmt: skip
    found = detect(nodes(node("n1", cpu="1"), node("n2", cpu="1")), pods)
    assert [(c.kind, c.node) for c in found] == [
        (KUBELET_REJECTED, "n1"), (OVERCOMMIT, "n1"), (OVERCOMMIT, "n2")
    ]  # fmt: skip
