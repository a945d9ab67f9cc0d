"""One decision authority per cluster, through the real kube-apiserver.

Several `serve` replicas behind a round-robin TCP balancer (what a Service
does), contending for one decision Lease, with kube-scheduler running: the
replicas never double-book a node, a SIGKILLed leader hands over without an
overcommit or a stranded pod, invalid requests reserve nothing, and a
reservation whose pod never appears is given back within seconds.

Each test gets its own control plane (the Lease, the replicas and the
webhook registration are cluster-wide). Figures are printed (`-s` shows
them); the assertions are the invariants, never timings.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Nodes, delete_pods, wait_for
from webhook.admission.rules import ENABLED_LABEL
from webhook.devcluster import DevCluster
from webhook.devcluster.injector import SIDECAR, SidecarInjector
from webhook.devcluster.objects import ensure_namespace, pod_manifest
from webhook.devcluster.webhook import (
    WebhookSet,
    register_webhook,
    start_replicas,
    unregister_webhook,
    wait_until_effective,
)
from webhook.kube import ApiError, Kube

pytestmark = pytest.mark.e2e


def cpu_millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def overcommitted(kube: Kube) -> dict[str, tuple[int, int]]:
    """Nodes whose bound, live pods request more cpu than the node has (recounted from the API)."""
    alloc = {
        n["metadata"]["name"]: cpu_millis(n["status"]["allocatable"]["cpu"])
        for n in kube.get("/api/v1/nodes")["items"]
    }
    used: Counter[str] = Counter()
    for pod in kube.get("/api/v1/pods")["items"]:
        node = pod["spec"].get("nodeName")
        if node in alloc and not pod["metadata"].get("deletionTimestamp"):
            sidecars = [c for c in pod["spec"].get("initContainers", [])
                        if c.get("restartPolicy") == "Always"]  # fmt: skip
            used[node] += sum(
                cpu_millis(c["resources"]["requests"]["cpu"])
                for c in [*pod["spec"]["containers"], *sidecars]
            )
    return {n: (u, alloc[n]) for n, u in used.items() if u > alloc[n]}


def bound_in(kube: Kube, namespace: str) -> int:
    items = kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    return sum(1 for p in items if p["spec"].get("nodeName"))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    with DevCluster.start(tmp_path / "cluster", scheduler=True) as running:
        yield running


@pytest.fixture
def kube(cluster: DevCluster) -> Iterator[Kube]:
    client = Kube(cluster.kubeconfig)
    yield client
    client.close()


@pytest.fixture
def deploy(cluster: DevCluster, kube: Kube) -> Iterator[Callable[[int], WebhookSet]]:
    """Start `replicas` serve processes behind a balancer and register them; the test's
    own cleanup (pods, nodes) runs first, then they are unregistered and stopped."""
    started: list[WebhookSet] = []

    def start(replicas: int) -> WebhookSet:
        hooks = start_replicas(cluster, replicas)
        started.append(hooks)
        register_webhook(kube, hooks)
        ensure_namespace(kube, "probe", {ENABLED_LABEL: "true"})
        wait_until_effective(kube, "probe")
        return hooks

    yield start
    if started:
        unregister_webhook(kube)
    for hooks in started:
        hooks.stop()


@pytest.mark.parametrize("replicas", [2, 3])
def test_replicas_behind_a_balancer_never_overcommit_a_node(
    cluster: DevCluster, kube: Kube, replicas: int, deploy: Callable[[int], WebhookSet]
) -> None:
    """60 pods of 1 cpu onto room for 40, 16 threads, 10 times: 0 overcommitted nodes."""
    hooks = deploy(replicas)
    admitted: list[int] = []
    for repetition in range(10):
        nodes = Nodes(kube, hooks)
        namespace = f"burst-{replicas}-{repetition}"
        ensure_namespace(kube, namespace, {ENABLED_LABEL: "true"})
        for _ in range(10):
            nodes.add(prefix=f"r{replicas}n{repetition}", cpu="4", memory="16Gi")

        def create(i: int, namespace: str = namespace) -> bool:
            pod = pod_manifest(f"p{i}", cpu="1", memory="64Mi")
            created = kube.create(f"/api/v1/namespaces/{namespace}/pods", pod)
            return bool(created["spec"].get("nodeName"))

        with ThreadPoolExecutor(max_workers=16) as pool:
            placed = sum(pool.map(create, range(60)))
        admitted.append(placed)
        # The fallback binder places what admission handed off while room is left.
        wait_for(lambda ns=namespace: bound_in(kube, ns) == 40, timeout=30,
                 message="40 pods bound (admission plus the fallback binder)")  # fmt: skip
        time.sleep(0.5)  # a late double-booking would show up now
        assert overcommitted(kube) == {}
        assert bound_in(kube, namespace) == 40
        delete_pods(kube, namespace)
        nodes.remove_all()
    leaders = [m for m in hooks.members if m.deciding()]
    assert len(leaders) == 1
    print(
        f"\n{replicas} replicas: placed at admission per burst of 60 onto room for 40: "
        f"{admitted}; balancer connections per replica: {hooks.balancer.connections}"
    )
    assert all(n > 0 for n in hooks.balancer.connections)  # every replica took reviews


def test_a_leader_killed_during_a_stream_hands_over_without_overcommit_or_stranded_pods(
    cluster: DevCluster, kube: Kube, deploy: Callable[[int], WebhookSet]
) -> None:
    """SIGKILL the deciding replica while pods arrive at 50/s; every pod ends up placed."""
    hooks = deploy(2)
    namespace = "stream"
    ensure_namespace(kube, namespace, {ENABLED_LABEL: "true"})
    nodes = Nodes(kube, hooks)
    try:
        for _ in range(10):
            nodes.add(prefix="stream", cpu="64", memory="256Gi")
        leader = hooks.leader()
        assert leader is not None
        heir = next(m for m in hooks.members if m is not leader)
        results: list[tuple[float, bool]] = []
        lock = threading.Lock()
        rate, seconds, kill_at = 50, 16.0, 4.0

        def create(i: int) -> None:
            pod = pod_manifest(f"s{i}", cpu="100m", memory="64Mi")
            try:
                created = kube.create(f"/api/v1/namespaces/{namespace}/pods", pod)
                placed = bool(created["spec"].get("nodeName"))
            except ApiError:
                placed = False
            with lock:
                results.append((time.monotonic(), placed))

        killed = threading.Event()
        taken: list[float] = []

        def watch_heir() -> None:  # polls on its own, so the stream's pace does not skew it
            killed.wait(60)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not heir.deciding():
                time.sleep(0.05)
            taken.append(time.monotonic())

        watcher = threading.Thread(target=watch_heir, daemon=True)
        watcher.start()
        start = time.monotonic()
        killed_at = 0.0
        with ThreadPoolExecutor(max_workers=16) as pool:
            for i in range(int(rate * seconds)):
                due = start + i / rate
                time.sleep(max(0.0, due - time.monotonic()))
                if not killed_at and time.monotonic() - start >= kill_at:
                    leader.stop(signal.SIGKILL)
                    killed_at = time.monotonic()
                    killed.set()
                pool.submit(create, i)
        watcher.join(70)
        taken_at = taken[0]
        total = len(results)
        wait_for(
            lambda: bound_in(kube, namespace) == total,
            timeout=60,
            message="every pod bound (the fallback binder places the handed-off ones)",
        )
        assert overcommitted(kube) == {}
        window = [placed for at, placed in results if killed_at <= at <= taken_at]
        share = sum(window) / len(window) if window else 1.0
        placed_total = sum(placed for _, placed in results)
        print(f"\nfailover (SIGKILL to the heir deciding): {taken_at - killed_at:.2f} s with a 4 s "
              f"lease; {total} pods, {placed_total} placed at admission, "
              f"{total - placed_total} by the fallback binder; during the failover "
              f"{share:.0%} of {len(window)} placed at admission")  # fmt: skip
    finally:
        delete_pods(kube, namespace)
        nodes.remove_all()


def test_requests_that_cannot_be_right_reserve_nothing_and_overcommit_nothing(
    cluster: DevCluster, kube: Kube, deploy: Callable[[int], WebhookSet]
) -> None:
    hooks = deploy(2)
    namespace = "gpus"
    ensure_namespace(kube, namespace, {ENABLED_LABEL: "true"})
    nodes = Nodes(kube, hooks)
    try:
        nodes.add("gpu-node", cpu="16", memory="64Gi", extended={"nvidia.com/gpu": "8"})
        negative = pod_manifest("negative", cpu="100m")
        negative["spec"]["containers"][0]["resources"] = {
            "requests": {"nvidia.com/gpu": "-16"}, "limits": {"nvidia.com/gpu": "-16"}}  # fmt: skip
        with pytest.raises(ApiError) as refused:
            kube.create(f"/api/v1/namespaces/{namespace}/pods", negative)
        assert refused.value.status == 422
        leader = hooks.leader()
        assert leader is not None
        assert leader.get("/readyz")[0] == 200
        assert "placement_webhook_reservations 0.0" in leader.metrics()

        placed = []
        for i in range(3):
            pod = pod_manifest(f"eight-{i}", cpu="100m")
            pod["spec"]["containers"][0]["resources"] = {
                "requests": {"cpu": "100m", "nvidia.com/gpu": "8"},
                "limits": {"nvidia.com/gpu": "8"},
            }
            created = kube.create(f"/api/v1/namespaces/{namespace}/pods", pod)
            placed.append(created["spec"].get("nodeName"))
        assert placed.count("gpu-node") == 1  # 8 of 8, not 24
        assert overcommitted(kube) == {}
    finally:
        delete_pods(kube, namespace)
        nodes.remove_all()


def test_a_reservation_whose_create_is_refused_later_is_given_back_within_seconds(
    cluster: DevCluster, kube: Kube, deploy: Callable[[int], WebhookSet]
) -> None:
    """A ResourceQuota refuses the create after our webhook placed it: the slot comes back."""
    hooks = deploy(2)
    ensure_namespace(kube, "quota", {ENABLED_LABEL: "true"})
    ensure_namespace(kube, "other", {ENABLED_LABEL: "true"})
    kube.create("/api/v1/namespaces/quota/resourcequotas", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "none"},
        "spec": {"hard": {"pods": "0"}}})  # fmt: skip
    nodes = Nodes(kube, hooks)
    try:
        nodes.add("only", cpu="4", memory="16Gi")
        # No quota controller runs here: write the status it would (the ResourceQuota
        # admission plugin, which runs after the mutating webhooks, enforces status.hard).
        kube.request(
            "PUT", "/api/v1/namespaces/quota/resourcequotas/none/status",
            body={**kube.get("/api/v1/namespaces/quota/resourcequotas/none"),
                  "status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}},
        )  # fmt: skip
        with pytest.raises(ApiError) as refused:
            kube.create("/api/v1/namespaces/quota/pods", pod_manifest("refused", cpu="4"))
        refused_at = time.monotonic()
        assert refused.value.status == 403

        def free_again() -> float | None:
            probe = pod_manifest(generate_name="probe-", cpu="4", memory="64Mi")
            created = kube.create("/api/v1/namespaces/other/pods", probe, dryRun="All")
            return time.monotonic() if created["spec"].get("nodeName") else None

        freed_at = wait_for(free_again, timeout=30, message="the node to be free again")
        seconds = freed_at - refused_at
        print(f"\nthe refused create's reservation held the node for {seconds:.2f} s after "
              "the refusal (webhook timeout 2 s + grace 3 s)")  # fmt: skip
        assert seconds < 10
    finally:
        nodes.remove_all()
        with contextlib.suppress(ApiError):
            kube.delete("/api/v1/namespaces/quota/resourcequotas/none")


@pytest.mark.parametrize("native", [False, True], ids=["container", "native-sidecar"])
def test_a_sidecar_injected_after_our_placement_never_overcommits_a_node(
    cluster: DevCluster, kube: Kube, native: bool, deploy: Callable[[int], WebhookSet]
) -> None:
    """40 pods of 1 cpu on 10 nodes of 4 cpu, each given a 500m sidecar by a webhook after ours."""
    hooks = deploy(2)
    namespace = "sidecars"
    ensure_namespace(kube, namespace, {ENABLED_LABEL: "true"})
    injector = SidecarInjector(cluster, cpu="500m", native=native).start()
    injector.register(kube, namespace)
    nodes = Nodes(kube, hooks)
    try:
        for _ in range(10):
            nodes.add(prefix="side", cpu="4", memory="16Gi")

        def create(i: int) -> dict[str, Any]:
            pod = pod_manifest(f"p{i}", cpu="1", memory="64Mi")
            return kube.create(f"/api/v1/namespaces/{namespace}/pods", pod)

        with ThreadPoolExecutor(max_workers=16) as pool:
            created = list(pool.map(create, range(40)))

        def names(pod: dict[str, Any]) -> set[str]:
            spec = pod["spec"]
            return {c["name"] for c in [*spec["containers"], *spec.get("initContainers", [])]}

        injected = [p for p in created if SIDECAR in names(p)]
        assert len(injected) == 40  # the injector ran after us on every pod
        placed = sum(1 for p in created if p["spec"].get("nodeName"))
        # 1.5 cpu per pod: two fit on a 4-cpu node, so 20 of the 40 have room.
        wait_for(
            lambda: bound_in(kube, namespace) == 20,
            timeout=30,
            message="20 pods bound (admission, re-checks and the fallback binder)",
        )
        time.sleep(0.5)
        assert overcommitted(kube) == {}
        print(f"\nsidecar ({'native' if native else 'container'}) injected after ours: "
              f"{placed} of 40 placed at admission, 20 bound in all, 0 overcommitted")  # fmt: skip
    finally:
        injector.stop()
        delete_pods(kube, namespace)
        nodes.remove_all()
