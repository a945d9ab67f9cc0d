"""What the API server will refuse, found before anything is reserved (table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.policy.validation import invalid_reason


def pod(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
        **spec: Any) -> dict[str, Any]:  # fmt: skip
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {
        "metadata": {"name": "p", "labels": spec.pop("labels", {"app": "web"})},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}], **spec},
    }


@pytest.mark.parametrize(
    "valid",
    [
        pod(),
        pod({"cpu": "500m", "memory": "1Gi"}),
        pod({"cpu": "1"}, {"cpu": "2"}),
        pod({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"}),
        pod(None, {"nvidia.com/gpu": "1"}),  # the request defaults to the limit
        pod({"hugepages-2Mi": "4Mi", "memory": "1Gi"}, {"hugepages-2Mi": "4Mi"}),
        pod({"kubernetes.io/batch-cpu": "1500"}),  # a native name with a prefix
        pod(overhead={"cpu": "250m", "memory": "120Mi"}),
        pod(resources={"requests": {"cpu": "2"}}),
        pod(labels={"app.kubernetes.io/name": "web", "tier": "", "v": "1.2_3-x"}),
    ],
)
def test_pods_the_api_server_accepts_pass(valid: dict[str, Any]) -> None:
    assert invalid_reason(valid) is None


@pytest.mark.parametrize(
    ("invalid", "reason"),
    [
        (pod({"nvidia.com/gpu": "-16"}, {"nvidia.com/gpu": "-16"}), "must be non-negative"),
        (pod({"cpu": "-1"}), "must be non-negative"),
        (pod({"example.com/foo": "0.5"}, {"example.com/foo": "0.5"}), "whole number"),
        (pod({"example.com/foo": "2"}, {"example.com/foo": "3"}), "must equal its limit"),
        (pod({"example.com/foo": "2"}), "must be set"),
        (pod({"hugepages-2Mi": "2Mi", "memory": "1Gi"}), "must be set"),
        (pod({"cpu": "2"}, {"cpu": "1"}), "less than or equal to its limit"),
        (pod({"cpu": "1e30"}), "too large"),
        (pod({"memory": "1e20"}), "too large"),
        (pod({"cpu": "lots"}), "not a quantity"),
        (pod({"gpu": "1"}), "standard resource"),
        (pod({"bad name!/x": "1"}, {"bad name!/x": "1"}), "extended resource name"),
        (pod(resources={"requests": {"ephemeral-storage": "1Gi"}}), "pod-level"),
        (pod(overhead={"cpu": "-1"}), "must be non-negative"),
        (pod(labels={"app": "x" * 64}), "not a valid label value"),
        (pod(labels={"-bad": "x"}), "not a valid label key"),
        (pod(labels={"a/b/c": "x"}), "not a valid label key"),
        ({"metadata": {}, "spec": {"containers": "nope"}}, "not a list"),
        ({"metadata": {}, "spec": {"containers": [{"resources": []}]}}, "not an object"),
    ],
)
def test_pods_the_api_server_refuses_are_named_with_the_field_at_fault(
    invalid: dict[str, Any], reason: str
) -> None:
    found = invalid_reason(invalid)
    assert found is not None and reason in found, found
