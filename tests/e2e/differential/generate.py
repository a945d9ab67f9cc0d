"""Seeded random clusters and pods for the differential test. Pure: no cluster, no clock.

A `Case` is the whole input of one comparison: namespaces, Services and
controllers, nodes, pods already bound (`spec.nodeName`), and one pod to
schedule with one of the profiles in `policies.CONFIG`. Everything is a plain
manifest, so a case can be written to a file and replayed. The same seed
always gives the same case.

What is drawn (each where kube-scheduler and the policy must agree):
resources (cpu, memory, ephemeral-storage, an extended resource, max pods,
init containers and sidecars, RuntimeClass overhead), taints of every
effect and tolerations, node selectors and node affinity with every
operator (matchFields too), host ports, topology spread constraints with
every option, inter-pod affinity and anti-affinity both ways (the incoming
pod's terms and the existing pods'), images, and owners and Services (the
system default spreading). Unschedulable nodes too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.differential.policies import PROFILES, RUNTIME_CLASSES

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
HOSTNAME = "kubernetes.io/hostname"
GPU = "example.com/gpu"
CASE_LABEL = "differential.placement-webhook.io/case"
TERMINATING_ANNOTATION = "differential.placement-webhook.io/terminating"
APPS = ("web", "db", "cache")
IMAGES = ("registry.example/web:1", "registry.example/db:2", "registry.example/cache:3")
MB = 1024 * 1024

Obj = dict[str, Any]


@dataclass
class Case:
    """One comparison's input; `name` prefixes every object it creates."""

    name: str
    profile: str
    namespaces: list[Obj] = field(default_factory=list)
    workloads: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    pod: Obj = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "profile": self.profile,
            "namespaces": self.namespaces,
            "workloads": self.workloads,
            "nodes": self.nodes,
            "pods": self.pods,
            "pod": self.pod,
        }

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> Case:
        return Case(**{k: raw[k] for k in Case.__dataclass_fields__})


def _chance(rng: random.Random, p: float) -> bool:
    return rng.random() < p


# ------------------------------------------------------------------ nodes


def image_sizes(rng: random.Random) -> dict[str, int]:
    """One size per image for a whole case: an image name means the same bytes on every
    node (kube-scheduler keeps the size of the first node that reported a name)."""
    return {image: rng.choice([10, 60, 300, 800, 1500]) * MB for image in IMAGES}


def node(rng: random.Random, name: str, case: str, zones: int, sizes: dict[str, int]) -> Obj:
    labels = {HOSTNAME: name, CASE_LABEL: case, "kubernetes.io/os": "linux"}
    if _chance(rng, 0.9):
        labels[ZONE] = f"zone-{rng.randrange(zones)}"
    if _chance(rng, 0.6):
        labels[REGION] = rng.choice(["r1", "r2"])
    if _chance(rng, 0.5):
        labels["disk"] = rng.choice(["ssd", "hdd"])
    if _chance(rng, 0.6):
        labels["generation"] = str(rng.randint(1, 9))
    capacity = {
        "cpu": rng.choice(["1", "2", "2", "4", "4", "8", "1500m"]),
        "memory": rng.choice(["2Gi", "4Gi", "4Gi", "8Gi", "16Gi", "3Gi"]),
        "pods": str(rng.choice([110, 110, 110, 110, 3, 5])),
        "ephemeral-storage": rng.choice(["20Gi", "100Gi"]),
    }
    if _chance(rng, 0.3):
        capacity[GPU] = str(rng.randint(1, 4))
    taints = []
    if _chance(rng, 0.15):
        taints.append(
            {"key": "dedicated", "value": rng.choice(["gpu", "db"]), "effect": "NoSchedule"}
        )
    if _chance(rng, 0.2):
        taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
    if _chance(rng, 0.05):
        taints.append({"key": "maintenance", "effect": "NoExecute"})
    images = [
        {"names": [image, f"{image.split(':')[0]}@sha256:{i:064x}"], "sizeBytes": sizes[image]}
        for i, image in enumerate(IMAGES)
        if _chance(rng, 0.4)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints, "unschedulable": _chance(rng, 0.08)},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "differential test node (no kubelet)",
                }
            ],
            "images": images,
        },
    }


