"""A process of ours running beside the local control plane, and its endpoints.

The webhook, the reconciler and the extender are started as real processes;
tests, the demo and the experiments talk to their endpoints and stop them
through this one handle. `get(path)` goes where the path is served, as in a
cluster: /healthz and /readyz to the plain-HTTP probe endpoint, /metrics and
/debug/* to the metrics endpoint with a bearer token the API server accepts
(TokenReview, then RBAC get on the path), anything else to `url` (with the
client certificate a webhook port requires).

`fork_from_long_lived_thread`: processes that must die with this Python
process get PR_SET_PDEATHSIG, which the kernel fires when the *thread* that
forked them exits, not the process. Forking from one daemon thread that
lives as long as the process makes the signal mean what it is meant to,
whichever thread (a pool worker, an experiment's helper) started the child.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

from webhook.kube import ApiError, Kube

PROBE_PATHS = ("/healthz", "/readyz")
READER_ACCOUNT = ("kube-system", "placement-webhook-metrics-reader")
READER_ROLE = "placement-webhook:metrics-reader"

T = TypeVar("T")


class _Forker:
    """A daemon thread that runs the jobs handed to it, one at a time, and hands back results."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue[Any]]]
        self._jobs = queue.SimpleQueue()
        threading.Thread(target=self._run, name="devcluster-forker", daemon=True).start()

    def _run(self) -> None:
        while True:
            job, answer = self._jobs.get()
            try:
                answer.put((True, job()))
            except BaseException as err:  # raised again in the caller's thread
                answer.put((False, err))

    def call(self, job: Callable[[], T]) -> T:
        answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._jobs.put((job, answer))
        ok, value = answer.get()
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]


_forker: _Forker | None = None
_forker_lock = threading.Lock()


def fork_from_long_lived_thread(start: Callable[[], T]) -> T:
    """Run `start` (a Popen with PR_SET_PDEATHSIG) on the one long-lived forker thread."""
    global _forker
    with _forker_lock:
        if _forker is None:
            _forker = _Forker()
    return _forker.call(start)


@dataclass
class ServedProcess:
    """A running process with an endpoint at `url` (https when `ca_file` is set)."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path
    ca_file: Path | None = None
    probe_url: str | None = None
    """The plain-HTTP probe endpoint, when /healthz and /readyz are served apart."""
    metrics_url: str | None = None
    """The metrics endpoint, when /metrics and /debug/* are served apart."""
    token: str | None = None
    """Bearer token for the metrics endpoint."""
    metrics_ca: Path | None = None
    """CA of the metrics endpoint's serving certificate (default `ca_file`)."""
    client_cert: tuple[Path, Path] | None = None
    """Client certificate and key presented to `url` (mutual TLS)."""

    def _target(self, path: str) -> tuple[str, ssl.SSLContext | None, dict[str, str]]:
        bare = path.split("?", 1)[0]
        if self.probe_url and bare in PROBE_PATHS:
            return self.probe_url, None, {}
        if self.metrics_url and (bare == "/metrics" or bare.startswith("/debug/")):
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            ca = self.metrics_ca or self.ca_file
            context = None
            if self.metrics_url.startswith("https"):
                context = ssl.create_default_context(cafile=str(ca) if ca else None)
            return self.metrics_url, context, headers
        context = ssl.create_default_context(cafile=str(self.ca_file)) if self.ca_file else None
        if context is not None and self.client_cert:
            context.load_cert_chain(*self.client_cert)
        return self.url, context, {}

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, Any]:
        """Status and decoded JSON of GET `path` (text for /metrics)."""
        base, context, headers = self._target(path)
        request = urllib.request.Request(base + path, headers=headers)
        try:
            with urllib.request.urlopen(request, context=context, timeout=timeout) as answer:
                status, body = answer.status, answer.read()
        except urllib.error.HTTPError as err:
            status, body = err.code, err.read()
        if path == "/metrics" and status == 200:
            return status, body.decode()
        return status, orjson.loads(body or b"{}")

    def metrics(self) -> str:
        status, body = self.get("/metrics", timeout=5)
        if status != 200:
            raise AssertionError(f"/metrics answered {status}: {body}")
        return str(body)

    def stop(self, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
        """Signal the process; SIGKILL goes to its whole process group when it leads one.

        gunicorn runs the app in a worker process: a SIGKILL of the arbiter alone
        would leave the worker serving. A container runtime, an OOM kill or a
        node crash takes both, which is what a killed replica means.
        """
        if self.process.poll() is None:
            if sig == signal.SIGKILL and _leads_group(self.process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
            else:
                self.process.send_signal(sig)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def tail_log(self, lines: int = 30) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"


def reader_token(kubeconfig: Path) -> str:
    """A token of a ServiceAccount allowed to read /metrics and /debug/* (made once per cluster).

    The kind of identity a Prometheus in the cluster has: a ServiceAccount
    bound to a ClusterRole with `get` on the non-resource URLs.
    """
    namespace, account = READER_ACCOUNT
    kube = Kube(kubeconfig)
    try:
        objects: list[tuple[str, dict[str, Any]]] = [
            (f"/api/v1/namespaces/{namespace}/serviceaccounts",
             {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}),
            ("/apis/rbac.authorization.k8s.io/v1/clusterroles",
             {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": {"name": READER_ROLE},
              "rules": [{"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]}]}),
            ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
             {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
              "metadata": {"name": READER_ROLE},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                          "name": READER_ROLE},
              "subjects": [{"kind": "ServiceAccount", "name": account,
                            "namespace": namespace}]}),
        ]  # fmt: skip
        for path, body in objects:
            try:
                kube.create(path, body)
            except ApiError as err:
                if err.status != 409:
                    raise
        answer = kube.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": 86400}},
        )  # fmt: skip
        return str(answer["status"]["token"])
    finally:
        kube.close()


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False
