"""Hypothesis invariants of the policy core.

- the vectorised filters agree with a slow per-node reference (first failing
  plugin wins). The reference loops node by node over the raw objects. It
  matches tolerations, nodeSelector and required node affinity on the raw
  pod with its own code, written from the API's rules; for resources, host
  ports, topology spread and inter-pod affinity it reads the pod through the
  production parser (PodView) and its label-selector and affinity-term
  matchers, so there it checks the vectorisation and the plugins' counting
  (skew, domains, existing pods' anti-affinity), not the meaning of a
  selector. Those meanings are checked against the real kube-scheduler by
  tests/e2e/test_differential.py and by the plugins' table-driven tests;
- normalised scores stay within 0..100 and totals are weighted sums;
- verdicts do not depend on the order nodes and pods were added, and an
  incrementally maintained snapshot decides like one built from scratch;
- a placed pod passes every enabled filter;
- explain and schedule agree.
"""

from __future__ import annotations

import random
from typing import Any

from filter_reference import Ref, int64_or_none, ref_requirement
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_builders import make_node, make_pod

from webhook import explain
from webhook.policy.dump import build_snapshot
from webhook.policy.framework import schedule
from webhook.policy.interface import CycleState
from webhook.policy.model import NodeView, PodView
from webhook.policy.policy_file import load_policy
from webhook.policy.profile import Profile
from webhook.policy.snapshot import ClusterSnapshot

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TAINTS = [
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "value": "", "effect": "PreferNoSchedule"},
    {"key": "maint", "value": "", "effect": "NoExecute"},
]
TOLERATIONS = [
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "maint", "operator": "Exists"},
    {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
    {"operator": "Exists"},
]


@st.composite
def nodes_st(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(2, 7))
    out = []
    for i in range(n):
        labels = {}
        zone = draw(st.sampled_from(["z1", "z2", "z3", None]))
        if zone:
            labels[ZONE] = zone
        disk = draw(st.sampled_from(["ssd", "hdd", None]))
        if disk:
            labels["disk"] = disk
        gen = draw(st.sampled_from(["1", "3", "5", "x", None]))
        if gen:
            labels["gen"] = gen
        out.append(
            make_node(
                f"n{i}",
                cpu=draw(st.sampled_from(["1", "2", "4"])),
                memory=draw(st.sampled_from(["1Gi", "2Gi", "4Gi"])),
                pods=draw(st.sampled_from(["2", "110"])),
                labels=labels,
                taints=draw(
                    st.sampled_from(
                        [[], [], [], [], [TAINTS[0]], [TAINTS[1]], [TAINTS[2]], TAINTS[:2]]
                    )
                ),
                unschedulable=draw(st.sampled_from([False] * 9 + [True])),
                images=[(["registry.example/app:1"], 300 * 1024 * 1024)]
                if draw(st.booleans())
                else None,
            )
        )
    return out


def _term(draw: st.DrawFn) -> dict[str, Any]:
    t: dict[str, Any] = {
        "labelSelector": {"matchLabels": {"app": draw(st.sampled_from(["web", "db"]))}},
        "topologyKey": draw(st.sampled_from([ZONE, HOST])),
    }
    ns = draw(st.sampled_from([None, ["other"], "all"]))
    if ns == "all":
        t["namespaceSelector"] = {}
    elif ns:
        t["namespaces"] = ns
    return t


def _with_ports(pod: dict[str, Any], ports: list[int]) -> dict[str, Any]:
    if ports:
        pod["spec"]["containers"][0]["ports"] = [
            {"containerPort": 80, "hostPort": p} for p in ports
        ]
    return pod


@st.composite
def existing_pods_st(draw: st.DrawFn, node_names: list[str]) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        spec: dict[str, Any] = {}
        if draw(st.integers(0, 3)) == 0:
            spec["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(draw)]}
            }
        pod = make_pod(
            f"e{i}",
            cpu=draw(st.sampled_from(["100m", "500m", "1", None])),
            memory=draw(st.sampled_from(["128Mi", "1Gi", None])),
            node=draw(st.sampled_from(node_names)),
            namespace=draw(st.sampled_from(["default", "default", "other"])),
            labels={"app": draw(st.sampled_from(["web", "db", "cache"]))},
            phase=draw(st.sampled_from(["Running", "Running", "Running", "Succeeded"])),
            **spec,
        )
        out.append(_with_ports(pod, draw(st.sampled_from([[], [], [80]]))))
    return out


