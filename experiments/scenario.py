"""Scenarios: small YAML files describing nodes, pods, arrival and the policy. Pure.

A scenario is everything that must be identical across arms: the node shapes,
the pods (shapes, constraints, order), how they arrive, the policy (one
KubeSchedulerConfiguration profile, given to kube-scheduler, the webhook and
the extender alike) and the API client rate limits. Decoding is strict:
unknown fields are errors, so a typo never silently changes an experiment.

    name: spread-100
    nodes:
      - {count: 90, prefix: std, cpu: "8", memory: 32Gi, zones: [a, b, c]}
      - {count: 10, prefix: gpu, cpu: "16", taints: [{key: gpu, value: "true", effect: NoSchedule}]}
    pods:
      - {count: 500, prefix: web, cpu: [100m, 250m], labels: {app: web}, spread: zone}
      - {count: 20, prefix: db, cpu: "1", labels: {app: db}, antiAffinity: hostname}
    arrival: {mode: burst, clients: 8}      # burst | rate (rate: pods/s) | sequential
    client: {qps: 500, burst: 1000}
    percentageOfNodesToScore: 100           # optional; default kube-scheduler's adaptive rule
    profile: {plugins: ..., pluginConfig: ...}  # optional; the one profile every arm uses
    deadlineSeconds: 120
    parity: true                            # compare the chosen nodes of arms B, C, D, E
    arms: [ceiling, A, B, C, D, E]
    kubelets: true                          # optional: every node is a hollow kubelet

Pods of all groups are interleaved round-robin in a fixed order; list-valued
cpu/memory cycle, and `cpuStep`/`memoryStep` on a node group make every node
a slightly different size (so scores rarely tie). `spread` and `antiAffinity`
take a topology key (`zone`, `hostname`, or a label key) and select the
group's own labels.

With `kubelets: true` every node is a hollow kubelet (the real kubelet code
over a fake runtime) instead of a bare Node object: pods run, the kubelet's
admission checks each placement, and its status writes and heartbeats are
part of the measurement. Node cpu is then whole cores (cpu and cpuStep).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.policy.policy_file import PolicyError, load_policy
from webhook.policy.quantity import quantity_milli, quantity_value

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
TOPOLOGY_ALIASES = {"zone": ZONE, "hostname": HOSTNAME}
ARM_KEYS = ("ceiling", "A", "B0", "B", "B2", "BE", "BL", "C", "D", "E", "F")
DEFAULT_ARMS = ("ceiling", "A", "B", "C", "D", "E")
NAMESPACE = "bench"
ENABLED_LABEL = "placement-webhook.io/enabled"


class ScenarioError(ValueError):
    """An invalid scenario file; the message names the file and the field."""


def _check(raw: Any, allowed: set[str], where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{where}: must be a mapping")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ScenarioError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return raw


def _strings(raw: Any, where: str) -> tuple[str, ...]:
    values = raw if isinstance(raw, list) else [raw]
    if not values or not all(isinstance(v, str | int | float) for v in values):
        raise ScenarioError(f"{where}: must be a quantity or a list of quantities")
    return tuple(str(v) for v in values)


def _count(raw: Any, where: str) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise ScenarioError(f"{where}: must be a non-negative integer")
    return raw


def _topology(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise ScenarioError(f"{where}: must be zone, hostname or a label key")
    return TOPOLOGY_ALIASES.get(raw, raw)


@dataclass(frozen=True)
class NodeGroup:
    count: int
    prefix: str = "node"
    cpu: str = "8"
    memory: str = "32Gi"
    pods: int = 110
    cpu_step: str = "0"
    """Added once per node index: node i has cpu + i * cpuStep."""
    memory_step: str = "0"
    zones: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()

    @staticmethod
    def parse(raw: Any, where: str) -> NodeGroup:
        fields = {"count", "prefix", "cpu", "memory", "pods", "cpuStep", "memoryStep", "zones",
                  "labels", "taints"}  # fmt: skip
        data = _check(raw, fields, where)
        return NodeGroup(
            count=_count(data.get("count"), f"{where}.count"),
            prefix=str(data.get("prefix", "node")),
            cpu=str(data.get("cpu", "8")),
            memory=str(data.get("memory", "32Gi")),
            pods=_count(data.get("pods", 110), f"{where}.pods"),
            cpu_step=str(data.get("cpuStep", "0")),
            memory_step=str(data.get("memoryStep", "0")),
            zones=tuple(str(z) for z in data.get("zones") or ()),
            labels={str(k): str(v) for k, v in (data.get("labels") or {}).items()},
            taints=tuple(dict(t) for t in data.get("taints") or ()),
        )

    def manifests(self) -> list[dict[str, Any]]:
        cpu, memory = quantity_milli(self.cpu), quantity_value(self.memory)
        cpu_step, memory_step = quantity_milli(self.cpu_step), quantity_value(self.memory_step)
        out = []
        for i in range(self.count):
            name = f"{self.prefix}-{i:05d}"
            labels = {HOSTNAME: name, "kubernetes.io/os": "linux", **self.labels}
            if self.zones:
                labels[ZONE] = self.zones[i % len(self.zones)]
            capacity = {
                "cpu": f"{cpu + i * cpu_step}m",
                "memory": str(memory + i * memory_step),
                "pods": str(self.pods),
                "ephemeral-storage": "100Gi",
            }
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"taints": [dict(t) for t in self.taints]},
                    "status": {
                        "capacity": capacity,
                        "allocatable": dict(capacity),
                        "conditions": [{"type": "Ready", "status": "True", "reason": "Bench"}],
                    },
                }
            )
        return out


@dataclass(frozen=True)
class PodGroup:
    count: int
    prefix: str = "pod"
    cpu: tuple[str, ...] = ("100m",)
    memory: tuple[str, ...] = ("128Mi",)
    labels: Mapping[str, str] = field(default_factory=dict)
    spread: str | None = None
    max_skew: int = 1
    anti_affinity: str | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def parse(raw: Any, where: str) -> PodGroup:
        fields = {"count", "prefix", "cpu", "memory", "labels", "spread", "maxSkew",
                  "antiAffinity", "tolerations", "nodeSelector"}  # fmt: skip
        data = _check(raw, fields, where)
        group = PodGroup(
            count=_count(data.get("count"), f"{where}.count"),
            prefix=str(data.get("prefix", "pod")),
            cpu=_strings(data.get("cpu", "100m"), f"{where}.cpu"),
            memory=_strings(data.get("memory", "128Mi"), f"{where}.memory"),
            labels={str(k): str(v) for k, v in (data.get("labels") or {}).items()},
            spread=_topology(data.get("spread"), f"{where}.spread"),
            max_skew=_count(data.get("maxSkew", 1), f"{where}.maxSkew"),
            anti_affinity=_topology(data.get("antiAffinity"), f"{where}.antiAffinity"),
            tolerations=tuple(dict(t) for t in data.get("tolerations") or ()),
            node_selector={str(k): str(v) for k, v in (data.get("nodeSelector") or {}).items()},
        )
        if (group.spread or group.anti_affinity) and not group.labels:
            raise ScenarioError(f"{where}: spread and antiAffinity select the group's labels")
        return group

    def manifest(self, index: int, namespace: str) -> dict[str, Any]:
        name = f"{self.prefix}-{index:05d}"
        spec: dict[str, Any] = {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {
                            "cpu": self.cpu[index % len(self.cpu)],
                            "memory": self.memory[index % len(self.memory)],
                        }
                    },
                }
            ],
            "terminationGracePeriodSeconds": 0,
        }
        selector = {"matchLabels": dict(self.labels)}
        if self.spread:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": self.max_skew,
                    "topologyKey": self.spread,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": selector,
                }
            ]
        if self.anti_affinity:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": self.anti_affinity, "labelSelector": selector}
                    ]
                }
            }
        if self.tolerations:
            spec["tolerations"] = [dict(t) for t in self.tolerations]
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(self.labels)},
            "spec": spec,
        }


@dataclass(frozen=True)
class Arrival:
    mode: str = "burst"
    """burst: as fast as `clients` threads can; rate: `rate` pods/s; sequential: one at a time,
    each created only once the previous one is bound."""
    rate: float = 0.0
    clients: int = 8

    @staticmethod
    def parse(raw: Any, where: str) -> Arrival:
        data = _check(raw or {}, {"mode", "rate", "clients"}, where)
        arrival = Arrival(
            mode=str(data.get("mode", "burst")),
            rate=float(data.get("rate", 0.0)),
            clients=_count(data.get("clients", 8), f"{where}.clients"),
        )
        if arrival.mode not in ("burst", "rate", "sequential"):
            raise ScenarioError(f"{where}.mode: must be burst, rate or sequential")
        if arrival.mode == "rate" and arrival.rate <= 0:
            raise ScenarioError(f"{where}.rate: must be positive for mode rate")
        if arrival.clients < 1:
            raise ScenarioError(f"{where}.clients: must be at least 1")
        return arrival


@dataclass(frozen=True)
class Client:
    """client-go rate limits, the same for every component's API client."""

    qps: float = 500.0
    burst: int = 1000


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: tuple[NodeGroup, ...]
    pods: tuple[PodGroup, ...]
    description: str = ""
    arrival: Arrival = Arrival()
    client: Client = Client()
    percentage_of_nodes_to_score: int | None = None
    deadline_seconds: float = 120.0
    parity: bool = False
    arms: tuple[str, ...] = DEFAULT_ARMS
    outage: Mapping[str, float] = field(default_factory=dict)
    """Arm F: {"after": fraction of pods created before the webhook stops, "for": seconds}."""
    profile: Mapping[str, Any] = field(default_factory=dict)
    """Extra fields of the one scheduling profile (plugins, pluginConfig), for every arm."""
    namespace: str = NAMESPACE
    kubelets: bool = False
    """Every node is a hollow kubelet (pods run) instead of a bare Node object."""

    @property
    def node_count(self) -> int:
        return sum(g.count for g in self.nodes)

    @property
    def pod_count(self) -> int:
        return sum(g.count for g in self.pods)

    def node_manifests(self) -> list[dict[str, Any]]:
        return [m for g in self.nodes for m in g.manifests()]

    def pod_manifests(self) -> list[dict[str, Any]]:
        """All pods, groups interleaved round-robin (weighted by count), in creation order."""
        out: list[dict[str, Any]] = []
        taken = [0] * len(self.pods)
        total = self.pod_count
        for _ in range(total):
            # the group furthest behind its share of the sequence goes next
            best = min(
                (i for i, g in enumerate(self.pods) if taken[i] < g.count),
                key=lambda i: ((taken[i] + 1) / self.pods[i].count, i),
            )
            out.append(self.pods[best].manifest(taken[best], self.namespace))
            taken[best] += 1
        return out

    def scheduler_config(self) -> dict[str, Any]:
        """The KubeSchedulerConfiguration every arm uses (kube-scheduler, webhook, extender)."""
        profile: dict[str, Any] = {"schedulerName": "default-scheduler", **self.profile}
        if self.percentage_of_nodes_to_score is not None:
            profile["percentageOfNodesToScore"] = self.percentage_of_nodes_to_score
        return {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [profile],
        }

    def policy_text(self, mode: str = "nodeName", extra: Mapping[str, Any] | None = None) -> str:
        """The webhook's / extender's policy file: the same profile plus the placement mode
        (and an arm's further PlacementPolicy fields)."""
        placement = {
            "apiVersion": "placement-webhook.io/v1alpha1",
            "kind": "PlacementPolicy",
            "mode": mode,
            **(extra or {}),
        }
        return yaml.safe_dump_all([self.scheduler_config(), placement], sort_keys=False)

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "nodes": self.node_count,
            "pods": self.pod_count,
            "arrival": {
                "mode": self.arrival.mode,
                "rate": self.arrival.rate,
                "clients": self.arrival.clients,
            },
            "client": {"qps": self.client.qps, "burst": self.client.burst},
            "percentageOfNodesToScore": self.percentage_of_nodes_to_score,
            "profile": dict(self.profile),
            "deadlineSeconds": self.deadline_seconds,
            "parity": self.parity,
            "arms": list(self.arms),
            "kubelets": self.kubelets,
        }


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    fields = {
        "name", "description", "nodes", "pods", "arrival", "client",
        "percentageOfNodesToScore", "deadlineSeconds", "parity", "arms", "outage", "profile",
        "kubelets",
    }  # fmt: skip
    raw = _check(data, fields, source)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{source}.name: required")
    nodes = tuple(
        NodeGroup.parse(g, f"{source}.nodes[{i}]")
        for i, g in enumerate(_list(raw, "nodes", source))
    )
    pods = tuple(
        PodGroup.parse(g, f"{source}.pods[{i}]") for i, g in enumerate(_list(raw, "pods", source))
    )
    client_raw = _check(raw.get("client") or {}, {"qps", "burst"}, f"{source}.client")
    arms = tuple(str(a) for a in raw.get("arms") or DEFAULT_ARMS)
    bad = [a for a in arms if a not in ARM_KEYS]
    if bad:
        raise ScenarioError(f"{source}.arms: unknown arm(s) {', '.join(bad)} (known: {ARM_KEYS})")
    pct = raw.get("percentageOfNodesToScore")
    if pct is not None and (not isinstance(pct, int) or not 0 <= pct <= 100):
        raise ScenarioError(f"{source}.percentageOfNodesToScore: must be 0..100")
    outage = _check(raw.get("outage") or {}, {"after", "for"}, f"{source}.outage")
    profile = _check(raw.get("profile") or {}, {"plugins", "pluginConfig"}, f"{source}.profile")
    scenario = Scenario(
        name=name,
        description=str(raw.get("description", "")).strip(),
        nodes=nodes,
        pods=pods,
        arrival=Arrival.parse(raw.get("arrival"), f"{source}.arrival"),
        client=Client(
            qps=float(client_raw.get("qps", 500.0)), burst=int(client_raw.get("burst", 1000))
        ),
        percentage_of_nodes_to_score=pct,
        deadline_seconds=float(raw.get("deadlineSeconds", 120.0)),
        parity=bool(raw.get("parity", False)),
        arms=arms,
        outage={str(k): float(v) for k, v in outage.items()},
        profile=dict(profile),
        kubelets=raw.get("kubelets", False),
    )
    if not isinstance(scenario.kubelets, bool):
        raise ScenarioError(f"{source}.kubelets: must be true or false")
    if scenario.kubelets:
        for i, group in enumerate(nodes):
            for key, value in (("cpu", group.cpu), ("cpuStep", group.cpu_step)):
                if quantity_milli(value) % 1000:
                    raise ScenarioError(
                        f"{source}.nodes[{i}].{key}: {value} is not whole cores, "
                        "which a hollow kubelet needs (kubelets: true)"
                    )
    for kind, groups in (("nodes", nodes), ("pods", pods)):
        prefixes = [g.prefix for g in groups]
        if len(set(prefixes)) != len(prefixes):
            raise ScenarioError(f"{source}.{kind}: every group needs its own prefix")
    if scenario.node_count == 0 or scenario.pod_count == 0:
        raise ScenarioError(f"{source}: needs at least one node and one pod")
    try:
        load_policy(scenario.policy_text(), source=f"{source} (policy)")
    except PolicyError as err:
        raise ScenarioError(str(err)) from None
    return scenario


def _list(raw: Mapping[str, Any], key: str, source: str) -> Sequence[Any]:
    value = raw.get(key)
    if not isinstance(value, list) or not value:
        raise ScenarioError(f"{source}.{key}: must be a non-empty list")
    return value


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ScenarioError(f"{path}: invalid YAML: {err}") from None
    return parse_scenario(data, str(path))
