"""One real node: the kubelet built from the pinned module, containerd and runc (Debian).

For the install test, which runs the project's own image from deploy/ and the
Helm chart: pods pulled from nowhere (images are imported with `ctr`), run by
runc with their memory limits enforced, on a CNI bridge in the cluster's
network namespace (netns.py: the control plane runs there too, and nothing
routes out of it).

A kubelet is a machine-wide thing: its cgroups go under a root of their own
(`/placement-webhook-<id>` in every cgroup v1 hierarchy), its files and
containerd's under the work folder; `stop()` drains the node and removes what
the kubelet and containerd leave (containers, mounts, cgroups, network
namespaces, log links), and `leftovers()` says if anything is still there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.devcluster.cluster import (
    DevCluster,
    DevClusterError,
    _die_with_parent,
    write_kubeconfig,
)
from webhook.devcluster.netns import BRIDGE, NODE_IP, POD_SUBNET, NetworkNamespace, NodeNetwork
from webhook.kube import ApiError, Kube

CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CGROUP_V1 = Path("/sys/fs/cgroup")
CONTAINER_LOG_LINKS = Path("/var/log/containers")  # fixed in the kubelet
#: Machine-wide paths the kubelet (device plugin socket), libcni (result cache)
#: and containerd (shim sockets) use whatever they are configured with. One real
#: node per machine at a time, then; `stop()` removes those it created.
MACHINE_PATHS = (
    Path("/var/lib/kubelet"),
    Path("/var/lib/cni"),
    Path("/run/containerd"),
    CONTAINER_LOG_LINKS,
)
RUN_NETNS = Path("/run/netns")  # where containerd names the pods' network namespaces
CNI_NETWORK = "placement-webhook-node"
REQUIRED_TOOLS = ("containerd", "ctr", "runc", "nsenter", "ip")
DEBIAN_PACKAGES = "containerd runc containernetworking-plugins iproute2 util-linux"


def missing_requirements() -> list[str]:
    """What this machine lacks for a real node (empty when it can run one)."""
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool, path=SYSTEM_PATH) is None]
    if not (CNI_BIN_DIR / "bridge").exists():
        missing.append(f"{CNI_BIN_DIR}/bridge")
    if os.geteuid() != 0:
        missing.append("root")
    return missing


@dataclass
class RealNode:
    """containerd and a kubelet registered as Node `name`, running pods for real."""

    name: str
    workdir: Path
    cluster: DevCluster
    network: NodeNetwork
    cgroup_root: str
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: Of MACHINE_PATHS, those there before the node started (the rest are ours).
    existed: frozenset[Path] = frozenset()
    #: Network namespaces named in /run/netns before the node started.
    netns_before: frozenset[str] = frozenset()

    # ---- paths ---------------------------------------------------------
    @property
    def containerd_socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    @property
    def kubelet_dir(self) -> Path:
        return self.workdir / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.workdir / "pod-logs"

    @property
    def inner_kubeconfig(self) -> Path:
        """An admin kubeconfig for commands run inside the node's network (`command`)."""
        return self.workdir / "admin-inside.kubeconfig"

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run on the node's network, as a shell on a cluster machine would."""
        return self.network.command(argv)

    # ---- lifecycle -----------------------------------------------------
    @classmethod
    def start(
        cls,
        cluster: DevCluster,
        network: NodeNetwork,
        workdir: Path,
        *,
        images: Sequence[Path] = (),
        name: str = "node-1",
        timeout: float = 120.0,
    ) -> RealNode:
        """Start containerd, import `images`, start the kubelet, wait for the Node to be Ready."""
        missing = missing_requirements()
        if missing:
            needs = ", ".join(missing)
            raise DevClusterError(
                f"a real node needs {needs} (Debian: apt-get install {DEBIAN_PACKAGES})"
            )
        workdir.mkdir(parents=True, exist_ok=True)
        node = cls(
            name,
            workdir,
            cluster,
            network,
            f"/placement-webhook-{network.netns.name}",
            existed=frozenset(p for p in MACHINE_PATHS if p.exists()),
            netns_before=frozenset(_named_netns()),
        )
        pki = cluster.pki
        write_kubeconfig(
            node.inner_kubeconfig,
            network.inner_server,
            (pki / "ca.crt").read_bytes(),
            (pki / "admin.crt").read_bytes(),
            (pki / "admin.key").read_bytes(),
            user="admin",
        )
        try:
            node._start_containerd()
            for archive in images:
                node.ctr("images", "import", str(archive))
            node._make_cgroup_root()
            node._start_kubelet()
            node.wait_ready(timeout)
        except BaseException:
            node.stop()
            raise
        return node

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        log = self.cluster.log_path(name)
        with open(log, "ab") as out:
            self.processes[name] = subprocess.Popen(
                self.network.command(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env={**os.environ, "PATH": SYSTEM_PATH},
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def _check_alive(self, name: str) -> None:
        if self.processes[name].poll() is not None:
            raise DevClusterError(f"{name} exited; last log lines:\n{self.cluster.tail_log(name)}")

    def _start_containerd(self) -> None:
        base = self.workdir / "containerd"
        cni = self.workdir / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        cri = '"io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{base / "root"}"
state = "{base / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{self.containerd_socket}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{base / "opt"}"
[plugins.{cri}]
  sandbox_image = "{self.sandbox_image()}"
  # The kubelet asks for oom_score_adj -998 for pod sandboxes, which needs a
  # capability a container-hosted CI machine may lack: clamp instead of fail.
  restrict_oom_score_adj = true
  [plugins.{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins.{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{base / "state" / "runc"}"
  [plugins.{cri}.cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{cni / "net.d"}"
"""
        (base).mkdir(parents=True, exist_ok=True)
        (base / "config.toml").write_text(config)
        bridge = {
            "cniVersion": "1.0.0",
            "name": CNI_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,  # nothing leaves the namespace, so nothing to masquerade
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(cni / "ipam"),
                    },
                },
            ],
        }
        (cni / "net.d" / "10-bridge.conflist").write_text(json.dumps(bridge, indent=2))
        self._spawn("containerd", ["containerd", "--config", str(base / "config.toml")])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self._check_alive("containerd")
            if self.containerd_socket.exists() and self._ctr_ok("version"):
                return
            time.sleep(0.2)
        raise DevClusterError(
            f"containerd not up after 30s:\n{self.cluster.tail_log('containerd')}"
        )

    def sandbox_image(self) -> str:
        """The pause image the pinned release uses (built by `hack/image.sh pause`)."""
        return "registry.k8s.io/pause:3.10.2"

    def ctr(self, *args: str, timeout: float = 120) -> str:
        """`ctr -n k8s.io ...` against this node's containerd (the kubelet's namespace)."""
        done = subprocess.run(
            ["ctr", "--address", str(self.containerd_socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PATH": SYSTEM_PATH},
        )
        if done.returncode != 0:
            raise DevClusterError(f"ctr {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def _ctr_ok(self, *args: str) -> bool:
        try:
            self.ctr(*args, timeout=10)
        except (DevClusterError, subprocess.TimeoutExpired):
            return False
        return True

    def _hierarchies(self) -> list[Path]:
        """The cgroup v1 hierarchies mounted on this machine."""
        found = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            if after.split()[0] == "cgroup":
                found.append(Path(before.split()[4]))
        return found

    def _make_cgroup_root(self) -> None:
        for hierarchy in self._hierarchies():
            folder = hierarchy / self.cgroup_root.lstrip("/")
            folder.mkdir(exist_ok=True)
            for knob in ("cpuset.cpus", "cpuset.mems"):  # a new cpuset starts empty
                if (hierarchy / knob).exists():
                    (folder / knob).write_text((hierarchy / knob).read_text())
            # The weight of a machine with this many CPUs busy (what the kubelet gives
            # kubepods, its allocatable millicores), not of one process: on a shared
            # machine the pods then compete as a node would, not as a single task.
            if (folder / "cpu.shares").exists():
                (folder / "cpu.shares").write_text(str(1024 * (os.cpu_count() or 1)))

    def _start_kubelet(self) -> None:
        pki = self.cluster.pki
        kubeconfig = self.cluster._client_kubeconfig(
            "kubelet", f"system:node:{self.name}", ("system:nodes",)
        )
        config: dict[str, Any] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "failCgroupV1": False,  # this machine has cgroup v1 only
            "failSwapOn": False,
            "podLogsDir": str(self.pod_logs),
            "resolvConf": "/etc/resolv.conf",
            # Imported images cannot be pulled again: never collect them, and do
            # not evict on a shared disk that other work is filling.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "serializeImagePulls": False,
            "nodeStatusUpdateFrequency": "4s",
            "syncFrequency": "10s",
            "fileCheckFrequency": "10s",
        }
        path = self.workdir / "kubelet-config.yaml"
        path.write_text(yaml.safe_dump(config))
        self._spawn(
            "kubelet",
            [
                str(self.cluster.bin_dir / "kubelet"),
                f"--config={path}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.kubelet_dir}",
                f"--cert-dir={self.workdir / 'kubelet-pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={NODE_IP}",
                "--v=1",
            ],
        )

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until the Node reports Ready (the runtime and the network are up)."""
        kube = Kube(self.cluster.kubeconfig)
        deadline = time.monotonic() + timeout
        last = "not registered"
        try:
            while time.monotonic() < deadline:
                self._check_alive("containerd")
                self._check_alive("kubelet")
                try:
                    conditions = kube.get(f"/api/v1/nodes/{self.name}")["status"].get(
                        "conditions", []
                    )
                except ApiError as err:
                    if not err.is_not_found:
                        raise
                else:
                    ready = next((c for c in conditions if c["type"] == "Ready"), None)
                    if ready and ready["status"] == "True":
                        return
                    last = ready["message"] if ready else "no Ready condition yet"
                time.sleep(0.5)
        finally:
            kube.close()
        raise DevClusterError(
            f"node {self.name} not Ready after {timeout:.0f}s ({last}); kubelet log:\n"
            + self.cluster.tail_log("kubelet", 40)
        )

    # ---- what runs -----------------------------------------------------
    def tasks(self) -> list[str]:
        """Ids of the containers containerd runs now (pause sandboxes included)."""
        lines = self.ctr("tasks", "ls").splitlines()[1:]
        return [line.split()[0] for line in lines if line.split()[-1] == "RUNNING"]

    def memory_limit(self, container_id: str) -> int:
        """The memory cgroup limit the runtime set for a running container, in bytes."""
        info = json.loads(self.ctr("containers", "info", container_id))
        path = info["Spec"]["linux"]["cgroupsPath"]
        return int((CGROUP_V1 / "memory" / path.lstrip("/") / "memory.limit_in_bytes").read_text())

    # ---- teardown ------------------------------------------------------
    def stop(self, grace: float = 60.0) -> None:
        """Stop the kubelet and containerd and remove what they left; never raises.

        The node is drained first: the controller-manager stops (so no
        controller recreates what is deleted) and the pods bound to the node
        are deleted, so the kubelet stops their containers, unmounts their
        volumes and tears down their network as on a real node. Whatever
        remains after `grace` is killed, unmounted and removed here.
        """
        self.cluster.stop_component("kube-controller-manager")
        with contextlib.suppress(Exception):
            self._delete_pods(grace)
        self._stop_process("kubelet")
        with contextlib.suppress(Exception):
            self._remove_containers()
        self._stop_process("containerd")
        self._kill_shims()
        for name in self._pod_netns():
            NetworkNamespace(name).delete()
        self._unmount_all()
        self._remove_cgroups()
        self._remove_log_links()
        self._remove_machine_paths()

    def _delete_pods(self, grace: float) -> None:
        kube = Kube(self.cluster.kubeconfig)
        try:
            selector = {"fieldSelector": f"spec.nodeName={self.name}"}
            for pod in kube.get("/api/v1/pods", **selector)["items"]:
                meta = pod["metadata"]
                with contextlib.suppress(ApiError):
                    kube.request(
                        "DELETE",
                        f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                        body={"gracePeriodSeconds": 5},
                    )
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                if (
                    not kube.get("/api/v1/pods", **selector)["items"]
                    and not self.tasks()
                    and not self._pod_netns()  # the kubelet stopped every sandbox
                ):
                    return
                time.sleep(0.5)
        finally:
            kube.close()

    def _stop_process(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def _remove_containers(self) -> None:
        for task in self.tasks():
            with contextlib.suppress(DevClusterError, subprocess.TimeoutExpired):
                self.ctr("tasks", "kill", "--all", "--signal", "SIGKILL", task, timeout=20)
        deadline = time.monotonic() + 20
        while self.tasks() and time.monotonic() < deadline:
            time.sleep(0.5)
        for line in self.ctr("tasks", "ls").splitlines()[1:]:
            with contextlib.suppress(DevClusterError, subprocess.TimeoutExpired):
                self.ctr("tasks", "delete", "--force", line.split()[0], timeout=20)
        for container in self.ctr("containers", "ls", "--quiet").split():
            with contextlib.suppress(DevClusterError, subprocess.TimeoutExpired):
                self.ctr("containers", "delete", container, timeout=20)

    def _shims(self) -> list[int]:
        """Pids of containerd shims started for this node (their command names our socket)."""
        found = []
        marker = str(self.containerd_socket).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                cmdline = (proc / "cmdline").read_bytes()
                if b"containerd-shim" in cmdline and marker in cmdline:
                    found.append(int(proc.name))
        return found

    def _pod_netns(self) -> list[str]:
        """The pods' network namespaces containerd made since the node started."""
        return [n for n in _named_netns() if n.startswith("cni-") and n not in self.netns_before]

    def _kill_shims(self) -> None:
        for pid in self._shims():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _mounts(self) -> list[str]:
        """Mount points under the work folder, deepest first."""
        prefix = str(self.workdir.resolve()) + "/"
        points = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                points.append(point)
        return sorted(points, key=len, reverse=True)

    def _unmount_all(self) -> None:
        for point in self._mounts():
            subprocess.run(["umount", "--lazy", point], capture_output=True)

    def _cgroups(self) -> list[Path]:
        """Our cgroup folders in every hierarchy, deepest first."""
        found: list[Path] = []
        for hierarchy in [*self._hierarchies(), CGROUP_V1 / "unified"]:
            top = hierarchy / self.cgroup_root.lstrip("/")
            if top.is_dir():
                found += [Path(d) for d, _, _ in os.walk(top)]
        return sorted(found, key=lambda p: len(p.parts), reverse=True)

    def _remove_cgroups(self) -> None:
        deadline = time.monotonic() + 10
        while (left := self._cgroups()) and time.monotonic() < deadline:
            for folder in left:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            if self._cgroups():
                time.sleep(0.2)

    def _log_links(self) -> list[Path]:
        if not CONTAINER_LOG_LINKS.is_dir():
            return []
        prefix = str(self.pod_logs) + "/"
        return [
            link
            for link in CONTAINER_LOG_LINKS.iterdir()
            if link.is_symlink() and os.readlink(link).startswith(prefix)
        ]

    def _remove_log_links(self) -> None:
        for link in self._log_links():
            with contextlib.suppress(OSError):
                link.unlink()

    def _our_machine_files(self) -> list[Path]:
        """Files of ours under MACHINE_PATHS that existed before: libcni's cached results."""
        cache = Path("/var/lib/cni/results")
        if Path("/var/lib/cni") not in self.existed or not cache.is_dir():
            return []
        return [f for f in cache.iterdir() if f.name.startswith(f"{CNI_NETWORK}-")]

    def _remove_machine_paths(self) -> None:
        for path in MACHINE_PATHS:
            if path not in self.existed:
                shutil.rmtree(path, ignore_errors=True)
        for leftover in self._our_machine_files():
            with contextlib.suppress(OSError):
                leftover.unlink()

    def leftovers(self) -> list[str]:
        """What this node left on the machine after `stop()` (empty when clean)."""
        left = [f"process {name}" for name, p in self.processes.items() if p.poll() is None]
        left += [f"containerd shim pid {pid}" for pid in self._shims()]
        left += [f"mount {point}" for point in self._mounts()]
        left += [f"cgroup {folder}" for folder in self._cgroups()]
        left += [f"log link {link}" for link in self._log_links()]
        left += [f"path {p}" for p in MACHINE_PATHS if p.exists() and p not in self.existed]
        left += [f"file {f}" for f in self._our_machine_files()]
        left += [f"netns {n}" for n in sorted(set(_named_netns()) - self.netns_before)]
        return left


def _named_netns() -> list[str]:
    return [p.name for p in RUN_NETNS.iterdir()] if RUN_NETNS.is_dir() else []


@contextlib.contextmanager
def cluster_with_real_node(
    workdir: Path, *, images: Sequence[Path] = (), timeout: float = 120.0
) -> Iterator[tuple[DevCluster, RealNode]]:
    """A control plane (with kube-scheduler and controller-manager) and one real node.

    Everything is stopped and removed on the way out, the namespace last.
    """
    network = NodeNetwork.create()
    try:
        with DevCluster.start(
            workdir / "cluster", scheduler=True, controller_manager=True, network=network
        ) as cluster:
            node = RealNode.start(
                cluster, network, workdir / "node", images=images, timeout=timeout
            )
            try:
                yield cluster, node
            finally:
                node.stop()
    finally:
        network.delete()
