"""`make demo`: the webhook placing pods on a real local control plane.

Builds what is missing, starts etcd + kube-apiserver, starts the webhook
(gunicorn over TLS) and registers it, starts the fallback reconciler, makes
an opted-in namespace, hollow kubelets for nodes of several sizes (one
tainted) and about fifty pods, prints where each pod went, why, and whether
the node's kubelet runs it (and how long after its create it was Running),
then starts one more kubelet and shows the reconciler binding the pods that
fit nowhere at admission, and stops everything it started.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from webhook.admission.patch import FILTER_RESULT, FINALSCORE_RESULT, UNSCHEDULABLE
from webhook.admission.rules import ENABLED_LABEL, SCHEDULER_NAME
from webhook.devcluster import DevCluster, DevClusterError, KubeletSpec, locate_binaries
from webhook.devcluster.objects import ensure_namespace, pod_manifest
from webhook.devcluster.reconciler import start_reconciler
from webhook.devcluster.webhook import register_webhook, start_webhook, wait_until_effective
from webhook.kube import Kube
from webhook.policy.model import PodView

NAMESPACE = "demo"
RUNNING_TIMEOUT = 30.0
WATCH_SECONDS = 2
NODES = [
    # name, cpu, memory, zone, taint
    ("small-a", "2", "4Gi", "zone-a", None),
    ("small-b", "2", "4Gi", "zone-b", None),
    ("medium-a", "4", "8Gi", "zone-a", None),
    ("medium-b", "4", "8Gi", "zone-b", None),
    ("large-c", "8", "16Gi", "zone-c", None),
    ("gpu-c", "8", "32Gi", "zone-c", {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}),
]


def _pods() -> list[dict[str, Any]]:
    """About fifty pods: web replicas, workers, batch jobs, tolerating and oversized ones."""
    pods = [
        pod_manifest(f"web-{i}", cpu="250m", memory="256Mi", labels={"app": "web"})
        for i in range(16)
    ]
    pods += [
        pod_manifest(generate_name="worker-", cpu="500m", memory="1Gi", labels={"app": "worker"})
        for _ in range(14)
    ]
    pods += [
        pod_manifest(f"batch-{i}", cpu="1", memory="2Gi", labels={"app": "batch"})
        for i in range(12)
    ]
    toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    pods += [
        pod_manifest(f"trainer-{i}", cpu="2", memory="8Gi", tolerations=[toleration],
                     nodeSelector={"topology.kubernetes.io/zone": "zone-c"})
        for i in range(3)
    ]  # fmt: skip
    pods += [pod_manifest(f"huge-{i}", cpu="16", memory="4Gi") for i in range(2)]
    pods += [
        pod_manifest(f"opted-out-{i}", cpu="100m", labels={"placement-webhook.io/skip": "true"})
        for i in range(2)
    ]
    return pods


def _why(pod: dict[str, Any]) -> str:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if UNSCHEDULABLE in annotations:
        return f"unschedulable: {annotations[UNSCHEDULABLE]}"
    if FILTER_RESULT not in annotations:
        return "not placed by the webhook (opted out)"
    filtered = orjson.loads(annotations[FILTER_RESULT])
    final = orjson.loads(annotations.get(FINALSCORE_RESULT, "{}"))
    node = pod["spec"].get("nodeName")
    rejected = filtered.get("rejected") or {}
    text = f"best of {filtered['feasible']} feasible (score {final.get(node, '?')})"
    if rejected:
        most = sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))[:2]
        top = ", ".join(f"{n} {r}" for r, n in most)
        text += f"; rejected: {top}"
    return text


def _node_spec(name: str, cpu: str, memory: str, zone: str, taint: Any) -> KubeletSpec:
    labels = {"topology.kubernetes.io/zone": zone}
    return KubeletSpec(
        name, cpu=cpu, memory=memory, labels=labels, taints=(taint,) if taint else ()
    )


class Progress:
    """When each pod was sent, and when a watch first saw it Running or rejected by its kubelet."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.sent: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.failed: dict[str, str] = {}
        self._changed = threading.Condition()
        self._stop = threading.Event()
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        version = str(kube.get(path, limit=1)["metadata"]["resourceVersion"])
        self._thread = threading.Thread(target=self._watch, args=(path, version), daemon=True)
        self._thread.start()

    def _watch(self, path: str, version: str) -> None:
        """Short watches, resumed, so that `stop` ends the last one within WATCH_SECONDS (an
        open watch would hold up the API server's shutdown)."""
        while not self._stop.is_set():
            try:
                for event in self.kube.watch(
                    path, resource_version=version, timeout_seconds=WATCH_SECONDS
                ):
                    pod = event.get("object") or {}
                    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
                    version = str(meta.get("resourceVersion") or version)
                    self._note(str(meta.get("name")), status)
            except Exception:  # the demo's display only: resume, or end with the cluster
                if self._stop.wait(0.2):
                    return

    def _note(self, name: str, status: dict[str, Any]) -> None:
        with self._changed:
            if status.get("phase") == "Running":
                self.running.setdefault(name, time.monotonic())
            elif status.get("phase") == "Failed":
                self.failed[name] = str(status.get("reason") or "Failed")
            self._changed.notify_all()

    def wait(self, names: list[str], timeout: float = RUNNING_TIMEOUT) -> None:
        """Until each pod runs or failed, or `timeout` passes."""
        with self._changed:
            self._changed.wait_for(
                lambda: all(n in self.running or n in self.failed for n in names), timeout
            )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WATCH_SECONDS + 5)
        self.kube.close()

    def state(self, name: str) -> str:
        if name in self.running:
            return f"Running {self.running[name] - self.sent[name]:5.2f}s"
        return self.failed.get(name, "")

    def summary(self, names: list[str]) -> str:
        waits = sorted(self.running[n] - self.sent[n] for n in names if n in self.running)
        if not waits:
            return "no pod is Running"
        median, slowest = waits[len(waits) // 2], waits[-1]
        failed = sum(1 for n in names if n in self.failed)
        return (
            f"{len(waits)} of {len(names)} placed pods Running (kubelet rejections: {failed}); "
            f"create→Running median {median:.2f}s, slowest {slowest:.2f}s"
        )


def _table(pods: list[dict[str, Any]], progress: Progress) -> str:
    rows = [("POD", "NODE", "STATUS", "WHY")]
    for pod in pods:
        name = pod["metadata"]["name"]
        rows.append(
            (name, pod["spec"].get("nodeName") or "(pending)", progress.state(name), _why(pod))
        )
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(
        f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]:<{width[2]}}  {r[3]}" for r in rows
    )


