"""NodeResourcesBalancedAllocation, ImageLocality and NodeLabelNumber scores."""

from typing import Any

import pytest
from policy_builders import make_node, make_pod, only, place, plugin_args, snapshot

from webhook.policy.policy_file import PolicyError

BA = only("NodeResourcesFit", scores={"NodeResourcesBalancedAllocation": 1})
IL = only(scores={"ImageLocality": 1})


def _scores(
    prof: Any, pod: dict[str, Any], nodes: list[dict[str, Any]], plugin: str, pods: Any = ()
) -> dict[str, int]:
    d = place(pod, snapshot(nodes, list(pods)), prof)
    return {n: s[plugin] for n, s in d.scores.items()}


def test_balanced_allocation_rejects_weights_other_than_one() -> None:
    with pytest.raises(PolicyError, match="must be 1"):
        only(
            scores={"NodeResourcesBalancedAllocation": 1},
            args=plugin_args(
                "NodeResourcesBalancedAllocation", "resources: [{name: cpu, weight: 2}]"
            ),
        )


MB = 1024 * 1024


def test_image_locality_prefers_nodes_with_the_image() -> None:
    nodes = [
        make_node("a", images=[(["registry.example/app:1"], 500 * MB)]),
        make_node("b", images=[(["registry.example/other:1"], 500 * MB)]),
    ]
    s = _scores(IL, make_pod("p"), nodes, "ImageLocality")
    # spread 1/2: 250MB -> 100 * (250-23)/(1000-23) = 23
    assert s == {"a": 23, "b": 0}


def test_image_locality_normalizes_untagged_images() -> None:
    nodes = [make_node("a", images=[(["nginx:latest"], 900 * MB)])]
    s = _scores(IL, make_pod("p", image="nginx"), nodes, "ImageLocality")
    assert s == {"a": 89}  # 100 * (900-23) // (1000-23)


def test_image_locality_caps_at_the_per_container_threshold() -> None:
    nodes = [make_node("a", images=[(["registry.example/app:1"], 5000 * MB)])]
    assert _scores(IL, make_pod("p"), nodes, "ImageLocality") == {"a": 100}


NLN_HIGH = only(
    scores={"NodeLabelNumber": 1},
    args=plugin_args("NodeLabelNumber", "labelKey: example.com/generation"),
)
NLN_LOW = only(
    scores={"NodeLabelNumber": 1},
    args=plugin_args("NodeLabelNumber", "{labelKey: example.com/generation, preferHigher: false}"),
)


def _gen_nodes() -> list[dict[str, Any]]:
    return [
        make_node("old", labels={"example.com/generation": "1"}),
        make_node("mid", labels={"example.com/generation": "3"}),
        make_node("new", labels={"example.com/generation": "5"}),
        make_node("none"),
        make_node("junk", labels={"example.com/generation": "five"}),
    ]


def test_node_label_number_prefers_higher_values_by_default() -> None:
    s = _scores(NLN_HIGH, make_pod("p"), _gen_nodes(), "NodeLabelNumber")
    assert s == {"old": 0, "mid": 50, "new": 100, "none": 0, "junk": 0}
    assert place(make_pod("p"), snapshot(_gen_nodes()), NLN_HIGH).node == "new"


def test_node_label_number_can_prefer_lower_values() -> None:
    s = _scores(NLN_LOW, make_pod("p"), _gen_nodes(), "NodeLabelNumber")
    assert s == {"old": 100, "mid": 50, "new": 0, "none": 0, "junk": 0}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ("preferHigher: true", "labelKey: is required"),
        ("{labelKey: 'bad key!'}", "not a valid label key"),
        ("{labelKey: a, preferHigher: maybe}", "must be true or false"),
        ("{labelKey: a, colour: red}", "unknown field"),
    ],
)
def test_node_label_number_args_are_validated(args: str, fragment: str) -> None:
    with pytest.raises(PolicyError, match=fragment):
        only(scores={"NodeLabelNumber": 1}, args=plugin_args("NodeLabelNumber", args))
