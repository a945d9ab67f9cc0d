"""A burst with a second webhook after ours: the API server calls ours again, nothing stalls.

The injector (webhook.devcluster.injector) adds a sidecar after our webhook
placed the pod, so the API server re-runs the mutating webhooks that ask
for it. Under a burst that makes it open and drop many connections to our
port at once; a worker that let idle connections hold its request threads
went silent then (issue 12: 54 s, every call timing out and failing open).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Nodes
from webhook.admission.patch import FILTER_RESULT
from webhook.devcluster import DevCluster
from webhook.devcluster.injector import SIDECAR, SidecarInjector
from webhook.devcluster.objects import pod_manifest
from webhook.devcluster.webhook import WebhookProcess
from webhook.kube import Kube

pytestmark = pytest.mark.e2e


@pytest.fixture
def injector(cluster: DevCluster, kube: Kube, namespace: str) -> Iterator[SidecarInjector]:
    sidecars = SidecarInjector(cluster, cpu="50m").start()
    sidecars.register(kube, namespace)
    yield sidecars
    sidecars.stop()


FAILED_OPEN = "Failed calling webhook, failing open pods.placement-webhook.io"


def failed_calls(cluster: DevCluster) -> int:
    """Calls to our webhook the API server gave up on (timeouts, refused connections) so far."""
    return cluster.log_path("kube-apiserver").read_text(errors="replace").count(FAILED_OPEN)


def test_a_burst_with_a_later_webhook_gets_every_pod_decided_and_probes_answered(
    cluster: DevCluster,
    kube: Kube,
    webhook: WebhookProcess,
    namespace: str,
    nodes: Nodes,
    injector: SidecarInjector,
) -> None:
    for _ in range(10):
        nodes.add(cpu="4", memory="16Gi")
    created: dict[str, dict] = {}
    errors: list[Exception] = []
    probe_ms: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            started = time.perf_counter()
            status = webhook.get("/healthz", timeout=5)[0]
            probe_ms.append((time.perf_counter() - started) * 1000 if status == 200 else 1e9)
            time.sleep(0.05)

    def create(i: int) -> None:
        try:
            pod = kube.create(f"/api/v1/namespaces/{namespace}/pods",
                              pod_manifest(f"burst-{i}", cpu="500m"))  # fmt: skip
            created[pod["metadata"]["name"]] = pod
        except Exception as err:  # collected and asserted below
            errors.append(err)

    failed_before = failed_calls(cluster)
    prober = threading.Thread(target=probe)
    prober.start()
    threads = [threading.Thread(target=create, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    prober.join()

    assert errors == []
    assert len(created) == 40
    undecided = [n for n, p in created.items() if FILTER_RESULT not in p["metadata"]["annotations"]]
    assert undecided == []  # failurePolicy Ignore would admit a timed-out call undecided
    assert all(SIDECAR in {c["name"] for c in p["spec"]["containers"]} for p in created.values())
    assert injector.injected == 40
    assert max(probe_ms) < 2000, f"the probe endpoint stalled: {max(probe_ms):.0f} ms"
    # reinvocations too: a call that timed out would be logged by the API server
    assert failed_calls(cluster) == failed_before
