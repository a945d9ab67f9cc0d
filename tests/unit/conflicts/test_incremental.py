"""The incremental Detector: after any sequence of changes it finds what a full pass finds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.conflicts.builders import node, pod
from webhook.conflicts.detect import detect
from webhook.conflicts.incremental import Detector
from webhook.conflicts.model import Conflict, PodRecord
from webhook.policy.model import NodeView

NODES = ("n0", "n1", "n2")
PODS = tuple(f"p{i}" for i in range(8))
APPS = ("a", "b")


@st.composite
def node_change(draw: Any) -> tuple[str, Any]:
    name = draw(st.sampled_from(NODES))
    if draw(st.integers(0, 5)) == 0:
        return ("drop_node", name)
    labels = {"zone": draw(st.sampled_from(("z0", "z1", "z2")))}
    if draw(st.booleans()):
        labels["disk"] = "ssd"
    if draw(st.integers(0, 3)) == 0:
        del labels["zone"]
    taints = [{"key": "gpu", "value": "x", "effect": "NoSchedule"}] if draw(st.booleans()) else []
    cpu = draw(st.sampled_from(("2", "3", "8")))
    raw = node(name, cpu=cpu, pods=draw(st.sampled_from(("3", "110"))), labels=labels,
               taints=taints)  # fmt: skip
    return ("put_node", NodeView.from_dict(raw))


def _selector(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


@st.composite
def pod_change(draw: Any) -> tuple[str, Any]:
    name = draw(st.sampled_from(PODS))
    if draw(st.integers(0, 9)) == 0:
        return ("drop_pod", f"uid-{name}")
    app = draw(st.sampled_from(APPS))
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": draw(st.sampled_from(("zone", "kubernetes.io/hostname"))),
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": _selector(
                draw(st.sampled_from(APPS))),
            "minDomains": draw(st.sampled_from((1, 3))),
            "nodeTaintsPolicy": draw(st.sampled_from(("Honor", "Ignore")))}]  # fmt: skip
    if draw(st.booleans()):
        term = {
            "labelSelector": _selector(draw(st.sampled_from(APPS))),
            "topologyKey": draw(st.sampled_from(("zone", "kubernetes.io/hostname"))),
        }
        if draw(st.booleans()):
            term["namespaceSelector"] = {"matchLabels": {"team": "x"}}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                [term]}}  # fmt: skip
    if draw(st.booleans()):
        spec["nodeSelector"] = {"disk": "ssd"}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    raw = pod(
        name,
        draw(st.sampled_from((None, *NODES, *NODES, *NODES))),
        cpu=draw(st.sampled_from(("500m", "1", "2"))),
        at=f"2024-05-01T10:00:{draw(st.integers(0, 9)):02d}Z",
        rv=draw(st.integers(1, 50)),
        by=draw(st.sampled_from(("webhook", "binding", "direct"))),
        namespace=draw(st.sampled_from(("one", "two"))),
        labels={"app": app},
        phase=draw(st.sampled_from(("Running",) * 6 + ("Pending", "Failed", "Succeeded"))),
        reason=draw(st.sampled_from(("", "OutOfcpu"))),
        terminating=draw(st.integers(0, 9)) == 0,
        **spec,
    )
    if draw(st.booleans()):
        raw["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return ("put_pod", PodRecord.from_dict(raw))


namespace_change = st.tuples(
    st.just("put_namespace"),
    st.sampled_from(("one", "two")),
    st.sampled_from(({"team": "x"}, {"team": "y"}, None)),
)
changes = st.lists(st.one_of(node_change(), pod_change(), pod_change(), namespace_change),
                   min_size=8, max_size=60)  # fmt: skip


def apply(det: Detector, change: tuple[Any, ...]) -> None:
    if change[0] == "put_namespace":
        det.put_namespace(change[1], change[2])
    else:
        getattr(det, change[0])(change[1])


def as_json(found: list[Conflict]) -> list[Any]:
    return [(c.key, c.to_json()) for c in found]


@settings(max_examples=300, deadline=None)
@given(changes)
def test_after_any_changes_the_incremental_result_equals_a_full_pass(
    todo: list[tuple[Any, ...]],
) -> None:
    det = Detector()
    for i, change in enumerate(todo):
        apply(det, change)
        if i % 3 == 2 or i == len(todo) - 1:  # read back sometimes: changes also pile up
            fresh = detect(det.nodes, list(det.pods.values()), det.labels_of)
            assert as_json(det.conflicts()) == as_json(fresh)
    assert as_json(det.full_pass()) == as_json(
        detect(det.nodes, reversed(list(det.pods.values())), det.labels_of)
    )


def test_a_change_is_seen_without_a_full_pass() -> None:
    det = Detector()
    det.put_node(NodeView.from_dict(node("n0", cpu="1")))
    det.put_pod(PodRecord.from_dict(pod("a", "n0", cpu="1")))
    assert det.conflicts() == []
    det.put_pod(PodRecord.from_dict(pod("b", "n0", cpu="1")))
    assert [c.kind for c in det.conflicts()] == ["Overcommit"]
    det.drop_pod("uid-b")
    assert det.conflicts() == []