# ------------------------------------------------------------------ pod parts


def _requests(rng: random.Random, scale: float = 1.0) -> dict[str, str]:
    out = {}
    if _chance(rng, 0.85):
        out["cpu"] = f"{int(rng.choice([50, 100, 250, 500, 1000, 1500, 2000]) * scale)}m"
    if _chance(rng, 0.8):
        out["memory"] = f"{int(rng.choice([64, 128, 512, 1024, 2048, 3072]) * scale)}Mi"
    if _chance(rng, 0.12):
        out["ephemeral-storage"] = rng.choice(["1Gi", "5Gi", "30Gi"])
    return out


def _container(rng: random.Random, name: str, scale: float = 1.0, ports: bool = False) -> Obj:
    requests = _requests(rng, scale)
    resources: Obj = {"requests": requests} if requests else {}
    if _chance(rng, 0.1):
        count = str(rng.randint(1, 2))
        resources = {"requests": {**requests, GPU: count}, "limits": {GPU: count}}
    container: Obj = {"name": name, "image": rng.choice(IMAGES), "resources": resources}
    if ports and _chance(rng, 0.25):
        port = rng.choice([8080, 9090])
        entry: Obj = {
            "containerPort": port,
            "hostPort": port,
            "protocol": rng.choice(["TCP", "TCP", "UDP"]),
        }
        if _chance(rng, 0.3):
            entry["hostIP"] = rng.choice(["127.0.0.1", "10.0.0.1"])
        container["ports"] = [entry]
    return container


def _labels(rng: random.Random, app: str) -> dict[str, str]:
    labels = {"app": app}
    if _chance(rng, 0.5):
        labels["tier"] = rng.choice(["front", "back"])
    if _chance(rng, 0.4):
        labels["version"] = rng.choice(["v1", "v2"])
    return labels


def _selector(rng: random.Random) -> Obj:
    app = rng.choice(APPS)
    if _chance(rng, 0.7):
        return {"matchLabels": {"app": app}}
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
    expr: Obj = {"key": rng.choice(["app", "tier"]), "operator": op}
    if op in ("In", "NotIn"):
        expr["values"] = rng.sample([*APPS, "front", "back"], rng.randint(1, 2))
    return {"matchExpressions": [expr]}


def _node_requirement(rng: random.Random, node_names: list[str]) -> Obj:
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if op in ("Gt", "Lt"):
        return {"key": "generation", "operator": op, "values": [str(rng.randint(1, 8))]}
    key = rng.choice(["disk", ZONE, REGION, "generation"])
    values = {
        "disk": ["ssd", "hdd"],
        ZONE: ["zone-0", "zone-1", "zone-2"],
        REGION: ["r1", "r2"],
        "generation": ["1", "3", "5"],
    }[key]
    req: Obj = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        req["values"] = rng.sample(values, rng.randint(1, len(values)))
    return req


def _node_affinity(rng: random.Random, node_names: list[str]) -> Obj:
    out: Obj = {}
    if _chance(rng, 0.4):
        terms = []
        for _ in range(rng.randint(1, 2)):
            term: Obj = {
                "matchExpressions": [
                    _node_requirement(rng, node_names) for _ in range(rng.randint(1, 2))
                ]
            }
            if _chance(rng, 0.15):  # In and NotIn take exactly one node name here
                name = rng.choice([*node_names, "no-such-node"])
                op = rng.choice(["In", "In", "NotIn"])
                term = {"matchFields": [{"key": "metadata.name", "operator": op, "values": [name]}]}
            terms.append(term)
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if _chance(rng, 0.6):
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": rng.randint(1, 100),
                "preference": {"matchExpressions": [_node_requirement(rng, node_names)]},
            }
            for _ in range(rng.randint(1, 3))
        ]
    return out


