from typing import Any

import pytest
from policy_builders import make_node, make_pod, only, place, snapshot

from webhook.policy.status import Code

TT = only("TaintToleration", scores={"TaintToleration": 1})


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tol(key: str = "", op: str = "Equal", value: str = "", effect: str = "") -> dict[str, str]:
    return {"key": key, "operator": op, "value": value, "effect": effect}


@pytest.mark.parametrize(
    ("taints", "tolerations", "fits"),
    [
        ([], [], True),
        ([taint("dedicated", "gpu")], [], False),
        ([taint("dedicated", "gpu", "NoExecute")], [], False),
        ([taint("dedicated", "gpu", "PreferNoSchedule")], [], True),
        ([taint("dedicated", "gpu")], [tol("dedicated", "Equal", "gpu", "NoSchedule")], True),
        ([taint("dedicated", "gpu")], [tol("dedicated", "Equal", "cpu", "NoSchedule")], False),
        ([taint("dedicated", "gpu")], [tol("dedicated", "Exists")], True),
        ([taint("dedicated", "gpu")], [tol("dedicated", "", "gpu")], True),
        ([taint("dedicated", "gpu")], [tol("dedicated", "Exists", effect="NoExecute")], False),
        ([taint("dedicated", "gpu")], [tol("", "Exists")], True),
        ([taint("a"), taint("b")], [tol("a", "Exists")], False),
        ([taint("a"), taint("b")], [tol("a", "Exists"), tol("b", "Exists")], True),
    ],
)
def test_pod_with_untolerated_taint_is_not_placed(
    taints: list[dict[str, str]], tolerations: list[dict[str, str]], fits: bool
) -> None:
    d = place(make_pod("p", tolerations=tolerations), snapshot([make_node("n", taints=taints)]), TT)
    assert (d.node == "n") is fits


def test_reason_names_the_first_untolerated_taint() -> None:
    node = make_node(
        "n", taints=[taint("a", "1", "PreferNoSchedule"), taint("b", "2"), taint("c", "3")]
    )
    d = place(make_pod("p"), snapshot([node]), TT)
    assert d.node_reasons["n"] == ("node(s) had untolerated taint(s)",)
    assert d.code is Code.UnschedulableAndUnresolvable
    assert d.message == "0/1 nodes are available: 1 node(s) had untolerated taint(s)."


def test_prefer_no_schedule_taints_lower_the_score() -> None:
    nodes = [
        make_node("clean"),
        make_node("one", taints=[taint("x", "", "PreferNoSchedule")]),
        make_node(
            "two", taints=[taint("x", "", "PreferNoSchedule"), taint("y", "", "PreferNoSchedule")]
        ),
    ]
    d = place(make_pod("p"), snapshot(nodes), TT)
    assert {n: s["TaintToleration"] for n, s in d.scores.items()} == {
        "clean": 100,
        "one": 50,
        "two": 0,
    }
    assert d.node == "clean"


def test_tolerated_prefer_no_schedule_taint_does_not_count() -> None:
    nodes = [make_node("a", taints=[taint("x", "", "PreferNoSchedule")]), make_node("b")]
    pod: dict[str, Any] = make_pod("p", tolerations=[tol("x", "Exists", effect="PreferNoSchedule")])
    d = place(pod, snapshot(nodes), TT)
    assert {n: s["TaintToleration"] for n, s in d.scores.items()} == {"a": 100, "b": 100}
