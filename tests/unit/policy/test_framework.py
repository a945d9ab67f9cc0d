import pytest
from policy_builders import default_profile, make_node, make_pod, only, place, snapshot

from webhook.policy.framework import fit_error_message, num_feasible_nodes_to_find, schedule
from webhook.policy.model import NodeView, PodView
from webhook.policy.status import Code


@pytest.mark.parametrize(
    ("pct", "nodes", "expected"),
    [
        (None, 50, 50),
        (None, 99, 99),
        (None, 100, 100),
        (None, 1000, 420),
        (None, 5000, 500),
        (None, 10000, 500),
        (None, 200, 100),
        (10, 5000, 500),
        (100, 5000, 5000),
        (1, 5000, 100),
    ],
)
def test_number_of_nodes_to_find_follows_kube_scheduler(
    pct: int | None, nodes: int, expected: int
) -> None:
    assert num_feasible_nodes_to_find(pct, nodes) == expected


def test_fit_error_lines_are_sorted_as_strings() -> None:
    msg = fit_error_message(5, {"Insufficient cpu": 3, "node(s) had untolerated taint(s)": 2})
    assert msg == "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient cpu."


def test_unschedulable_message_aggregates_reasons_over_nodes() -> None:
    nodes = [make_node(f"n{i}", cpu="1") for i in range(3)] + [
        make_node(f"t{i}", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
        for i in range(2)
    ]
    d = place(make_pod("p", "2"), snapshot(nodes))
    assert d.code is Code.UnschedulableAndUnresolvable
    assert (
        d.message == "0/5 nodes are available: 2 node(s) had untolerated taint(s),"
        " 3 Insufficient cpu."
    )
    assert d.reason_counts == {
        "Insufficient cpu": 3,
        "node(s) had untolerated taint(s)": 2,
    }


def test_no_nodes_is_unschedulable() -> None:
    d = place(make_pod("p"), snapshot([]))
    assert d.node is None and d.code is Code.Unschedulable


def test_pod_that_cannot_be_evaluated_is_skipped() -> None:
    pod = make_pod("p", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}])
    d = place(pod, snapshot([make_node("a")]))
    assert d.code is Code.Skip and d.node is None and "PersistentVolumeClaim" in d.message


def test_tie_break_is_deterministic_and_spreads_different_pods() -> None:
    snap = snapshot([make_node(f"n{i:02d}") for i in range(20)])
    prof = default_profile()
    chosen = set()
    for i in range(40):
        pod = PodView.from_dict(make_pod(f"p{i}"))
        a = schedule(pod, snap, prof)
        b = schedule(pod, snap, prof)
        assert a.node == b.node
        chosen.add(a.node)
    assert len(chosen) > 5


def test_seed_changes_the_tie_break() -> None:
    snap = snapshot([make_node(f"n{i:02d}") for i in range(20)])
    pod = PodView.from_dict(make_pod("p", uid=""))
    nodes = {schedule(pod, snap, default_profile(), seed=str(i)).node for i in range(30)}
    assert len(nodes) > 5


def test_only_a_percentage_of_large_clusters_is_evaluated() -> None:
    snap = snapshot([make_node(f"n{i:04d}") for i in range(1000)])
    d = place(make_pod("p"), snap)
    assert d.evaluated_nodes == 420
    assert len(d.feasible_nodes) == 420
    assert len(d.scores) == 420


def test_all_nodes_are_evaluated_when_the_pod_fits_few() -> None:
    nodes = [make_node(f"n{i:04d}", cpu="1") for i in range(300)] + [make_node("big", cpu="16")]
    d = place(make_pod("p", "8"), snapshot(nodes))
    assert d.node == "big"
    assert d.evaluated_nodes == 301


def test_a_node_is_reported_by_its_first_failing_filter() -> None:
    node = make_node(
        "n", cpu="1", unschedulable=True, taints=[{"key": "k", "effect": "NoSchedule"}]
    )
    d = place(make_pod("p", "2"), snapshot([node]))
    assert d.node_reasons["n"] == ("node(s) were unschedulable",)
    assert d.node_plugins["n"] == "NodeUnschedulable"


def test_total_score_is_the_weighted_sum() -> None:
    prof = only("NodeResourcesFit", scores={"NodeResourcesFit": 3, "TaintToleration": 2})
    d = place(make_pod("p", "1", "1Gi"), snapshot([make_node("a")]), prof)
    s = d.scores["a"]
    assert s["total"] == 3 * s["NodeResourcesFit"] + 2 * s["TaintToleration"]


def test_scheduling_gates_are_a_skip_reason() -> None:
    d = place(
        make_pod("p", schedulingGates=[{"name": "example.com/quota"}]), snapshot([make_node("a")])
    )
    assert d.code is Code.Skip and "example.com/quota" in d.message