def _affinity_term(rng: random.Random, other_namespace: str) -> Obj:
    term: Obj = {
        "labelSelector": _selector(rng),
        "topologyKey": rng.choice([HOSTNAME, ZONE, ZONE, REGION]),
    }
    roll = rng.random()
    if roll < 0.15:
        term["namespaces"] = [other_namespace]
    elif roll < 0.3:
        term["namespaceSelector"] = rng.choice([{}, {"matchLabels": {"team": "blue"}}])
    if _chance(rng, 0.1):
        term["matchLabelKeys"] = ["version"]
    return term


def _pod_affinity(rng: random.Random, other_namespace: str, incoming: bool) -> Obj:
    out: Obj = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        body: Obj = {}
        if _chance(rng, 0.15 if incoming else 0.1):
            body["requiredDuringSchedulingIgnoredDuringExecution"] = [
                _affinity_term(rng, other_namespace)
            ]
        if _chance(rng, 0.35 if incoming else 0.2):
            body["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {
                    "weight": rng.randint(1, 100),
                    "podAffinityTerm": _affinity_term(rng, other_namespace),
                }
                for _ in range(rng.randint(1, 2))
            ]
        if body:
            out[kind] = body
    return out


def _spread(rng: random.Random) -> list[Obj]:
    out = []
    keys = rng.sample([ZONE, HOSTNAME, REGION], rng.randint(1, 2))
    for key in keys:
        when = rng.choice(["DoNotSchedule", "ScheduleAnyway"])
        c: Obj = {
            "maxSkew": rng.randint(1, 3),
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": _selector(rng),
        }
        if when == "DoNotSchedule" and _chance(rng, 0.25):
            c["minDomains"] = rng.randint(1, 4)
        if _chance(rng, 0.25):
            c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
        if _chance(rng, 0.25):
            c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
        if _chance(rng, 0.15):
            c["matchLabelKeys"] = ["version"]
        out.append(c)
    return out


def _tolerations(rng: random.Random) -> list[Obj]:
    pool = [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists"},
        {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
        {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"},
        {"operator": "Exists"},
    ]
    weights = [3, 2, 3, 1, 0.3]
    return [t for t, w in zip(pool, weights, strict=True) if _chance(rng, 0.12 * w)]


def _owner(rng: random.Random, workloads: list[Obj]) -> list[Obj]:
    """An owner DefaultSelector follows, or one it does not (wrong group, other kind, gone)."""
    controllers = [w for w in workloads if w["kind"] != "Service"]
    roll = rng.random()
    if controllers and roll < 0.55:
        w = rng.choice(controllers)
        api, kind, name = w["apiVersion"], w["kind"], w["metadata"]["name"]
    elif roll < 0.65:
        api, kind, name = "apps/v1", "ReplicaSet", "missing-rs"
    elif roll < 0.72:
        api, kind, name = "apps/v1", "Deployment", "some-deployment"
    elif roll < 0.78 and controllers:
        api, kind, name = "extensions/v1beta1", "ReplicaSet", controllers[0]["metadata"]["name"]
    else:
        return []
    return [
        {
            "apiVersion": api,
            "kind": kind,
            "name": name,
            "controller": True,
            "uid": f"00000000-0000-4000-8000-{rng.randrange(16**12):012x}",
        }
    ]


def pod(
    rng: random.Random,
    name: str,
    namespace: str,
    other_namespace: str,
    node_names: list[str],
    workloads: list[Obj],
    *,
    node_name: str | None = None,
    profile: str | None = None,
) -> Obj:
    incoming = node_name is None
    app = rng.choice(APPS)
    scale = 1.0 if incoming else 0.4  # bound pods leave room more often than not
    spec: Obj = {
        "containers": [_container(rng, "main", scale, ports=True)],
        "terminationGracePeriodSeconds": 0,
    }
    if _chance(rng, 0.3):
        spec["containers"].append(_container(rng, "helper", scale / 2))
    if _chance(rng, 0.25):
        init = _container(rng, "init", scale * 1.5)
        if _chance(rng, 0.5):
            init["restartPolicy"] = "Always"  # a sidecar
        spec["initContainers"] = [init]
    if incoming and _chance(rng, 0.15):
        spec["runtimeClassName"] = rng.choice(sorted(RUNTIME_CLASSES))
    if _chance(rng, 0.3):
        spec["tolerations"] = _tolerations(rng)
    if incoming and _chance(rng, 0.12):
        spec["nodeSelector"] = {rng.choice(["disk", REGION]): rng.choice(["ssd", "r1"])}
    affinity: Obj = {}
    if incoming and _chance(rng, 0.4):
        affinity["nodeAffinity"] = _node_affinity(rng, node_names)
    if _chance(rng, 0.4 if incoming else 0.3):
        affinity.update(_pod_affinity(rng, other_namespace, incoming))
    if affinity:
        spec["affinity"] = affinity
    if incoming and _chance(rng, 0.35):
        spec["topologySpreadConstraints"] = _spread(rng)
    if node_name is not None:
        spec["nodeName"] = node_name
    if profile is not None:
        spec["schedulerName"] = profile
    meta: Obj = {"name": name, "namespace": namespace, "labels": _labels(rng, app)}
    owners = _owner(rng, workloads) if _chance(rng, 0.7) else []
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


# ------------------------------------------------------------------ workloads


def _template(labels: dict[str, str]) -> Obj:
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "c", "image": IMAGES[0]}]},
    }


