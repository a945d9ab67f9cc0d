from typing import Any

import pytest
from policy_builders import make_node, make_pod, only, place, plugin_args, snapshot

from webhook.policy.status import Code

FIT = only("NodeResourcesFit", scores={"NodeResourcesFit": 1})


@pytest.mark.parametrize(
    ("pod", "existing", "node", "reasons"),
    [
        (make_pod("p", "1", "1Gi"), [], make_node("n", "2", "2Gi"), None),
        (make_pod("p", "3", "1Gi"), [], make_node("n", "2", "2Gi"), ("Insufficient cpu",)),
        (make_pod("p", "1", "3Gi"), [], make_node("n", "2", "2Gi"), ("Insufficient memory",)),
        (
            make_pod("p", "3", "3Gi"),
            [],
            make_node("n", "2", "2Gi"),
            ("Insufficient cpu", "Insufficient memory"),
        ),
        (
            make_pod("p", "1", "1Gi"),
            [make_pod("e", "1500m", None, node="n")],
            make_node("n", "2", "2Gi"),
            ("Insufficient cpu",),
        ),
        (
            make_pod("p", "500m"),
            [make_pod("e", "1500m", None, node="n")],
            make_node("n", "2", "2Gi"),
            None,
        ),
        (make_pod("p"), [make_pod("e", node="n")], make_node("n", pods="1"), ("Too many pods",)),
        (
            make_pod("p", "3"),
            [make_pod("e", node="n")],
            make_node("n", "2", pods="1"),
            ("Too many pods", "Insufficient cpu"),
        ),
        (
            make_pod("p", requests={"nvidia.com/gpu": "1"}),
            [],
            make_node("n"),
            ("Insufficient nvidia.com/gpu",),
        ),
        (
            make_pod("p", requests={"nvidia.com/gpu": "1"}),
            [],
            make_node("n", extra={"nvidia.com/gpu": "1"}),
            None,
        ),
        (
            make_pod("p", requests={"nvidia.com/gpu": "1"}),
            [make_pod("e", requests={"nvidia.com/gpu": "1"}, node="n")],
            make_node("n", extra={"nvidia.com/gpu": "1"}),
            ("Insufficient nvidia.com/gpu",),
        ),
        (
            make_pod("p", requests={"ephemeral-storage": "2Gi"}),
            [],
            make_node("n", extra={"ephemeral-storage": "1Gi"}),
            ("Insufficient ephemeral-storage",),
        ),
        # a pod requesting nothing only needs a pod slot
        (make_pod("p"), [make_pod("e", "2", "2Gi", node="n")], make_node("n", "2", "2Gi"), None),
    ],
)
def test_pod_fits_only_when_requests_fit_the_free_allocatable(
    pod: dict[str, Any],
    existing: list[dict[str, Any]],
    node: dict[str, Any],
    reasons: tuple[str, ...] | None,
) -> None:
    d = place(pod, snapshot([node], existing), FIT)
    if reasons is None:
        assert d.node == "n"
    else:
        assert d.node is None
        assert d.node_reasons["n"] == reasons


