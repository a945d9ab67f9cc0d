"""The extender wire format: what kube-scheduler sends, in either key case, and what we answer."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.extender.builders import args_body, node, pod
from webhook.extender import wire

NODES = [node("a"), node("b"), node("c")]


def test_node_cache_capable_args_carry_names_and_a_null_node_list() -> None:
    args = wire.parse_args(args_body(pod("p"), NODES, cache_capable=True))

    assert args.node_names == ("a", "b", "c")
    assert args.nodes is None
    assert args.node_cache_capable
    assert args.pod["metadata"]["name"] == "p"


def test_args_without_node_cache_carry_full_node_objects() -> None:
    args = wire.parse_args(args_body(pod("p"), NODES, cache_capable=False))

    assert args.node_names == ("a", "b", "c")
    assert args.nodes is not None and args.nodes[1]["status"]["allocatable"]["cpu"] == "4"
    assert not args.node_cache_capable


@pytest.mark.parametrize("cache_capable", [True, False])
def test_lower_case_keys_are_read_like_go_reads_them(cache_capable: bool) -> None:
    upper = wire.parse_args(args_body(pod("p"), NODES, cache_capable=cache_capable))
    lower = wire.parse_args(
        args_body(pod("p"), NODES, cache_capable=cache_capable, lower_case=True)
    )

    assert lower == upper


@given(st.lists(st.booleans(), min_size=9, max_size=9))
def test_any_casing_of_the_field_names_is_accepted(flips: list[bool]) -> None:
    def cased(word: str) -> str:
        return "".join(c.upper() if f else c.lower() for c, f in zip(word, flips, strict=False))

    body = orjson.dumps({cased("Pod"): pod("p"), cased("NodeNames"): ["a"], cased("Nodes"): None})

    assert wire.parse_args(body).node_names == ("a",)


def test_an_exact_key_wins_over_a_differently_cased_one() -> None:
    body = orjson.dumps({"nodenames": ["lower"], "NodeNames": ["exact"], "Pod": pod("p")})

    assert wire.parse_args(body).node_names == ("exact",)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (orjson.dumps({"NodeNames": ["a"]}), "Pod must be a Pod object"),
        (orjson.dumps({"Pod": pod("p"), "NodeNames": [1]}), "list of strings"),
        (orjson.dumps({"Pod": pod("p"), "Nodes": None, "NodeNames": None}), "neither"),
        (orjson.dumps({"Pod": pod("p"), "Nodes": {"items": [{"metadata": {}}]}}), "no metadata"),
        (orjson.dumps({"Pod": pod("p"), "Nodes": {"items": {}}}), "must be a list"),
    ],
)
def test_malformed_args_are_a_wire_error_naming_the_problem(body: bytes, message: str) -> None:
    with pytest.raises(wire.WireError, match=message):
        wire.parse_args(body)


def test_filter_result_for_a_node_cache_capable_scheduler_lists_names() -> None:
    args = wire.parse_args(args_body(pod("p"), NODES))

    result = wire.filter_result(args, ["a", "c"], {"b": "Insufficient cpu"}, {})

    assert result == {
        "NodeNames": ["a", "c"],
        "Nodes": None,
        "FailedNodes": {"b": "Insufficient cpu"},
        "FailedAndUnresolvableNodes": {},
    }


def test_filter_result_without_node_cache_returns_the_passing_node_objects_in_order() -> None:
    args = wire.parse_args(args_body(pod("p"), NODES, cache_capable=False))

    result = wire.filter_result(args, ["c", "a"], {}, {"b": "node(s) were unschedulable"})

    assert result["NodeNames"] is None
    assert result["Nodes"] is not None
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["a", "c"]
    assert result["FailedAndUnresolvableNodes"] == {"b": "node(s) were unschedulable"}


def test_no_passing_node_is_an_empty_list_not_null() -> None:
    args = wire.parse_args(args_body(pod("p"), NODES))

    assert wire.filter_result(args, [])["NodeNames"] == []


def test_a_filter_error_carries_only_the_error() -> None:
    assert wire.filter_error("cache not synced") == {"Error": "cache not synced"}


def test_host_priorities_use_go_field_names() -> None:
    assert wire.host_priorities([("a", 10), ("b", 0)]) == [
        {"Host": "a", "Score": 10},
        {"Host": "b", "Score": 0},
    ]


def test_a_priority_above_max_extender_priority_is_refused() -> None:
    with pytest.raises(ValueError, match=r"outside 0\.\.10"):
        wire.host_priorities([("a", 11)])


def test_binding_args_as_kube_scheduler_sends_them_are_parsed() -> None:
    body = orjson.dumps({"PodName": "p", "PodNamespace": "ns", "PodUID": "u-1", "Node": "a"})

    assert wire.parse_binding(body) == wire.BindingArgs("p", "ns", "u-1", "a")


def test_binding_args_with_lower_case_keys_are_parsed() -> None:
    body = orjson.dumps({"podName": "p", "podNamespace": "ns", "podUID": "u-1", "node": "a"})

    assert wire.parse_binding(body) == wire.BindingArgs("p", "ns", "u-1", "a")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"PodNamespace": "ns", "Node": "a"}, "PodName is required"),
        ({"PodName": "p", "PodNamespace": "ns", "Node": ""}, "Node is required"),
        ({"PodName": 3, "PodNamespace": "ns", "Node": "a"}, "must be a string"),
    ],
)
def test_incomplete_binding_args_are_a_wire_error(data: dict[str, object], message: str) -> None:
    with pytest.raises(wire.WireError, match=message):
        wire.parse_binding(orjson.dumps(data))


def test_binding_result_is_empty_on_success_and_carries_the_error_otherwise() -> None:
    assert wire.binding_result() == {}
    assert wire.binding_result("conflict") == {"Error": "conflict"}