def test_reservations_steer_the_next_decision() -> None:
    snap = snapshot([make_node("a", cpu="2"), make_node("b", cpu="2")])
    prof = default_profile()
    first = schedule(PodView.from_dict(make_pod("p1", "1500m", uid="")), snap, prof)
    assert first.node is not None
    snap.assume("r1", PodView.from_dict(make_pod("p1", "1500m", uid="")), first.node)
    second = schedule(PodView.from_dict(make_pod("p2", "1500m", uid="")), snap, prof)
    assert second.node is not None and second.node != first.node
    snap.assume("r2", PodView.from_dict(make_pod("p2", "1500m", uid="")), second.node)
    third = schedule(PodView.from_dict(make_pod("p3", "1500m", uid="")), snap, prof)
    assert third.node is None
    assert third.message == "0/2 nodes are available: 2 Insufficient cpu."


def test_a_decision_keeps_its_answers_after_the_snapshot_changes() -> None:
    """A Decision is plain data: the caller may read it after the view's lock is released,
    while watch events remove nodes and give their slots to new ones."""
    snap = snapshot([make_node("small", cpu="1"), make_node("big", cpu="8")])
    d = place(make_pod("p", "2"), snap)
    reasons, scores = d.node_reasons, d.scores

    snap.remove_node("small")
    snap.remove_node("big")
    snap.upsert_node(NodeView.from_dict(make_node("newcomer", cpu="1")))

    assert d.node == "big"
    assert d.node_reasons == reasons == {"small": ("Insufficient cpu",)}
    assert d.node_plugins == {"small": "NodeResourcesFit"}
    assert d.scores == scores and set(scores) == {"big"}


def test_a_pre_filter_that_narrows_the_nodes_leaves_the_others_outside_the_cycle() -> None:
    """The nodes left out are reported with the plugin's outside reason, and a filter that
    other plugins share (the pod's node affinity mask) is computed for the narrowed nodes."""
    names = {"nodeSelectorTerms": [  # terms are ORed; matchFields take one name each
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}
        for n in "bc"
    ]}  # fmt: skip
    pod = make_pod(
        "ds",
        nodeSelector={"disk": "ssd"},
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": names}},
    )
    snap = snapshot([make_node(n, labels={"disk": "ssd" if n != "b" else "hdd"}) for n in "abc"])

    d = place(pod, snap)

    assert d.node == "c"
    assert d.node_reasons == {
        "a": ("node(s) didn't satisfy plugin(s) [NodeAffinity]",),
        "b": ("node(s) didn't match Pod's node affinity/selector",),
    }
    assert d.evaluated_nodes == 3


@pytest.mark.parametrize(
    ("fitting_share", "pods"),
    [(0.9, 8), (0.2, 8), (0.0, 4)],
    ids=["prefix-suffices", "second-pass", "none-fit"],
)
def test_judging_the_scan_in_parts_gives_what_judging_every_node_gives(
    monkeypatch: pytest.MonkeyPatch, fitting_share: float, pods: int
) -> None:
    """On 2,000 nodes the filters judge the scan's prefix first; the decisions must be the
    ones a single pass over every node gives, cut at the same stop."""
    import webhook.policy.framework as framework

    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    nodes = [
        make_node(
            f"n{i:04d}",
            cpu="8" if (i * 7919 % 100) < fitting_share * 100 else "1",
            taints=taint if i >= 1700 else None,  # one block: in some prefixes, not others
        )
        for i in range(2000)
    ]
    snap = snapshot(nodes)
    prof = default_profile()

    def decide_all() -> list[tuple[object, ...]]:
        out = []
        for i in range(pods):
            d = schedule(PodView.from_dict(make_pod(f"p{i}", "4")), snap, prof, seed=str(i))
            out.append((
                d.node, d.code, d.message, d.reason_counts, d.feasible_nodes,
                d.evaluated_nodes, d.best_scores, d.node_reasons,
            ))  # fmt: skip
        return out

    calls: list[int] = []
    real = framework.run_filters

    def counting(state: object, profile: object) -> object:
        calls.append(len(state.slots))  # type: ignore[attr-defined]
        return real(state, profile)  # type: ignore[arg-type]

    monkeypatch.setattr(framework, "run_filters", counting)
    in_parts = decide_all()
    judged_in_parts = sum(calls)
    monkeypatch.setattr(
        framework, "_filter_scan", lambda state, profile, to_find: real(state, profile)
    )
    calls.clear()
    assert decide_all() == in_parts
    assert sum(calls) == 0  # the reference pass used the real run_filters directly
    if fitting_share == 0.9:
        assert judged_in_parts < pods * 2000  # for some pods the prefix sufficed
    else:
        assert judged_in_parts == pods * 2000  # a second pass judged the rest
