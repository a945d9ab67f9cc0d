"""Run our own webhook beside the local control plane and register it.

The API server calls the webhook at https://127.0.0.1:PORT/mutate, trusting
the CA from `certs`, and presents its own client certificate (PORT is one
the cluster reserved for that); the webhook requires it (`--client-ca`,
`--client-name kube-apiserver`). The webhook runs as a real `placement-webhook
serve` process (gunicorn, mutual TLS, probe and metrics endpoints), exactly as
in a cluster, only outside of it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import certs
from webhook.admission.registration import CONFIGURATION_NAME, webhook_configuration
from webhook.devcluster.cluster import (
    APISERVER_CLIENT_NAME,
    DevCluster,
    DevClusterError,
    _die_with_parent,
    free_port,
)
from webhook.devcluster.process import ServedProcess
from webhook.kube import ApiError, Kube


class WebhookProcess(ServedProcess):
    """A running `placement-webhook serve`; its CA is in `tls_dir`."""

    @property
    def tls_dir(self) -> Path:
        assert self.ca_file is not None
        return self.ca_file.parent


def start_webhook(
    cluster: DevCluster,
    *,
    name: str = "webhook",
    policy: str | os.PathLike[str] | None = None,
    extra_args: Sequence[str] = (),
    tls_dir: Path | None = None,
    mutual_tls: bool = True,
    timeout: float = 60.0,
) -> WebhookProcess:
    """Start `placement-webhook serve` against the cluster and wait until /readyz is ok.

    With `mutual_tls` (the default, as deployed) the webhook port takes only
    the API server's client certificate and that of a client of the
    webhook's own CA (`tls/client.crt`, which tests use to call it directly).
    """
    tls = tls_dir or cluster.workdir / f"{name}-tls"
    certs.ensure_serving_pair(tls, ["localhost"], ["127.0.0.1"])
    port = cluster.take_webhook_port() if mutual_tls else free_port()
    probe_port, metrics_port = free_port(), free_port()
    log = cluster.log_path(name)
    client_ca = tls / "client-ca.crt"
    own_client = tls / "client.crt", tls / "client.key"
    security: list[str] = []
    if mutual_tls:
        write_client_bundle(client_ca, cluster.apiserver_client_ca, tls / "ca.crt")
        pair = certs.issue_client_certificate(certs.load_authority(tls), "e2e-client")
        certs.write_pem_atomically(own_client[1], pair.key_pem)
        certs.write_pem_atomically(own_client[0], pair.cert_pem, 0o644)
        names = [APISERVER_CLIENT_NAME, "e2e-client"]
        security = ["--client-ca", str(client_ca), *(f"--client-name={n}" for n in names)]
    args = [
        sys.executable, "-m", "webhook.cli", "serve",
        "--kubeconfig", str(cluster.kubeconfig),
        "--bind", f"127.0.0.1:{port}",
        "--tls-cert", str(tls / "tls.crt"),
        "--tls-key", str(tls / "tls.key"),
        "--health-bind", f"127.0.0.1:{probe_port}",
        "--metrics-bind", f"127.0.0.1:{metrics_port}",
        *security,
        *(["--policy", str(policy)] if policy else []),
        *extra_args,
    ]  # fmt: skip
    with open(log, "ab") as out:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
    hook = WebhookProcess(
        process,
        f"https://127.0.0.1:{port}",
        log,
        ca_file=tls / "ca.crt",
        probe_url=f"http://127.0.0.1:{probe_port}",
        metrics_url=f"https://127.0.0.1:{metrics_port}",
        token=cluster.metrics_token(),
        client_cert=own_client if mutual_tls else None,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DevClusterError(f"webhook exited ({process.returncode}):\n{hook.tail_log()}")
        with contextlib.suppress(OSError):
            status, _ = hook.get("/readyz")
            if status == 200:
                return hook
        time.sleep(0.2)
    hook.stop()
    raise DevClusterError(f"webhook not ready after {timeout:.0f}s:\n{hook.tail_log()}")


def write_client_bundle(path: Path, *cas: Path) -> None:
    """The --client-ca bundle: the CAs' certificates one after another."""
    certs.write_pem_atomically(path, b"".join(ca.read_bytes() for ca in cas), 0o644)


def register_webhook(
    kube: Kube, hook: WebhookProcess, *, name: str = CONFIGURATION_NAME, timeout_seconds: int = 2
) -> None:
    """Create (or replace) the MutatingWebhookConfiguration pointing at `hook`."""
    bundle = certs.ca_bundle((hook.tls_dir / "ca.crt").read_bytes())
    body = webhook_configuration(
        ca_bundle=bundle, url=hook.url, name=name, timeout_seconds=timeout_seconds
    )
    path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    with contextlib.suppress(ApiError):
        kube.delete(f"{path}/{name}")
    kube.create(path, body)


def unregister_webhook(kube: Kube, name: str = CONFIGURATION_NAME) -> None:
    path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    with contextlib.suppress(ApiError):
        kube.delete(f"{path}/{name}")


def wait_until_effective(kube: Kube, namespace: str, timeout: float = 30.0) -> None:
    """Wait until the API server calls the webhook (its configuration informer lags).

    Probes with server-side dry-run creates, which the webhook answers without
    reserving anything, until one comes back with a decision annotation.
    """
    from webhook.admission.patch import FILTER_RESULT
    from webhook.devcluster.objects import pod_manifest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = pod_manifest(generate_name="webhook-probe-", cpu="1m", memory="1Mi")
        created = kube.create(f"/api/v1/namespaces/{namespace}/pods", probe, dryRun="All")
        if FILTER_RESULT in ((created.get("metadata") or {}).get("annotations") or {}):
            return
        time.sleep(0.2)
    raise DevClusterError(f"the API server did not call the webhook within {timeout:.0f}s")