def workloads(rng: random.Random, namespace: str) -> list[Obj]:
    """Services and controllers in `namespace` (replicas 0: no controller runs here)."""
    out: list[Obj] = []
    for i in range(rng.choice([0, 1, 1, 2])):
        selector = {"app": rng.choice(APPS)}
        if _chance(rng, 0.3):
            selector["tier"] = rng.choice(["front", "back"])
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": f"svc-{i}", "namespace": namespace},
                "spec": {"selector": selector, "ports": [{"port": 80}]},
            }
        )
    if _chance(rng, 0.15):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "headless", "namespace": namespace},
                "spec": {"clusterIP": "None", "ports": [{"port": 80}]},
            }
        )
    for i in range(rng.choice([0, 1, 1, 2])):
        app = rng.choice(APPS)
        labels = {"app": app}
        selector: Obj = {"matchLabels": {"app": app}}
        if _chance(rng, 0.3):
            labels["version"] = rng.choice(["v1", "v2"])
            selector["matchExpressions"] = [
                {"key": "version", "operator": "In", "values": [labels["version"]]}
            ]
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": f"{app}-rs{i}", "namespace": namespace},
                "spec": {"replicas": 0, "selector": selector, "template": _template(labels)},
            }
        )
    if _chance(rng, 0.3):
        app = rng.choice(APPS)
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": f"{app}-ss", "namespace": namespace},
                "spec": {
                    "replicas": 0,
                    "serviceName": "headless",
                    "selector": {"matchLabels": {"app": app}},
                    "template": _template({"app": app}),
                },
            }
        )
    if _chance(rng, 0.2):
        app = rng.choice(APPS)
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ReplicationController",
                "metadata": {"name": f"{app}-rc", "namespace": namespace},
                "spec": {
                    "replicas": 0,
                    "selector": {"app": app},
                    "template": _template({"app": app}),
                },
            }
        )
    return out


# ------------------------------------------------------------------ cases


def namespaces(rng: random.Random, name: str) -> list[Obj]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": f"{name}-{suffix}",
                "labels": {"team": rng.choice(["blue", "red"]), CASE_LABEL: name},
            },
        }
        for suffix in ("a", "b")
    ]


