"""Serving certificates reloaded from disk without a restart.

gunicorn's gthread worker asks for an SSL context for every new connection,
so handing it a context that is swapped when the files change rotates the
certificate for new connections while connections in flight finish on the
old one. Kubernetes updates Secret volumes by swapping a symlink, so the
files' identity (inode, size, mtime, followed through links) is what we watch.
A pair that does not load (a key written before its certificate, a half
copied file) keeps the old context until the next check.

With client CA bundles (`client_ca`: files, comma-separated), the context
requires and verifies a client certificate during the handshake (mutual
TLS); the bundles are reloaded the same way, so adding a CA (the API
server's, a new one of our own) needs no restart. Only HTTP/1.1 is offered
(ALPN): the protocol the worker frames.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def _identity(path: str) -> tuple[int, int, int]:
    stat = os.stat(path)
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


class CertificateReloader:
    """Builds server SSL contexts from `certfile`/`keyfile`, reloading on change."""

    def __init__(
        self,
        certfile: str,
        keyfile: str,
        *,
        client_ca: str | None = None,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.certfile, self.keyfile = certfile, keyfile
        self.client_cas = tuple(path for path in (client_ca or "").split(",") if path)
        self.check_interval, self.clock = check_interval, clock
        self._lock = threading.Lock()
        self._identity = self._read_identity()
        self._context = self._build()  # fail fast at start-up on a bad pair
        self._checked = clock()
        self.reloads = 0

    def _read_identity(self) -> tuple[tuple[int, int, int], ...]:
        files = (self.certfile, self.keyfile, *self.client_cas)
        return tuple(_identity(f) for f in files)

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.certfile, self.keyfile)
        context.set_alpn_protocols(["http/1.1"])
        for bundle in self.client_cas:
            context.load_verify_locations(cafile=bundle)
        if self.client_cas:
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def context(self) -> ssl.SSLContext:
        """The current context; rebuilt first when the files changed."""
        now = self.clock()
        if now - self._checked < self.check_interval:
            return self._context
        with self._lock:
            if now - self._checked < self.check_interval:
                return self._context
            self._checked = now
            try:
                identity = self._read_identity()
                if identity != self._identity:
                    self._context = self._build()
                    self._identity = identity
                    self.reloads += 1
                    log.info("serving certificate reloaded from %s", self.certfile)
            except (OSError, ssl.SSLError) as err:
                log.warning("serving certificate not reloaded yet: %s", err)
            return self._context