@st.composite
def incoming_st(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    tols = draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2))
    if tols:
        spec["tolerations"] = tols
    if draw(st.integers(0, 3)) == 0:
        spec["nodeSelector"] = {"disk": draw(st.sampled_from(["ssd", "hdd"]))}
    reqs = draw(
        st.sampled_from(
            [
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                {"key": ZONE, "operator": "In", "values": ["z1", "z2"]},
                {"key": "disk", "operator": "DoesNotExist"},
                {"key": "gen", "operator": "Gt", "values": ["2"]},
                {"key": "gen", "operator": "Lt", "values": ["4"]},
            ]
        )
    )
    affinity: dict[str, Any] = {}
    if reqs:
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [reqs]}]
            }
        }
    if draw(st.booleans()):
        affinity["nodeAffinity"] = {
            **affinity.get("nodeAffinity", {}),
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 5,
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                    },
                }
            ],
        }
    kind = draw(st.sampled_from(["none", "aff", "aff", "anti", "anti", "pref"]))
    if kind == "aff":
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(draw)]}
    elif kind == "anti":
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(draw)]
        }
    elif kind == "pref":
        affinity["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": _term(draw)}
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    if draw(st.integers(0, 2)) > 0:
        c: dict[str, Any] = {
            "maxSkew": draw(st.integers(1, 2)),
            "topologyKey": draw(st.sampled_from([ZONE, HOST])),
            "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
            "labelSelector": {"matchLabels": {"app": draw(st.sampled_from(["web", "db"]))}},
        }
        if draw(st.booleans()):
            c["minDomains"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            c["nodeTaintsPolicy"] = "Honor"
        if draw(st.booleans()):
            c["nodeAffinityPolicy"] = "Ignore"
        spec["topologySpreadConstraints"] = [c]
    pod = make_pod(
        "incoming",
        cpu=draw(st.sampled_from(["100m", "1", "3", None])),
        memory=draw(st.sampled_from(["256Mi", "3Gi", None])),
        labels={"app": draw(st.sampled_from(["web", "db", "cache"]))},
        uid="",
        **spec,
    )
    return _with_ports(pod, draw(st.sampled_from([[], [80]])))


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    nodes = draw(nodes_st())
    pods = draw(existing_pods_st([n["metadata"]["name"] for n in nodes]))
    return nodes, pods, draw(incoming_st())


ALL_NODES = load_policy(
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    "percentageOfNodesToScore: 100\n"
    "profiles:\n  - plugins:\n      multiPoint:\n"
    "        enabled: [{name: NodeLabelNumber, weight: 2}]\n"
    "    pluginConfig:\n      - {name: NodeLabelNumber, args: {labelKey: gen}}\n"
).default_profile


@SETTINGS
@given(scenario())
def test_vectorised_filters_agree_with_the_per_node_reference(sc: Any) -> None:
    nodes, pods, incoming = sc
    ref = Ref(nodes, pods, incoming)
    expected = {n["metadata"]["name"]: r for n in nodes if (r := ref.reasons(n))}
    snap = build_snapshot(nodes, pods)
    d = schedule(PodView.from_dict(incoming), snap, ALL_NODES)
    assert dict(d.node_reasons) == expected
    assert set(d.feasible_nodes) == {n["metadata"]["name"] for n in nodes} - set(expected)
    assert (d.node is None) == (not d.feasible_nodes)


SPREAD_AND_AFFINITY = load_policy(
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    "percentageOfNodesToScore: 100\n"
    "profiles:\n  - plugins:\n      filter:\n        disabled: [{name: '*'}]\n"
    "        enabled: [{name: PodTopologySpread}, {name: InterPodAffinity}]\n"
).default_profile


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_spread_and_inter_pod_affinity_filters_agree_with_the_reference(sc: Any) -> None:
    nodes, pods, incoming = sc
    ref = Ref(nodes, pods, incoming)
    only = {"PodTopologySpread", "InterPodAffinity"}
    expected = {n["metadata"]["name"]: r for n in nodes if (r := ref.reasons(n, only))}
    snap = build_snapshot(nodes, pods)
    d = schedule(PodView.from_dict(incoming), snap, SPREAD_AND_AFFINITY)
    assert dict(d.node_reasons) == expected


@SETTINGS
@given(scenario())
def test_scores_are_normalized_and_totals_are_weighted_sums(sc: Any) -> None:
    nodes, pods, incoming = sc
    d = schedule(PodView.from_dict(incoming), build_snapshot(nodes, pods), ALL_NODES)
    for row in d.scores.values():
        total = 0
        for plugin, score in row.items():
            if plugin == "total":
                continue
            assert 0 <= score <= 100, (plugin, score)
            total += d.weights[plugin] * score
        assert row["total"] == total
    if d.node is not None:
        best = max(r["total"] for r in d.scores.values())
        assert d.scores[d.node]["total"] == best


@SETTINGS
@given(scenario(), st.randoms(use_true_random=False))
def test_verdicts_do_not_depend_on_insertion_order_or_history(sc: Any, rnd: random.Random) -> None:
    nodes, pods, incoming = sc
    pod = PodView.from_dict(incoming)
    a = schedule(pod, build_snapshot(nodes, pods), ALL_NODES)

    shuffled_nodes, shuffled_pods = list(nodes), list(pods)
    rnd.shuffle(shuffled_nodes)
    rnd.shuffle(shuffled_pods)
    snap = ClusterSnapshot()
    # history: pods first (nodes unknown), a node removed and re-added, pods moved back and forth
    for p in shuffled_pods:
        snap.upsert_pod(PodView.from_dict(p))
    for n in shuffled_nodes:
        snap.upsert_node(NodeView.from_dict(n))
    victim = shuffled_nodes[0]
    snap.remove_node(victim["metadata"]["name"])
    for p in shuffled_pods:
        moved = {**p, "spec": {**p["spec"], "nodeName": victim["metadata"]["name"]}}
        snap.upsert_pod(PodView.from_dict(moved))
    snap.upsert_node(NodeView.from_dict(victim))
    for p in shuffled_pods:
        snap.upsert_pod(PodView.from_dict(p))
    snap.assume("r", PodView.from_dict(make_pod("ghost", "1")), victim["metadata"]["name"])
    snap.forget("r")
    b = schedule(pod, snap, ALL_NODES)
    assert dict(a.node_reasons) == dict(b.node_reasons)
    assert set(a.feasible_nodes) == set(b.feasible_nodes)
    assert {n: dict(s) for n, s in a.scores.items()} == {n: dict(s) for n, s in b.scores.items()}
    assert a.node == b.node


def _passes_alone(pod: PodView, snap: ClusterSnapshot, profile: Profile, node: str) -> list[str]:
    slot = snap.slot_of(node)
    assert slot is not None
    failing = []
    for plugin in profile.filters:
        state = CycleState(pod=pod, snapshot=snap, slots=snap.sorted_slots())
        res = plugin.filter(state)
        if res is None:
            continue
        pos = list(snap.sorted_slots()).index(slot)
        if res.status_index[pos] >= 0:
            failing.append(plugin.name)
    return failing


@SETTINGS
@given(scenario())
def test_a_placed_pod_passes_every_enabled_filter(sc: Any) -> None:
    nodes, pods, incoming = sc
    snap = build_snapshot(nodes, pods)
    pod = PodView.from_dict(incoming)
    d = schedule(pod, snap, ALL_NODES)
    if d.node is not None:
        assert _passes_alone(pod, snap, ALL_NODES, d.node) == []


@SETTINGS
@given(scenario())
def test_explain_and_schedule_agree(sc: Any) -> None:
    nodes, pods, incoming = sc
    snap = build_snapshot(nodes, pods)
    pod = PodView.from_dict(incoming)
    from webhook.policy.policy_file import Policy

    policy = Policy(profiles={"default-scheduler": ALL_NODES})
    decision, profile = explain.explain(pod, snap, policy)
    out = explain.to_json(decision, pod, profile)
    direct = schedule(pod, snap, ALL_NODES)
    assert out["selectedNode"] == direct.node
    assert out["unschedulableReasons"] == {n: list(r) for n, r in direct.node_reasons.items()}
    assert out["scores"] == {n: dict(s) for n, s in direct.scores.items()}
    assert out["feasibleNodes"] == list(direct.feasible_nodes)


def test_reference_helpers_parse_gt_values() -> None:
    assert int64_or_none("5") == 5 and int64_or_none("x") is None
    assert ref_requirement({"gen": "5"}, {"key": "gen", "operator": "Gt", "values": ["2"]})
    assert not ref_requirement({"gen": "x"}, {"key": "gen", "operator": "Lt", "values": ["4"]})
