"""The one accessor layer over wire bodies: it never raises on a body of the wrong shape."""

from __future__ import annotations

from typing import Any

import pytest

from webhook import bodies
from webhook.bodies import ObjectRef

POD: dict[str, Any] = {
    "metadata": {
        "name": "web-1", "namespace": "apps", "uid": "u1", "resourceVersion": "42",
        "labels": {"app": "web"}, "annotations": {"a": "b"},
        "ownerReferences": [
            {"kind": "Deployment", "name": "d"},
            {"kind": "ReplicaSet", "name": "web", "controller": True},
        ],
    },
    "spec": {"nodeName": "n1", "schedulerName": "placement-webhook"},
    "status": {"phase": "Running"},
}  # fmt: skip


def test_a_well_formed_pod_reads_as_written() -> None:
    assert ObjectRef.of(POD) == ObjectRef("apps", "web-1", "u1", "42")
    assert str(ObjectRef.of(POD)) == "apps/web-1"
    assert bodies.labels_of(POD) == {"app": "web"}
    assert bodies.annotations_of(POD) == {"a": "b"}
    assert bodies.node_name(POD) == "n1"
    assert bodies.scheduler_name(POD) == "placement-webhook"
    assert bodies.status(POD)["phase"] == "Running"
    assert bodies.controller_of(POD) == {"kind": "ReplicaSet", "name": "web", "controller": True}


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"metadata": None, "spec": None, "status": None},
        {"metadata": [], "spec": "x", "status": 3},
        {"metadata": {"name": 5, "labels": ["a"], "annotations": "x", "ownerReferences": {}},
         "spec": {"nodeName": ["n1"], "schedulerName": 7}},
        {"metadata": {"ownerReferences": ["x", None, {"controller": False}]}},
    ],
)  # fmt: skip
def test_missing_or_mistyped_fields_read_as_empty(body: dict[str, Any]) -> None:
    assert ObjectRef.of(body) == ObjectRef("", "")
    assert bodies.labels_of(body) == {} and bodies.annotations_of(body) == {}
    assert bodies.node_name(body) == "" and bodies.scheduler_name(body) == ""
    assert bodies.controller_of(body) is None
    assert bodies.resource_version(body) == ""
