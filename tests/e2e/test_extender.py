"""The real kube-scheduler calling the extender (filter, prioritize, bind) on a real cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.components import ExtenderProcess, start_extender, write_scheduler_config
from tests.e2e.conftest import Nodes, delete_pods, unique, wait_for
from webhook.devcluster import DevCluster
from webhook.devcluster.objects import ensure_namespace, pod_manifest
from webhook.extender.config import ExtenderEntry, scheduler_document
from webhook.kube import Kube

pytestmark = pytest.mark.e2e

SCHEDULER = "extender-e2e"
PROFILE = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
  - schedulerName: {SCHEDULER}
"""
# The extender alone enforces this: the scheduler's own profile does not have it.
EXTENDER_ONLY = """\
    pluginConfig:
      - name: NodeAffinity
        args:
          addedAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
                - matchExpressions: [{key: pool, operator: In, values: [extender]}]
---
apiVersion: placement-webhook.io/v1alpha1
kind: PlacementPolicy
schedulerName: extender-e2e
"""


@pytest.fixture(scope="module", params=[True, False], ids=["node-cache", "node-objects"])
def extender(
    request: pytest.FixtureRequest, cluster: DevCluster, kube: Kube
) -> Iterator[ExtenderProcess]:
    """The extender, and a kube-scheduler (profile `extender-e2e`) that calls it."""
    cache_capable: bool = request.param
    policy = Path(cluster.workdir / f"extender-policy-{cache_capable}.yaml")
    policy.write_text(PROFILE + EXTENDER_ONLY)
    process = start_extender(cluster, name=f"extender-{cache_capable}", policy=policy)
    name = f"kube-scheduler-extender-{cache_capable}"
    config = write_scheduler_config(
        cluster,
        cluster.workdir / f"{name}.yaml",
        scheduler_document(PROFILE),
        name=name,
        extender=ExtenderEntry(process.url, node_cache_capable=cache_capable),
    )
    cluster.start_scheduler(config, name=name)
    yield process
    cluster.stop_component(name)
    process.stop()


def calls(process: ExtenderProcess, verb: str, result: str) -> float:
    wanted = f'placement_extender_requests_total{{result="{result}",verb="{verb}"}} '
    for line in process.metrics().splitlines():
        if line.startswith(wanted):
            return float(line.split()[1])
    return 0.0


def node_count(process: ExtenderProcess) -> int:
    return int(process.get("/readyz")[1]["nodes"])


@pytest.fixture
def extender_namespace(kube: Kube) -> Iterator[str]:
    """A namespace whose pods go afterwards: a pod left pending here would be
    bound by the next parameter's scheduler (same profile) and count as its bind."""
    name = unique("ext")
    ensure_namespace(kube, name)
    yield name
    delete_pods(kube, name)


@pytest.fixture
def pool(kube: Kube, extender: ExtenderProcess) -> Iterator[Nodes]:
    factory = Nodes(kube, None)
    yield factory
    factory.remove_all()
    wait_for(lambda: node_count(extender) == 0, message="extender view to drop test nodes")


def test_kube_scheduler_binds_through_the_extender_on_the_node_the_policy_prefers(
    kube: Kube, extender: ExtenderProcess, pool: Nodes, extender_namespace: str
) -> None:
    small = pool.add(cpu="1", labels={"pool": "extender"})
    busy = pool.add(cpu="8", labels={"pool": "extender"})
    roomy = pool.add(cpu="16", labels={"pool": "extender"})
    wait_for(lambda: node_count(extender) == 3, message="extender to see the nodes")
    namespace = extender_namespace
    binds_before = calls(extender, "bind", "bound")

    name = unique("app")
    kube.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest(name, cpu="2", scheduler_name=SCHEDULER),
    )

    bound = wait_for(
        lambda: kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")["spec"].get("nodeName"),
        timeout=30,
        message="the pod to be bound",
    )
    assert bound == roomy
    assert bound not in (small, busy)
    assert calls(extender, "bind", "bound") == binds_before + 1


def test_nodes_the_extender_rejects_leave_the_pod_pending_with_its_reason(
    kube: Kube, extender: ExtenderProcess, pool: Nodes, extender_namespace: str
) -> None:
    pool.add(cpu="8")
    pool.add(cpu="8", labels={"pool": "other"})
    wait_for(lambda: node_count(extender) == 2, message="extender to see the nodes")
    namespace = extender_namespace

    name = unique("app")
    kube.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest(name, cpu="1", scheduler_name=SCHEDULER),
    )

    def condition() -> str:
        pod = kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                return str(c.get("message", ""))
        return ""

    message = wait_for(condition, timeout=30, message="a PodScheduled=False condition")
    assert "2 node(s) didn't match scheduler-enforced node affinity" in message
    assert not kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")["spec"].get("nodeName")
