from typing import Any

import pytest
from policy_builders import make_node, make_pod, only, place, plugin_args, snapshot

from webhook.policy.status import Code
from webhook.policy.workloads import WorkloadView

PTS = only("PodTopologySpread", scores={"PodTopologySpread": 1})
ZONE = "topology.kubernetes.io/zone"
NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING = "node(s) didn't match pod topology spread constraints (missing required label)"


def spread(
    key: str = ZONE,
    skew: int = 1,
    when: str = "DoNotSchedule",
    selector: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": selector if selector is not None else {"app": "web"}},
        **extra,
    }


def zone_nodes(*zones: str) -> list[dict[str, Any]]:
    return [make_node(f"{z}-n{i}", labels={ZONE: z}) for z in zones for i in range(2)]


def web(name: str, node: str, **labels: str) -> dict[str, Any]:
    return make_pod(name, node=node, labels={"app": "web", **labels})


def incoming(*constraints: dict[str, Any], **labels: str) -> dict[str, Any]:
    return make_pod(
        "p", labels={"app": "web", **labels}, topologySpreadConstraints=list(constraints)
    )


def test_pod_goes_to_the_zone_with_fewer_matching_pods() -> None:
    snap = snapshot(zone_nodes("a", "b"), [web("w1", "a-n0"), web("w2", "a-n1")])
    d = place(incoming(spread()), snap, PTS)
    assert d.node in ("b-n0", "b-n1")
    assert d.node_reasons["a-n0"] == (NOT_MATCH,)
    assert d.code is Code.Success


def test_skew_within_max_skew_is_allowed() -> None:
    snap = snapshot(zone_nodes("a", "b"), [web("w1", "a-n0")])
    d = place(incoming(spread(skew=2)), snap, PTS)
    assert set(d.feasible_nodes) == {"a-n0", "a-n1", "b-n0", "b-n1"}


def test_node_without_the_topology_key_is_unresolvable() -> None:
    snap = snapshot([*zone_nodes("a"), make_node("bare")])
    d = place(incoming(spread()), snap, PTS)
    assert d.node_reasons["bare"] == (MISSING,)


def test_pods_in_other_namespaces_or_not_matching_do_not_count() -> None:
    pods = [
        make_pod("x", node="a-n0", labels={"app": "web"}, namespace="other"),
        make_pod("y", node="a-n0", labels={"app": "db"}),
    ]
    d = place(incoming(spread()), snapshot(zone_nodes("a", "b"), pods), PTS)
    assert len(d.feasible_nodes) == 4


