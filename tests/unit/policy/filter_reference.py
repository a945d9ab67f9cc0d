"""A slow per-node reference for the policy's filters (tests/unit/policy/test_invariants.py).

Tolerations and node selection are matched here on the raw objects, written
from the Kubernetes API's rules (v1.Toleration.ToleratesTaint and
component-helpers' nodeaffinity), not with the production parser and
matchers. Resources, host ports, topology spread and inter-pod affinity read
the pod through the production parser (PodView) and its label-selector and
affinity-term matchers: there the reference checks the vectorisation and the
plugins' counting, not the meaning of a selector.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.policy.model import PodView


def ref_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("key") and toleration["key"] != taint["key"]:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def ref_untolerated(
    pod: Mapping[str, Any], taints: list[Mapping[str, Any]], effects: set[str]
) -> bool:
    tolerations = pod["spec"].get("tolerations") or []
    return any(
        t["effect"] in effects and not any(ref_tolerates(tol, t) for tol in tolerations)
        for t in taints
    )


def int64_or_none(text: str) -> int | None:
    try:
        value = int(text, 10)
    except ValueError:
        return None
    return value if -(2**63) <= value < 2**63 else None


def ref_requirement(labels: Mapping[str, str], req: Mapping[str, Any]) -> bool:
    key, operator, values = req["key"], req["operator"], req.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt") and key in labels:
        have, want = int64_or_none(labels[key]), int64_or_none(values[0])
        if have is None or want is None:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def ref_node_term(name: str, labels: Mapping[str, str], term: Mapping[str, Any]) -> bool:
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    return all(ref_requirement(labels, r) for r in expressions) and all(
        ref_requirement({"metadata.name": name}, r) for r in fields
    )


def ref_node_selection(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """nodeSelector (every pair) and required node affinity (any term)."""
    name, labels = node["metadata"]["name"], node["metadata"]["labels"]
    selector = pod["spec"].get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    node_affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(ref_node_term(name, labels, t) for t in required.get("nodeSelectorTerms") or [])


class Ref:
    """Per-node filters, node by node (no vectorisation), in kube-scheduler's plugin
    order; which matchers are its own and which the production ones: see above."""

    def __init__(
        self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], pod: dict[str, Any]
    ) -> None:
        self.nodes = nodes
        self.raw_pod = pod
        self.pod = PodView.from_dict(pod)
        self.existing = [
            (PodView.from_dict(p), p["spec"]["nodeName"])
            for p in pods
            if not PodView.from_dict(p).is_terminal
        ]

    def labels(self, node: Mapping[str, Any]) -> dict[str, str]:
        return dict(node["metadata"]["labels"])

    def on(self, name: str) -> list[PodView]:
        return [p for p, n in self.existing if n == name]

    def node_affinity_match(self, node: Mapping[str, Any]) -> bool:
        return ref_node_selection(self.raw_pod, node)

    def untolerated(self, node: Mapping[str, Any], effects: set[str]) -> bool:
        return ref_untolerated(self.raw_pod, node["spec"].get("taints", []), effects)

    def reasons(
        self, node: Mapping[str, Any], only: set[str] | None = None
    ) -> tuple[str, ...] | None:
        pod = self.pod
        name = node["metadata"]["name"]

        def on(plugin: str) -> bool:
            return only is None or plugin in only

        if (
            on("NodeUnschedulable")
            and node["spec"].get("unschedulable")
            and ref_untolerated(
                self.raw_pod,
                [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
                {"NoSchedule"},
            )
        ):
            return ("node(s) were unschedulable",)
        if on("TaintToleration") and self.untolerated(node, {"NoSchedule", "NoExecute"}):
            return ("node(s) had untolerated taint(s)",)
        if on("NodeAffinity") and not self.node_affinity_match(node):
            return ("node(s) didn't match Pod's node affinity/selector",)
        used = {hp for p in self.on(name) for hp in p.host_ports}
        for want in pod.host_ports if on("NodePorts") else ():
            for u in used:
                if (
                    u.protocol == want.protocol
                    and u.port == want.port
                    and ("0.0.0.0" in (u.ip, want.ip) or u.ip == want.ip)
                ):
                    return ("node(s) didn't have free ports for the requested pod ports",)
        res = self.resources(node) if on("NodeResourcesFit") else ()
        if res:
            return res
        spread = self.spread(node) if on("PodTopologySpread") else ()
        if spread:
            return spread
        return self.inter_pod(node) if on("InterPodAffinity") else None

    def resources(self, node: Mapping[str, Any]) -> tuple[str, ...]:
        from webhook.policy.quantity import quantity_milli, quantity_value

        alloc = node["status"]["allocatable"]
        pods = self.on(node["metadata"]["name"])
        out = []
        if len(pods) + 1 > quantity_value(alloc["pods"]):
            out.append("Too many pods")
        for r in ("cpu", "memory"):
            want = self.pod.requests.get(r, 0)
            if want <= 0:
                continue
            cap = quantity_milli(alloc[r]) if r == "cpu" else quantity_value(alloc[r])
            used = sum(p.requests.get(r, 0) for p in pods)
            if want > cap - used:
                out.append(f"Insufficient {r}")
        return tuple(out)

    def spread(self, node: Mapping[str, Any]) -> tuple[str, ...]:
        pod = self.pod
        cons = [c for c in pod.spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
        for c in cons:
            counts: dict[str, int] = {}
            for n in self.nodes:
                lab = self.labels(n)
                if not all(x.topology_key in lab for x in cons):
                    continue
                if c.node_affinity_policy == "Honor" and not self.node_affinity_match(n):
                    continue
                if c.node_taints_policy == "Honor" and self.untolerated(
                    n, {"NoSchedule", "NoExecute"}
                ):
                    continue
                cnt = 0
                if not c.selector.empty:
                    cnt = sum(
                        1
                        for p in self.on(n["metadata"]["name"])
                        if p.namespace == pod.namespace and c.selector.matches(p.labels)
                    )
                v = lab[c.topology_key]
                counts[v] = counts.get(v, 0) + cnt
            labels = self.labels(node)
            if c.topology_key not in labels:
                return (
                    "node(s) didn't match pod topology spread constraints (missing required label)",
                )
            min_match = (
                0 if len(counts) < c.min_domains else min(counts.values(), default=2**31 - 1)
            )
            self_match = 1 if c.selector.matches(pod.labels) else 0
            if counts.get(labels[c.topology_key], 0) + self_match - min_match > c.max_skew:
                return ("node(s) didn't match pod topology spread constraints",)
        return ()

    def inter_pod(self, node: Mapping[str, Any]) -> tuple[str, ...] | None:
        pod = self.pod
        labels = self.labels(node)

        def ns_labels(ns: str) -> dict[str, str]:
            return {"kubernetes.io/metadata.name": ns}

        def node_labels(name: str) -> dict[str, str]:
            return next(self.labels(n) for n in self.nodes if n["metadata"]["name"] == name)

        if pod.required_affinity:
            counts: dict[tuple[str, str], int] = {}
            for p, n in self.existing:
                if all(
                    t.matches(p.namespace, p.labels, ns_labels(p.namespace))
                    for t in pod.required_affinity
                ):
                    nl = node_labels(n)
                    for t in pod.required_affinity:
                        if t.topology_key in nl:
                            k = (t.topology_key, nl[t.topology_key])
                            counts[k] = counts.get(k, 0) + 1
            exist = True
            for t in pod.required_affinity:
                if t.topology_key not in labels:
                    return ("node(s) didn't match pod affinity rules",)
                if counts.get((t.topology_key, labels[t.topology_key]), 0) <= 0:
                    exist = False
            if not exist and not (
                not counts
                and all(
                    t.matches(pod.namespace, pod.labels, ns_labels(pod.namespace))
                    for t in pod.required_affinity
                )
            ):
                return ("node(s) didn't match pod affinity rules",)
        for t in pod.required_anti_affinity:
            if t.topology_key not in labels:
                continue
            for p, n in self.existing:
                nl = node_labels(n)
                if nl.get(t.topology_key) == labels[t.topology_key] and t.matches(
                    p.namespace, p.labels, ns_labels(p.namespace)
                ):
                    return ("node(s) didn't match pod anti-affinity rules",)
        for p, n in self.existing:
            nl = node_labels(n)
            for t in p.required_anti_affinity:
                same_domain = (
                    t.topology_key in nl and labels.get(t.topology_key) == nl[t.topology_key]
                )
                if same_domain and t.matches(pod.namespace, pod.labels, ns_labels(pod.namespace)):
                    return ("node(s) didn't satisfy existing pods anti-affinity rules",)
        return None