def _utilisation(pods: list[dict[str, Any]]) -> str:
    used: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node:
            count[node] += 1
            used[node] += PodView.from_dict(pod).requests.get("cpu", 0)  # millicores
    lines = ["NODE      CPU REQUESTED / ALLOCATABLE  PODS"]
    for name, cpu, *_ in NODES:
        total = int(cpu) * 1000
        share = used[name] / total if total else 0
        bar = "#" * round(share * 20)
        lines.append(
            f"{name:<9} {used[name] / 1000:5.2f} / {cpu:>2} cores  [{bar:<20}] {count[name]:>3}"
        )
    return "\n".join(lines)


def _show_fallback(
    cluster: DevCluster, kube: Kube, created: list[dict[str, Any]], progress: Progress, step: Any
) -> None:
    """Start one more kubelet and watch the reconciler bind what admission could not place."""
    handed = [
        p["metadata"]["name"]
        for p in created
        if not p["spec"].get("nodeName") and p["spec"].get("schedulerName") == SCHEDULER_NAME
    ]
    if not handed:
        return
    step(f"{len(handed)} pods fit nowhere and wait for the reconciler; adding node large-d")
    started = time.monotonic()
    cluster.start_kubelets([_node_spec("large-d", "24", "64Gi", "zone-d", None)])
    bound: dict[str, str] = {}
    last_change = started
    # Until all are bound, or nothing has changed for 3 s (the rest fit nowhere).
    while len(bound) < len(handed) and time.monotonic() - last_change < 3:
        for pod in kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]:
            name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
            if name in handed and node and name not in bound:
                bound[name] = node
                last_change = time.monotonic()
        time.sleep(0.1)
    took = (last_change - started) if bound else 0.0
    step(f"the reconciler bound {len(bound)} of {len(handed)} within {took:.1f}s (the node's "
         "kubelet included)")  # fmt: skip
    progress.wait(list(bound))
    failed = _failed_scheduling(kube)
    for name in handed:
        if name in bound:
            state = progress.state(name).split()[0] or "not Running yet"
            print(f"    {name:<12} -> {bound[name]} ({state})")
        else:
            print(f"    {name:<12} -> pending: {failed.get(name, '?')}")
    print()


