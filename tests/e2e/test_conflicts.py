"""Conflict detection against the real kube-scheduler and two webhook replicas placing at once.

Its own control plane (module scope) with kube-scheduler and
kube-controller-manager. Two `placement-webhook serve` replicas, each
registered for its own namespaces (label `replica=a` / `replica=b`), so the
two place the same nodes from two caches that learn of each other's pods
only through their watches; kube-scheduler places a third namespace and a
fourth client sets `spec.nodeName` directly. The webhooks hand pods that fit
nowhere to the reconciler, which places them too.

The tests recount every node from the API with code of their own (no
detector code) and compare: every overcommit found, none invented, the same
culprits and placers.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Nodes, wait_for
from tests.e2e.test_reconciler import LEASE_NAMESPACE
from webhook.admission.registration import webhook_configuration
from webhook.admission.rules import ENABLED_LABEL
from webhook.devcluster import DevCluster
from webhook.devcluster.objects import ensure_namespace, pod_manifest
from webhook.devcluster.reconciler import ReconcilerProcess, start_reconciler
from webhook.devcluster.webhook import WebhookProcess, start_webhook, wait_until_effective
from webhook.kube import Kube

pytestmark = pytest.mark.e2e

REPLICA_LABEL = "replica"
CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
_names = itertools.count()


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    workdir = tmp_path_factory.mktemp("conflicts-cluster")
    with DevCluster.start(workdir, scheduler=True) as running:
        running.start_controller_manager()
        yield running


@pytest.fixture(scope="module")
def kube(cluster: DevCluster) -> Iterator[Kube]:
    client = Kube(cluster.kubeconfig)
    ensure_namespace(client, LEASE_NAMESPACE)
    yield client
    client.close()


def register_replica(kube: Kube, hook: WebhookProcess, replica: str) -> None:
    """A configuration for `hook` that only namespaces labelled replica=<replica> reach."""
    import certs

    bundle = certs.ca_bundle((hook.tls_dir / "ca.crt").read_bytes())
    name = f"placement-webhook-{replica}"
    body = webhook_configuration(ca_bundle=bundle, url=hook.url, name=name, timeout_seconds=5)
    for entry in body["webhooks"]:
        entry["namespaceSelector"]["matchExpressions"].append(
            {"key": REPLICA_LABEL, "operator": "In", "values": [replica]}
        )
    with contextlib.suppress(Exception):
        kube.delete(f"{CONFIGURATIONS}/{name}")
    kube.create(CONFIGURATIONS, body)


@pytest.fixture(scope="module")
def replicas(cluster: DevCluster, kube: Kube) -> Iterator[dict[str, WebhookProcess]]:
    hooks: dict[str, WebhookProcess] = {}
    try:
        for replica in ("a", "b"):
            # Two deciders that do not coordinate (each its own Lease): the
            # misconfiguration, or the second scheduler, that conflict detection
            # exists to catch. A correctly deployed pair shares one Lease and
            # never double-books (tests/e2e/test_authority.py).
            hook = start_webhook(
                cluster,
                name=f"webhook-{replica}",
                extra_args=["--handoff-unschedulable"],
                lease_name=f"independent-{replica}",
            )
            hooks[replica] = hook
            register_replica(kube, hook, replica)
            probe = f"probe-{replica}"
            ensure_namespace(kube, probe, {ENABLED_LABEL: "true", REPLICA_LABEL: replica})
            wait_until_effective(kube, probe)
        yield hooks
    finally:
        for hook in hooks.values():
            hook.stop()


@pytest.fixture
def nodes(kube: Kube) -> Iterator[Nodes]:
    made = Nodes(kube, None)  # no webhook view to wait for in this module
    yield made
    made.remove_all()


class Namespaces:
    """This test's namespaces; their ReplicaSets and pods are deleted afterwards, so
    nothing a test leaves pending is placed onto the next test's nodes."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self.names: list[str] = []

    def add(self, prefix: str, replica: str | None) -> str:
        name = f"{prefix}-{next(_names)}"
        labels = {ENABLED_LABEL: "true", REPLICA_LABEL: replica} if replica else {}
        ensure_namespace(self.kube, name, labels)
        self.names.append(name)
        return name

    def empty_all(self) -> None:
        for name in self.names:
            with contextlib.suppress(Exception):
                self.kube.request("DELETE", f"/apis/apps/v1/namespaces/{name}/replicasets")
            with contextlib.suppress(Exception):
                self.kube.request(
                    "DELETE", f"/api/v1/namespaces/{name}/pods", params={"gracePeriodSeconds": 0}
                )


