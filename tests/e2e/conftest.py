"""E2e fixtures: one real control plane for the whole run, one webhook per need.

The control plane (etcd + kube-apiserver, upstream binaries built by hack/) is
started once per session; tests isolate themselves by namespace and by node
names. Component logs are printed when a test fails, so a CI failure can be
read without the machine.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.admission.rules import ENABLED_LABEL
from webhook.devcluster import DevCluster
from webhook.devcluster.objects import create_node, ensure_namespace, node_manifest
from webhook.devcluster.webhook import (
    DEPLOYED_REPLICAS,
    WebhookProcess,
    WebhookSet,
    register_webhook,
    start_replicas,
    unregister_webhook,
    wait_until_effective,
)
from webhook.kube import ApiError, Kube

_counter = itertools.count()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    workdir = tmp_path_factory.mktemp("devcluster")
    with DevCluster.start(workdir, scheduler=False) as running:
        yield running


@pytest.fixture(scope="session")
def kube(cluster: DevCluster) -> Iterator[Kube]:
    client = Kube(cluster.kubeconfig)
    yield client
    client.close()


@pytest.fixture(scope="session")
def webhook(cluster: DevCluster, kube: Kube) -> Iterator[WebhookSet]:
    """The webhook as deployed (its replica count, behind a balancer), nodeName mode, the
    default policy, registered for the run."""
    hook = start_replicas(cluster, DEPLOYED_REPLICAS)
    register_webhook(kube, hook)
    ensure_namespace(kube, "probe", {ENABLED_LABEL: "true"})
    wait_until_effective(kube, "probe")
    yield hook
    unregister_webhook(kube)
    hook.stop()


@pytest.fixture
def namespace(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh opted-in namespace per test; its pods are deleted afterwards.

    The webhook's fallback binder runs for the whole session: a pod a test
    leaves pending would otherwise be bound onto the next test's nodes.
    """
    name = f"t{next(_counter)}-{request.node.name.replace('_', '-')[:40].strip('-').lower()}"
    ensure_namespace(kube, name, {ENABLED_LABEL: "true"})
    yield name
    delete_pods(kube, name)


def delete_pods(kube: Kube, namespace: str) -> None:
    """Delete every pod of `namespace` at once (no kubelet confirms a graceful deletion)."""
    kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", params={"gracePeriodSeconds": 0})


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}"


def wait_for(predicate, timeout: float = 10.0, message: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll until `predicate()` is truthy; return its value or fail the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {message}")
        time.sleep(0.05)


class Nodes:
    """Creates a test's nodes and removes them afterwards, keeping the webhook's view in step.

    Nodes are cluster-wide, so each test starts with none: whatever it creates
    is the whole cluster the webhook decides against.
    """

    def __init__(self, kube: Kube, hook: WebhookProcess | WebhookSet | None):
        self.kube, self.hook, self.names = kube, hook, []  # type: list[str]

    def _view_count(self) -> int:
        """Nodes in the view of the replica that sees the fewest (every replica must see it)."""
        if self.hook is None:
            return 0
        live = [r for r in self.hook.replicas if r.process.poll() is None]
        return min(int(r.get("/readyz")[1]["nodes"]) for r in live) if live else 0

    def add(self, name: str | None = None, *, prefix: str = "node", **spec: object) -> str:
        name = name or unique(prefix)
        before = self._view_count()
        create_node(self.kube, node_manifest(name, **spec))  # type: ignore[arg-type]
        self.names.append(name)
        if self.hook is not None:
            wait_for(lambda: self._view_count() > before, message=f"webhook to see node {name}")
        return name

    def remove_all(self) -> None:
        for name in self.names:
            try:
                self.kube.delete(f"/api/v1/nodes/{name}")
            except ApiError as err:
                if not err.is_not_found:
                    raise
        if self.hook is not None:
            wait_for(lambda: self._max_view_count() == 0, message="webhook view to drop test nodes")

    def _max_view_count(self) -> int:
        if self.hook is None:
            return 0
        live = [r for r in self.hook.replicas if r.process.poll() is None]
        return max(int(r.get("/readyz")[1]["nodes"]) for r in live) if live else 0


@pytest.fixture
def nodes(kube: Kube, webhook: WebhookSet) -> Iterator[Nodes]:
    factory = Nodes(kube, webhook)
    yield factory
    factory.remove_all()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and "cluster" in getattr(item, "funcargs", {}):
        running: DevCluster = item.funcargs["cluster"]  # type: ignore[attr-defined]
        for log in sorted(Path(running.workdir / "logs").glob("*.log")):
            report.sections.append((f"log tail: {log.name}", running.tail_log(log.stem, 40)))
