"""Least privilege, proven on a real API server: the RBAC we ship is enough, each verb needed.

The ServiceAccounts, Roles and bindings rendered from deploy/overlays/self-managed
are applied to a fresh local control plane. Tokens for the ServiceAccounts
come from the TokenRequest API, and each process runs with only its own:

1. `python -m certs in-cluster` (placement-webhook-certs) creates the
   Secrets, injects the caBundle, and rotates once;
2. `placement-webhook serve` (placement-webhook), one replica as deployed,
   called by the API server over mutual TLS, holds the decision Lease,
   places two pods at admission, binds a pod the webhook never saw, marks
   one that fits nowhere unschedulable, evicts one of its pods from a node
   that shrank under it (conflictPolicy: evict), and deletes a pod pinned to
   a node that no longer fits it, for its ReplicaSet to recreate (the
   nodeAffinity repair);
3. a scraper with the shipped metrics-reader role reads the /metrics page,
   which serve authorizes by asking the API server.

The flow stops at the first request the API server denies (each process
logs the denial with the API server's own message). With the shipped RBAC
nothing is denied; with any one verb taken out of any one rule, that verb
is denied to that identity. So the rules are sufficient and each verb is
necessary: adding an unneeded verb makes its negative case fail.

The helpers here (tokens, kubeconfigs, processes, the kubelet's way of
updating a Secret volume) are shared with test_cert_rotation_incluster.py.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import re
import shlex
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.unit.deploy.manifests import (
    NAMESPACE,
    REPO,
    Obj,
    find,
    rbac_verbs,
    render,
    without_verb,
)
from webhook.admission.patch import FILTER_RESULT
from webhook.admission.rules import ENABLED_LABEL
from webhook.conflicts.model import BOUND_BY_ANNOTATION, SELECTED_NODE_ANNOTATION
from webhook.devcluster import DevCluster
from webhook.devcluster.cluster import APISERVER_CLIENT_NAME, _die_with_parent, free_port
from webhook.devcluster.objects import create_node, ensure_namespace, node_manifest, pod_manifest
from webhook.kube import ApiError, Kube
from webhook.reconciler.options import DEFAULT_LEASE_NAME

pytestmark = pytest.mark.e2e

RBAC_KINDS = (
    "Namespace",
    "ServiceAccount",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
)
WEBHOOK_SA, CERTS_SA = "placement-webhook", "placement-webhook-certs"
FAST_LEASE = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5")


# ------------------------------------------------------------------ identities


def apply(cluster: DevCluster, objects: Sequence[Obj]) -> str:
    """Server-side apply as the admin (the operator installing)."""
    return cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        input=yaml.safe_dump_all(list(objects)),
    )


def rbac_objects(objects: Sequence[Obj]) -> list[Obj]:
    return [o for o in objects if o["kind"] in RBAC_KINDS]


def token_kubeconfig(cluster: DevCluster, admin: Kube, account: str, folder: Path) -> Path:
    """A kubeconfig holding a TokenRequest token for ServiceAccount `account`, and nothing else."""
    answer = admin.create(
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},  # audience: the API server's own
        },
    )
    ca = base64.b64encode((cluster.pki / "ca.crt").read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "dev", "cluster": {"server": cluster.server, "certificate-authority-data": ca}}
        ],
        "users": [{"name": account, "user": {"token": answer["status"]["token"]}}],
        "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": account}}],
        "current-context": "dev",
    }
    path = folder / f"{account}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def user_of(account: str) -> str:
    return f"system:serviceaccount:{NAMESPACE}:{account}"


# ------------------------------------------------------------------ denials in logs


@dataclass(frozen=True)
class Denial:
    user: str
    verb: str
    resource: str
    group: str

    def __str__(self) -> str:
        return f"{self.user} cannot {self.verb} {self.resource} ({self.group or 'core'})"


_DENIAL = re.compile(
    r'User "(?P<user>[^"]+)" cannot (?P<verb>\w+) resource "(?P<resource>[^"]+)"'
    r' in API group "(?P<group>[^"]*)"'
)


def denials_in(text: str) -> set[Denial]:
    """Every RBAC denial the API server reported, as quoted in a process log."""
    return {Denial(**m.groupdict()) for m in _DENIAL.finditer(text)}


class Denied(AssertionError):
    def __init__(self, denials: set[Denial], during: str):
        self.denials = denials
        super().__init__(f"denied while waiting for {during}: " + "; ".join(map(str, denials)))


# ------------------------------------------------------------------ processes


@dataclass
class Process:
    """One of our processes, started as a ServiceAccount; its log is scanned for denials."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    stopped: bool = False

    def text(self) -> str:
        with contextlib.suppress(FileNotFoundError):
            return self.log.read_text(errors="replace")
        return ""

    def stop(self) -> None:
        self.stopped = True
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def spawn(name: str, args: Sequence[str], log: Path) -> Process:
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
            cwd=REPO,
        )
    return Process(name, popen, log)