def _failed_scheduling(kube: Kube) -> dict[str, str]:
    """The latest FailedScheduling note per pod, as the reconciler wrote it."""
    events = kube.get(f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events")["items"]
    notes: dict[str, str] = {}
    for event in sorted(events, key=lambda e: e.get("eventTime") or ""):
        if event.get("reason") == "FailedScheduling":
            notes[event["regarding"]["name"]] = event.get("note", "")
    return notes


def run(workdir: Path, step: Any) -> int:
    step("building the control plane if missing (first run: about 7 min on 2 cores; then instant)")
    bin_dir = locate_binaries()
    step(f"starting etcd + kube-apiserver (binaries in {bin_dir.name})")
    with DevCluster.start(workdir / "cluster", bin_dir=bin_dir, progress=step) as cluster:
        kube = Kube(cluster.kubeconfig)
        step("starting placement-webhook serve (gunicorn, TLS) and registering it")
        hook = start_webhook(cluster)
        reconciler = None
        try:
            ensure_namespace(kube, "placement-webhook")
            step("starting placement-webhook reconcile (the leader-elected fallback)")
            reconciler = start_reconciler(cluster, "demo")
            register_webhook(kube, hook)
            ensure_namespace(kube, NAMESPACE, {ENABLED_LABEL: "true"})
            wait_until_effective(kube, NAMESPACE)
            step(
                f"starting {len(NODES)} hollow kubelets (real kubelet code, fake container runtime)"
            )
            took = cluster.start_kubelets([_node_spec(*node) for node in NODES])
            step(f"{len(NODES)} nodes Ready in {took:.1f}s")
            time.sleep(0.5)  # let the webhook's node watch see them
            pods = _pods()
            step(f"creating {len(pods)} pods in namespace {NAMESPACE} (labelled {ENABLED_LABEL})")
            progress = Progress(Kube(cluster.kubeconfig))
            started = time.monotonic()
            created = []
            for pod in pods:
                sent = time.monotonic()
                created.append(kube.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod))
                progress.sent[created[-1]["metadata"]["name"]] = sent  # generated names too
            elapsed = time.monotonic() - started
            placed = [p["metadata"]["name"] for p in created if p["spec"].get("nodeName")]
            step(
                f"{len(created)} pods created in {elapsed:.2f}s "
                f"({elapsed / len(created) * 1000:.1f} ms each, webhook included); "
                f"{len(placed)} placed at admission; waiting for their kubelets to run them"
            )
            progress.wait(placed)
            step(progress.summary(placed))
            print()
            print(_table(created, progress))
            print()
            print(_utilisation(created))
            print()
            _show_fallback(cluster, kube, created, progress, step)
            progress.stop()
        finally:
            step("stopping the webhook, the reconciler, the kubelets and the control plane")
            hook.stop()
            if reconciler is not None:
                reconciler.stop()
            kube.close()
    step("done: every process stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webhook.demo", description=__doc__)
    parser.add_argument("--workdir", help="keep cluster state and logs here (default: temp dir)")
    args = parser.parse_args(argv)
    started = time.monotonic()

    def step(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", flush=True)

    try:
        if args.workdir:
            return run(Path(args.workdir), step)
        with tempfile.TemporaryDirectory(prefix="placement-webhook-demo-") as tmp:
            return run(Path(tmp), step)
    except DevClusterError as err:
        print(f"demo failed: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
