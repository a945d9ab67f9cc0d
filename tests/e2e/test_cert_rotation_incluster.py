"""In-cluster certificates rotated under load: not one admission request fails.

`python -m certs in-cluster` runs as its ServiceAccount and keeps the
certificates in Secrets; the webhook runs as its own ServiceAccount and
reads the serving certificate from files. There is no kubelet here, so the
test plays its part: after each rotation it copies the Secret into the
webhook's certificate folder the way the kubelet updates a Secret volume
(a new timestamped folder, then an atomic swap of the `..data` symlink).

Meanwhile two threads create pods in an opted-in namespace without pause.
With failurePolicy Ignore a failed call to the webhook does not fail the
pod: it is created unplaced. So "no request failed" is checked on every pod
the API server returned: each carries the webhook's placement.

Three rotations, each from a different cause: a serving certificate found
due (a third of its life left), a rotation on request, and a CA rotation
(the new CA is published beside the old before it signs anything).
"""

from __future__ import annotations

import base64
import datetime as dt
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509

import certs
from certs.incluster import split_pems
from tests.e2e.test_rbac import (
    CERTS_SA,
    WEBHOOK_SA,
    Process,
    Processes,
    apply,
    certs_args,
    https_get,
    project,
    rbac_objects,
    secret_data,
    serve_args,
    token_kubeconfig,
    url_webhook_configuration,
)
from tests.unit.deploy.manifests import NAMESPACE, REPO, render
from webhook.admission.patch import FILTER_RESULT
from webhook.admission.rules import ENABLED_LABEL
from webhook.conflicts.model import SELECTED_NODE_ANNOTATION
from webhook.devcluster import DevCluster
from webhook.devcluster.cluster import free_port
from webhook.devcluster.objects import create_node, ensure_namespace, node_manifest, pod_manifest
from webhook.kube import Kube

pytestmark = pytest.mark.e2e

CONFIG = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/placement-webhook"
LOAD_NAMESPACE = "rotation"


