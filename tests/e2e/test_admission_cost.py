"""What a placement costs the real API server: one webhook call per pod, not two.

kube-apiserver's PodTopologyLabels admission (beta, on by default since 1.35)
copies a node's zone and region labels onto a pod created with spec.nodeName.
It runs again when the API server reinvokes the admission chain after our
patch; had it changed the pod then, the API server would call our webhook a
second time (reinvocationPolicy IfNeeded). Our patch carries those labels
already, so it changes nothing and the count of calls equals the pods.
"""

from __future__ import annotations

import pytest

from experiments.probes import apiserver_metrics
from experiments.promtext import Samples
from tests.e2e.conftest import Nodes
from webhook.admission.registration import WEBHOOK_NAME
from webhook.devcluster import DevCluster
from webhook.devcluster.objects import pod_manifest
from webhook.kube import Kube

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
CALLS = "apiserver_admission_webhook_admission_duration_seconds_count"


def webhook_calls(cluster: DevCluster) -> float:
    samples = Samples.parse(apiserver_metrics(cluster))
    return sum(samples.select(CALLS, name=WEBHOOK_NAME, operation="CREATE").values())


def test_a_pod_bound_by_node_name_costs_one_webhook_call_and_carries_its_zone(
    cluster: DevCluster, kube: Kube, nodes: Nodes, namespace: str
) -> None:
    node = nodes.add(cpu="8", labels={ZONE: "zone-x", REGION: "region-y"})
    before = webhook_calls(cluster)

    created = [
        kube.create(f"/api/v1/namespaces/{namespace}/pods", pod_manifest(f"p{i}", cpu="100m"))
        for i in range(5)
    ]

    assert [p["spec"]["nodeName"] for p in created] == [node] * 5
    for pod in created:
        assert pod["metadata"]["labels"][ZONE] == "zone-x"
        assert pod["metadata"]["labels"][REGION] == "region-y"
    assert webhook_calls(cluster) - before == 5
