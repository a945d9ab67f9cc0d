"""A gunicorn worker whose threads only ever run complete requests.

gunicorn's gthread worker hands a connection to a request thread as soon as
it is readable, and the thread then does the TLS handshake and reads the
request with blocking calls that have no timeout. A client that completes
the handshake and then sends nothing, or half a request, holds that thread
until it goes away. Go's HTTP transport (the API server's webhook client)
does exactly that when a connection it dialled for a call is no longer
needed: the call was served on another connection, so the new one waits in
its idle pool, for up to 90 s. Eight such connections stop all eight threads,
`/mutate` and `/healthz` alike, and every pod created meanwhile is admitted
unplaced after the webhook timeout (py-spy: all threads in
`Request.parse -> SSLSocket.recv`, or in `LengthReader.read` for half a body).

Here the event loop does the handshake and reads every request without
blocking, with a deadline per phase (handshake, request, idle), and submits
a request to the thread pool only when every byte of it has arrived. A
stalled or slow client costs a file descriptor and at most its buffered
bytes, never a thread and never a decision. A verified client certificate's
names go into the WSGI environ (`webhook.serving.identity.ENVIRON_KEY`), with
the time the request's first byte arrived (`RECEIVED_KEY`).

The worker subclasses gthread for its thread pool, its event loop and its
signal handling; only the connection handling is its own.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from gunicorn import http
from gunicorn import sock as gsock
from gunicorn.http import wsgi
from gunicorn.workers.gthread import ThreadWorker

from webhook.logs import Throttle
from webhook.serving.framing import Framed, FramingLimits, Refused, frame, plain_response
from webhook.serving.identity import (
    ENVIRON_KEY,
    RECEIVED_KEY,
    ClientIdentity,
    identity_from_peercert,
    is_allowed,
)

HANDSHAKE, READING, BUSY = "handshake", "reading", "busy"
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


@dataclass(frozen=True)
class ConnectionLimits:
    """Deadlines and budgets of connections that are not (yet) running a request."""

    handshake_seconds: float = 5.0
    """From accept to a finished TLS handshake."""
    request_seconds: float = 10.0
    """From a request's first byte to its last (the API server sends a review at once)."""
    idle_seconds: float = 120.0
    """A connection between requests. Longer than Go's idle timeout (90 s), so the
    client closes idle connections first and never sends a review into our close."""
    write_seconds: float = 5.0
    """Writing a response, in the request thread (answers are a few KiB)."""
    buffered_bytes: int = 64 * 1024 * 1024
    """Bytes of incomplete requests held across all connections; past it, 429."""
    framing: FramingLimits = field(default_factory=FramingLimits)
    client_names: tuple[str, ...] = ()
    """When set, a verified client certificate must carry one of these (CN or DNS SAN)."""


class Connection:
    """One accepted socket and where it is in its life."""

    __slots__ = ("buffer", "client", "continued", "deadline", "identity", "received", "server",
                 "sock", "state", "watched")  # fmt: skip

    def __init__(self, sock: socket.socket, client: Any, server: Any, state: str, deadline: float):
        self.sock: Any = sock
        self.client, self.server = client, server
        self.state, self.deadline = state, deadline
        self.buffer = bytearray()
        self.identity: ClientIdentity | None = None
        self.received: float | None = None
        self.continued = False
        self.watched = 0  # selector events registered, 0 when not registered