def small_case(seed: int, index: int) -> Case:
    """A cluster of 1 to 8 nodes, up to 12 bound pods, and one pod to schedule."""
    rng = random.Random(f"small-{seed}-{index}")
    name = f"c{index}"
    case = Case(name=name, profile=rng.choice(PROFILES))
    case.namespaces = namespaces(rng, name)
    ns_a, ns_b = (ns["metadata"]["name"] for ns in case.namespaces)
    case.workloads = workloads(rng, ns_a)
    zones = rng.randint(1, 3)
    sizes = image_sizes(rng)
    count = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 8])
    case.nodes = [node(rng, f"{name}-n{i}", name, zones, sizes) for i in range(count)]
    names = [n["metadata"]["name"] for n in case.nodes]
    for i in range(rng.randint(0, 12)):
        ns, other = (ns_a, ns_b) if _chance(rng, 0.75) else (ns_b, ns_a)
        case.pods.append(
            pod(rng, f"p{i}", ns, other, names, case.workloads, node_name=rng.choice(names))
        )
    case.pod = pod(rng, "target", ns_a, ns_b, names, case.workloads, profile=case.profile)
    mark_terminating(random.Random(f"terminating-{seed}-{index}"), case.pods)
    return case


def mark_terminating(rng: random.Random, pods: list[Obj], share: float = 0.15) -> None:
    """Mark about `share` of the bound pods to be deleted gracefully before the target
    comes: with no kubelet to confirm, they stay terminating, and both schedulers must
    count them (resources, ports, inter-pod affinity) except in topology spreading.
    A stream of its own, so the rest of every case stays as it was generated before."""
    for bound in pods:
        if _chance(rng, share):
            bound["metadata"].setdefault("annotations", {})[TERMINATING_ANNOTATION] = "true"


def big_cluster(seed: int, nodes: int, pods: int) -> Case:
    """A cluster over 100 nodes (percentageOfNodesToScore applies); no pod to schedule yet."""
    rng = random.Random(f"big-{seed}")
    name = "big"
    case = Case(name=name, profile="")
    case.namespaces = namespaces(rng, name)
    ns_a, ns_b = (ns["metadata"]["name"] for ns in case.namespaces)
    case.workloads = workloads(rng, ns_a)
    sizes = image_sizes(rng)
    case.nodes = [node(rng, f"{name}-n{i:03d}", name, 3, sizes) for i in range(nodes)]
    for n in case.nodes:  # roomy, mostly untainted nodes: most pods fit more than 100 of them
        n["spec"]["unschedulable"] = _chance(rng, 0.02)
        n["spec"]["taints"] = [t for t in n["spec"]["taints"] if t["effect"] == "PreferNoSchedule"]
        if _chance(rng, 0.03):
            n["spec"]["taints"].append({"key": "dedicated", "value": "db", "effect": "NoSchedule"})
        labels = n["metadata"]["labels"]
        labels.setdefault(ZONE, f"zone-{rng.randrange(3)}")
        labels.setdefault(REGION, rng.choice(["r1", "r2"]))
        n["status"]["capacity"].update(
            pods="110", cpu=rng.choice(["4", "8", "16"]), memory=rng.choice(["16Gi", "32Gi"])
        )
        n["status"]["allocatable"] = dict(n["status"]["capacity"])
    names = [n["metadata"]["name"] for n in case.nodes]
    for i in range(pods):
        ns, other = (ns_a, ns_b) if _chance(rng, 0.75) else (ns_b, ns_a)
        bound = pod(rng, f"p{i}", ns, other, names, case.workloads, node_name=rng.choice(names))
        # no required terms or host ports: one such pod would close a whole zone to many pods
        for kind in bound["spec"].get("affinity", {}).values():
            kind.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
        for container in bound["spec"]["containers"]:
            container.pop("ports", None)
        case.pods.append(bound)
    return case


def big_target(seed: int, cluster: Case, index: int, profile: str) -> Case:
    """One pod to schedule on the big cluster (a Case sharing its objects)."""
    rng = random.Random(f"big-{seed}-{index}")
    ns_a, ns_b = (ns["metadata"]["name"] for ns in cluster.namespaces)
    names = [n["metadata"]["name"] for n in cluster.nodes]
    target = pod(rng, f"target-{index}", ns_a, ns_b, names, cluster.workloads, profile=profile)
    return Case(
        name=f"{cluster.name}-{index}",
        profile=profile,
        namespaces=cluster.namespaces,
        workloads=cluster.workloads,
        nodes=cluster.nodes,
        pods=cluster.pods,
        pod=target,
    )
