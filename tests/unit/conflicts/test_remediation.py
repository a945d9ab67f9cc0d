"""Evict mode evicts only our own overcommit culprits that a controller will recreate."""

from __future__ import annotations

from typing import Any

from tests.unit.conflicts.builders import node, nodes, pod, records
from webhook.conflicts.detect import detect
from webhook.conflicts.remediation import eviction_targets, why_not_evictable


def at(second: int) -> str:
    return f"2024-05-01T10:00:{second:02d}Z"


def targets(*pods: dict[str, Any], cpu: str = "1", skip: tuple[str, ...] = ()) -> list[str]:
    found = detect(nodes(node("n1", cpu=cpu)), records(*pods))
    return [t.pod.name for t in eviction_targets(found, skip=skip)]


def test_our_replica_set_pod_that_lost_is_evicted() -> None:
    assert targets(pod("a", "n1", at=at(1)), pod("b", "n1", at=at(2))) == ["b"]


def test_a_pod_placed_by_kube_scheduler_is_never_evicted() -> None:
    assert targets(pod("a", "n1", at=at(1)), pod("b", "n1", at=at(2), by="binding")) == []


def test_a_pod_nothing_would_recreate_is_never_evicted() -> None:
    assert targets(pod("a", "n1", at=at(1)), pod("b", "n1", at=at(2), owner=None)) == []
    assert targets(pod("a", "n1", at=at(1)), pod("b", "n1", at=at(2), owner="DaemonSet")) == []


def test_the_earlier_pod_is_kept_even_when_it_is_ours() -> None:
    assert targets(pod("a", "n1", at=at(1)), pod("b", "n1", at=at(2), by="direct")) == []


def test_pods_already_evicted_are_not_evicted_again() -> None:
    assert targets(pod("a", "n1", at=at(1)), pod("b", "n1", at=at(2)), skip=("uid-b",)) == []


def test_other_conflict_kinds_are_only_reported() -> None:
    port: dict[str, Any] = {
        "containers": [{"name": "c", "ports": [{"containerPort": 1, "hostPort": 80}]}]
    }
    assert (
        targets(pod("a", "n1", at=at(1), **port), pod("b", "n1", at=at(2), **port), cpu="8") == []
    )


def test_the_reason_a_pod_may_not_be_evicted_is_given() -> None:
    (conflict,) = detect(
        nodes(node("n1", cpu="1")),
        records(pod("a", "n1", at=at(1)), pod("b", "n1", at=at(2), by="binding")),
    )
    assert (
        why_not_evictable(conflict.culprits[0]) == "placed by kube-scheduler, not by this webhook"
    )
