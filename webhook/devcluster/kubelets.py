"""Hollow kubelets beside the local control plane: one real kubelet process per node.

`hack/hollow-kubelet` is kubemark's hollow kubelet (the kubelet's own code for
registration, node status and Lease heartbeats, admission, pod workers, the
status manager and events) over a fake container runtime, with the node's
size as flags. Each one has its own identity, a client certificate for
`system:node:NAME` in group `system:nodes`, so the API server's Node
authorizer and NodeRestriction admission plugin confine it to its own Node
and the pods bound to it, as in a real cluster.

Owned kubelets die with this Python process, whichever thread started
them (see `process.fork_from_long_lived_thread`).

What a hollow kubelet does not do that a real one does: run containers
(the fake runtime reports them running at once, they never exit, and a
stopped container is gone immediately, so terminationGracePeriodSeconds and
preStop hooks take no time); probes (every container is ready); volumes
beyond bookkeeping; cgroups, so no CPU or memory limits and no OOM kills;
eviction under real pressure (the fake cadvisor reports no usage); system
and kube reservations (allocatable equals capacity); the kubelet HTTP
server (no logs, exec, port-forward or metrics); image pulls (instant, no
registry).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import ssl
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webhook.devcluster.cluster import DevCluster

BINARY = "hollow-kubelet"
COMPONENT_PREFIX = "kubelet-"
NODE_GROUP = "system:nodes"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_SOCKET_MAX = 107
"""A unix socket path must fit in sun_path (108 bytes with its NUL)."""
_LONGEST_SOCKET = "pod-resources/kubelet.sock"
"""The longest socket path a kubelet makes under its root folder."""


class KubeletSpecError(ValueError):
    """A kubelet's node cannot be made as asked."""


@dataclass(frozen=True)
class KubeletSpec:
    """One hollow kubelet's node: the same keywords as `objects.node_manifest`."""

    name: str
    cpu: str = "4"
    """Whole cores: the fake cadvisor reports a core count."""
    memory: str = "8Gi"
    ephemeral_storage: str = "100Gi"
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    """Registered with the node; the kubelet itself adds hostname, os and arch, and refuses
    other kubernetes.io/k8s.io labels as a real kubelet does (NodeRestriction)."""
    taints: tuple[Mapping[str, str], ...] = ()
    extended: Mapping[str, str] = field(default_factory=dict)
    """Extended resources (name -> quantity), reported as device plugins would."""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise KubeletSpecError(f"node name {self.name!r} is not a DNS subdomain of <= 63")
        if not str(self.cpu).isdigit() or int(self.cpu) < 1:
            raise KubeletSpecError(
                f"node {self.name}: cpu {self.cpu!r} must be whole cores (a hollow kubelet "
                "reports a core count); use a bare Node object for fractional cpu"
            )
        if self.pods < 1:
            raise KubeletSpecError(f"node {self.name}: pods must be at least 1")
        object.__setattr__(self, "taints", tuple(dict(t) for t in self.taints))
        for taint in self.taints:
            if not taint.get("key") or taint.get("effect") not in _EFFECTS:
                raise KubeletSpecError(
                    f"node {self.name}: taint {dict(taint)} needs a key and an effect of "
                    f"{', '.join(_EFFECTS)}"
                )

    @staticmethod
    def of(name: str, **shape: Any) -> KubeletSpec:
        """A spec from `node_manifest`-style keywords (cpu, memory, pods, labels, taints...)."""
        if "ephemeral-storage" in shape:
            shape["ephemeral_storage"] = shape.pop("ephemeral-storage")
        if "taints" in shape:
            shape["taints"] = tuple(shape["taints"])
        unknown = set(shape) - set(KubeletSpec.__dataclass_fields__)
        if unknown:
            raise KubeletSpecError(
                f"node {name}: a hollow kubelet cannot be given {', '.join(sorted(unknown))}"
            )
        return KubeletSpec(name, **shape)

    def args(self, kubeconfig: Path, root: Path) -> list[str]:
        def pairs(values: Mapping[str, str]) -> str:
            return ",".join(f"{k}={v}" for k, v in sorted(values.items()))

        taints = ",".join(
            f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"
            for t in self.taints
        )
        args = [
            f"--name={self.name}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={root}",
            f"--cpu={self.cpu}",
            f"--memory={self.memory}",
            f"--ephemeral-storage={self.ephemeral_storage}",
            f"--max-pods={self.pods}",
        ]
        if self.labels:
            args.append(f"--node-labels={pairs(self.labels)}")
        if taints:
            args.append(f"--register-with-taints={taints}")
        if self.extended:
            args.append(f"--extended-resources={pairs(self.extended)}")
        return args


