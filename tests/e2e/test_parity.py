"""Our unschedulable messages diffed against the real kube-scheduler's FailedScheduling events.

Same cluster, same pod: kube-scheduler (no webhook registered here) reports
why it cannot place the pod; our policy, run on a snapshot listed from the
same API server, must say the same thing in the same words.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import wait_for
from webhook.devcluster import DevCluster
from webhook.devcluster.objects import create_node, ensure_namespace, node_manifest, pod_manifest
from webhook.kube import Kube
from webhook.policy.dump import build_snapshot
from webhook.policy.framework import schedule
from webhook.policy.model import PodView
from webhook.policy.policy_file import default_policy

pytestmark = pytest.mark.e2e

NAMESPACE = "parity"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    with DevCluster.start(tmp_path_factory.mktemp("parity"), scheduler=True) as cluster:
        client = Kube(cluster.kubeconfig)
        gpu = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
        for name, spec in {
            "small-1": {"cpu": "1", "memory": "2Gi"},
            "small-2": {"cpu": "1", "memory": "2Gi", "labels": {"disk": "hdd"}},
            "big": {"cpu": "16", "memory": "64Gi", "taints": [gpu], "labels": {"disk": "ssd"}},
            "cordoned": {"cpu": "16", "memory": "64Gi", "unschedulable": True},
            "tiny": {"cpu": "4", "memory": "8Gi", "pods": 1},
        }.items():
            create_node(client, node_manifest(name, **spec))  # type: ignore[arg-type]
        ensure_namespace(client, NAMESPACE)
        client.create(f"/api/v1/namespaces/{NAMESPACE}/pods",
                      pod_manifest("occupant", cpu="10m", nodeName="tiny"))  # fmt: skip
        yield client
        client.close()


def scheduler_message(kube: Kube, name: str) -> str:
    def failed() -> str:
        events = kube.get(f"/api/v1/namespaces/{NAMESPACE}/events")["items"]
        for event in events:
            if event["reason"] == "FailedScheduling" and event["involvedObject"]["name"] == name:
                return str(event["message"])
        return ""

    message = wait_for(failed, timeout=30, message=f"FailedScheduling for {name}")
    return message.split(" preemption:")[0]


def our_message(kube: Kube, pod: dict) -> str:
    nodes = kube.get("/api/v1/nodes")["items"]
    pods = kube.get("/api/v1/pods")["items"]
    snapshot = build_snapshot(nodes, [p for p in pods if p["spec"].get("nodeName")])
    profile = default_policy().profile_for("")
    assert profile is not None
    return schedule(PodView.from_dict(pod), snapshot, profile).message


@pytest.mark.parametrize(
    "pod",
    [
        pod_manifest("needs-cpu", cpu="8"),
        pod_manifest("needs-memory", cpu="100m", memory="32Gi"),
        pod_manifest("needs-ssd", cpu="100m", nodeSelector={"disk": "ssd"}),
        pod_manifest("needs-both", cpu="12", memory="48Gi",
                     tolerations=[{"key": "dedicated", "operator": "Exists"}],
                     nodeSelector={"disk": "hdd"}),
    ],
    ids=lambda p: p["metadata"]["name"],
)  # fmt: skip
def test_unschedulable_message_matches_kube_scheduler(kube: Kube, pod: dict) -> None:
    created = kube.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod)

    theirs = scheduler_message(kube, created["metadata"]["name"])

    assert our_message(kube, created) == theirs
