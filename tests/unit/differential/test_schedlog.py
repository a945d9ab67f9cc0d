"""Reading kube-scheduler's klog lines (the format of v1.37's text logger)."""

from __future__ import annotations

from tests.e2e.differential import schedlog

LOG = r"""I1201 09:59:58.797406   21566 schedule_one.go:984] "Plugin scored node for pod" pod="x/p1" plugin="TaintToleration" node="n1" score=300
I1201 09:59:58.797411   21566 schedule_one.go:984] "Plugin scored node for pod" pod="x/p1" plugin="NodeResourcesFit" node="n1" score=97
I1201 09:59:58.797467   21566 schedule_one.go:984] "Plugin scored node for pod" pod="x/p1" plugin="TaintToleration" node="n0" score=300
I1201 09:59:58.797472   21566 schedule_one.go:984] "Plugin scored node for pod" pod="x/other" plugin="TaintToleration" node="n0" score=0
I1201 09:59:58.797654   21566 schedule_one.go:1052] "Calculated node's final score for pod" pod="x/p1" node="n1" score=397
I1201 09:59:58.797660   21566 schedule_one.go:1052] "Calculated node's final score for pod" pod="x/p1" node="n0" score=300
I1201 09:59:58.805652   21566 schedule_one.go:483] "Successfully bound pod to node" pod="x/p1" node="n1" evaluatedNodes=3 feasibleNodes=2
I1201 09:59:58.802588   21566 schedule_one.go:1194] "Unable to schedule pod; no fit; waiting" pod="x/p2" err="0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, 1 \"quoted\". preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
E1201 09:59:58.902306   21566 configmap_cafile_content.go:246] "Unhandled Error" err="x" logger="UnhandledError"
not a klog line
"""  # noqa: E501


def _lines() -> list[schedlog.Line]:
    return [line for text in LOG.splitlines() if (line := schedlog.parse_line(text))]


def test_a_line_gives_its_message_and_values_with_go_quoting_undone() -> None:
    lines = _lines()
    assert len(lines) == 9
    assert lines[0] == schedlog.Line(
        schedlog.SCORED, {"pod": "x/p1", "plugin": "TaintToleration", "node": "n1", "score": "300"}
    )
    assert '1 "quoted".' in lines[7].values["err"]


def test_a_placed_pods_cycle_has_its_scores_totals_and_counts() -> None:
    cycle = schedlog.read_cycle(_lines(), "x/p1")
    assert cycle.scores == {
        "n1": {"TaintToleration": 300, "NodeResourcesFit": 97},
        "n0": {"TaintToleration": 300},
    }
    assert cycle.totals == {"n1": 397, "n0": 300}
    assert (cycle.node, cycle.evaluated, cycle.feasible, cycle.done) == ("n1", 3, 2, True)


def test_an_unschedulable_pods_message_loses_the_preemption_part() -> None:
    cycle = schedlog.read_cycle(_lines(), "x/p2")
    assert cycle.node is None and cycle.done
    assert cycle.message == (
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector,"
        ' 1 "quoted".'
    )


def test_a_pod_not_yet_decided_has_no_verdict() -> None:
    cycle = schedlog.read_cycle(_lines(), "x/other")
    assert not cycle.done and cycle.scores == {"n0": {"TaintToleration": 0}}


def test_informer_events_are_found_by_node_or_pod() -> None:
    lines = [
        schedlog.parse_line('I1201 1:2:3.4 9 eventhandlers.go:64] "Add event for node" node="a"'),
        schedlog.parse_line(
            'I1201 1:2:3.4 9 eventhandlers.go:364] "Delete event for unscheduled pod" pod="x/p"'
        ),
    ]
    parsed = [line for line in lines if line is not None]
    assert schedlog.seen(parsed, schedlog.NODE_ADD, "node") == {"a"}
    assert schedlog.seen(parsed, schedlog.POD_DELETE, "pod") == {"x/p"}