def test_terminating_pods_do_not_count() -> None:
    w = web("w1", "a-n0")
    w["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    d = place(incoming(spread()), snapshot(zone_nodes("a", "b"), [w]), PTS)
    assert len(d.feasible_nodes) == 4


def test_min_domains_treats_the_global_minimum_as_zero() -> None:
    snap = snapshot(zone_nodes("a", "b"), [web("w1", "a-n0"), web("w2", "b-n0")])
    d = place(incoming(spread(minDomains=3)), snap, PTS)
    assert d.node is None
    assert d.message == "0/4 nodes are available: 4 " + NOT_MATCH + "."
    d = place(incoming(spread(minDomains=2)), snap, PTS)
    assert d.node is not None


def test_nodes_excluded_by_node_affinity_do_not_form_domains() -> None:
    nodes = [
        make_node("a1", labels={ZONE: "a", "pool": "x"}),
        make_node("b1", labels={ZONE: "b", "pool": "y"}),
    ]
    snap = snapshot(nodes, [web("w1", "a1")])
    pod = incoming(spread())
    pod["spec"]["nodeSelector"] = {"pool": "x"}
    # only zone a is eligible: its count 1 is also the minimum, so skew is 1
    prof = only("NodeAffinity", "PodTopologySpread")
    assert place(pod, snap, prof).node == "a1"
    # with nodeAffinityPolicy Ignore, zone b (0 pods) is the minimum: skew 2
    pod_ignore = incoming(spread(nodeAffinityPolicy="Ignore"))
    pod_ignore["spec"]["nodeSelector"] = {"pool": "x"}
    assert place(pod_ignore, snap, prof).node is None


def test_tainted_nodes_count_unless_taints_policy_is_honor() -> None:
    nodes = [
        make_node("a1", labels={ZONE: "a"}),
        make_node("b1", labels={ZONE: "b"}, taints=[{"key": "k", "effect": "NoSchedule"}]),
    ]
    snap = snapshot(nodes, [web("w1", "a1")])
    prof = only("TaintToleration", "PodTopologySpread")
    assert place(incoming(spread()), snap, prof).node is None
    assert place(incoming(spread(nodeTaintsPolicy="Honor")), snap, prof).node == "a1"


def test_match_label_keys_restrict_counting_to_the_same_revision() -> None:
    pods = [web("w1", "a-n0", rev="1"), web("w2", "a-n1", rev="1")]
    snap = snapshot(zone_nodes("a", "b"), pods)
    d = place(incoming(spread(matchLabelKeys=["rev"]), rev="2"), snap, PTS)
    assert len(d.feasible_nodes) == 4
    d = place(incoming(spread(matchLabelKeys=["rev"]), rev="1"), snap, PTS)
    assert set(d.feasible_nodes) == {"b-n0", "b-n1"}


def test_pod_not_matching_its_own_selector_adds_no_skew() -> None:
    snap = snapshot(zone_nodes("a", "b"), [web("w1", "a-n0")])
    pod = make_pod("p", labels={"app": "other"}, topologySpreadConstraints=[spread()])
    assert len(place(pod, snap, PTS).feasible_nodes) == 4


def test_hostname_spreading_fills_empty_nodes_first() -> None:
    nodes = [make_node(f"n{i}") for i in range(3)]
    snap = snapshot(nodes, [web("w0", "n0"), web("w1", "n1")])
    d = place(incoming(spread(key="kubernetes.io/hostname")), snap, PTS)
    assert d.feasible_nodes == ("n2",)


def test_schedule_anyway_scores_the_emptier_zone_higher() -> None:
    snap = snapshot(zone_nodes("a", "b"), [web("w1", "a-n0"), web("w2", "a-n1")])
    d = place(incoming(spread(when="ScheduleAnyway")), snap, PTS)
    s = {n: v["PodTopologySpread"] for n, v in d.scores.items()}
    assert s["b-n0"] == s["b-n1"] == 100
    assert s["a-n0"] == s["a-n1"] < 100
    assert d.node in ("b-n0", "b-n1")


def test_schedule_anyway_score_matches_kube_scheduler_formula() -> None:
    # zones a: 3 pods, b: 1 pod, 2 domains -> weight log(4); maxSkew 1
    pods = [web("w1", "a-n0"), web("w2", "a-n0"), web("w3", "a-n1"), web("w4", "b-n0")]
    d = place(incoming(spread(when="ScheduleAnyway")), snapshot(zone_nodes("a", "b"), pods), PTS)
    s = {n: v["PodTopologySpread"] for n, v in d.scores.items()}
    # raw: a = round(3*1.386) = 4, b = round(1*1.386) = 1 ; normalized 100*(4+1-raw)/4
    assert s == {"a-n0": 25, "a-n1": 25, "b-n0": 100, "b-n1": 100}


def _owned(
    pod: dict[str, Any], kind: str, name: str, api_version: str = "apps/v1"
) -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": name, "uid": name, "controller": True}
    ]
    return pod


def _workload(
    kind: str, name: str, selector: dict[str, Any], namespace: str = "default"
) -> WorkloadView:
    api = "v1" if kind in ("Service", "ReplicationController") else "apps/v1"
    meta = {"name": name, "namespace": namespace}
    obj = {"apiVersion": api, "kind": kind, "metadata": meta, "spec": {"selector": selector}}
    return WorkloadView.from_dict(kind, obj)


def test_system_default_spreading_spreads_among_the_replicasets_pods() -> None:
    nodes = [make_node(f"n{i}") for i in range(3)]
    pods = [
        _owned(web(f"w{i}", node), "ReplicaSet", "web-1")
        for i, node in enumerate(["n0", "n0", "n1"])
    ]
    snap = snapshot(nodes, pods)
    snap.workloads.upsert(_workload("ReplicaSet", "web-1", {"matchLabels": {"app": "web"}}))
    pod = _owned(make_pod("p", labels={"app": "web"}), "ReplicaSet", "web-1")
    d = place(pod, snap, PTS)
    s = {n: v["PodTopologySpread"] for n, v in d.scores.items()}
    assert s["n2"] == 100 and s["n0"] < s["n1"] < 100
    assert d.node == "n2"


