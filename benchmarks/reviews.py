"""AdmissionReviews as the API server sends them, for the benchmarks that call /mutate.

One builder for the request envelope (bench_admission, bench_worst_pods,
bench_abuse all send pod CREATE reviews), so a change to what the API server
sends is made once.
"""

from __future__ import annotations

import socket
import uuid
from typing import Any

import orjson


def admission_review(
    pod: Any, *, dry_run: bool = False, namespace: str = "bench", uid: str | None = None
) -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview of a pod CREATE (a fresh uid unless given)."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "CREATE",
            "object": pod,
            "dryRun": dry_run,
        },
    }


def review_body(pod: Any, *, dry_run: bool = False, namespace: str = "bench") -> bytes:
    """The JSON body of `admission_review`."""
    return orjson.dumps(admission_review(pod, dry_run=dry_run, namespace=namespace))


def plain_pod(
    prefix: str = "bench-", *, cpu: str = "10m", memory: str | None = None, app: str = "bench"
) -> dict[str, Any]:
    """A one-container pod with a generateName (as a ReplicaSet's pods arrive)."""
    requests = {"cpu": cpu} if memory is None else {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": prefix, "namespace": "bench", "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "app:1",
                                 "resources": {"requests": requests}}]},
    }  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
