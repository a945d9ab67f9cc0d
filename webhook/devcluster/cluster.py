"""Start, wait for and stop the local control plane processes.

Admission plugins: the defaults, plus MutatingAdmissionWebhook (on by default
in recent releases, named anyway) and NodeRestriction (hollow kubelets may
touch only their own Node and pods, as in a real cluster), minus
`ServiceAccount` (it would reject every pod until a controller creates the
`default` ServiceAccount) and `TaintNodesByCondition` (a bare Node object has
no kubelet to report Ready, so the taint it adds would never be lifted). The
controller-manager, when asked for, runs without the node lifecycle
controller for the same reason: it would taint and evict bare nodes, which
never heartbeat. Authorization is Node,RBAC: the Node authorizer is what
lets a kubelet (`system:node:NAME`) read its pods and write their status.

The API server always presents a client certificate to webhooks (mutual
TLS): an AdmissionConfiguration gives the MutatingAdmissionWebhook and
ValidatingAdmissionWebhook plugins a kubeconfig whose users are named by
the webhooks' `host:port`, as the API server looks them up. The file is read
once at start-up, so the ports are reserved then (`webhook_ports`); a webhook
started on one of them (`take_webhook_port`) gets the certificate, a webhook
on any other port gets none.

Processes started with `own_processes=True` (tests, demo) die with the Python
process that started them (PR_SET_PDEATHSIG), so an interrupted test run
leaves no orphans; `devcluster up` starts them detached and records their
pids in the state folder for `devcluster down`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import certs
from webhook.devcluster import kubelets
from webhook.devcluster.process import fork_from_long_lived_thread

if TYPE_CHECKING:
    from webhook.devcluster.netns import NodeNetwork

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN_DIR_ENV = "PLACEMENT_WEBHOOK_BIN_DIR"
COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "kubectl",
    "hollow-kubelet",
)
#: CN of the client certificate the API server presents to webhooks.
APISERVER_CLIENT_NAME = "kube-apiserver"
#: Webhook ports reserved at start, each with the API server's client certificate.
WEBHOOK_PORTS = 16
_PR_SET_PDEATHSIG = 1


class DevClusterError(RuntimeError):
    """The control plane could not be built, started or reached."""


def locate_binaries() -> Path:
    """The folder holding the pinned upstream binaries, building them if needed.

    `PLACEMENT_WEBHOOK_BIN_DIR` points at a ready folder; otherwise
    `hack/build.sh` answers with its cache folder (instantly when built).
    """
    if os.environ.get(BIN_DIR_ENV):
        folder = Path(os.environ[BIN_DIR_ENV])
    else:
        script = REPO_ROOT / "hack" / "build.sh"
        if not script.exists():
            raise DevClusterError(f"set {BIN_DIR_ENV}: no hack/build.sh beside this package")
        done = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise DevClusterError("hack/build.sh failed (see its output above)")
        folder = Path(done.stdout.strip().splitlines()[-1])
    missing = [c for c in COMPONENTS if not (folder / c).exists()]
    if missing:
        raise DevClusterError(f"{folder}: missing {', '.join(missing)}")
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def distinct_free_ports(count: int) -> list[int]:
    """`count` different free ports (held open together while chosen, so none repeats)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Component:
    """One started process and where its output goes."""

    name: str
    process: subprocess.Popen[bytes] | None
    pid: int
    log: Path


