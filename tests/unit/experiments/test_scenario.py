"""Scenario files: strict decoding, and the objects every arm creates from them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from experiments.arms import ARMS
from experiments.scenario import HOSTNAME, ZONE, ScenarioError, load_scenario, parse_scenario
from webhook.policy.policy_file import load_policy

BUNDLED = Path(__file__).parents[3] / "experiments" / "scenarios"


def scenario(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "t",
        "nodes": [{"count": 4, "prefix": "n", "cpu": "4", "zones": ["a", "b"]}],
        "pods": [
            {"count": 6, "prefix": "web", "labels": {"app": "web"}, "spread": "zone"},
            {"count": 3, "prefix": "db", "labels": {"app": "db"}, "antiAffinity": "hostname"},
        ],
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize("path", sorted(BUNDLED.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_bundled_scenario_loads(path: Path) -> None:
    assert load_scenario(path).pod_count > 0


def test_nodes_get_names_zones_round_robin_and_stepped_sizes() -> None:
    group = {"count": 3, "prefix": "n", "cpu": "2", "cpuStep": "500m", "zones": ["a", "b"]}

    nodes = parse_scenario(scenario(nodes=[group])).node_manifests()

    assert [n["metadata"]["name"] for n in nodes] == ["n-00000", "n-00001", "n-00002"]
    assert [n["metadata"]["labels"][ZONE] for n in nodes] == ["a", "b", "a"]
    assert [n["status"]["allocatable"]["cpu"] for n in nodes] == ["2000m", "2500m", "3000m"]


def test_pod_groups_are_interleaved_in_proportion() -> None:
    pods = parse_scenario(scenario()).pod_manifests()

    first_six = Counter(p["metadata"]["name"].split("-")[0] for p in pods[:6])
    assert first_six == {"web": 4, "db": 2}
    assert len(pods) == 9


def test_spread_and_anti_affinity_select_the_groups_own_labels() -> None:
    pods = {p["metadata"]["name"]: p for p in parse_scenario(scenario()).pod_manifests()}

    spread = pods["web-00000"]["spec"]["topologySpreadConstraints"][0]
    anti = pods["db-00000"]["spec"]["affinity"]["podAntiAffinity"]
    term = anti["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert spread["topologyKey"] == ZONE
    assert spread["labelSelector"] == {"matchLabels": {"app": "web"}}
    assert spread["whenUnsatisfiable"] == "DoNotSchedule"
    assert term == {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "db"}}}


def test_list_valued_sizes_cycle() -> None:
    pods = parse_scenario(
        scenario(pods=[{"count": 3, "prefix": "p", "cpu": ["100m", "200m"]}])
    ).pod_manifests()

    cpus = [p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in pods]
    assert cpus == ["100m", "200m", "100m"]


def test_the_policy_carries_the_scenario_profile_and_the_placement_mode() -> None:
    parsed = parse_scenario(
        scenario(
            percentageOfNodesToScore=100,
            profile={"plugins": {"score": {"disabled": [{"name": "ImageLocality"}]}}},
        )
    )

    policy = load_policy(parsed.policy_text("nodeAffinity"))
    docs = list(yaml.safe_load_all(parsed.policy_text()))
    assert policy.placement.mode == "nodeAffinity"
    assert "ImageLocality" not in policy.default_profile.score_weights
    assert docs[0]["profiles"][0]["percentageOfNodesToScore"] == 100


def test_an_arms_placement_fields_reach_the_webhooks_policy() -> None:
    parsed = parse_scenario(scenario())
    lean = load_policy(parsed.policy_text("nodeName", dict(ARMS["BL"].placement))).placement
    before = load_policy(parsed.policy_text("nodeName", dict(ARMS["B0"].placement))).placement

    assert (lean.decision_annotations, lean.scheduled_events) == ("minimal", False)
    assert before.copy_topology_labels is False and before.scheduled_events is True
    assert load_policy(parsed.policy_text()).placement.copy_topology_labels is True


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"nodez": []}, "unknown field"),
        ({"arms": ["A", "Z"]}, "unknown arm"),
        ({"arrival": {"mode": "rate"}}, "must be positive"),
        ({"arrival": {"mode": "trickle"}}, "burst, rate or sequential"),
        ({"pods": [{"count": 1, "spread": "zone"}]}, "select the group's labels"),
        ({"pods": [{"count": 1, "prefix": "a"}, {"count": 1, "prefix": "a"}]}, "own prefix"),
        ({"percentageOfNodesToScore": 101}, "0..100"),
        ({"profile": {"plugins": {"score": {"enabled": [{"name": "Nope"}]}}}}, "unknown plugin"),
        ({"nodes": []}, "non-empty list"),
        ({"kubelets": "yes"}, "kubelets: must be true or false"),
        ({"kubelets": True, "nodes": [{"count": 1, "cpu": "1500m"}]}, r"nodes\[0\].cpu: .*whole"),
        ({"kubelets": True, "nodes": [{"count": 2, "cpuStep": "400m"}]}, r"cpuStep: .*whole"),
    ],
)
def test_invalid_scenarios_are_refused_with_the_field_named(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(scenario(**overrides))


def test_a_kubelet_scenario_says_so_in_its_summary() -> None:
    assert parse_scenario(scenario(kubelets=True)).summary()["kubelets"] is True
    assert parse_scenario(scenario()).kubelets is False