def served_certificate(port: int) -> x509.Certificate:
    """The certificate a new TLS connection to the webhook gets right now."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=3) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def secret_certificate(admin: Kube) -> x509.Certificate:
    return x509.load_pem_x509_certificate(secret_data(admin, "placement-webhook-tls")["tls.crt"])


def published_cas(admin: Kube) -> list[x509.Certificate]:
    bundle = admin.get(CONFIG)["webhooks"][0]["clientConfig"]["caBundle"]
    return split_pems(base64.b64decode(bundle))


@dataclass
class Load:
    """Threads creating pods; every API answer is kept to check the webhook placed it."""

    admin: Kube
    threads: int = 2
    created: list[tuple[str, bool]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        for index in range(self.threads):
            worker = threading.Thread(target=self._run, args=(index,), daemon=True)
            worker.start()
            self._workers.append(worker)

    def _run(self, index: int) -> None:
        count = 0
        while not self._stop.is_set():
            count += 1
            name = f"load-{index}-{count}"
            try:
                pod = self.admin.create(
                    f"/api/v1/namespaces/{LOAD_NAMESPACE}/pods",
                    pod_manifest(name, cpu="1m", memory="1Mi"),
                )
            except Exception as err:  # an API error is a failed request too
                with self._lock:
                    self.errors.append(f"{name}: {err}")
                continue
            notes = pod["metadata"].get("annotations") or {}
            placed = bool(pod["spec"].get("nodeName")) and SELECTED_NODE_ANNOTATION in notes
            with self._lock:
                self.created.append((name, placed))
            time.sleep(0.01)

    def count(self) -> int:
        with self._lock:
            return len(self.created)

    def at_least(self, more: int) -> Callable[[], bool]:
        """A predicate: `more` pods were created after this call."""
        target = self.count() + more
        return lambda: self.count() >= target

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(30)

    def unplaced(self) -> list[str]:
        with self._lock:
            return [name for name, placed in self.created if not placed]


@dataclass
class Rig:
    cluster: DevCluster
    admin: Kube
    procs: Processes
    folder: Path
    certs_kubeconfig: Path
    webhook_kubeconfig: Path
    port: int
    webhook: Process | None = None

    @property
    def tls(self) -> Path:
        return self.folder / "tls"

    @property
    def policy(self) -> Path:
        return REPO / "deploy" / "base" / "policy.yaml"

    def certs(self, name: str, *extra: str) -> str:
        """Run `certs in-cluster --once` as its ServiceAccount; its log."""
        code = self.procs.run(name, certs_args(self.certs_kubeconfig, "--settle", "1", *extra))
        log = self.procs.started[-1].text()
        assert code == 0, log
        return log

    def serves(self, certificate: x509.Certificate) -> Callable[[], bool]:
        """A predicate: a new connection to the webhook gets `certificate`."""
        return lambda: served_certificate(self.port).serial_number == certificate.serial_number

    def kubelet_sync(self) -> None:
        project(secret_data(self.admin, "placement-webhook-tls"), self.tls)

    def start_webhook(self) -> None:
        self.webhook = self.procs.start(
            "webhook", serve_args(self.webhook_kubeconfig, self.port, self.tls, self.policy)
        )
        url = f"https://127.0.0.1:{self.port}/readyz"
        self.procs.until(lambda: https_get(url, self.tls / "ca.crt")[0] == 200, "webhook ready")

    def admission_reaches_the_webhook(self) -> bool:
        probe = pod_manifest(generate_name="probe-", cpu="1m", memory="1Mi")
        created = self.admin.create(
            f"/api/v1/namespaces/{LOAD_NAMESPACE}/pods", probe, dryRun="All"
        )
        return FILTER_RESULT in (created["metadata"].get("annotations") or {})


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    folder = tmp_path_factory.mktemp("rotation")
    with DevCluster.start(folder / "cluster") as cluster:
        admin = Kube(cluster.kubeconfig)
        procs = Processes(folder)
        objects = render("self-managed")
        apply(cluster, rbac_objects(objects))
        port = free_port()
        apply(cluster, [url_webhook_configuration(objects, port)])
        rig = Rig(
            cluster,
            admin,
            procs,
            folder,
            certs_kubeconfig=token_kubeconfig(cluster, admin, CERTS_SA, folder),
            webhook_kubeconfig=token_kubeconfig(cluster, admin, WEBHOOK_SA, folder),
            port=port,
        )
        try:
            rig.certs("certs-bootstrap")
            rig.kubelet_sync()
            rig.start_webhook()
            for i in range(4):
                create_node(
                    admin, node_manifest(f"roomy-{i}", cpu="64", memory="256Gi", pods=10000)
                )
            ensure_namespace(admin, LOAD_NAMESPACE, {ENABLED_LABEL: "true"})
            procs.until(rig.admission_reaches_the_webhook, "admission to reach the webhook")
            yield rig
        finally:
            procs.stop_all()
            admin.close()


def age_the_serving_certificate(rig: Rig) -> None:
    """Put a certificate into the Secret that was issued 300 days ago (65 of 365 days left)."""
    ca_secret = secret_data(rig.admin, "placement-webhook-ca")
    folder = rig.folder / "ca"
    certs.write_pem_atomically(folder / "ca.crt", ca_secret["ca.crt"])
    certs.write_pem_atomically(folder / "ca.key", ca_secret["ca.key"])
    aged = certs.issue_serving_certificate(
        certs.load_authority(folder),
        certs.service_dns_names("placement-webhook", NAMESPACE),
        ["127.0.0.1"],
        now=dt.datetime.now(dt.UTC) - dt.timedelta(days=300),
    )
    path = f"/api/v1/namespaces/{NAMESPACE}/secrets/placement-webhook-tls"
    secret = rig.admin.get(path)
    secret["data"]["tls.crt"] = base64.b64encode(aged.cert_pem).decode()
    secret["data"]["tls.key"] = base64.b64encode(aged.key_pem).decode()
    rig.admin.request("PUT", path, body=secret)


def test_serving_and_ca_rotations_under_load_fail_no_admission_request(rig: Rig) -> None:
    served = [served_certificate(rig.port)]
    first_ca = published_cas(rig.admin)
    load = Load(rig.admin)
    load.start()
    try:
        rotations = (
            (
                "certs-due",
                age_the_serving_certificate,
                (),
                "less than a third of its lifetime left",
            ),
            ("certs-requested", lambda _rig: None, ("--rotate-serving",), "rotation requested"),
            ("certs-ca", lambda _rig: None, ("--rotate-ca",), "signed by a previous CA"),
        )
        for name, prepare, flags, reason in rotations:
            rig.procs.until(load.at_least(20), "pods before the rotation")
            prepare(rig)
            log = rig.certs(name, *flags)
            (issued,) = [line for line in log.splitlines() if "serving certificate issued" in line]
            assert reason in issued
            rig.kubelet_sync()
            rig.procs.until(rig.serves(secret_certificate(rig.admin)), f"the cert of {name}")
            served.append(served_certificate(rig.port))
            rig.procs.until(load.at_least(20), "pods after the rotation")
    finally:
        load.stop()

    print(
        f"\n{load.count()} pods created across 3 rotations; serials "
        f"{[hex(c.serial_number)[:10] for c in served]}"
    )
    assert load.errors == []
    assert load.unplaced() == []
    assert len({c.serial_number for c in served}) == 4
    # After the CA rotation: the new CA signs, and both are trusted until the old retires.
    now_published = published_cas(rig.admin)
    assert len(first_ca) == 1 and len(now_published) == 2
    assert now_published[1] == first_ca[0]
    assert served[-1].issuer == now_published[0].subject
    assert served[-2].issuer == first_ca[0].subject

    # The API server may keep its connections (and their old sessions); a
    # restarted webhook forces new ones, which must verify the new chain.
    assert rig.webhook is not None
    rig.webhook.stop()
    rig.start_webhook()
    rig.procs.until(rig.admission_reaches_the_webhook, "admission over a new connection")
    assert rig.procs.denials() == set()
