"""nodeAffinity mode with the real kube-scheduler binding, and a certificate swap under load.

These need their own control plane (with kube-scheduler) and their own
webhook registration, so they do not disturb the shared session cluster.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

import certs
from tests.e2e.conftest import wait_for
from webhook.admission.patch import FILTER_RESULT, SELECTED_NODE
from webhook.admission.rules import ENABLED_LABEL
from webhook.devcluster import DevCluster
from webhook.devcluster.objects import create_node, ensure_namespace, node_manifest, pod_manifest
from webhook.devcluster.webhook import (
    WebhookProcess,
    register_webhook,
    start_webhook,
    unregister_webhook,
    wait_until_effective,
)
from webhook.kube import Kube

pytestmark = pytest.mark.e2e

AFFINITY_POLICY = """\
apiVersion: placement-webhook.io/v1alpha1
kind: PlacementPolicy
mode: nodeAffinity
"""


@pytest.fixture(scope="module")
def scheduled_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster.start(tmp_path_factory.mktemp("with-scheduler"), scheduler=True) as running:
        yield running


@pytest.fixture(scope="module")
def skube(scheduled_cluster: DevCluster) -> Iterator[Kube]:
    client = Kube(scheduled_cluster.kubeconfig)
    for i, cpu in enumerate(["2", "4", "8"]):
        create_node(client, node_manifest(f"aff-{i}", cpu=cpu, memory="16Gi"))
    ensure_namespace(client, "affinity", {ENABLED_LABEL: "true"})
    yield client
    client.close()


def served_serial(hook: WebhookProcess) -> int:
    context = ssl.create_default_context(cafile=str(hook.tls_dir / "ca.crt"))
    port = int(hook.url.rsplit(":", 1)[1])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_affinity_mode_pins_the_node_and_kube_scheduler_binds_it_there(
    scheduled_cluster: DevCluster, skube: Kube, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(AFFINITY_POLICY)
    hook = start_webhook(scheduled_cluster, name="affinity-webhook", policy=policy)
    try:
        register_webhook(skube, hook)
        wait_until_effective(skube, "affinity")
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "controller": True,
                 "uid": "11111111-2222-3333-4444-555555555555"}  # fmt: skip
        created = []
        for i in range(6):
            manifest = pod_manifest(f"a{i}", cpu="1")
            manifest["metadata"]["ownerReferences"] = [owner]  # pinned: a ReplicaSet recreates it
            created.append(skube.create("/api/v1/namespaces/affinity/pods", manifest))
        bare = skube.create("/api/v1/namespaces/affinity/pods", pod_manifest("bare", cpu="1"))
        preferred = bare["spec"]["affinity"]["nodeAffinity"]
        assert "requiredDuringSchedulingIgnoredDuringExecution" not in preferred  # never stranded
        assert preferred["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 100
        for pod in created:
            assert "nodeName" not in pod["spec"]  # the scheduler binds, not us
            chosen = pod["metadata"]["annotations"][SELECTED_NODE]
            terms = pod["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"]
            assert terms == [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [chosen]}]}
            ]

        def bound() -> list[dict]:
            pods = skube.get("/api/v1/namespaces/affinity/pods")["items"]
            return pods if all(p["spec"].get("nodeName") for p in pods) else []

        for pod in wait_for(bound, timeout=30, message="kube-scheduler to bind every pod"):
            if pod["metadata"]["name"] != "bare":  # the bare pod is steered, not pinned
                assert pod["spec"]["nodeName"] == pod["metadata"]["annotations"][SELECTED_NODE]
        # The reservations end once the scheduler has bound the pods.
        wait_for(
            lambda: "placement_webhook_reservations 0.0" in hook.metrics(),
            message="reservations to be released by the bound pods",
        )
    finally:
        unregister_webhook(skube)
        hook.stop()


def test_certificate_swap_during_load_drops_no_request(
    scheduled_cluster: DevCluster, skube: Kube, tmp_path: Path
) -> None:
    tls = tmp_path / "tls"
    hook = start_webhook(scheduled_cluster, name="rotating-webhook", tls_dir=tls)
    ensure_namespace(skube, "rotation", {ENABLED_LABEL: "true"})
    stop = threading.Event()
    created: list[dict] = []
    errors: list[Exception] = []

    def load() -> None:
        while not stop.is_set():
            try:
                created.append(
                    skube.create(
                        "/api/v1/namespaces/rotation/pods",
                        pod_manifest(generate_name="r-", cpu="1m", memory="1Mi"),
                    )
                )
            except Exception as err:  # collected and asserted below
                errors.append(err)

    try:
        register_webhook(skube, hook)
        wait_until_effective(skube, "rotation")
        first_serial = served_serial(hook)
        workers = [threading.Thread(target=load) for _ in range(4)]
        for w in workers:
            w.start()
        ca = certs.load_authority(tls)
        serials = [first_serial]
        for _ in range(3):  # three rotations under load, each a new key and certificate
            time.sleep(0.5)
            leaf = certs.issue_serving_certificate(ca, ["localhost"], ["127.0.0.1"])
            certs.write_pem_atomically(tls / "tls.key", leaf.key_pem)
            certs.write_pem_atomically(tls / "tls.crt", leaf.cert_pem)
            expected = leaf.certificate.serial_number
            # New connections get the new certificate while the load goes on.
            wait_for(lambda e=expected: served_serial(hook) == e, message="the new certificate")
            serials.append(expected)
        time.sleep(0.5)
        stop.set()
        for w in workers:
            w.join()

        assert errors == []
        assert len(created) > 50
        # failurePolicy is Ignore: a failed call would admit the pod with no decision on it.
        undecided = [p["metadata"]["name"] for p in created if FILTER_RESULT not in
                     (p["metadata"].get("annotations") or {})]  # fmt: skip
        assert undecided == []
        assert len(set(serials)) == 4
    finally:
        stop.set()
        unregister_webhook(skube)
        hook.stop()
