"""The cluster's network: a namespace of our own, with a door into it from the host.

The install test runs a control plane and a real node (realnode.py) whose
pods must reach the API server and be reached by it. All of it lives in one
network namespace made for the run, with a loopback device and a bridge and
no other link, so whatever its processes send stays inside it (and the
machine). Inside:
- the bridge `cni0` has the node's address (the kubelet's InternalIP and the
  pods' gateway); pods get addresses of `POD_SUBNET` from host-local IPAM;
- the API server listens on port 443 of every address there, and the
  `kubernetes` Service's ClusterIP is an address of the namespace itself, so
  pods reach the API server at that ClusterIP without kube-proxy (as with
  kube-proxy's IPVS mode, which puts ClusterIPs on a local device);
- the API server reaches webhooks through their Service's endpoints
  (--enable-aggregator-routing), the pods' own addresses, as it reaches
  aggregated API servers; so no Service needs kube-proxy here.
The host reaches the API server through a `Forwarder` on 127.0.0.1; nothing
else crosses.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import certs

_CLONE_NEWNET = 0x40000000
_RUN_NETNS = Path("/run/netns")
POD_SUBNET = "10.244.0.0/24"
NODE_IP = "10.244.0.1"  # the bridge's address: the node's InternalIP and the pods' gateway
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service: first address of the devcluster's range
BRIDGE = "cni0"
APISERVER_PORT = 443  # the `kubernetes` Service's port; pods dial SERVICE_IP:443


class NetnsError(RuntimeError):
    """The namespace could not be made or entered."""


def _local_mac() -> str:
    """A random locally administered unicast MAC address."""
    return ":".join(f"{b:02x}" for b in (0x02, *secrets.token_bytes(5)))


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


def _with_flags(args: Sequence[str], flags: Mapping[str, str]) -> list[str]:
    """`args` with each `--name=value` of `flags` replacing the one of that name."""
    kept = [a for a in args if a.split("=", 1)[0] not in flags]
    return [*kept, *(f"{name}={value}" for name, value in flags.items())]


@dataclass
class NodeNetwork:
    """The namespace a control plane shares with a real node (see the module docstring)."""

    netns: NetworkNamespace
    forwarders: list[Forwarder] = field(default_factory=list)

    @classmethod
    def create(cls) -> NodeNetwork:
        netns = NetworkNamespace.create("pw-node")
        try:
            netns.ip("addr", "add", f"{SERVICE_IP}/32", "dev", "lo")
            netns.ip("link", "add", BRIDGE, "type", "bridge")
            # A bridge takes the lowest MAC of its ports unless one is set: each pod
            # joining or leaving could change the gateway's MAC under the others'
            # ARP caches, cutting every pod off for seconds (webhook calls time out).
            netns.ip("link", "set", BRIDGE, "address", _local_mac())
            netns.ip("addr", "add", f"{NODE_IP}/{POD_SUBNET.split('/')[1]}", "dev", BRIDGE)
            netns.ip("link", "set", BRIDGE, "up")
        except BaseException:
            netns.delete()
            raise
        return cls(netns)

    # ---- what DevCluster asks ------------------------------------------
    def command(self, argv: Sequence[str]) -> list[str]:
        return self.netns.command(argv)

    @property
    def inner_server(self) -> str:
        """The API server as processes inside the namespace reach it."""
        return f"https://127.0.0.1:{APISERVER_PORT}"

    def apiserver_args(self, args: Sequence[str], pki: Path) -> list[str]:
        """The devcluster's API server flags, changed for a cluster with a real kubelet.

        Node authorization and NodeRestriction (the kubelet's identity),
        the ServiceAccount admission plugin (pods get their token volume),
        a client certificate for calls to the kubelet (logs, exec,
        port-forward), endpoint routing to webhooks, and every address of
        the namespace on port 443.
        """
        ca = certs.load_authority(pki)
        client = certs.issue_client_certificate(
            ca, "kube-apiserver-kubelet-client", ["system:masters"]
        )
        certs.write_pem_atomically(pki / "kubelet-client.crt", client.cert_pem, 0o644)
        certs.write_pem_atomically(pki / "kubelet-client.key", client.key_pem)
        return _with_flags(
            args,
            {
                "--bind-address": "0.0.0.0",
                "--secure-port": str(APISERVER_PORT),
                "--advertise-address": NODE_IP,
                "--endpoint-reconciler-type": "lease",
                "--authorization-mode": "Node,RBAC",
                "--enable-admission-plugins": (
                    "MutatingAdmissionWebhook,ValidatingAdmissionWebhook,NodeRestriction"
                ),
                "--disable-admission-plugins": "TaintNodesByCondition",
                "--enable-aggregator-routing": "true",
                "--kubelet-client-certificate": str(pki / "kubelet-client.crt"),
                "--kubelet-client-key": str(pki / "kubelet-client.key"),
                "--kubelet-preferred-address-types": "InternalIP",
            },
        )

    def expose(self, host_port: int) -> Forwarder:
        """Relay 127.0.0.1:`host_port` on the host to the API server inside."""
        forwarder = Forwarder(self.netns, ("127.0.0.1", APISERVER_PORT), host_port)
        self.forwarders.append(forwarder)
        return forwarder

    def delete(self) -> None:
        for forwarder in self.forwarders:
            forwarder.close()
        self.forwarders.clear()
        self.netns.delete()
