"""Equal parts of parsed pods are one object; the records stay equal to a plain parse."""

from __future__ import annotations

from tests.unit.conflicts.builders import pod
from webhook.conflicts.canon import Canon
from webhook.conflicts.model import PodRecord
from webhook.conflicts.store import ConflictStore

SPREAD = [
    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
     "labelSelector": {"matchLabels": {"app": "web"}}}
]  # fmt: skip
TOLERATIONS = [{"key": "k", "operator": "Exists", "effect": "NoExecute"}]


def replica(name: str, node: str = "n1") -> dict[str, object]:
    return pod(
        name, node, labels={"app": "web"}, topologySpreadConstraints=SPREAD,
        tolerations=TOLERATIONS,
    )  # fmt: skip


def test_a_shared_record_equals_the_plain_parse() -> None:
    canon = Canon()
    for name in ("a", "b"):
        raw = replica(name)
        assert canon.record(PodRecord.from_dict(raw)) == PodRecord.from_dict(raw)


def test_replicas_share_their_labels_requests_and_constraints() -> None:
    canon = Canon()
    a = canon.record(PodRecord.from_dict(replica("a")))
    b = canon.record(PodRecord.from_dict(replica("b")))
    assert a.view.labels is b.view.labels
    assert a.view.requests is b.view.requests
    assert a.view.spread_constraints is b.view.spread_constraints
    assert a.view.tolerations is b.view.tolerations
    assert a.view.node_name is b.view.node_name
    assert a.owner is b.owner
    assert a.uid != b.uid


def test_different_parts_are_not_shared() -> None:
    canon = Canon()
    a = canon.record(PodRecord.from_dict(pod("a", "n1", labels={"app": "web"})))
    b = canon.record(PodRecord.from_dict(pod("b", "n2", labels={"app": "db"})))
    assert a.view.labels == {"app": "web"} and b.view.labels == {"app": "db"}
    assert a.node == "n1" and b.node == "n2"


def test_the_table_is_emptied_when_it_reaches_its_limit() -> None:
    canon = Canon(limit=8)
    for i in range(50):
        canon.record(PodRecord.from_dict(pod(f"p{i}", f"n{i}", labels={"i": str(i)})))
        assert len(canon) <= 8


def test_the_store_keeps_shared_records() -> None:
    store = ConflictStore()
    _, a = store.put_pod(replica("a"))
    _, b = store.put_pod(replica("b"))
    assert a is not None and b is not None and a.view.labels is b.view.labels
