"""A round-robin TCP balancer on loopback, in front of several webhook replicas.

In a cluster the API server reaches the webhook through a Service, and
kube-proxy spreads its connections over the replicas. Locally the API server
calls one URL, so this stands in for the Service: each new connection goes to
the next backend in turn and bytes are copied both ways. TLS passes through
untouched (the replicas terminate it, mutual TLS included), exactly as with a
ClusterIP Service. A backend that refuses the connection is skipped for that
connection, as kube-proxy's endpoints would drop an unready pod.
"""

from __future__ import annotations

import contextlib
import itertools
import selectors
import socket
import threading
from collections.abc import Sequence

CHUNK = 65536


class Balancer:
    """Listens on 127.0.0.1:`port` (0: a free one) and spreads connections over `backends`."""

    def __init__(self, backends: Sequence[tuple[str, int]], *, port: int = 0, max_conns: int = 512):
        if not backends:
            raise ValueError("a balancer needs at least one backend")
        self.backends = list(backends)
        self._turn = itertools.cycle(range(len(self.backends)))
        self._listener = socket.create_server(("127.0.0.1", port), backlog=256)
        self.port = int(self._listener.getsockname()[1])
        self._slots = threading.BoundedSemaphore(max_conns)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.connections = [0] * len(self.backends)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Balancer:
        thread = threading.Thread(target=self._accept_loop, name="balancer", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for sock in list(self._open):
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._slots.acquire(timeout=5):
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        for _ in range(len(self.backends)):
            index = next(self._turn)
            try:
                upstream = socket.create_connection(self.backends[index], timeout=2)
            except OSError:
                continue
            upstream.settimeout(None)
            with self._lock:
                self.connections[index] += 1
            return upstream
        return None

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        try:
            upstream = self._connect()
            if upstream is None:
                return
            with self._lock:
                self._open.update((client, upstream))
            _splice(client, upstream, self._stop)
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with self._lock:
                        self._open.discard(sock)
                    with contextlib.suppress(OSError):
                        sock.close()
            self._slots.release()


def _splice(a: socket.socket, b: socket.socket, stop: threading.Event) -> None:
    """Copy bytes both ways until either side closes (half-closes are passed on)."""
    peers = {a: b, b: a}
    peers_by_fd = {a.fileno(): a, b.fileno(): b}
    open_reads = {a, b}
    with selectors.DefaultSelector() as selector:
        for sock in open_reads:
            selector.register(sock, selectors.EVENT_READ)
        while open_reads and not stop.is_set():
            for key, _ in selector.select(timeout=1.0):
                sock = peers_by_fd[key.fd]
                try:
                    data = sock.recv(CHUNK)
                except OSError:
                    return
                if not data:
                    selector.unregister(sock)
                    open_reads.discard(sock)
                    with contextlib.suppress(OSError):
                        peers[sock].shutdown(socket.SHUT_WR)
                    continue
                try:
                    peers[sock].sendall(data)
                except OSError:
                    return