@pytest.fixture
def namespaces(kube: Kube) -> Iterator[Namespaces]:
    made = Namespaces(kube)
    yield made
    made.empty_all()


# ------------------------------------------------------------------ the independent recount


def quantity(value: str, resource: str) -> int:
    """cpu in millicores, memory in bytes (the suffixes these tests use)."""
    units = {"m": 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
    if resource == "cpu":
        return int(value[:-1]) if value.endswith("m") else int(float(value) * 1000)
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return int(value[: -len(suffix)]) * factor
    return int(value)


def placed_by(pod: dict[str, Any]) -> str:
    node = pod["spec"].get("nodeName")
    if pod["metadata"].get("annotations", {}).get("placement-webhook.io/selected-node") == node:
        return "placement-webhook"
    if any("f:nodeName" in (m.get("fieldsV1") or {}).get("f:spec", {})
           for m in pod["metadata"].get("managedFields", [])):  # fmt: skip
        return "direct-nodeName"
    return "kube-scheduler"


def arrival(pod: dict[str, Any]) -> tuple[str, int, str, str]:
    meta = pod["metadata"]
    when = meta["creationTimestamp"]
    if placed_by(pod) != "direct-nodeName":
        for cond in pod["status"].get("conditions", []):
            if cond["type"] == "PodScheduled" and cond["status"] == "True":
                bound_via_binding = not any(
                    "f:nodeName" in (m.get("fieldsV1") or {}).get("f:spec", {})
                    for m in meta.get("managedFields", [])
                )
                if bound_via_binding:
                    when = cond["lastTransitionTime"]
    return (when, int(meta["resourceVersion"]), meta["namespace"], meta["name"])


def recount(kube: Kube) -> dict[str, list[tuple[str, str, str]]]:
    """Overcommitted node -> the (namespace, name, placer) a kubelet would reject, in order."""
    capacity = {
        n["metadata"]["name"]: {
            "cpu": quantity(n["status"]["allocatable"]["cpu"], "cpu"),
            "memory": quantity(n["status"]["allocatable"]["memory"], "memory"),
            "pods": int(n["status"]["allocatable"]["pods"]),
        }
        for n in kube.get("/api/v1/nodes")["items"]
    }
    on_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in kube.get("/api/v1/pods")["items"]:
        node = pod["spec"].get("nodeName")
        if (
            node in capacity
            and pod["status"].get("phase") not in ("Succeeded", "Failed")
            and not pod["metadata"].get("deletionTimestamp")
        ):
            on_node[node].append(pod)
    out = {}
    for node, pods in on_node.items():
        used: Counter[str] = Counter()
        rejected = []
        for pod in sorted(pods, key=arrival):
            need: Counter[str] = Counter(pods=1)
            for c in pod["spec"]["containers"]:
                for resource, value in c.get("resources", {}).get("requests", {}).items():
                    need[resource] += quantity(value, resource)
            if any(used[r] + v > capacity[node].get(r, 0) for r, v in need.items()):
                rejected.append((pod["metadata"]["namespace"], pod["metadata"]["name"],
                                 placed_by(pod)))  # fmt: skip
            else:
                used.update(need)
        if rejected:
            out[node] = rejected
    return out


def reported(rec: ReconcilerProcess, kind: str = "Overcommit") -> dict[str, list[tuple[str, ...]]]:
    conflicts = rec.get("/debug/conflicts")[1]["conflicts"]
    return {
        c["node"]: [(p["namespace"], p["name"], p["placedBy"]) for p in c["culprits"]]
        for c in conflicts
        if c["kind"] == kind
    }


def settle(count_bound: Callable[[], int], quiet: float = 3.0, limit: float = 60.0) -> int:
    """Wait until no pod has been bound for `quiet` seconds; returns the bound count."""
    last, since, start = -1, time.monotonic(), time.monotonic()
    while time.monotonic() - start < limit:
        now = count_bound()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
        time.sleep(0.25)
    raise AssertionError("pods kept being bound")


def bound_pods(kube: Kube, namespaces: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ns in namespaces:
        out.extend(
            p
            for p in kube.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            if p["spec"].get("nodeName")
        )
    return out


def at_once(*jobs: Callable[[], object]) -> None:
    """Run the jobs on threads released together by a barrier."""
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job: Callable[[], object]) -> None:
        barrier.wait()
        try:
            job()
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def create_many(kube: Kube, ns: str, count: int, cpu: str, **spec: Any) -> list[Callable[[], None]]:
    """One job per pod (run together with `at_once`, they hit admission concurrently)."""

    def job(i: int) -> Callable[[], None]:
        def create() -> None:
            manifest = pod_manifest(f"p{i}", cpu=cpu, memory="64Mi", **spec)
            kube.create(f"/api/v1/namespaces/{ns}/pods", manifest)

        return create

    return [job(i) for i in range(count)]


# ------------------------------------------------------------------ tests


def test_every_overcommit_of_racing_schedulers_is_reported_with_its_culprit(
    cluster: DevCluster,
    kube: Kube,
    replicas: dict[str, WebhookProcess],
    nodes: Nodes,
    namespaces: Namespaces,
) -> None:
    small = [nodes.add(prefix="small", cpu="2", memory="8Gi") for _ in range(3)]
    rec = start_reconciler(cluster, f"report-{next(_names)}")
    try:
        wait_for(rec.leads, timeout=15, message="the reconciler to lead")
        ns_a, ns_b = namespaces.add("race-a", "a"), namespaces.add("race-b", "b")
        ns_k, ns_d = namespaces.add("race-k", None), namespaces.add("race-d", None)
        started = time.monotonic()
        at_once(
            *create_many(kube, ns_a, 6, "500m"),
            *create_many(kube, ns_b, 6, "500m"),
            *create_many(kube, ns_k, 6, "500m"),
            *create_many(kube, ns_d, 2, "500m", nodeName=small[0]),
        )
        spaces = [ns_a, ns_b, ns_k, ns_d]
        settle(lambda: len(bound_pods(kube, spaces)))
        from_race = recount(kube)
        # A direct placement of a whole node's cpu on a used node makes one overcommit certain.
        kube.create(f"/api/v1/namespaces/{ns_d}/pods",
                    pod_manifest("late", cpu="2", memory="64Mi", nodeName=small[1]))  # fmt: skip
        late_at = time.monotonic()

        expected = wait_for(
            lambda: (want := recount(kube)) == reported(rec) and want,
            timeout=30,
            message="the reported overcommits to match the recount",
        )
        detected_in = time.monotonic() - late_at

        placers = Counter(placed_by(p) for p in bound_pods(kube, spaces))
        culprits = Counter(c[2] for cs in expected.values() for c in cs)
        print(
            f"\nrace: {sum(placers.values())} pods bound in {late_at - started:.1f}s by "
            f"{dict(placers)}; overcommitted nodes from the race alone: {len(from_race)} "
            f"({sum(len(v) for v in from_race.values())} culprits); after the late pod: "
            f"{len(expected)} nodes, culprits by placer {dict(culprits)}; "
            f"reported {detected_in:.2f}s after the late pod"
        )
        assert small[1] in expected
        assert expected[small[1]][-1] == (ns_d, "late", "direct-nodeName")
        all_kinds = {c["kind"] for c in rec.get("/debug/conflicts")[1]["conflicts"]}
        assert all_kinds == {"Overcommit"}
        assert rec.metric("placement_webhook_conflicts", kind="Overcommit") == len(expected)
        warnings = [
            e for ns in spaces
            for e in kube.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
            if e["reason"] == "PlacementConflict"
        ]  # fmt: skip
        culprit_names = {(ns, name) for cs in expected.values() for ns, name, _ in cs}
        wait_for(
            lambda: culprit_names <= {
                (e["regarding"]["namespace"], e["regarding"]["name"])
                for ns in spaces
                for e in kube.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
                if e["reason"] == "PlacementConflict"
            },
            message="a PlacementConflict event on every culprit",
        )  # fmt: skip
        assert all(e["type"] == "Warning" for e in warnings)
    finally:
        rec.stop()


EVICT_POLICY = """\
apiVersion: placement-webhook.io/v1alpha1
kind: PlacementPolicy
conflictPolicy: evict
"""


def replica_set(name: str, replicas: int, cpu: str) -> dict[str, Any]:
    template = pod_manifest(cpu=cpu, memory="64Mi", labels={"app": name})
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


def test_evict_mode_brings_nodes_back_within_capacity_and_replica_sets_replace_the_pods(
    cluster: DevCluster,
    kube: Kube,
    replicas: dict[str, WebhookProcess],
    nodes: Nodes,
    namespaces: Namespaces,
    tmp_path: Path,
) -> None:
    small = [nodes.add(prefix="tight", cpu="2", memory="8Gi") for _ in range(2)]
    policy = tmp_path / "evict.yaml"
    policy.write_text(EVICT_POLICY)
    rec = start_reconciler(cluster, f"evict-{next(_names)}", policy=policy)
    try:
        wait_for(rec.leads, timeout=15, message="the reconciler to lead")
        ns_a, ns_b = namespaces.add("rs-a", "a"), namespaces.add("rs-b", "b")
        at_once(
            lambda: kube.create(f"/apis/apps/v1/namespaces/{ns_a}/replicasets",
                                replica_set("web", 4, "500m")),
            lambda: kube.create(f"/apis/apps/v1/namespaces/{ns_b}/replicasets",
                                replica_set("api", 4, "500m")),
        )  # fmt: skip
        spaces = [ns_a, ns_b]
        settle(lambda: len(bound_pods(kube, spaces)))
        before = {p["metadata"]["uid"] for p in bound_pods(kube, spaces)}
        spare = nodes.add(prefix="spare", cpu="4", memory="8Gi")
        # Shrink one full node: its last arrivals (ours, owned by a ReplicaSet) must go.
        shrunk_at = time.monotonic()
        kube.patch_merge(f"/api/v1/nodes/{small[0]}/status",
                         {"status": {"allocatable": {"cpu": "1"}}})  # fmt: skip

        def healthy() -> bool:
            if recount(kube):
                return False
            for ns in (ns_a, ns_b):
                active = [p for p in kube.get(f"/api/v1/namespaces/{ns}/pods")["items"]
                          if not p["metadata"].get("deletionTimestamp")]  # fmt: skip
                if len(active) != 4 or not all(p["spec"].get("nodeName") for p in active):
                    return False
            return not reported(rec)

        wait_for(healthy, timeout=60, message="nodes within capacity and replicas all placed")
        took = time.monotonic() - shrunk_at

        evicted = [
            p for ns in spaces for p in kube.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            if p["metadata"].get("deletionTimestamp")
        ]  # fmt: skip
        evict_events = [
            e for ns in spaces
            for e in kube.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
            if e["reason"] == "PlacementConflict" and e["action"] == "Evict"
        ]  # fmt: skip
        replacements = Counter(
            p["spec"]["nodeName"] for ns in spaces
            for p in kube.get(f"/api/v1/namespaces/{ns}/pods")["items"]
            if not p["metadata"].get("deletionTimestamp")
        )  # fmt: skip
        print(
            f"\nevicted {len(evicted)} pods; nodes within capacity {took:.2f}s after the shrink; "
            f"pods per node now {dict(replacements)} (spare: {spare}); "
            f"evictions by result: evicted="
            f"{rec.metric('placement_webhook_conflict_evictions_total', result='evicted'):.0f}"
        )
        assert evicted, "the shrunk node must have lost at least one pod"
        new = [
            p
            for p in bound_pods(kube, spaces)
            if p["metadata"]["uid"] not in before and not p["metadata"].get("deletionTimestamp")
        ]
        assert len(new) == len(evicted)  # each evicted pod was replaced by its ReplicaSet...
        assert all(p["spec"]["nodeName"] != small[0] for p in new)  # ...and placed elsewhere
        assert all(placed_by(p) == "placement-webhook" for p in evicted)
        assert all(p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet" for p in evicted)
        assert {e["regarding"]["uid"] for e in evict_events} == {
            p["metadata"]["uid"] for p in evicted
        }
    finally:
        rec.stop()


def test_placements_against_taints_affinity_and_kubelet_rejections_are_reported(
    cluster: DevCluster, kube: Kube, nodes: Nodes, namespaces: Namespaces
) -> None:
    tainted = nodes.add(prefix="tainted", taints=[{"key": "dedicated", "value": "gpu",
                                            "effect": "NoSchedule"}])  # fmt: skip
    plain = nodes.add(prefix="plain", labels={"disk": "hdd"})
    rec = start_reconciler(cluster, f"kinds-{next(_names)}")
    try:
        ns = namespaces.add("kinds", None)
        pods = f"/api/v1/namespaces/{ns}/pods"
        kube.create(pods, pod_manifest("on-taint", nodeName=tainted))
        kube.create(pods, pod_manifest("wrong-disk", nodeName=plain, nodeSelector={"disk": "ssd"}))
        anti = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "db"}},
                     "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }  # fmt: skip
        kube.create(pods, pod_manifest("db-1", nodeName=plain, labels={"app": "db"}, affinity=anti))
        kube.create(pods, pod_manifest("db-2", nodeName=plain, labels={"app": "db"}, affinity=anti))
        kube.create(pods, pod_manifest("rejected", nodeName=plain))
        # What a kubelet writes when it refuses a pod at admission.
        kube.patch_merge(
            f"{pods}/rejected/status",
            {"status": {"phase": "Failed", "reason": "OutOfcpu",
                        "message": "Pod was rejected: Node didn't have enough resource: cpu"}},
        )  # fmt: skip

        def found() -> dict[str, list[tuple[str, str]]]:
            out: dict[str, list[tuple[str, str]]] = {}
            for c in rec.get("/debug/conflicts")[1]["conflicts"]:
                out.setdefault(c["kind"], []).extend((c["node"], p["name"]) for p in c["culprits"])
            return out

        expected = {
            "Taint": [(tainted, "on-taint")],
            "NodeAffinity": [(plain, "wrong-disk")],
            "PodAntiAffinity": [(plain, "db-2")],
            "KubeletRejected": [(plain, "rejected")],
        }
        wait_for(lambda: found() == expected, timeout=20, message=f"conflicts {expected}")
        listed = rec.get("/debug/conflicts")[1]["conflicts"]
        assert {p["placedBy"] for c in listed for p in c["culprits"]} == {"direct-nodeName"}
        assert rec.metric("placement_webhook_conflicts", kind="Taint") == 1
    finally:
        rec.stop()
