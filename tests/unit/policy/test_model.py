from typing import Any

import pytest
from policy_builders import make_node, make_pod, snapshot

from webhook.policy.dump import snapshot_from_list
from webhook.policy.model import NodeView, PodView
from webhook.policy.snapshot import ClusterSnapshot


def _pod(spec: dict[str, Any], **meta: Any) -> PodView:
    return PodView.from_dict({"metadata": {"name": "p", "namespace": "ns", **meta}, "spec": spec})


def _c(name: str, cpu: str | None = None, mem: str | None = None, **extra: Any) -> dict[str, Any]:
    req = {}
    if cpu:
        req["cpu"] = cpu
    if mem:
        req["memory"] = mem
    return {"name": name, "image": "x", "resources": {"requests": req}, **extra}


@pytest.mark.parametrize(
    ("spec", "cpu", "memory"),
    [
        ({"containers": [_c("a", "100m", "1Gi"), _c("b", "200m", "1Gi")]}, 300, 2 * 1024**3),
        # an init container larger than the sum wins per resource
        (
            {"initContainers": [_c("i", "2", "1Gi")], "containers": [_c("a", "1", "3Gi")]},
            2000,
            3 * 1024**3,
        ),
        # sidecars (restartPolicy Always) add up with the regular containers
        (
            {
                "initContainers": [_c("s", "500m", "1Gi", restartPolicy="Always")],
                "containers": [_c("a", "1", "1Gi")],
            },
            1500,
            2 * 1024**3,
        ),
        # an init container after a sidecar runs next to the sidecar
        (
            {
                "initContainers": [
                    _c("s", "500m", "1Gi", restartPolicy="Always"),
                    _c("i", "2", "1Gi"),
                ],
                "containers": [_c("a", "1", "1Gi")],
            },
            2500,
            2 * 1024**3,
        ),
        # pod overhead is added
        (
            {"containers": [_c("a", "1", "1Gi")], "overhead": {"cpu": "250m", "memory": "120Mi"}},
            1250,
            1024**3 + 120 * 1024**2,
        ),
        # pod-level requests replace the container sum for cpu/memory
        (
            {"containers": [_c("a", "1", "1Gi")], "resources": {"requests": {"cpu": "3"}}},
            3000,
            1024**3,
        ),
    ],
)
def test_effective_requests_follow_kube_scheduler(
    spec: dict[str, Any], cpu: int, memory: int
) -> None:
    pod = _pod(spec)
    assert pod.requests["cpu"] == cpu
    assert pod.requests["memory"] == memory


def test_limits_default_requests_when_requests_are_missing() -> None:
    pod = _pod(
        {
            "containers": [
                {"name": "a", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}}
            ]
        }
    )
    assert pod.requests == {"cpu": 2000, "nvidia.com/gpu": 1}


def test_pods_without_requests_get_nonzero_defaults_for_scoring_only() -> None:
    pod = _pod({"containers": [{"name": "a"}, _c("b", "1", None)]})
    assert pod.requests == {"cpu": 1000}
    assert pod.nonzero_cpu == 1100
    assert pod.nonzero_memory == 2 * 200 * 1024**2


def test_explicit_zero_request_is_not_replaced_by_the_default() -> None:
    pod = _pod({"containers": [_c("a", "0", "0")]})
    assert pod.nonzero_cpu == 0 and pod.nonzero_memory == 0


@pytest.mark.parametrize(
    ("status", "meta", "marks"),
    [
        ({"phase": "Succeeded"}, {}, (True, False)),
        ({"phase": "Failed"}, {}, (True, False)),
        ({"phase": "Running"}, {"deletionTimestamp": "2024-01-01T00:00:00Z"}, (False, True)),
        ({"phase": "Succeeded"}, {"deletionTimestamp": "2024-01-01T00:00:00Z"}, (True, False)),
        ({"phase": "Running"}, {}, (False, False)),
        ({"phase": "Pending"}, {}, (False, False)),
    ],
)
def test_terminal_and_terminating_pods_are_marked(
    status: dict[str, Any], meta: dict[str, Any], marks: tuple[bool, bool]
) -> None:
    pod = PodView.from_dict(
        {"metadata": {"name": "p", **meta}, "spec": {"containers": []}, "status": status}
    )
    assert (pod.is_terminal, pod.is_terminating) == marks


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (
            {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]},
            "PersistentVolumeClaim",
        ),
        ({"volumes": [{"name": "d", "ephemeral": {"volumeClaimTemplate": {}}}]}, "ephemeral"),
        ({"resourceClaims": [{"name": "gpu"}]}, "DRA"),
        ({"schedulingGates": [{"name": "wait"}]}, "scheduling gates"),
    ],
)
def test_pods_the_policy_cannot_evaluate_carry_a_skip_reason(
    spec: dict[str, Any], fragment: str
) -> None:
    pod = _pod({"containers": [_c("a", "1", "1Gi")], **spec})
    assert pod.skip_reason is not None and fragment in pod.skip_reason


def test_configmap_and_emptydir_volumes_are_evaluated() -> None:
    pod = _pod(
        {
            "containers": [],
            "volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "x"}}],
        }
    )
    assert pod.skip_reason is None


def _requested(snap: ClusterSnapshot, node: str) -> tuple[int, int, int]:
    slot = snap.slot_of(node)
    assert slot is not None
    return int(snap.requested[slot, 0]), int(snap.requested[slot, 1]), int(snap.requested[slot, 3])


def test_snapshot_counts_bound_pods_against_their_node() -> None:
    snap = snapshot([make_node("a"), make_node("b")], [make_pod("p", "1", "1Gi", node="a")])
    assert _requested(snap, "a") == (1000, 1024**3, 1)
    assert _requested(snap, "b") == (0, 0, 0)
    assert [p.name for p in snap.pods_on("a")] == ["p"]