class Processes:
    """Everything one test started: waits that end early on a denial, and cleanup."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.started: list[Process] = []

    def start(self, name: str, args: Sequence[str]) -> Process:
        process = spawn(name, args, self.folder / f"{name}.log")
        self.started.append(process)
        return process

    def run(self, name: str, args: Sequence[str], timeout: float = 60) -> int:
        """Run to completion (a one-shot command); its log is kept like the others'."""
        process = self.start(name, args)
        try:
            return process.popen.wait(timeout)
        finally:
            process.stop()

    def denials(self) -> set[Denial]:
        found: set[Denial] = set()
        for process in self.started:
            found |= denials_in(process.text())
        return found

    def until(self, predicate: Callable[[], Any], during: str, timeout: float = 30.0) -> Any:
        """Poll `predicate` until truthy; raise Denied as soon as any request was denied."""
        deadline = time.monotonic() + timeout
        while True:
            if denied := self.denials():
                raise Denied(denied, during)
            for process in self.started:
                if not process.stopped and process.popen.poll() not in (None, 0):
                    raise AssertionError(f"{process.name} exited:\n{process.text()[-3000:]}")
            with contextlib.suppress(OSError, ApiError):
                if value := predicate():
                    return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {during}")
            time.sleep(0.1)

    def stop_all(self) -> None:
        for process in reversed(self.started):
            process.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.text()[-4000:]}" for p in self.started)


# ------------------------------------------------------------------ the kubelet's Secret volume


def project(data: Mapping[str, bytes], folder: Path) -> None:
    """Write a Secret's keys into `folder` the way the kubelet updates a Secret volume.

    Files go into a new timestamped folder; `..data` is switched to it by
    renaming a temporary symlink over it (atomic), and each key is a symlink
    through `..data`. A reader sees the old set of files or the new one,
    never a mix: what the webhook's certificate reloader relies on.
    """
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns()}"
    stamp.mkdir()
    for key, value in data.items():
        (stamp / key).write_bytes(value)
        (stamp / key).chmod(0o440)
    previous = os.readlink(folder / "..data") if (folder / "..data").is_symlink() else None
    os.symlink(stamp.name, folder / "..data_tmp")
    os.replace(folder / "..data_tmp", folder / "..data")
    for key in data:
        if not (folder / key).is_symlink():
            os.symlink(f"..data/{key}", folder / key)
    if previous:
        shutil.rmtree(folder / previous)


def secret_data(admin: Kube, name: str) -> dict[str, bytes]:
    secret = admin.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}")
    return {str(k): base64.b64decode(v) for k, v in secret["data"].items()}


# ------------------------------------------------------------------ our processes' command lines


def certs_args(kubeconfig: Path, *extra: str) -> list[str]:
    """`python -m certs in-cluster --once`, naming 127.0.0.1 (the webhook runs on loopback)."""
    fixed = shlex.split("-m certs in-cluster --once --ip 127.0.0.1 --settle 0.5 --log-format text")
    return [*fixed, "--namespace", NAMESPACE, "--kubeconfig", str(kubeconfig), *extra]


@dataclass(frozen=True)
class WebhookPorts:
    """Where `serve` listens: the webhook (a port the API server has its certificate for),
    the probe endpoint and the metrics endpoint."""

    webhook: int
    probes: int
    metrics: int

    @classmethod
    def take(cls, cluster: DevCluster) -> WebhookPorts:
        return cls(cluster.take_webhook_port(), free_port(), free_port())