def test_a_replicaset_missing_from_the_snapshot_gives_no_default_spreading() -> None:
    nodes = [make_node(f"n{i}") for i in range(2)]
    pods = [_owned(web("w0", "n0"), "ReplicaSet", "web-1")]
    pod = _owned(make_pod("p", labels={"app": "web"}), "ReplicaSet", "web-1")
    d = place(pod, snapshot(nodes, pods), PTS)
    assert "PodTopologySpread" not in d.scores["n0"]


def test_a_service_selecting_the_pod_spreads_it_without_a_controller() -> None:
    nodes = [make_node(f"n{i}") for i in range(2)]
    snap = snapshot(nodes, [web("w0", "n0"), make_pod("other", node="n1", labels={"app": "db"})])
    snap.workloads.upsert(_workload("Service", "web", {"app": "web"}))
    d = place(make_pod("p", labels={"app": "web", "v": "2"}), snap, PTS)
    s = {n: v["PodTopologySpread"] for n, v in d.scores.items()}
    assert s["n1"] == 100 and s["n0"] < 100  # the db pod on n1 is not a sibling


def test_service_and_controller_selectors_are_combined() -> None:
    nodes = [make_node(f"n{i}") for i in range(2)]
    # w0 matches the Service but not the ReplicaSet's track=canary: not a sibling
    pods = [web("w0", "n0"), web("w1", "n1", track="canary")]
    snap = snapshot(nodes, pods)
    snap.workloads.upsert(_workload("Service", "web", {"app": "web"}))
    rs = {"matchExpressions": [{"key": "track", "operator": "In", "values": ["canary"]}]}
    snap.workloads.upsert(_workload("ReplicaSet", "canary", rs))
    pod = _owned(make_pod("p", labels={"app": "web", "track": "canary"}), "ReplicaSet", "canary")
    d = place(pod, snap, PTS)
    assert d.node == "n0"


def test_pods_without_service_or_controller_get_no_default_spreading() -> None:
    d = place(make_pod("p", labels={"app": "web"}), snapshot([make_node("n0")]), PTS)
    assert "PodTopologySpread" not in d.scores["n0"]


def test_list_defaulting_with_hard_default_constraints_filters() -> None:
    prof = only(
        "PodTopologySpread",
        args=plugin_args(
            "PodTopologySpread",
            """
            defaultingType: List
            defaultConstraints:
              - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}
            """,
        ),
    )
    existing = _owned(make_pod("db-0", node="n0", labels={"app": "db"}), "StatefulSet", "db")
    pod = make_pod("db-1", labels={"app": "db", "statefulset.kubernetes.io/pod-name": "db-1"})
    snap = snapshot([make_node("n0"), make_node("n1")], [existing])
    snap.workloads.upsert(_workload("StatefulSet", "db", {"matchLabels": {"app": "db"}}))
    d = place(_owned(pod, "StatefulSet", "db"), snap, prof)
    assert d.node == "n1"
    assert d.node_reasons["n0"] == (NOT_MATCH,)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ("defaultingType: Sometimes", "defaultingType"),
        (
            "defaultConstraints: [{maxSkew: 1, topologyKey: k, whenUnsatisfiable: DoNotSchedule}]",
            "must be List",
        ),
        (
            "{defaultingType: List, defaultConstraints: [{maxSkew: 0, topologyKey: k, whenUnsatisfiable: DoNotSchedule}]}",  # noqa: E501
            "maxSkew",
        ),
        (
            "{defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: k, whenUnsatisfiable: Maybe}]}",  # noqa: E501
            "whenUnsatisfiable",
        ),
    ],
)
def test_invalid_spread_args_stop_loading(args: str, fragment: str) -> None:
    from webhook.policy.policy_file import PolicyError

    with pytest.raises(PolicyError, match=fragment):
        only("PodTopologySpread", args=plugin_args("PodTopologySpread", args))
