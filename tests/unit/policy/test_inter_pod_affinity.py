from typing import Any

import pytest
from policy_builders import make_node, make_pod, only, place, plugin_args, snapshot

from webhook.policy.policy_file import PolicyError
from webhook.policy.status import Code

IPA = only("InterPodAffinity", scores={"InterPodAffinity": 1})
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"


def term(key: str, selector: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": selector}, "topologyKey": key, **extra}


def affinity(
    *terms: dict[str, Any], anti: bool = False, preferred: list[int] | None = None
) -> dict[str, Any]:
    kind = "podAntiAffinity" if anti else "podAffinity"
    if preferred is not None:
        body = [{"weight": w, "podAffinityTerm": t} for w, t in zip(preferred, terms, strict=True)]
        return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": body}}
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def nodes() -> list[dict[str, Any]]:
    return [
        make_node("a1", labels={ZONE: "a"}),
        make_node("a2", labels={ZONE: "a"}),
        make_node("b1", labels={ZONE: "b"}),
        make_node("bare"),
    ]


def test_pod_with_affinity_goes_to_the_zone_of_matching_pods() -> None:
    snap = snapshot(nodes(), [make_pod("db", node="a1", labels={"app": "db"})])
    pod = make_pod("p", affinity=affinity(term(ZONE, {"app": "db"})))
    d = place(pod, snap, IPA)
    assert set(d.feasible_nodes) == {"a1", "a2"}
    assert d.node_reasons["b1"] == (AFF,)
    assert d.node_reasons["bare"] == (AFF,)


def test_affinity_with_no_matching_pod_anywhere_is_unresolvable() -> None:
    pod = make_pod("p", affinity=affinity(term(ZONE, {"app": "db"})))
    d = place(pod, snapshot(nodes()), IPA)
    assert d.node is None and d.code is Code.UnschedulableAndUnresolvable
    assert d.message == f"0/4 nodes are available: 4 {AFF}."


def test_first_pod_of_a_self_affine_group_may_go_anywhere_with_the_key() -> None:
    pod = make_pod("p", labels={"app": "db"}, affinity=affinity(term(ZONE, {"app": "db"})))
    d = place(pod, snapshot(nodes()), IPA)
    assert set(d.feasible_nodes) == {"a1", "a2", "b1"}


def test_existing_pod_must_match_all_affinity_terms() -> None:
    pods = [
        make_pod("db", node="a1", labels={"app": "db"}),
        make_pod("cache", node="b1", labels={"tier": "cache"}),
    ]
    pod = make_pod("p", affinity=affinity(term(ZONE, {"app": "db"}), term(ZONE, {"tier": "cache"})))
    d = place(pod, snapshot(nodes(), pods), IPA)
    assert d.node is None


def test_anti_affinity_keeps_replicas_off_the_same_node() -> None:
    snap = snapshot(nodes(), [make_pod("w1", node="a1", labels={"app": "web"})])
    pod = make_pod(
        "p", labels={"app": "web"}, affinity=affinity(term(HOST, {"app": "web"}), anti=True)
    )
    d = place(pod, snap, IPA)
    assert d.node_reasons == {"a1": (ANTI,)}
    assert d.code is Code.Success


def test_zone_anti_affinity_blocks_the_whole_zone() -> None:
    snap = snapshot(nodes(), [make_pod("w1", node="a1", labels={"app": "web"})])
    pod = make_pod("p", affinity=affinity(term(ZONE, {"app": "web"}), anti=True))
    d = place(pod, snap, IPA)
    assert set(d.feasible_nodes) == {"b1", "bare"}


def test_existing_pods_anti_affinity_repels_the_incoming_pod() -> None:
    guard = make_pod(
        "g",
        node="a1",
        labels={"app": "guard"},
        affinity=affinity(term(ZONE, {"app": "web"}), anti=True),
    )
    snap = snapshot(nodes(), [guard])
    d = place(make_pod("p", labels={"app": "web"}), snap, IPA)
    assert d.node_reasons == {"a1": (EXISTING,), "a2": (EXISTING,)}
    assert place(make_pod("q", labels={"app": "db"}), snap, IPA).node_reasons == {}


def test_existing_anti_affinity_stops_counting_when_the_pod_leaves() -> None:
    guard = make_pod("g", node="a1", affinity=affinity(term(HOST, {"app": "web"}), anti=True))
    snap = snapshot(nodes(), [guard])
    snap.remove_pod("uid-default-g")
    assert place(make_pod("p", labels={"app": "web"}), snap, IPA).node_reasons == {}


def test_terms_only_see_their_namespaces() -> None:
    pods = [make_pod("db", node="a1", labels={"app": "db"}, namespace="data")]
    same_ns = make_pod("p", affinity=affinity(term(ZONE, {"app": "db"})))
    assert place(same_ns, snapshot(nodes(), pods), IPA).node is None
    listed = make_pod("p", affinity=affinity(term(ZONE, {"app": "db"}, namespaces=["data"])))
    assert set(place(listed, snapshot(nodes(), pods), IPA).feasible_nodes) == {"a1", "a2"}


def test_namespace_selector_uses_namespace_labels() -> None:
    pods = [make_pod("db", node="b1", labels={"app": "db"}, namespace="data")]
    nss = [{"kind": "Namespace", "metadata": {"name": "data", "labels": {"team": "storage"}}}]
    sel = make_pod(
        "p",
        affinity=affinity(
            term(ZONE, {"app": "db"}, namespaceSelector={"matchLabels": {"team": "storage"}})
        ),
    )
    assert set(place(sel, snapshot(nodes(), pods, nss), IPA).feasible_nodes) == {"b1"}
    every = make_pod("p", affinity=affinity(term(ZONE, {"app": "db"}, namespaceSelector={})))
    assert set(place(every, snapshot(nodes(), pods, nss), IPA).feasible_nodes) == {"b1"}
    other = make_pod(
        "p",
        affinity=affinity(
            term(ZONE, {"app": "db"}, namespaceSelector={"matchLabels": {"team": "x"}})
        ),
    )
    assert place(other, snapshot(nodes(), pods, nss), IPA).node is None


def _scores(pod: dict[str, Any], pods: list[dict[str, Any]], prof: Any = IPA) -> dict[str, int]:
    d = place(pod, snapshot(nodes(), pods), prof)
    return {n: s["InterPodAffinity"] for n, s in d.scores.items()}


def test_preferred_affinity_scores_the_zone_with_matching_pods() -> None:
    pods = [make_pod("db", node="a1", labels={"app": "db"})]
    pod = make_pod("p", affinity=affinity(term(ZONE, {"app": "db"}), preferred=[5]))
    assert _scores(pod, pods) == {"a1": 100, "a2": 100, "b1": 0, "bare": 0}


def test_preferred_anti_affinity_scores_the_zone_with_matching_pods_lower() -> None:
    pods = [make_pod("w", node="b1", labels={"app": "web"})]
    pod = make_pod("p", affinity=affinity(term(ZONE, {"app": "web"}), anti=True, preferred=[5]))
    assert _scores(pod, pods) == {"a1": 100, "a2": 100, "b1": 0, "bare": 100}


def test_existing_required_affinity_attracts_with_hard_pod_affinity_weight() -> None:
    fan = make_pod("fan", node="b1", affinity=affinity(term(ZONE, {"app": "star"})))
    assert _scores(make_pod("p", labels={"app": "star"}), [fan]) == {
        "a1": 0,
        "a2": 0,
        "b1": 100,
        "bare": 0,
    }
    prof = only(
        "InterPodAffinity",
        scores={"InterPodAffinity": 1},
        args=plugin_args("InterPodAffinity", "hardPodAffinityWeight: 0"),
    )
    assert _scores(make_pod("p", labels={"app": "star"}), [fan], prof) == {
        "a1": 0,
        "a2": 0,
        "b1": 0,
        "bare": 0,
    }


def test_existing_preferred_terms_can_be_ignored() -> None:
    fan = make_pod("fan", node="b1", affinity=affinity(term(ZONE, {"app": "star"}), preferred=[10]))
    assert _scores(make_pod("p", labels={"app": "star"}), [fan])["b1"] == 100
    prof = only(
        "InterPodAffinity",
        scores={"InterPodAffinity": 1},
        args=plugin_args("InterPodAffinity", "ignorePreferredTermsOfExistingPods: true"),
    )
    d = place(make_pod("p", labels={"app": "star"}), snapshot(nodes(), [fan]), prof)
    assert "InterPodAffinity" not in d.scores["b1"]


def test_mixed_preferences_are_normalized_min_max() -> None:
    pods = [
        make_pod("db", node="a1", labels={"app": "db"}),
        make_pod("w", node="b1", labels={"app": "web"}),
    ]
    pod = make_pod(
        "p",
        affinity={
            **affinity(term(ZONE, {"app": "db"}), preferred=[4]),
            **affinity(term(ZONE, {"app": "web"}), anti=True, preferred=[4]),
        },
    )
    # raw: zone a +4, zone b -4, bare 0 -> normalized 100, 0, 50
    assert _scores(pod, pods) == {"a1": 100, "a2": 100, "b1": 0, "bare": 50}


@pytest.mark.parametrize(
    "args", ["hardPodAffinityWeight: 101", "hardPodAffinityWeight: -1", "bogus: 1"]
)
def test_invalid_inter_pod_affinity_args_stop_loading(args: str) -> None:
    with pytest.raises(PolicyError):
        only("InterPodAffinity", args=plugin_args("InterPodAffinity", args))


def test_match_label_keys_limit_anti_affinity_to_the_same_revision() -> None:
    old = make_pod("w-old", node="a1", labels={"app": "web", "rev": "1"})
    t = term(HOST, {"app": "web"}, matchLabelKeys=["rev"])
    new = make_pod("p", labels={"app": "web", "rev": "2"}, affinity=affinity(t, anti=True))
    assert place(new, snapshot(nodes(), [old]), IPA).node_reasons == {}
    same = make_pod("p", labels={"app": "web", "rev": "1"}, affinity=affinity(t, anti=True))
    assert place(same, snapshot(nodes(), [old]), IPA).node_reasons == {"a1": (ANTI,)}
