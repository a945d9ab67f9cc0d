from typing import Any

import pytest
from policy_builders import make_node, make_pod, only, place, plugin_args, snapshot

NA = only("NodeAffinity", scores={"NodeAffinity": 1})
REASON = "node(s) didn't match Pod's node affinity/selector"


def req(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


LABELS = {"zone": "z1", "disk": "ssd", "cores": "16"}


@pytest.mark.parametrize(
    ("spec", "fits"),
    [
        ({}, True),
        ({"nodeSelector": {"zone": "z1"}}, True),
        ({"nodeSelector": {"zone": "z2"}}, False),
        ({"nodeSelector": {"zone": "z1", "disk": "hdd"}}, False),
        ({"nodeSelector": {"missing": "x"}}, False),
        ({"affinity": req({"matchExpressions": [expr("zone", "In", "z1", "z2")]})}, True),
        ({"affinity": req({"matchExpressions": [expr("zone", "NotIn", "z1")]})}, False),
        ({"affinity": req({"matchExpressions": [expr("missing", "NotIn", "z1")]})}, True),
        ({"affinity": req({"matchExpressions": [expr("disk", "Exists")]})}, True),
        ({"affinity": req({"matchExpressions": [expr("disk", "DoesNotExist")]})}, False),
        ({"affinity": req({"matchExpressions": [expr("gpu", "DoesNotExist")]})}, True),
        ({"affinity": req({"matchExpressions": [expr("cores", "Gt", "8")]})}, True),
        ({"affinity": req({"matchExpressions": [expr("cores", "Gt", "16")]})}, False),
        ({"affinity": req({"matchExpressions": [expr("cores", "Lt", "17")]})}, True),
        ({"affinity": req({"matchExpressions": [expr("zone", "Gt", "1")]})}, False),
        ({"affinity": req({"matchExpressions": [expr("cores", "Gt", "x")]})}, False),
        # terms are ORed, expressions ANDed
        (
            {
                "affinity": req(
                    {"matchExpressions": [expr("zone", "In", "z9")]},
                    {"matchExpressions": [expr("disk", "In", "ssd")]},
                )
            },
            True,
        ),
        (
            {
                "affinity": req(
                    {"matchExpressions": [expr("zone", "In", "z1"), expr("disk", "In", "hdd")]}
                )
            },
            False,
        ),
        # an empty term matches nothing
        ({"affinity": req({})}, False),
        ({"affinity": req({"matchFields": [expr("metadata.name", "In", "n")]})}, True),
        ({"affinity": req({"matchFields": [expr("metadata.name", "NotIn", "n")]})}, False),
        # nodeSelector and affinity must both match
        (
            {
                "nodeSelector": {"zone": "z2"},
                "affinity": req({"matchExpressions": [expr("disk", "Exists")]}),
            },
            False,
        ),
    ],
)
def test_pod_is_placed_only_on_nodes_matching_selector_and_required_affinity(
    spec: dict[str, Any], fits: bool
) -> None:
    d = place(make_pod("p", **spec), snapshot([make_node("n", labels=LABELS)]), NA)
    assert (d.node == "n") is fits
    if not fits:
        assert d.node_reasons["n"][0] in (REASON, "node(s) didn't satisfy plugin(s) [NodeAffinity]")


def test_pinning_by_node_name_field_reports_other_nodes_as_absent() -> None:
    nodes = [make_node("a"), make_node("b"), make_node("c")]
    pod = make_pod("p", affinity=req({"matchFields": [expr("metadata.name", "In", "b")]}))
    d = place(pod, snapshot(nodes), NA)
    assert d.node == "b"
    assert d.node_reasons["a"] == ("node(s) didn't satisfy plugin(s) [NodeAffinity]",)


def test_preferred_terms_add_their_weights_and_are_normalized() -> None:
    nodes = [
        make_node("a", labels={"zone": "z1"}),
        make_node("b", labels={"zone": "z2", "ssd": "y"}),
        make_node("c"),
    ]
    pref = [
        {"weight": 2, "preference": {"matchExpressions": [expr("zone", "In", "z1")]}},
        {"weight": 4, "preference": {"matchExpressions": [expr("ssd", "Exists")]}},
    ]
    pod = make_pod(
        "p", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": pref}}
    )
    d = place(pod, snapshot(nodes), NA)
    assert {n: s["NodeAffinity"] for n, s in d.scores.items()} == {"a": 50, "b": 100, "c": 0}
    assert d.node == "b"


def test_added_affinity_from_args_is_enforced() -> None:
    prof = only(
        "NodeAffinity",
        args=plugin_args(
            "NodeAffinity",
            """
            addedAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                  - matchExpressions: [{key: pool, operator: In, values: [web]}]
            """,
        ),
    )
    nodes = [make_node("a", labels={"pool": "web"}), make_node("b")]
    d = place(make_pod("p"), snapshot(nodes), prof)
    assert d.node == "a"
    assert d.node_reasons["b"] == ("node(s) didn't match scheduler-enforced node affinity",)


def test_conflicting_node_name_terms_reject_the_pod_before_filtering() -> None:
    term = {
        "matchFields": [
            expr("metadata.name", "In", "a"),
            expr("metadata.name", "In", "b"),
        ]
    }
    d = place(make_pod("p", affinity=req(term)), snapshot([make_node("a"), make_node("b")]), NA)
    assert d.node is None
    assert d.message == "0/2 nodes are available: pod affinity terms conflict."


def test_pinning_to_a_missing_node_reports_every_node_as_absent() -> None:
    pod = make_pod("p", affinity=req({"matchFields": [expr("metadata.name", "In", "gone")]}))
    d = place(pod, snapshot([make_node("a"), make_node("b")]), NA)
    assert d.message == (
        "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )
