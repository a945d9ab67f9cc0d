"""Where the cluster view comes from: live list+watch, or a static snapshot file.

`ClusterSource.start()` returns the ClusterView to decide against;
`ready()` says whether decisions against it are trustworthy right now.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import orjson
import yaml

from webhook.cluster.informer import Informer, WatchSource
from webhook.cluster.view import ClusterView
from webhook.policy.dump import snapshot_from_list

# Every collection the view is built from (cluster.view.KINDS), for the webhook and the reconciler.
WATCHED = (
    ("Node", "/api/v1/nodes"),
    ("Pod", "/api/v1/pods"),
    ("Namespace", "/api/v1/namespaces"),
    ("Service", "/api/v1/services"),
    ("ReplicationController", "/api/v1/replicationcontrollers"),
    ("ReplicaSet", "/apis/apps/v1/replicasets"),
    ("StatefulSet", "/apis/apps/v1/statefulsets"),
)


class ClusterSource(Protocol):
    def start(self) -> ClusterView: ...

    def ready(self) -> bool: ...


class LiveSource:
    """Informers for every WATCHED collection feeding one ClusterView."""

    def __init__(
        self,
        client: WatchSource,
        *,
        max_age_seconds: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.client = client
        self.max_age_seconds = max_age_seconds
        self.view = ClusterView(clock=clock)
        self.informers = [Informer(client, self.view, kind, path) for kind, path in WATCHED]
        self._expirer: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> ClusterView:
        for informer in self.informers:
            informer.start()
        self._expirer = threading.Thread(target=self._expire_loop, name="reservations", daemon=True)
        self._expirer.start()
        return self.view

    def _expire_loop(self) -> None:
        while not self._stop.wait(1.0):
            self.view.expire_reservations()

    def stop(self) -> None:
        self._stop.set()
        for informer in self.informers:
            informer.stop()

    def ready(self) -> bool:
        return self.view.is_ready(self.max_age_seconds)


class SnapshotSource:
    """A fixed cluster from a `kubectl get nodes,pods,namespaces,services,... -A -o json` dump."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.view = ClusterView(snapshot_from_list({"items": load_list(self.path)}), synced=True)

    def start(self) -> ClusterView:
        return self.view

    def ready(self) -> bool:
        return True


def load_list(path: Path) -> list[Mapping[str, Any]]:
    """Items of a v1 List (JSON or YAML), or of a single object, from a file."""
    raw = path.read_bytes()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = yaml.safe_load(raw)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a Kubernetes List or object")
    items = data.get("items") if "items" in data else [data]
    if not isinstance(items, list):
        raise ValueError(f"{path}: items must be a list")
    return [i for i in items if isinstance(i, dict)]