def serve_args(
    cluster: DevCluster, kubeconfig: Path, ports: WebhookPorts, tls: Path, policy: Path
) -> list[str]:
    """`serve` as deployed with mutual TLS: the API server's client CA and the webhook's own."""
    bundles = f"{cluster.apiserver_client_ca},{tls / 'ca.crt'}"
    return [
        *shlex.split("-m webhook.cli serve --log-format text"),
        *("--kubeconfig", str(kubeconfig), "--bind", f"127.0.0.1:{ports.webhook}"),
        *("--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key")),
        *("--health-bind", f"127.0.0.1:{ports.probes}"),
        *("--metrics-bind", f"127.0.0.1:{ports.metrics}"),
        *("--client-ca", bundles, "--client-name", APISERVER_CLIENT_NAME),
        *("--namespace", NAMESPACE, "--policy", str(policy), "--identity", "rbac-e2e"),
        *("--conflict-interval", "0.5", *FAST_LEASE),
    ]


def evict_policy(folder: Path) -> Path:
    """The shipped policy with conflictPolicy: evict (the RBAC grants it either way)."""
    text = (REPO / "deploy" / "base" / "policy.yaml").read_text()
    assert "conflictPolicy: report" in text
    path = folder / "evict.yaml"
    path.write_text(text.replace("conflictPolicy: report", "conflictPolicy: evict"))
    return path


def url_webhook_configuration(objects: Sequence[Obj], port: int) -> Obj:
    """The shipped MutatingWebhookConfiguration, pointed at the webhook on loopback.

    There is no Service network here (no kube-proxy, no kubelet), so the API
    server reaches the webhook by URL; every other field is the manifest's.
    """
    config = copy.deepcopy(find(objects, "MutatingWebhookConfiguration"))
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}/mutate"}
    return config


def https_get(url: str, ca: Path) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(url, context=context, timeout=3) as answer:
            return answer.status, orjson.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, {}


def http_get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return answer.status, orjson.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, {}


