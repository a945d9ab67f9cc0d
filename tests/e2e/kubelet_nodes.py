"""A test's hollow kubelets: started per test, stopped and their Nodes deleted afterwards.

The kubelet counterpart of conftest's `Nodes`: the same keywords as
`node_manifest` (cpu in whole cores), and, when a webhook is given, `add`
returns once the webhook's view holds the new node, so the test decides
against the cluster it just made.
"""

from __future__ import annotations

import itertools
from typing import Any

from tests.e2e.conftest import wait_for
from webhook.devcluster import DevCluster, KubeletSpec
from webhook.devcluster.kubelets import component_name
from webhook.devcluster.webhook import WebhookProcess
from webhook.kube import ApiError, Kube

_counter = itertools.count()


class Kubelets:
    """Starts hollow kubelets for one test; `remove_all` stops them and deletes their Nodes."""

    def __init__(self, cluster: DevCluster, kube: Kube, hook: WebhookProcess | None = None):
        self.cluster, self.kube, self.hook = cluster, kube, hook
        self.names: list[str] = []

    def _view_count(self) -> int:
        return int(self.hook.get("/readyz")[1]["nodes"]) if self.hook else 0

    def add(self, name: str | None = None, *, prefix: str = "kubelet", **shape: Any) -> str:
        """Start a hollow kubelet and wait until its Node is Ready (and in the webhook's view)."""
        name = name or f"{prefix}-{next(_counter)}"
        before = self._view_count()
        self.cluster.start_kubelets([KubeletSpec.of(name, **shape)], timeout=60)
        self.names.append(name)
        if self.hook is not None:
            wait_for(lambda: self._view_count() > before, message=f"webhook to see node {name}")
        return name

    def restart(self, name: str, **shape: Any) -> None:
        """Stop the node's kubelet and start a new one for the same Node, sized by `shape`.

        The new process has no memory of the old one's pods (a fresh fake runtime and
        state folder): it admits the node's pods again, as a kubelet does after a restart.
        """
        self.cluster.stop_component(component_name(name))
        self.cluster.start_kubelets([KubeletSpec.of(name, **shape)], timeout=60)

    def remove_all(self) -> None:
        for name in self.names:
            self.cluster.stop_component(component_name(name), grace=5)
            try:
                self.kube.delete(f"/api/v1/nodes/{name}")
            except ApiError as err:
                if not err.is_not_found:
                    raise
        if self.hook is not None:
            wait_for(lambda: self._view_count() == 0, message="webhook view to drop test nodes")
