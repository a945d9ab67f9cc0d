"""A second mutating webhook for tests: it injects a sidecar after our webhook has run.

A real HTTPS server (a thread of the test process, on loopback) registered
in a MutatingWebhookConfiguration named `sidecar-injector`: the API server
calls mutating webhooks in the order of their configuration names, so it
runs after `placement-webhook`, and because it changes the pod, the API
server calls ours again (reinvocationPolicy IfNeeded). The sidecar is a
container with the given requests, or, with `native=True`, an init
container with `restartPolicy: Always` (a native sidecar), whose requests
count for the whole life of the pod too.

It listens on one of the cluster's reserved webhook ports, so the API server
presents its client certificate to it as to ours (it does not ask for one).
"""

from __future__ import annotations

import base64
import contextlib
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

import certs
from webhook.devcluster.cluster import DevCluster
from webhook.kube import ApiError, Kube

CONFIGURATION = "sidecar-injector"
SIDECAR = "injected-sidecar"
_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


class SidecarInjector:
    """Start with `start()`, register with `register(kube, namespace)`, end with `stop()`."""

    def __init__(
        self,
        cluster: DevCluster,
        *,
        cpu: str = "100m",
        memory: str = "64Mi",
        native: bool = False,
        name: str = CONFIGURATION,
    ):
        self.cluster, self.cpu, self.memory, self.native, self.name = (
            cluster, cpu, memory, native, name,
        )  # fmt: skip
        self.tls = cluster.workdir / f"{name}-tls"
        certs.ensure_serving_pair(self.tls, ["localhost"], ["127.0.0.1"])
        self.port = cluster.take_webhook_port()
        self.calls = 0
        self.injected = 0
        self._lock = threading.Lock()
        self._kube: Kube | None = None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.tls / "tls.crt", self.tls / "tls.key")
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> SidecarInjector:
        self._thread.start()
        return self

    def register(self, kube: Kube, namespace: str, *, timeout_seconds: int = 5) -> None:
        """Route pod CREATE in `namespace` to the injector (after ours, by name)."""
        self._kube = kube
        config = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": self.name},
            "webhooks": [
                {
                    "name": f"{self.name}.placement-webhook.io",
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": {
                        "url": f"{self.url}/inject",
                        "caBundle": certs.ca_bundle((self.tls / "ca.crt").read_bytes()),
                    },
                    "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                               "operations": ["CREATE"], "resources": ["pods"]}],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "failurePolicy": "Fail",  # a failed injection shows, it is not skipped
                    "sideEffects": "None",
                    "timeoutSeconds": timeout_seconds,
                    "reinvocationPolicy": "Never",
                }
            ],
        }  # fmt: skip
        with contextlib.suppress(ApiError):
            kube.delete(f"{_PATH}/{self.name}")
        kube.create(_PATH, config)

    def patch_for(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """The JSONPatch that adds the sidecar, or none when the pod has it already."""
        spec = pod.get("spec") or {}
        names = {c.get("name") for c in (spec.get("containers") or [])}
        names |= {c.get("name") for c in (spec.get("initContainers") or [])}
        if SIDECAR in names:
            return []
        sidecar: dict[str, Any] = {
            "name": SIDECAR,
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": self.cpu, "memory": self.memory}},
        }
        if not self.native:
            return [{"op": "add", "path": "/spec/containers/-", "value": sidecar}]
        sidecar["restartPolicy"] = "Always"
        if spec.get("initContainers"):
            return [{"op": "add", "path": "/spec/initContainers/-", "value": sidecar}]
        return [{"op": "add", "path": "/spec/initContainers", "value": [sidecar]}]

    def stop(self) -> None:
        if self._kube is not None:
            with contextlib.suppress(ApiError):
                self._kube.delete(f"{_PATH}/{self.name}")
        self.server.shutdown()
        self.server.server_close()


def _handler(injector: SidecarInjector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # the stdlib's name
            length = int(self.headers.get("Content-Length") or 0)
            review = orjson.loads(self.rfile.read(length))
            request = review.get("request") or {}
            ops = injector.patch_for(request.get("object") or {})
            with injector._lock:
                injector.calls += 1
                injector.injected += bool(ops)
            response: dict[str, Any] = {"uid": request.get("uid"), "allowed": True}
            if ops:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(orjson.dumps(ops)).decode()
            body = orjson.dumps({"apiVersion": "admission.k8s.io/v1",
                                 "kind": "AdmissionReview", "response": response})  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