def parse_pairs(text: str) -> dict[str, str]:
    """`k=v,k2=v2` (the kubelet's --node-labels form) as a dict."""
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise KubeletSpecError(f"{item!r} is not key=value")
        out[key] = value
    return out


def parse_taints(text: str) -> tuple[dict[str, str], ...]:
    """`key=value:Effect,key:Effect` (the kubelet's --register-with-taints form) as taints."""
    out = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        pair, sep, effect = item.rpartition(":")
        key, _, value = pair.partition("=")
        if not sep or not key or effect not in _EFFECTS:
            raise KubeletSpecError(f"taint {item!r} is not key[=value]:{'|'.join(_EFFECTS)}")
        out.append({"key": key, "value": value, "effect": effect} if value else
                   {"key": key, "effect": effect})  # fmt: skip
    return tuple(out)


def component_name(node: str) -> str:
    return COMPONENT_PREFIX + node


def is_kubelet(component: str) -> bool:
    return component.startswith(COMPONENT_PREFIX)


def root_folder(workdir: Path) -> Path:
    """Where kubelets keep their state: `workdir/k/<index>/`, short because the kubelet's unix
    sockets live there, or a fresh temporary folder when even that is too long."""
    inside = workdir / "k"
    if len(str(state_folder(inside, 9999) / _LONGEST_SOCKET)) <= _SOCKET_MAX:
        return inside
    return Path(tempfile.mkdtemp(prefix="pw-kubelets-"))


def state_folder(root: Path, index: int) -> Path:
    return root / str(index)


def new_state_folder(root: Path) -> Path:
    """The first unused `root/<index>`, made now (a node started again gets a fresh one)."""
    index = 0
    while state_folder(root, index).exists():
        index += 1
    folder = state_folder(root, index)
    folder.mkdir(parents=True)
    return folder


def remove_root_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def start(cluster: DevCluster, specs: Sequence[KubeletSpec], *, own: bool, timeout: float) -> float:
    """Start one hollow kubelet per spec, each with its own node identity and state folder."""
    from webhook.devcluster.cluster import DevClusterError

    started = time.monotonic()
    taken = sorted(s.name for s in specs if component_name(s.name) in cluster.components)
    if taken or len({s.name for s in specs}) != len(specs):
        raise DevClusterError(f"hollow kubelet names must be unique: {taken or 'repeated'}")
    if cluster.kubelet_root is None:
        cluster.kubelet_root = root_folder(cluster.workdir)
    for spec in specs:
        name = component_name(spec.name)
        kubeconfig = cluster._client_kubeconfig(name, f"system:node:{spec.name}", (NODE_GROUP,))
        cluster._spawn(name, spec.args(kubeconfig, new_state_folder(cluster.kubelet_root)), own,
                       BINARY)  # fmt: skip
    cluster._save_state()
    wait_until_ready(cluster, [s.name for s in specs], timeout)
    return time.monotonic() - started


def list_nodes(cluster: DevCluster) -> list[dict[str, Any]]:
    """Every Node, read with the admin identity (from the API server's cache)."""
    context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    context.load_cert_chain(cluster.pki / "admin.crt", cluster.pki / "admin.key")
    url = f"{cluster.server}/api/v1/nodes?resourceVersion=0"
    with urllib.request.urlopen(url, context=context, timeout=10) as answer:
        return list(json.loads(answer.read())["items"])


def ready_nodes(nodes: Iterable[Mapping[str, Any]]) -> set[str]:
    """Names of the nodes whose Ready condition is True."""
    out = set()
    for node in nodes:
        for cond in (node.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                out.add(str(node["metadata"]["name"]))
    return out


def wait_until_ready(cluster: DevCluster, names: Sequence[str], timeout: float) -> None:
    """Until every named node reports Ready; fails early with the log of a kubelet that exited."""
    from webhook.devcluster.cluster import DevClusterError

    deadline = time.monotonic() + timeout
    waiting = set(names)
    while waiting:
        for name in sorted(waiting):
            component = component_name(name)
            if not cluster.status().get(component, False):
                raise DevClusterError(
                    f"hollow kubelet {name} exited; last log lines:\n{cluster.tail_log(component)}"
                )
        with contextlib.suppress(OSError, ValueError):
            waiting -= ready_nodes(list_nodes(cluster))
        if not waiting:
            return
        if time.monotonic() > deadline:
            shown = ", ".join(sorted(waiting)[:5]) + (" ..." if len(waiting) > 5 else "")
            raise DevClusterError(
                f"{len(waiting)} hollow kubelet node(s) not Ready after {timeout:.0f}s: {shown}"
            )
        time.sleep(0.2)