def scrape(url: str, token: str | None) -> int:
    """Status of GET /metrics with a bearer token (the certificate is not what is tested here)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"{url}/metrics", headers=headers), context=context, timeout=5
        ) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def reader_token(admin: Kube, role: str | None) -> str:
    """A token of a ServiceAccount in `monitoring`, bound to `role` (None: to nothing)."""
    account = f"scraper-{role.split(':')[-1] if role else 'unbound'}"
    ensure_namespace(admin, "monitoring")
    with contextlib.suppress(ApiError):
        admin.create(
            "/api/v1/namespaces/monitoring/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
        )
    if role:
        with contextlib.suppress(ApiError):
            admin.create(
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": account},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": account, "namespace": "monitoring"}
                    ],
                },
            )
    answer = admin.create(
        f"/api/v1/namespaces/monitoring/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return str(answer["status"]["token"])  # fmt: skip


# ------------------------------------------------------------------ the flow


@dataclass
class Install:
    """The self-managed install on a local control plane, each process as its ServiceAccount."""

    cluster: DevCluster
    admin: Kube
    objects: list[Obj]
    folder: Path
    procs: Processes
    seen: dict[str, Any] = field(default_factory=dict)

    def pods(self, namespace: str) -> dict[str, dict[str, Any]]:
        items = self.admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        return {p["metadata"]["name"]: p for p in items}

    def events(self, namespace: str, reason: str) -> list[dict[str, Any]]:
        items = self.admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        return [e for e in items if e["reason"] == reason]

    def run(self) -> None:
        """Install, place, bind, evict; raises Denied at the first denied request."""
        cluster, admin, procs = self.cluster, self.admin, self.procs
        apply(cluster, rbac_objects(self.objects))
        kubeconfig = {
            account: token_kubeconfig(cluster, admin, account, self.folder)
            for account in (WEBHOOK_SA, CERTS_SA)
        }
        ports = WebhookPorts.take(cluster)
        apply(cluster, [url_webhook_configuration(self.objects, ports.webhook)])

        # 1. certificates: bootstrap, then one rotation (an update of the Secret).
        for name, extra in (("certs-bootstrap", ()), ("certs-rotate", ("--rotate-serving",))):
            code = procs.run(name, certs_args(kubeconfig[CERTS_SA], *extra))
            procs.until(lambda: True, f"{name} to finish")  # surfaces its denials first
            assert code == 0, procs.logs()
        tls = self.folder / "tls"
        project(secret_data(admin, "placement-webhook-tls"), tls)
        hook = admin.get(
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/placement-webhook"
        )["webhooks"][0]
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == (tls / "ca.crt").read_bytes()

        # 2. the webhook: one replica, holding the decision Lease.
        policy = evict_policy(self.folder)
        procs.start("webhook", serve_args(cluster, kubeconfig[WEBHOOK_SA], ports, tls, policy))
        probes = f"http://127.0.0.1:{ports.probes}"
        procs.until(lambda: http_get(f"{probes}/readyz")[0] == 200, "the webhook's cache to sync")
        procs.until(
            lambda: http_get(f"{probes}/readyz")[1].get("deciding"),
            "the webhook to take the Lease and decide",
        )

        # 3. the webhook places two pods (both on the only node) and says so in events.
        create_node(admin, node_manifest("small", cpu="2"))
        ensure_namespace(admin, "placed", {ENABLED_LABEL: "true"})
        procs.until(
            lambda: http_get(f"{probes}/readyz")[1]["nodes"] == 1, "the webhook to see the node"
        )
        procs.until(lambda: self._dry_run_is_placed("placed"), "admission to reach the webhook")
        owner = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web",
            "uid": "00000000-0000-0000-0000-00000000000a",
            "controller": True,
        }
        for count, name in enumerate(("w1", "w2"), start=1):
            pod = pod_manifest(name, cpu="1")
            pod["metadata"]["ownerReferences"] = [owner]
            created = admin.create("/api/v1/namespaces/placed/pods", pod)
            assert created["spec"].get("nodeName") == "small", procs.logs()  # why, if not
            assert created["metadata"]["annotations"][SELECTED_NODE_ANNOTATION] == "small"
            # the event is written once the watch has the pod, so its reservation has ended:
            # w2 must not meet w1 still unconfirmed (maxUnconfirmedShare 0.5 of 2 cpu would
            # hand it off, rightly)
            procs.until(
                lambda n=count: len(self.events("placed", "Scheduled")) == n,
                f"the webhook's Scheduled event for {name}",
            )

        # 4. the fallback binder binds a pod admission never saw, and flags one that fits nowhere.
        create_node(admin, node_manifest("big", cpu="8"))
        ensure_namespace(admin, "pending")  # not opted in: the webhook is not called
        for name, cpu in (("r1", "1"), ("huge", "64")):
            admin.create(
                "/api/v1/namespaces/pending/pods",
                pod_manifest(name, cpu=cpu, scheduler_name="placement-webhook"),
            )
        bound = procs.until(
            lambda: self.pods("pending")["r1"]["spec"].get("nodeName"),
            "the fallback binder to bind r1",
        )
        self.seen["r1"] = self.pods("pending")["r1"]
        assert bound == "big"
        procs.until(
            lambda: self.events("pending", "Scheduled"), "the fallback binder's Scheduled event"
        )
        procs.until(lambda: self.events("pending", "FailedScheduling"), "FailedScheduling")
        procs.until(
            lambda: any(
                c["type"] == "PodScheduled" and c["reason"] == "Unschedulable"
                for c in self.pods("pending")["huge"]["status"].get("conditions", [])
            ),
            "PodScheduled=False on the pod that fits nowhere",
        )

        # 5. the node shrinks under the webhook's pods: the later one is evicted.
        admin.patch_merge("/api/v1/nodes/small/status", {"status": {"allocatable": {"cpu": "1"}}})
        evicted = procs.until(
            lambda: [
                n for n, p in self.pods("placed").items() if p["metadata"].get("deletionTimestamp")
            ],
            "an eviction",
        )
        self.seen["evicted"] = evicted
        procs.until(
            lambda: [
                e for e in self.events("placed", "PlacementConflict") if e["action"] == "Evict"
            ],
            "the Evict event",
        )
        # 6. a pod pinned to the shrunk node, which kube-scheduler calls unschedulable, while
        #    "big" fits it: deleted, for its ReplicaSet to recreate (nodeAffinity repair).
        self._strand("pending", "stranded", node="small")
        procs.until(lambda: "stranded" not in self.pods("pending"), "the repair's deletion")
        procs.until(lambda: self.events("pending", "PlacementRepaired"), "the repair's event")
        # 7. leadership is renewed (a Lease update), and nothing was denied.
        lease = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{DEFAULT_LEASE_NAME}"
        self.seen["lease"] = procs.until(
            lambda: (
                (held := admin.get(lease))["spec"]["renewTime"] != held["spec"]["acquireTime"]
                and held
            ),
            "a renewal of the Lease",
        )
        # 8. a scraper with the shipped reader role reads the metrics page; serve
        #    asks the API server (TokenReview, SubjectAccessReview).
        token = reader_token(admin, "placement-webhook:metrics-reader")
        endpoints = (f"https://127.0.0.1:{ports.metrics}",)
        for url in endpoints:
            procs.until(lambda u=url: scrape(u, token) == 200, f"{url}/metrics to be read")
        unbound = reader_token(admin, None)
        self.seen["scrapes"] = [(scrape(u, None), scrape(u, unbound)) for u in endpoints]
        procs.until(lambda: True, "the end of the flow")

    def _strand(self, namespace: str, name: str, node: str) -> None:
        """A pod as nodeAffinity mode pins it, and as kube-scheduler leaves it when it fails."""
        pod = pod_manifest(name, cpu="1")
        pod["metadata"]["ownerReferences"] = [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "pinned", "controller": True,
            "uid": "00000000-0000-0000-0000-00000000000b",
        }]  # fmt: skip
        pod["metadata"]["annotations"] = {SELECTED_NODE_ANNOTATION: node}
        pin = {"key": "metadata.name", "operator": "In", "values": [node]}
        pod["spec"]["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [pin]}]}}}  # fmt: skip
        self.admin.create(f"/api/v1/namespaces/{namespace}/pods", pod)
        unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "message": "0/2 nodes are available: 1 Insufficient cpu."}  # fmt: skip
        self.admin.request(
            "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            body={"status": {"conditions": [unschedulable]}},
            content_type="application/strategic-merge-patch+json",
        )  # fmt: skip

    def _dry_run_is_placed(self, namespace: str) -> bool:
        probe = pod_manifest(generate_name="probe-", cpu="1m", memory="1Mi")
        created = self.admin.create(f"/api/v1/namespaces/{namespace}/pods", probe, dryRun="All")
        return FILTER_RESULT in (created["metadata"].get("annotations") or {})


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    """A fresh control plane per test: each case changes cluster-wide RBAC."""
    with DevCluster.start(tmp_path / "cluster") as running:
        yield running


@pytest.fixture
def install(cluster: DevCluster, tmp_path: Path) -> Iterator[Install]:
    admin = Kube(cluster.kubeconfig)
    procs = Processes(tmp_path)
    flow = Install(cluster, admin, render("self-managed"), tmp_path, procs)
    try:
        yield flow
    finally:
        procs.stop_all()
        admin.close()


# ------------------------------------------------------------------ tests


def test_the_shipped_rbac_runs_the_whole_install_and_nothing_is_denied(install: Install) -> None:
    install.run()

    r1 = install.seen["r1"]
    assert r1["metadata"]["annotations"][BOUND_BY_ANNOTATION] == "reconciler/rbac-e2e"
    assert install.seen["evicted"] == ["w2"]  # the later arrival on the shrunk node
    assert install.seen["lease"]["spec"]["holderIdentity"] == "rbac-e2e"
    # no token: 401; a token of an account without the reader role: 403
    assert install.seen["scrapes"] == [(401, 403)]
    assert install.procs.denials() == set()


def _case_id(case: tuple[str, str, int, str]) -> str:
    kind, name, index, verb = case
    return f"{kind}-{name}-rule{index}-{verb}"


@pytest.mark.parametrize("case", rbac_verbs(), ids=[_case_id(c) for c in rbac_verbs()])
def test_without_any_one_verb_the_install_stops_with_exactly_that_request_denied(
    install: Install, case: tuple[str, str, int, str]
) -> None:
    kind, name, index, verb = case
    rule = find(install.objects, kind, name)["rules"][index]
    subjects = {
        s["name"]
        for b in install.objects
        if b["kind"] in ("RoleBinding", "ClusterRoleBinding") and b["roleRef"]["name"] == name
        for s in b["subjects"]
    }
    install.objects = without_verb(install.objects, kind, name, index, verb)

    with pytest.raises(Denied) as stopped:
        install.run()

    expected = {
        Denial(user_of(account), verb, resource, rule["apiGroups"][0])
        for account in subjects
        for resource in rule["resources"]
    }
    assert stopped.value.denials & expected, (
        f"removing {verb} from {name} rule {index} should deny it; "
        f"denied instead: {stopped.value.denials}"
    )
    assert stopped.value.denials <= expected, f"more was denied: {stopped.value.denials}"