def test_pod_update_moves_accounting_between_nodes_and_is_idempotent() -> None:
    snap = snapshot([make_node("a"), make_node("b")])
    snap.upsert_pod(PodView.from_dict(make_pod("p", "1", "1Gi", node="a")))
    snap.upsert_pod(PodView.from_dict(make_pod("p", "1", "1Gi", node="a")))
    assert _requested(snap, "a") == (1000, 1024**3, 1)
    snap.upsert_pod(PodView.from_dict(make_pod("p", "1", "1Gi", node="b")))
    assert _requested(snap, "a") == (0, 0, 0)
    assert _requested(snap, "b") == (1000, 1024**3, 1)
    snap.upsert_pod(PodView.from_dict(make_pod("p", "1", "1Gi", node="b", phase="Succeeded")))
    assert _requested(snap, "b") == (0, 0, 0)
    snap.remove_pod("uid-default-p")
    snap.remove_pod("uid-default-p")
    assert snap.pods_on("b") == []


def test_pods_bound_to_an_unknown_node_count_once_it_appears() -> None:
    snap = snapshot([], [make_pod("p", "1", "1Gi", node="late")])
    snap.upsert_node(NodeView.from_dict(make_node("late")))
    assert _requested(snap, "late") == (1000, 1024**3, 1)
    snap.remove_node("late")
    snap.upsert_node(NodeView.from_dict(make_node("late")))
    assert _requested(snap, "late") == (1000, 1024**3, 1)


def test_a_tentative_pod_counts_until_forgotten() -> None:
    snap = snapshot([make_node("a")])
    pending = PodView.from_dict(make_pod("p", "2", "1Gi", uid=""))
    snap.assume("r1", pending, "a")
    snap.assume("r1", pending, "a")
    assert _requested(snap, "a") == (2000, 1024**3, 1)
    snap.forget("r1")
    assert _requested(snap, "a") == (0, 0, 0)


def test_a_tentative_pod_is_not_counted_twice_when_the_pod_itself_already_counts() -> None:
    snap = snapshot([make_node("a")], [make_pod("p", "2", "1Gi", node="a", uid="u1")])
    snap.assume("r1", PodView.from_dict(make_pod("p", "2", "1Gi", uid="u1")), "a")
    assert _requested(snap, "a") == (2000, 1024**3, 1)


def test_the_snapshot_never_ends_a_tentative_pod_by_itself() -> None:
    """Matching a pod to its reservation is the ledger's job (webhook.cluster.ledger)."""
    snap = snapshot([make_node("a")])
    snap.assume("r1", PodView.from_dict(make_pod("p", "2", "1Gi", uid="")), "a")
    real = make_pod("p", "2", "1Gi", node="a")
    real["metadata"]["annotations"] = {"placement-webhook.io/reservation": "r1"}
    snap.upsert_pod(PodView.from_dict(real))
    assert _requested(snap, "a") == (4000, 2 * 1024**3, 2)
    snap.forget("r1")
    assert _requested(snap, "a") == (2000, 1024**3, 1)


def _pinned(name: str, node: str) -> dict[str, Any]:
    pod = make_pod(name, "2", "1Gi", phase="Pending")
    pod["metadata"]["annotations"] = {"placement-webhook.io/selected-node": node}
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [pin]}]}}}  # fmt: skip
    return pod


def test_a_pending_pod_we_pinned_to_one_node_counts_there_until_it_is_deleted() -> None:
    snap = snapshot([make_node("a"), make_node("b")])
    snap.upsert_pod(PodView.from_dict(_pinned("p", "a")))
    assert _requested(snap, "a") == (2000, 1024**3, 1)
    assert _requested(snap, "b") == (0, 0, 0)
    snap.remove_pod("uid-default-p")
    assert _requested(snap, "a") == (0, 0, 0)


def test_a_pin_without_our_annotation_or_with_another_node_is_not_a_pin() -> None:
    foreign = _pinned("p", "a")
    foreign["metadata"]["annotations"] = {}
    other = _pinned("q", "a")
    other["metadata"]["annotations"]["placement-webhook.io/selected-node"] = "b"
    snap = snapshot([make_node("a"), make_node("b")], [foreign, other])
    assert _requested(snap, "a") == (0, 0, 0) and _requested(snap, "b") == (0, 0, 0)


def test_node_update_changes_labels_and_allocatable_in_place() -> None:
    snap = snapshot([make_node("a", cpu="2", labels={"zone": "z1"})])
    snap.upsert_node(NodeView.from_dict(make_node("a", cpu="8", labels={"zone": "z2"})))
    slot = snap.slot_of("a")
    assert slot is not None
    assert int(snap.allocatable[slot, 0]) == 8000
    col = snap.label_columns["zone"]
    assert col.values[col.codes[slot]] == "z2"
    assert len(snap) == 1 and snap.node_names() == ["a"]


def test_node_without_allocatable_uses_capacity() -> None:
    node = make_node("a")
    del node["status"]["allocatable"]
    snap = snapshot([node])
    slot = snap.slot_of("a")
    assert slot is not None and int(snap.allocatable[slot, 0]) == 4000


def test_snapshot_from_a_kubectl_list() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            make_node("a"),
            make_pod("p", "1", node="a"),
            {"kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "x"}}},
        ],
    }
    snap = snapshot_from_list(doc)
    assert len(snap) == 1 and len(snap.pods_on("a")) == 1
    assert snap.namespace_labels("default")["team"] == "x"
