"""Only the API server may place pods: the webhook port wants its client certificate.

The session cluster's API server presents its client certificate to webhooks
on the ports it reserved (AdmissionConfiguration, user by host:port); the
webhook requires one its --client-ca verifies and whose name is allowed.
"""

from __future__ import annotations

import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

import certs
from tests.e2e.conftest import Nodes, wait_for
from webhook.admission.patch import SELECTED_NODE
from webhook.admission.registration import webhook_configuration
from webhook.devcluster import DevCluster
from webhook.devcluster.objects import pod_manifest
from webhook.devcluster.webhook import WebhookProcess, start_webhook, unregister_webhook
from webhook.kube import ApiError, Kube

pytestmark = pytest.mark.e2e


def review_bytes(namespace: str) -> bytes:
    pod = pod_manifest("forged", cpu="1")
    body = orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": namespace,
                "operation": "CREATE",
                "object": pod,
                "dryRun": True,
            },
        }
    )
    head = (
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def send_review(hook: WebhookProcess, context: ssl.SSLContext, namespace: str) -> bytes:
    """Handshake, send a review, read the answer; the TLS error if the server refuses."""
    port = int(hook.url.rsplit(":", 1)[1])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(review_bytes(namespace))
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
        return answer


def client_context(hook: WebhookProcess, pair: tuple[Path, Path] | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(hook.tls_dir / "ca.crt"))
    if pair is not None:
        context.load_cert_chain(*pair)
    return context


def stranger_pair(folder: Path, name: str) -> tuple[Path, Path]:
    """A client certificate of a CA the webhook does not trust, with an allowed name."""
    ca = certs.new_authority("stranger-ca")
    pair = certs.issue_client_certificate(ca, name)
    (folder / "stranger.crt").write_bytes(pair.cert_pem)
    (folder / "stranger.key").write_bytes(pair.key_pem)
    return folder / "stranger.crt", folder / "stranger.key"


def test_a_review_without_a_client_certificate_is_refused_in_the_handshake(
    webhook: WebhookProcess, namespace: str
) -> None:
    # In TLS 1.3 the client's side of the handshake ends before the server has
    # checked the client's certificate: the server's alert arrives on the first read.
    with pytest.raises(ssl.SSLError) as refused:
        send_review(webhook, client_context(webhook, None), namespace)
    assert refused.value.reason == "TLSV13_ALERT_CERTIFICATE_REQUIRED"


def test_a_certificate_of_an_untrusted_ca_is_refused_in_the_handshake(
    webhook: WebhookProcess, namespace: str, tmp_path: Path
) -> None:
    pair = stranger_pair(tmp_path, "kube-apiserver")  # the right name does not help
    with pytest.raises(ssl.SSLError) as refused:
        send_review(webhook, client_context(webhook, pair), namespace)
    assert refused.value.reason == "TLSV1_ALERT_UNKNOWN_CA"


def test_a_trusted_certificate_with_a_name_not_allowed_gets_403(
    webhook: WebhookProcess, namespace: str, tmp_path: Path
) -> None:
    ca = certs.load_authority(webhook.tls_dir)
    pair = certs.issue_client_certificate(ca, "someone-else")
    (tmp_path / "c.crt").write_bytes(pair.cert_pem)
    (tmp_path / "c.key").write_bytes(pair.key_pem)
    context = client_context(webhook, (tmp_path / "c.crt", tmp_path / "c.key"))
    answer = send_review(webhook, context, namespace)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403")
    assert b"someone-else" in body and b"not one of the allowed client names" in body


def test_an_allowed_client_gets_an_answer_and_the_api_servers_own_calls_place_pods(
    webhook: WebhookProcess, kube: Kube, namespace: str, nodes: Nodes
) -> None:
    node = nodes.add(cpu="4")
    answer = send_review(webhook, client_context(webhook, webhook.client_cert), namespace)
    assert answer.startswith(b"HTTP/1.1 200")
    created = kube.create(f"/api/v1/namespaces/{namespace}/pods", pod_manifest("real", cpu="1"))
    assert created["spec"]["nodeName"] == node
    assert created["metadata"]["annotations"][SELECTED_NODE] == node


@pytest.fixture
def unreserved_webhook(cluster: DevCluster, kube: Kube) -> Iterator[WebhookProcess]:
    """A webhook that requires client certificates, on a port the API server has none for."""
    tls = cluster.workdir / "no-client-cert-tls"
    certs.ensure_serving_pair(tls, ["localhost"], ["127.0.0.1"])
    bundle = tls / "client-ca.crt"
    bundle.write_bytes(cluster.apiserver_client_ca.read_bytes())
    hook = start_webhook(
        cluster, name="no-client-cert", tls_dir=tls, mutual_tls=False,
        extra_args=["--client-ca", str(bundle)],
    )  # fmt: skip
    yield hook
    unregister_webhook(kube, "placement-webhook-unreserved")
    hook.stop()


def test_without_the_api_servers_client_certificate_the_call_fails_with_certificate_required(
    unreserved_webhook: WebhookProcess, kube: Kube, namespace: str
) -> None:
    bundle = certs.ca_bundle((unreserved_webhook.tls_dir / "ca.crt").read_bytes())
    config = webhook_configuration(
        ca_bundle=bundle, url=unreserved_webhook.url, name="placement-webhook-unreserved"
    )
    config["webhooks"][0]["failurePolicy"] = "Fail"  # so the API server says why
    config["webhooks"][0]["namespaceSelector"] = {
        "matchLabels": {"kubernetes.io/metadata.name": namespace}
    }
    kube.create("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", config)

    def attempt() -> str:
        try:
            kube.create(
                f"/api/v1/namespaces/{namespace}/pods",
                pod_manifest(generate_name="nocert-", cpu="1m"),
                dryRun="All",
            )
        except ApiError as err:
            return str(err)
        return ""

    message = wait_for(attempt, timeout=30, message="the API server to call the webhook")
    assert "tls: certificate required" in message
