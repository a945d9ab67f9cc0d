"""Placement quality recounted from the final objects."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.quality import assess

ZONE = "topology.kubernetes.io/zone"


def node(name: str, cpu: str = "4", zone: str = "a", **spec: Any) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "10"}
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE: zone}},
        "spec": spec,
        "status": {"allocatable": alloc},
    }


def pod(name: str, on: str | None, cpu: str = "1", labels: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:  # fmt: skip
    body = {"containers": [{"resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}], **spec}
    if on:
        body["nodeName"] = on
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels or {}}, "spec": body}


def test_utilization_counts_bound_pods_only() -> None:
    quality = assess([node("a"), node("b")], [pod("p", "a", cpu="2"), pod("q", None)])

    assert quality.cpu_utilization == (0.5, 0.0)
    assert quality.nodes_used == 1
    assert quality.pods_bound == 1


def test_a_node_whose_requests_exceed_allocatable_is_overcommitted() -> None:
    quality = assess([node("a", cpu="2")], [pod("p", "a", cpu="1500m"), pod("q", "a", cpu="1")])

    assert quality.overcommitted == {"a": ("cpu",)}


def test_a_pod_on_a_node_its_selector_excludes_violates_it() -> None:
    quality = assess([node("a")], [pod("p", "a", nodeSelector={ZONE: "b"})])

    assert quality.violations == {"nodeSelector": 1}


def test_an_untolerated_no_schedule_taint_is_a_violation_and_a_tolerated_one_is_not() -> None:
    taint = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
    tolerate = [{"key": "gpu", "operator": "Exists"}]
    pods = [pod("p", "g"), pod("q", "g", tolerations=tolerate)]

    quality = assess([node("g", taints=[taint])], pods)

    assert quality.violations == {"taint": 1}


def test_two_pods_sharing_a_host_against_their_anti_affinity_both_violate() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname",
                 "labelSelector": {"matchLabels": {"app": "db"}}}
            ]
        }
    }  # fmt: skip
    db = {"app": "db"}
    pods = [pod("x", "a", labels=db, affinity=anti), pod("y", "a", labels=db, affinity=anti),
            pod("z", "b", labels=db, affinity=anti)]  # fmt: skip

    quality = assess([node("a"), node("b")], pods)

    assert quality.violations == {"antiAffinity": 2}


@pytest.mark.parametrize(("in_a", "in_b", "excess"), [(2, 1, 0), (3, 1, 1), (4, 0, 3)])
def test_pods_beyond_min_plus_max_skew_violate_the_spread(
    in_a: int, in_b: int, excess: int
) -> None:
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]  # fmt: skip
    web = {"app": "web"}
    pods = [pod(f"a{i}", "a", cpu="10m", labels=web, topologySpreadConstraints=spread)
            for i in range(in_a)]  # fmt: skip
    pods += [pod(f"b{i}", "b", cpu="10m", labels=web, topologySpreadConstraints=spread)
             for i in range(in_b)]  # fmt: skip

    quality = assess([node("a", zone="a"), node("b", zone="b")], pods)

    assert quality.violations.get("spread", 0) == excess
