"""A network namespace of our own, standing for a cluster's network, and a door into it.

The install test runs a control plane and a real node (containerd, runc,
pods on a CNI bridge) whose pods must reach the API server and be reached by
it. All of that lives in one network namespace made for the run: it has a
loopback device and a bridge, and no other link, so whatever its processes
send stays inside it (and the machine). The host reaches the API server
through a `Forwarder` on 127.0.0.1; nothing else crosses.

Processes are started inside with `nsenter --net` (only the network
namespace: `ip netns exec` would also remount /sys and hide the cgroup
mounts the kubelet and runc need).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import socket
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_CLONE_NEWNET = 0x40000000
_RUN_NETNS = Path("/run/netns")


class NetnsError(RuntimeError):
    """The namespace could not be made or entered."""


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class NetworkNamespace:
    """A named network namespace (`ip netns`), deleted by `delete()`."""

    name: str

    @property
    def path(self) -> Path:
        return _RUN_NETNS / self.name

    @classmethod
    def create(cls, prefix: str = "pw") -> NetworkNamespace:
        """A new namespace with its loopback up (a random name: runs never share one)."""
        netns = cls(f"{prefix}-{secrets.token_hex(4)}")
        _ip("netns", "add", netns.name)
        try:
            netns.ip("link", "set", "lo", "up")
        except BaseException:
            netns.delete()
            raise
        return netns

    def ip(self, *args: str) -> None:
        """`ip -n NAME ...`: configure a link or an address inside."""
        _ip("-n", self.name, *args)

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the namespace (the same process: nsenter execs it)."""
        return ["nsenter", f"--net={self.path}", *argv]

    def delete(self) -> None:
        """Remove the namespace and every link in it; never raises."""
        with contextlib.suppress(NetnsError):
            _ip("netns", "delete", self.name)

    def exists(self) -> bool:
        return self.path.exists()


def enter_in_this_thread(path: Path) -> None:
    """Move the calling thread (only it) into the network namespace at `path`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise NetnsError(f"setns {path}: {os.strerror(errno)}")
    finally:
        os.close(fd)


class Forwarder:
    """Relays connections from 127.0.0.1:`port` on the host to `target` inside a namespace.

    One thread accepts; each connection gets a thread that enters the
    namespace (setns moves only the calling thread), dials the target there
    and pumps both ways with a helper thread. The bytes are relayed as they
    are (TLS stays end to end), so clients see the API server itself.
    """

    def __init__(self, netns: NetworkNamespace, target: tuple[str, int], port: int = 0):
        self._netns_path = netns.path
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"forward-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._relay, args=(downstream,), daemon=True).start()

    def _relay(self, downstream: socket.socket) -> None:
        try:
            enter_in_this_thread(self._netns_path)
            upstream = socket.create_connection(self._target, timeout=10)
            upstream.settimeout(None)
        except OSError:
            downstream.close()
            return
        with self._lock:
            self._open.update((downstream, upstream))
        back = threading.Thread(target=_pump, args=(upstream, downstream), daemon=True)
        back.start()
        _pump(downstream, upstream)
        back.join()
        with self._lock:
            self._open.difference_update((downstream, upstream))
        downstream.close()
        upstream.close()

    def close(self) -> None:
        """Stop accepting and cut every relayed connection."""
        self._listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
