"""nodeAffinity mode: a pinned pod whose node is filled by another scheduler is placed elsewhere.

The pin (`matchFields metadata.name`) is immutable, so a pod pinned to a node
that stops fitting would wait forever. The replica that decides deletes it
once kube-scheduler has called it Unschedulable and another node fits; its
ReplicaSet recreates it, admission pins the new pod where it fits, and the
real kube-scheduler binds it. Real kube-scheduler and controller-manager.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import wait_for
from webhook.admission.patch import SELECTED_NODE
from webhook.admission.rules import ENABLED_LABEL
from webhook.devcluster import DevCluster
from webhook.devcluster.objects import create_node, ensure_namespace, node_manifest, pod_manifest
from webhook.devcluster.webhook import (
    register_webhook,
    start_replicas,
    unregister_webhook,
    wait_until_effective,
)
from webhook.kube import Kube

pytestmark = pytest.mark.e2e

AFFINITY_POLICY = """\
apiVersion: placement-webhook.io/v1alpha1
kind: PlacementPolicy
mode: nodeAffinity
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    with DevCluster.start(tmp_path / "cluster", scheduler=True, controller_manager=True) as running:
        yield running


def pods_of(kube: Kube, namespace: str) -> list[dict]:
    items = kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def test_a_pinned_pod_whose_node_another_scheduler_filled_is_placed_elsewhere(
    cluster: DevCluster, tmp_path: Path
) -> None:
    kube = Kube(cluster.kubeconfig)
    policy = tmp_path / "policy.yaml"
    policy.write_text(AFFINITY_POLICY)
    hooks = start_replicas(cluster, 2, policy=policy)
    try:
        register_webhook(kube, hooks)
        ensure_namespace(kube, "apps", {ENABLED_LABEL: "true"})
        wait_until_effective(kube, "apps")
        create_node(kube, node_manifest("roomy", cpu="4", memory="16Gi"))
        create_node(kube, node_manifest("spare", cpu="2", memory="16Gi"))
        wait_for(lambda: all(int(m.get("/readyz")[1]["nodes"]) == 2 for m in hooks.members),
                 message="the replicas to see both nodes")  # fmt: skip

        # kube-scheduler is stopped: the pod is pinned and left pending, as in the
        # moment between our admission and kube-scheduler's bind.
        cluster.stop_component("kube-scheduler")
        template = pod_manifest(cpu="1500m", memory="64Mi", labels={"app": "web"})
        kube.create("/apis/apps/v1/namespaces/apps/replicasets", {
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": template["metadata"], "spec": template["spec"]}},
        })  # fmt: skip
        (first,) = wait_for(lambda: pods_of(kube, "apps"), message="the ReplicaSet's pod")
        pinned = first["metadata"]["annotations"][SELECTED_NODE]
        assert pinned == "roomy"  # the least allocated node that fits
        terms = first["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert all({"key": "metadata.name", "operator": "In", "values": [pinned]}
                   in t["matchFields"] for t in terms)  # fmt: skip

        # Another scheduler fills the pinned node (a pod bound by nodeName, not ours).
        ensure_namespace(kube, "others")
        filler = pod_manifest("filler", cpu="3", memory="64Mi", nodeName=pinned)
        kube.create("/api/v1/namespaces/others/pods", filler)

        restarted = time.monotonic()
        cluster.start_scheduler()

        def moved() -> dict | None:
            for pod in pods_of(kube, "apps"):
                if pod["metadata"]["uid"] != first["metadata"]["uid"] and pod["spec"].get(
                    "nodeName"
                ):
                    return pod
            return None

        replacement = wait_for(moved, timeout=60, message="the replacement pod to be bound")
        seconds = time.monotonic() - restarted
        assert replacement["spec"]["nodeName"] == "spare"
        assert replacement["metadata"]["annotations"][SELECTED_NODE] == "spare"
        events = kube.get("/apis/events.k8s.io/v1/namespaces/apps/events")["items"]
        repaired = [e for e in events if e.get("reason") == "PlacementRepaired"]
        assert repaired and repaired[0]["regarding"]["uid"] == first["metadata"]["uid"]
        print(f"\nthe stranded pinned pod was replaced and bound on another node {seconds:.1f} s "
              "after kube-scheduler came back")  # fmt: skip
    finally:
        unregister_webhook(kube)
        hooks.stop()
        kube.close()