class BoundedWorker(ThreadWorker):  # type: ignore[misc]
    """gthread's pool and loop; connections read to the end before a thread sees them."""

    limits = ConnectionLimits()
    clock: Callable[[], float] = staticmethod(time.monotonic)

    @classmethod
    def configured(cls, limits: ConnectionLimits) -> type[BoundedWorker]:
        """A subclass carrying `limits` (gunicorn instantiates the class it is given)."""
        return type("BoundedWorker", (cls,), {"limits": limits})

    def init_process(self) -> None:
        self.connections: set[Connection] = set()
        self.buffered = 0
        self.throttle = Throttle(self.log, interval=60.0)
        super().init_process()

    # ---- accepting ---------------------------------------------------------
    def accept(self, listener: socket.socket) -> None:
        try:
            raw, client = listener.accept()
        except OSError as err:
            if err.errno in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                return
            raise
        raw.setblocking(False)
        now = self.clock()
        if self.cfg.is_ssl:
            try:
                wrapped = gsock.ssl_context(self.cfg).wrap_socket(
                    raw, server_side=True, do_handshake_on_connect=False
                )
            except (OSError, ValueError) as err:
                self.throttle.warning("tls-context", "cannot start TLS: %s", err)
                raw.close()
                return
            conn = Connection(wrapped, client, listener.getsockname(), HANDSHAKE,
                              now + self.limits.handshake_seconds)  # fmt: skip
        else:
            conn = Connection(raw, client, listener.getsockname(), READING,
                              now + self.limits.idle_seconds)  # fmt: skip
        self.nr_conns += 1
        self.connections.add(conn)
        self._make_room()
        self._watch(conn, _READ)

    def _make_room(self) -> None:
        """Below the connection limit, so accepting never stops: the stalest idle one goes."""
        if self.nr_conns < self.worker_connections - 1:
            return
        idle = [c for c in self.connections if c.state != BUSY]
        if idle:
            victim = min(idle, key=lambda c: c.deadline)
            self.throttle.warning(
                "evicted", "connection limit reached: closed the stalest idle one"
            )
            self._close(victim)

    # ---- the event loop's side -----------------------------------------------
    def _watch(self, conn: Connection, events: int) -> None:
        callback = partial(self._on_ready, conn)
        if conn.watched == 0:
            self.poller.register(conn.sock, events, callback)
        elif conn.watched != events:
            self.poller.modify(conn.sock, events, callback)
        conn.watched = events

    def _unwatch(self, conn: Connection) -> None:
        if conn.watched:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(conn.sock)
            conn.watched = 0

    def _on_ready(self, conn: Connection, _fileobj: Any) -> None:
        try:
            if conn.state == HANDSHAKE and not self._handshake(conn):
                return
            if conn.state == READING:
                self._read(conn)
        except Exception as err:  # a connection's failure never reaches the loop
            self.throttle.warning("connection-error", "connection from %s failed: %r",
                                  conn.client, err)  # fmt: skip
            self._close(conn)

    def _handshake(self, conn: Connection) -> bool:
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._watch(conn, _READ)
            return False
        except ssl.SSLWantWriteError:
            self._watch(conn, _WRITE)
            return False
        except (ssl.SSLError, OSError) as err:
            reason = getattr(err, "reason", None) or type(err).__name__
            self.throttle.warning(f"handshake:{reason}", "TLS handshake refused from %s: %s",
                                  _host(conn.client), reason)  # fmt: skip
            self._close(conn, flush=True)
            return False
        conn.identity = identity_from_peercert(conn.sock.getpeercert())
        conn.state = READING
        conn.deadline = self.clock() + self.limits.idle_seconds
        self._watch(conn, _READ)
        return True

    def _read(self, conn: Connection) -> None:
        cap = self.limits.framing.max_head_bytes + self.limits.framing.max_body_bytes + 65536
        while len(conn.buffer) < cap:
            try:
                chunk = conn.sock.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
                break
            except ssl.SSLWantWriteError:
                self._watch(conn, _WRITE)
                return
            except (ssl.SSLError, OSError):
                self._close(conn)
                return
            if not chunk:
                self._close(conn)
                return
            if not conn.buffer:
                conn.received = self.clock()
                conn.deadline = conn.received + self.limits.request_seconds
            conn.buffer += chunk
            self.buffered += len(chunk)
        if self.buffered > self.limits.buffered_bytes:
            self._refuse(conn, 429, "too many bytes of unfinished requests held; try again")
            return
        self._watch(conn, _READ)
        self._dispatch_if_complete(conn)

    def _dispatch_if_complete(self, conn: Connection) -> None:
        if not conn.buffer:
            return
        verdict = frame(conn.buffer, self.limits.framing)
        if verdict is None:
            return
        if isinstance(verdict, Refused):
            self._refuse(conn, verdict.status, verdict.reason)
            return
        if not is_allowed(conn.identity, self.limits.client_names):
            who = conn.identity.describe() if conn.identity else "no certificate"
            self._refuse(conn, 403, f"client certificate ({who}) is not one of the allowed "
                                    "client names")  # fmt: skip
            return
        assert isinstance(verdict, Framed)
        if len(conn.buffer) < verdict.length:
            if verdict.expects_continue and not conn.continued:
                conn.continued = True
                self._send_quietly(conn, b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        request = bytes(conn.buffer[: verdict.length])
        del conn.buffer[: verdict.length]
        self.buffered -= verdict.length
        received = conn.received
        conn.state = BUSY
        self._unwatch(conn)
        future = self.tpool.submit(self._serve, conn, request, received)
        future.add_done_callback(lambda f: self.method_queue.defer(self._served, conn, f))

    def _served(self, conn: Connection, future: Any) -> None:
        """Back on the loop after a request: wait for the next one, or close."""
        keep = not future.cancelled() and future.exception() is None and future.result()
        if not keep or not self.alive:
            self._close(conn)
            return
        try:
            conn.sock.setblocking(False)
        except OSError:
            self._close(conn)
            return
        now = self.clock()
        conn.state, conn.continued = READING, False
        if conn.buffer:  # pipelined bytes of the next request
            conn.received, conn.deadline = now, now + self.limits.request_seconds
        else:
            conn.received, conn.deadline = None, now + self.limits.idle_seconds
        self._watch(conn, _READ)
        self._dispatch_if_complete(conn)

    def _refuse(self, conn: Connection, status: int, reason: str) -> None:
        self.throttle.warning(f"refused:{status}", "refused a request from %s: %d %s",
                              _host(conn.client), status, reason)  # fmt: skip
        self._send_quietly(conn, plain_response(status, reason))
        self._close(conn)

    @staticmethod
    def _send_quietly(conn: Connection, data: bytes) -> None:
        with contextlib.suppress(OSError, ValueError):
            conn.sock.send(data)

    def _close(self, conn: Connection, *, flush: bool = False) -> None:
        """Forget and close; `flush` first lets a TLS alert reach the client.

        Closing with the client's unread bytes in the receive queue makes the
        kernel answer with a reset, which can overtake the alert: so the queue
        is drained and our side shut down before the close.
        """
        if conn not in self.connections:
            return
        if flush:
            with contextlib.suppress(OSError):
                while socket.socket.recv(conn.sock, 65536):
                    pass
            with contextlib.suppress(OSError):
                socket.socket.shutdown(conn.sock, socket.SHUT_WR)
        self._unwatch(conn)
        self.connections.discard(conn)
        self.buffered -= len(conn.buffer)
        conn.buffer.clear()
        with contextlib.suppress(OSError):
            conn.sock.close()
        self.nr_conns -= 1

    # ---- deadlines (gthread's loop calls these once a second) -----------------
    def murder_keepalived(self, force: bool = False) -> None:
        if force:
            for conn in [c for c in self.connections if c.state != BUSY]:
                self._close(conn)

    def murder_pending(self) -> None:
        now = self.clock()
        for conn in [c for c in self.connections if c.state != BUSY]:
            if not self.alive and not conn.buffer:
                self._close(conn)  # stopping: idle connections go at once
            elif conn.deadline <= now:
                if conn.buffer:
                    self._refuse(conn, 408, "request not complete in time")
                else:
                    self._close(conn)

    # ---- the request thread's side ---------------------------------------------
    def _serve(self, conn: Connection, request: bytes, received: float | None) -> bool:
        """Run one complete request through the WSGI app; True to keep the connection."""
        req = None
        try:
            conn.sock.setblocking(True)
            conn.sock.settimeout(self.limits.write_seconds)
            req = next(http.get_parser(self.cfg, [request], conn.client))
            started = datetime.now()
            out = HeldWrites(conn.sock)
            resp, environ = wsgi.create(req, out, conn.client, conn.server, self.cfg)
            environ["wsgi.multithread"] = True
            environ[ENVIRON_KEY] = conn.identity
            environ[RECEIVED_KEY] = received
            if not self.alive or not self.cfg.keepalive:
                resp.force_close()
            respiter = self.wsgi(environ, resp.start_response)
            try:
                for item in respiter:
                    resp.write(item)
                resp.close()
                out.flush()
            finally:
                self.log.access(resp, req, environ, datetime.now() - started)
                if hasattr(respiter, "close"):
                    respiter.close()
            return not resp.should_close()
        except (OSError, ssl.SSLError):
            return False
        except Exception as err:
            self.handle_error(req, conn.sock, conn.client, err)
            return False


class HeldWrites:
    """A connection's socket as gunicorn's response writer sees it: what it writes is held
    and sent in one `sendall` when the response is complete.

    gunicorn writes the head and the body separately: two TLS records and two
    sends for an answer of a few KiB, and a client that reads the head before
    the body is there. Past `limit` held bytes (a large page), what is held is
    sent at once. Anything else asked of the socket sends what is held first,
    so bytes never change order. A response that fails before it is complete
    sends nothing of it (the error answer goes to the socket itself).
    """

    __slots__ = ("held", "limit", "size", "sock")

    def __init__(self, sock: Any, limit: int = 256 * 1024):
        self.sock, self.limit = sock, limit
        self.held: list[bytes] = []
        self.size = 0

    def sendall(self, data: bytes) -> None:
        self.held.append(bytes(data))
        self.size += len(data)
        if self.size >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.held:
            data = b"".join(self.held)
            self.held.clear()
            self.size = 0
            self.sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        self.flush()
        return getattr(self.sock, name)


def _host(client: Any) -> str:
    return str(client[0]) if isinstance(client, tuple) and client else str(client)
