from policy_builders import make_node, make_pod, only, place, snapshot

PROF = only("NodeUnschedulable", "NodeName")


def test_pod_is_not_placed_on_a_cordoned_node() -> None:
    d = place(make_pod("p"), snapshot([make_node("n", unschedulable=True)]), PROF)
    assert d.node is None
    assert d.message == "0/1 nodes are available: 1 node(s) were unschedulable."


def test_pod_tolerating_the_unschedulable_taint_may_use_a_cordoned_node() -> None:
    tol = [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    ]
    d = place(make_pod("p", tolerations=tol), snapshot([make_node("n", unschedulable=True)]), PROF)
    assert d.node == "n"


def test_pod_naming_a_node_only_fits_that_node() -> None:
    d = place(make_pod("p", node="b"), snapshot([make_node("a"), make_node("b")]), PROF)
    assert d.node == "b"
    assert d.node_reasons["a"] == ("node(s) didn't match the requested node name",)


def test_pod_naming_an_unknown_node_fits_nowhere() -> None:
    d = place(make_pod("p", node="zzz"), snapshot([make_node("a")]), PROF)
    assert d.node is None
    assert d.message == "0/1 nodes are available: 1 node(s) didn't match the requested node name."
