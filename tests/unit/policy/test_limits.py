"""Pods the core must not decide: malformed for the fields it reads, or too costly."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.policy.limits import PodLimits, why_not_evaluable


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i"}], **spec},
    }


def term(n: int) -> dict[str, Any]:
    return {"matchExpressions": [{"key": f"k{n}", "operator": "In", "values": ["a"]}]}


def test_a_plain_pod_and_nulls_for_absent_fields_are_fine() -> None:
    assert why_not_evaluable(pod()) is None
    assert why_not_evaluable(pod(tolerations=None, affinity={"nodeAffinity": None})) is None


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"tolerations": [None]}, "spec.tolerations[0]: must not be null"),
        ({"tolerations": [{"key": 1}]}, "spec.tolerations[0].key: must be a string"),
        ({"schedulerName": ["x"]}, "spec.schedulerName: must be a string"),
        ({"overhead": {"cpu": True}}, "spec.overhead['cpu']: must be a quantity"),
        ({"affinity": True}, "spec.affinity: must be an object"),
        ({"topologySpreadConstraints": 1}, "spec.topologySpreadConstraints: must be an array"),
        ({"containers": [{"ports": [{"hostPort": "80"}]}]}, "hostPort: must be an integer"),
        ({"priority": True}, "spec.priority: must be an integer"),
    ],
)
def test_a_field_the_core_reads_with_the_wrong_type_is_malformed(
    spec: dict[str, Any], where: str
) -> None:
    reason = why_not_evaluable(pod(**spec))
    assert reason is not None and reason.startswith("malformed pod: ") and where in reason


def test_labels_must_be_strings() -> None:
    obj = pod()
    obj["metadata"]["labels"] = {"a": 1}
    assert "metadata.labels['a']: must be a string" in str(why_not_evaluable(obj))


def test_ten_thousand_node_selector_terms_are_too_many() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term(i) for i in range(10_000)]}}}  # fmt: skip
    assert why_not_evaluable(pod(affinity=affinity)) == (
        "10000 node selector terms, more than the 64 this webhook evaluates"
    )


def test_twenty_thousand_host_ports_are_too_many() -> None:
    ports = [{"containerPort": p, "hostPort": p} for p in range(1, 20_001)]
    reason = why_not_evaluable(pod(containers=[{"name": "c", "ports": ports}]))
    assert reason == "20000 host ports, more than the 256 this webhook evaluates"


def test_selector_values_are_counted_over_every_selector() -> None:
    spread = {"maxSkew": 1, "topologyKey": "zone", "labelSelector": {
        "matchExpressions": [{"key": "a", "operator": "In", "values": ["x"] * 30}]}}  # fmt: skip
    limits = PodLimits(selector_values=50)
    assert why_not_evaluable(pod(topologySpreadConstraints=[spread]), limits) is None
    reason = why_not_evaluable(pod(topologySpreadConstraints=[spread, spread]), limits)
    assert reason == "60 selector values, more than the 50 this webhook evaluates"


def test_huge_label_sets_are_too_large() -> None:
    obj = pod()
    obj["metadata"]["labels"] = {f"k{i}": "v" * 60 for i in range(3000)}
    assert "labels, more than the 512" in str(why_not_evaluable(obj))