def test_a_terminating_pod_holds_its_room_until_it_is_gone_a_finished_one_does_not() -> None:
    """kube-scheduler's NodeInfo and the kubelet's admission both count a pod being
    deleted until it has stopped; a Succeeded or Failed pod holds nothing."""
    terminating = make_pod("stopping", "2", node="n")
    terminating["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    finished = make_pod("done", "2", node="n", phase="Succeeded")
    node = make_node("n", "2", "2Gi")
    held = place(make_pod("p", "1"), snapshot([node], [terminating]), FIT)
    assert held.node is None
    assert held.node_reasons["n"] == ("Insufficient cpu",)
    assert place(make_pod("p", "1"), snapshot([node], [finished]), FIT).node == "n"


def test_request_larger_than_the_whole_node_is_unresolvable() -> None:
    d = place(make_pod("p", "64"), snapshot([make_node("n", "2")]), FIT)
    assert d.code is Code.UnschedulableAndUnresolvable


def test_request_that_fits_an_empty_node_is_only_unschedulable() -> None:
    d = place(
        make_pod("p", "2"), snapshot([make_node("n", "2")], [make_pod("e", "1", node="n")]), FIT
    )
    assert d.code is Code.Unschedulable


def test_ignored_extended_resources_are_not_checked() -> None:
    prof = only(
        "NodeResourcesFit",
        args=plugin_args(
            "NodeResourcesFit",
            """
            ignoredResources: [example.com/foo]
            ignoredResourceGroups: [example.org]
            """,
        ),
    )
    pod = make_pod("p", requests={"example.com/foo": "1", "example.org/bar": "2"})
    assert place(pod, snapshot([make_node("n")]), prof).node == "n"


def _score(prof: Any, pod: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, int]:
    d = place(pod, snapshot(nodes), prof)
    return {n: s["NodeResourcesFit"] for n, s in d.scores.items()}


def test_least_allocated_prefers_the_emptier_node() -> None:
    # cpu (4000-3000)*100/4000 = 25, memory (10000-5000)*100/10000 = 50 -> 37
    nodes = [make_node("a", "4", "10000"), make_node("b", "6", "10000")]
    pod = make_pod("p", "3", "5000")
    scores = _score(FIT, pod, nodes)
    assert scores == {"a": 37, "b": 50}


def test_least_allocated_uses_nonzero_defaults_for_pods_without_requests() -> None:
    nodes = [make_node("a", "1", "1000Mi")]
    scores = _score(FIT, make_pod("p"), nodes)
    # cpu (1000-100)*100/1000 = 90, memory (1000-200)*100/1000 = 80 -> 85
    assert scores == {"a": 85}


def test_most_allocated_prefers_the_fuller_node() -> None:
    prof = only(
        "NodeResourcesFit",
        scores={"NodeResourcesFit": 1},
        args=plugin_args("NodeResourcesFit", "scoringStrategy: {type: MostAllocated}"),
    )
    nodes = [make_node("a", "4", "10000"), make_node("b", "6", "10000")]
    scores = _score(prof, make_pod("p", "3", "5000"), nodes)
    # a: cpu 75, mem 50 -> 62 ; b: cpu 50, mem 50 -> 50
    assert scores == {"a": 62, "b": 50}


def test_requested_to_capacity_ratio_follows_the_shape() -> None:
    prof = only(
        "NodeResourcesFit",
        scores={"NodeResourcesFit": 1},
        args=plugin_args(
            "NodeResourcesFit",
            """
            scoringStrategy:
              type: RequestedToCapacityRatio
              resources: [{name: cpu, weight: 1}]
              requestedToCapacityRatio:
                shape:
                  - {utilization: 0, score: 0}
                  - {utilization: 100, score: 10}
            """,
        ),
    )
    nodes = [make_node("a", "4"), make_node("b", "10")]
    scores = _score(prof, make_pod("p", "3"), nodes)
    # utilization 75% -> 75, 30% -> 30 (bin packing)
    assert scores == {"a": 75, "b": 30}


def test_requested_to_capacity_ratio_with_decreasing_shape_truncates_like_go() -> None:
    prof = only(
        "NodeResourcesFit",
        scores={"NodeResourcesFit": 1},
        args=plugin_args(
            "NodeResourcesFit",
            """
            scoringStrategy:
              type: RequestedToCapacityRatio
              resources: [{name: cpu}]
              requestedToCapacityRatio:
                shape:
                  - {utilization: 0, score: 10}
                  - {utilization: 30, score: 3}
            """,
        ),
    )
    # utilization 10%: 100 + (30-100)*(10-0)/30 = 100 - 23.33 -> Go truncation gives 77
    scores = _score(prof, make_pod("p", "1"), [make_node("a", "10")])
    assert scores == {"a": 77}


def test_extended_resource_is_scored_only_when_requested() -> None:
    prof = only(
        "NodeResourcesFit",
        scores={"NodeResourcesFit": 1},
        args=plugin_args(
            "NodeResourcesFit",
            """
            scoringStrategy:
              type: LeastAllocated
              resources: [{name: cpu, weight: 1}, {name: nvidia.com/gpu, weight: 3}]
            """,
        ),
    )
    nodes = [make_node("a", "4", extra={"nvidia.com/gpu": "4"})]
    # no gpu request: only cpu counts: (4000-1000)*100/4000 = 75
    assert _score(prof, make_pod("p", "1"), nodes) == {"a": 75}
    # gpu 1 of 4: 75 ; weighted (75*1 + 75*3)/4 = 75 ; with 2 gpus: (75 + 50*3)/4 = 56
    assert _score(prof, make_pod("p", "1", requests={"nvidia.com/gpu": "2"}), nodes) == {"a": 56}
