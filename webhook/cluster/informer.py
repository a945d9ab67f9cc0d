"""List+watch of one resource on raw JSON, resumable, with bookmarks and backoff.

The shape client-go's reflector has: list (paged) -> replace the store ->
watch from the list's resourceVersion -> apply events, remember the newest
resourceVersion (bookmarks included) -> on a normal close, watch again from
there -> on 410 Gone, list again -> on any other error, back off with jitter.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from webhook import bodies

log = logging.getLogger(__name__)


class WatchSource(Protocol):
    """What the informer needs of a client (webhook.kube.Kube provides it)."""

    def get(self, path: str, **params: Any) -> dict[str, Any]: ...

    def watch(
        self, path: str, *, resource_version: str, timeout_seconds: int = 300, **params: Any
    ) -> Iterator[dict[str, Any]]: ...


class Store(Protocol):
    """Where the informer delivers objects (webhook.cluster.view.ClusterView)."""

    def replace(self, kind: str, pages: Iterable[list[Mapping[str, Any]]]) -> int: ...

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None: ...

    def touch(self, kind: str, resource_version: str = "") -> None: ...


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter, as client-go's reflector uses."""

    initial: float = 0.5
    maximum: float = 30.0

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        return float(rand() * min(self.maximum, self.initial * (2**attempt)))


class Informer:
    """Keeps `store` in sync with one resource collection at `path`."""

    def __init__(
        self,
        source: WatchSource,
        store: Store,
        kind: str,
        path: str,
        *,
        page_size: int = 500,
        watch_timeout: int = 300,
        backoff: Backoff = Backoff(),
    ):
        self.source, self.store, self.kind, self.path = source, store, kind, path
        self.page_size, self.watch_timeout, self.backoff = page_size, watch_timeout, backoff
        self.resource_version = ""
        self.relists = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def pages(self, versions: list[str]) -> Iterator[list[Mapping[str, Any]]]:
        """A consistent paged list, one page at a time (so raw JSON never piles up).

        The collection's resourceVersion is appended to `versions` at the end.
        """
        token = None
        while True:
            page = self.source.get(self.path, limit=self.page_size, **{"continue": token})
            yield page.get("items") or []
            meta = bodies.list_meta(page)
            token = meta.get("continue")
            if not token:
                versions.append(str(meta.get("resourceVersion") or ""))
                return

    def relist(self) -> None:
        versions: list[str] = []
        count = self.store.replace(self.kind, self.pages(versions))
        self.resource_version = versions[-1]
        self.store.touch(self.kind, self.resource_version)
        self.relists += 1
        log.info("listed %s: %d objects at resourceVersion %s", self.kind, count, versions[-1])

    def watch_once(self) -> None:
        """One watch call; returns on a normal close, raises on errors, relists on 410."""
        for event in self.source.watch(
            self.path, resource_version=self.resource_version, timeout_seconds=self.watch_timeout
        ):
            if self._stop.is_set():
                return
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    log.info("%s watch expired (410 Gone); listing again", self.kind)
                    self.relist()
                    return
                raise RuntimeError(f"{self.kind} watch error: {obj.get('message')}")
            version = bodies.resource_version(obj)
            if kind != "BOOKMARK":
                self.store.apply(self.kind, str(kind), obj)
            else:
                self.store.touch(self.kind, str(version or ""))
            if version:
                self.resource_version = str(version)
        self.store.touch(self.kind)

    def run(self) -> None:
        attempt = 0
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                self.watch_once()
                attempt = 0
            except Exception as err:
                if getattr(err, "is_gone", False):
                    need_list = True
                    continue
                delay = self.backoff.delay(attempt)
                attempt += 1
                log.warning("%s list/watch failed (%s); retrying in %.1fs", self.kind, err, delay)
                if self._stop.wait(delay):
                    return
                if attempt > 3:
                    need_list = True