@dataclass
class DevCluster:
    """A running (or stopped) local control plane rooted at `workdir`.

    Use `DevCluster.start(...)` or the context manager; `kubeconfig` is an
    admin kubeconfig (system:masters) for tests and tools.
    """

    workdir: Path
    bin_dir: Path
    apiserver_port: int = 0
    components: dict[str, Component] = field(default_factory=dict)
    webhook_ports: list[int] = field(default_factory=list)
    """Ports the API server presents its client certificate to (https://127.0.0.1:PORT)."""
    _taken_ports: int = 0
    _metrics_token: str | None = None

    def metrics_token(self) -> str:
        """A bearer token allowed to read our processes' /metrics and /debug/* pages."""
        if self._metrics_token is None:
            from webhook.devcluster.process import reader_token

            self._metrics_token = reader_token(self.kubeconfig)
        return self._metrics_token

    kubelet_root: Path | None = None
    """Hollow kubelets' state folders (see `kubelets.root_folder`), once one was started."""
    #: Set for a cluster with a real node: every component runs in that network
    #: namespace, and `server` is a forwarder to the API server inside it.
    network: NodeNetwork | None = None

    # ---- paths ---------------------------------------------------------
    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def apiserver_client_ca(self) -> Path:
        """The CA that signed the API server's client certificate for webhooks."""
        return self.pki / "ca.crt"

    def take_webhook_port(self) -> int:
        """A free reserved port: a webhook there is called with the API server's certificate.

        Handed out in turn, skipping ports something listens on, so the ports
        of stopped webhooks come round again.
        """
        for _ in range(len(self.webhook_ports)):
            port = self.webhook_ports[self._taken_ports % len(self.webhook_ports)]
            self._taken_ports += 1
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
        raise DevClusterError(f"all {len(self.webhook_ports)} reserved webhook ports are in use")

    @property
    def inner_server(self) -> str:
        """The API server as the cluster's own processes reach it."""
        return self.network.inner_server if self.network else self.server

    def log_path(self, name: str) -> Path:
        return self.workdir / "logs" / f"{name}.log"

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        """Run the pinned kubectl against this cluster and return its stdout."""
        done = subprocess.run(
            [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            input=input,
        )
        if check and done.returncode != 0:
            raise DevClusterError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    # ---- lifecycle -----------------------------------------------------
    @classmethod
    def start(
        cls,
        workdir: str | os.PathLike[str],
        *,
        scheduler: bool = False,
        controller_manager: bool = False,
        scheduler_config: str | os.PathLike[str] | None = None,
        own_processes: bool = True,
        bin_dir: Path | None = None,
        progress: Callable[[str], None] | None = None,
        timeout: float = 90.0,
        kubelets: Sequence[kubelets.KubeletSpec] = (),
        network: NodeNetwork | None = None,
        profiling: bool = False,
    ) -> DevCluster:
        """Start etcd and kube-apiserver (and the optional components) and wait until ready.

        `kubelets`: hollow kubelets to start once the API server is ready; returns
        when their nodes are Ready. `profiling` serves the API server's /debug/pprof
        (for `python -m experiments run --profile`); off otherwise, as a hardened
        API server runs.
        """
        say = progress or (lambda _msg: None)
        folder = Path(workdir).resolve()
        if folder.exists():
            shutil.rmtree(folder)
        (folder / "logs").mkdir(parents=True)
        cluster = cls(workdir=folder, bin_dir=bin_dir or locate_binaries(), network=network)
        try:
            cluster._write_pki()
            say("starting etcd")
            cluster._start_etcd(own_processes)
            say("starting kube-apiserver")
            cluster._start_apiserver(own_processes, profiling=profiling)
            cluster.wait_ready(timeout)
            say(f"kube-apiserver ready at {cluster.server}")
            if scheduler:
                cluster.start_scheduler(scheduler_config, own_processes=own_processes)
                say("kube-scheduler started")
            if controller_manager:
                cluster.start_controller_manager(own_processes=own_processes)
                say("kube-controller-manager started")
            if kubelets:
                say(f"starting {len(kubelets)} hollow kubelet(s)")
                took = cluster.start_kubelets(kubelets, own_processes=own_processes)
                say(f"{len(kubelets)} hollow kubelet node(s) Ready in {took:.1f}s")
            cluster._save_state()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def __enter__(self) -> DevCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, grace: float = 10.0) -> None:
        """Stop every process this cluster started, newest first; never raises.

        Kubelets go first and all at once (a hundred of them one by one would
        take seconds), then the rest newest first.
        """
        nodes = [c for name, c in self.components.items() if kubelets.is_kubelet(name)]
        self._stop_components(nodes, grace)
        for component in reversed(list(self.components.values())):
            if component not in nodes:
                self._stop_components([component], grace)
        self.components.clear()
        if self.kubelet_root is not None and not self.kubelet_root.is_relative_to(self.workdir):
            kubelets.remove_root_folder(self.kubelet_root)
        with contextlib.suppress(OSError):
            (self.workdir / "state.json").unlink()

    def stop_component(self, name: str, grace: float = 10.0) -> None:
        """Stop one component (for tests that kill, say, the scheduler)."""
        component = self.components.pop(name, None)
        if component:
            self._stop_components([component], grace)
            self._save_state()

    @staticmethod
    def _stop_components(components: Sequence[Component], grace: float) -> None:
        """SIGTERM all, wait up to `grace`, SIGKILL what is left."""
        for component in components:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(component.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        left = list(components)
        while left and time.monotonic() < deadline:
            left = [c for c in left if _alive(c)]
            if left:
                time.sleep(0.05)
        for component in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(component.pid, signal.SIGKILL)
        for component in components:
            if component.process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    component.process.wait(5)

    @classmethod
    def attach(cls, workdir: str | os.PathLike[str]) -> DevCluster:
        """The cluster recorded in `workdir/state.json` by `devcluster up`."""
        folder = Path(workdir).resolve()
        try:
            state = json.loads((folder / "state.json").read_text())
        except FileNotFoundError as err:
            raise DevClusterError(f"{folder}: no running dev cluster recorded") from err
        cluster = cls(workdir=folder, bin_dir=Path(state["binDir"]), apiserver_port=state["port"])
        cluster.webhook_ports = list(state.get("webhookPorts", []))
        if state.get("kubeletRoot"):
            cluster.kubelet_root = Path(state["kubeletRoot"])
        for name, pid in state["pids"].items():
            cluster.components[name] = Component(name, None, pid, cluster.log_path(name))
        return cluster

    def status(self) -> dict[str, bool]:
        return {name: _alive(c) for name, c in self.components.items()}

    def _save_state(self) -> None:
        state = {
            "binDir": str(self.bin_dir),
            "port": self.apiserver_port,
            "kubeconfig": str(self.kubeconfig),
            "pids": {name: c.pid for name, c in self.components.items()},
            "webhookPorts": self.webhook_ports,
            "kubeletRoot": str(self.kubelet_root) if self.kubelet_root else None,
        }
        (self.workdir / "state.json").write_text(json.dumps(state, indent=2))

    # ---- processes -----------------------------------------------------
    def _spawn(self, name: str, args: list[str], own: bool, binary: str | None = None) -> None:
        log = self.log_path(name)
        argv = [str(self.bin_dir / (binary or name)), *args]

        def launch() -> subprocess.Popen[bytes]:
            with open(log, "ab") as out:
                return subprocess.Popen(
                    self.network.command(argv) if self.network else argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=self.workdir,
                    start_new_session=True,
                    preexec_fn=_die_with_parent if own and sys.platform == "linux" else None,
                )

        process = fork_from_long_lived_thread(launch) if own else launch()
        self.components[name] = Component(name, process, process.pid, log)

    def _check_alive(self, name: str) -> None:
        component = self.components[name]
        if not _alive(component):
            raise DevClusterError(f"{name} exited; last log lines:\n{self.tail_log(name)}")

    def tail_log(self, name: str, lines: int = 25) -> str:
        try:
            text = self.log_path(name).read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def _start_etcd(self, own: bool) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._spawn(
            "etcd",
            [
                "--name=dev",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=dev=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",  # a throw-away cluster: durability buys nothing here
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
            own,
        )

    def _start_apiserver(self, own: bool, *, profiling: bool = False) -> None:
        self.apiserver_port = free_port()
        pki = self.pki
        args = [
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",  # loopback cannot back the kubernetes Service
            f"--secure-port={self.apiserver_port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--api-audiences=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins="
            "NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true",
            f"--profiling={'true' if profiling else 'false'}",
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=2000",
            "--max-mutating-requests-inflight=1000",
            "--event-ttl=1h",
            f"--admission-control-config-file={self._write_admission_config()}",
        ]
        if self.network is not None:
            args = self.network.apiserver_args(args, pki)
            self.network.expose(self.apiserver_port)
        self._spawn("kube-apiserver", args, own)

    def _write_admission_config(self) -> Path:
        """AdmissionConfiguration: the API server's client certificate for each reserved port."""
        self.webhook_ports = distinct_free_ports(WEBHOOK_PORTS)
        user = {
            "client-certificate": str(self.pki / "webhook-client.crt"),
            "client-key": str(self.pki / "webhook-client.key"),
        }
        kubeconfig = self.workdir / "admission-webhooks.kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "users": [{"name": f"127.0.0.1:{p}", "user": user} for p in self.webhook_ports],
                }
            )
        )
        plugin = {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": str(kubeconfig),  # must be absolute
        }
        config = self.workdir / "admission-configuration.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "AdmissionConfiguration",
                    "plugins": [
                        {"name": name, "configuration": plugin}
                        for name in ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")
                    ],
                }
            )
        )
        return config

    def _client_kubeconfig(self, name: str, user: str, groups: tuple[str, ...]) -> Path:
        ca = certs.load_authority(self.pki)
        pair = certs.issue_client_certificate(ca, user, groups)
        path = self.workdir / f"{name}.kubeconfig"
        write_kubeconfig(
            path, self.inner_server, ca.cert_pem, pair.cert_pem, pair.key_pem, user=user
        )
        return path

    def start_scheduler(
        self,
        config: str | os.PathLike[str] | None = None,
        *,
        name: str = "kube-scheduler",
        own_processes: bool = True,
        extra_args: Sequence[str] = (),
    ) -> None:
        """Start a kube-scheduler (a second one with another `name` and `config` is fine).

        `extra_args` go on its command line as given (say, `--vmodule=...` for
        the score log lines a differential test reads).
        """
        kubeconfig = self._client_kubeconfig(name, "system:kube-scheduler", ())
        args = [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--leader-elect=false",
        ]
        if config:
            args.append(f"--config={self._with_client_connection(Path(config), kubeconfig, name)}")
        args.extend(extra_args)
        self._spawn(name, args, own_processes, binary="kube-scheduler")
        time.sleep(0.5)
        self._check_alive(name)

    def start_kubelets(
        self,
        specs: Sequence[kubelets.KubeletSpec],
        *,
        own_processes: bool = True,
        timeout: float = 120.0,
    ) -> float:
        """Start one hollow kubelet per spec; returns the seconds until all their nodes were Ready.

        Stop one with `stop_component(kubelets.component_name(NAME))`.
        """
        return kubelets.start(self, specs, own=own_processes, timeout=timeout)

    def _with_client_connection(self, config: Path, kubeconfig: Path, name: str) -> Path:
        """A copy of a KubeSchedulerConfiguration that points at this cluster.

        kube-scheduler ignores --kubeconfig when --config is given; the
        configuration's clientConnection.kubeconfig is what it uses.
        """
        document = yaml.safe_load(config.read_text()) or {}
        connection = document.setdefault("clientConnection", {})
        connection.setdefault("kubeconfig", str(kubeconfig))
        copy = self.workdir / f"{name}-config.yaml"
        copy.write_text(yaml.safe_dump(document, sort_keys=False))
        return copy

    def start_controller_manager(self, *, own_processes: bool = True) -> None:
        """Start kube-controller-manager (ReplicaSets, Deployments, garbage collection).

        The node lifecycle and IPAM controllers are off: there is no kubelet
        heartbeating, and the lifecycle controller would taint every node.
        Controllers share one identity (no per-controller ServiceAccounts, as
        the ServiceAccount admission plugin is off); on this throw-away
        cluster it is in system:masters, since system:kube-controller-manager
        alone may not read ReplicaSets.
        """
        kubeconfig = self._client_kubeconfig(
            "kube-controller-manager", "system:kube-controller-manager", ("system:masters",)
        )
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
                "--controllers=*,-node-lifecycle-controller,-node-ipam-controller",
                f"--service-account-private-key-file={self.pki / 'sa.key'}",
                f"--root-ca-file={self.pki / 'ca.crt'}",
                "--use-service-account-credentials=false",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--concurrent-replicaset-syncs=5",
            ],
            own_processes,
        )
        time.sleep(0.5)
        self._check_alive("kube-controller-manager")

    def _write_pki(self) -> None:
        pki = self.pki
        ca = certs.new_authority("placement-webhook-devcluster-ca")
        certs.write_pem_atomically(pki / "ca.key", ca.key_pem)
        certs.write_pem_atomically(pki / "ca.crt", ca.cert_pem, 0o644)
        serving = certs.issue_serving_certificate(
            ca,
            ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
            ["127.0.0.1", "10.96.0.1"],
        )
        certs.write_pem_atomically(pki / "apiserver.key", serving.key_pem)
        certs.write_pem_atomically(pki / "apiserver.crt", serving.cert_pem, 0o644)
        sa_key = ec.generate_private_key(ec.SECP256R1())
        certs.write_pem_atomically(
            pki / "sa.key",
            sa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        certs.write_pem_atomically(
            pki / "sa.pub",
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            0o644,
        )
        webhook_client = certs.issue_client_certificate(ca, APISERVER_CLIENT_NAME)
        certs.write_pem_atomically(pki / "webhook-client.crt", webhook_client.cert_pem, 0o644)
        certs.write_pem_atomically(pki / "webhook-client.key", webhook_client.key_pem)
        admin = certs.issue_client_certificate(ca, "admin", ["system:masters"])
        certs.write_pem_atomically(pki / "admin.crt", admin.cert_pem, 0o644)
        certs.write_pem_atomically(pki / "admin.key", admin.key_pem)

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Poll `/readyz` with the admin identity until it answers ok."""
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(self.pki / "admin.crt", self.pki / "admin.key")
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            for name in ("etcd", "kube-apiserver"):
                self._check_alive(name)
            try:
                with urllib.request.urlopen(
                    f"{self.server}/readyz", context=context, timeout=2
                ) as answer:
                    if answer.status == 200:
                        write_kubeconfig(
                            self.kubeconfig,
                            self.server,
                            (self.pki / "ca.crt").read_bytes(),
                            (self.pki / "admin.crt").read_bytes(),
                            (self.pki / "admin.key").read_bytes(),
                            user="admin",
                        )
                        return
            except OSError as err:
                last = str(err)
            time.sleep(0.25)
        raise DevClusterError(
            f"kube-apiserver not ready after {timeout:.0f}s ({last}); log tail:\n"
            + self.tail_log("kube-apiserver")
        )


def _alive(component: Component) -> bool:
    if component.process is not None:
        return component.process.poll() is None
    try:
        os.kill(component.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie of a detached process still answers kill(0); check its state.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{component.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def write_kubeconfig(
    path: Path, server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes, *, user: str
) -> None:
    """A kubeconfig with embedded credentials, written atomically."""
    import base64

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dev",
                "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)},
            }
        ],
        "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": user}}],
        "current-context": "dev",
        "preferences": {},
    }
    certs.write_pem_atomically(path, yaml.safe_dump(config).encode())


@contextlib.contextmanager
def running(workdir: str | os.PathLike[str], **options: object) -> Iterator[DevCluster]:
    """`with running(dir) as cluster:`; stops everything on the way out."""
    cluster = DevCluster.start(workdir, **options)  # type: ignore[arg-type]
    try:
        yield cluster
    finally:
        cluster.stop()
