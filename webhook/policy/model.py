"""Pods, nodes and the cluster snapshot the policy evaluates against.

Raw API objects (dicts, as decoded by orjson) are parsed exactly once into
compact frozen views (`PodView`, `NodeView`). The `ClusterSnapshot` keeps the
per-node state that plugins need as numpy arrays indexed by a node *slot*
(allocatable and requested matrices, label value codes per label key, taint
set ids, unschedulable flags) plus small Python indexes over pods (label
index, host ports, grouped inter-pod affinity terms). Every mutation is
incremental and idempotent, so the live cache can feed watch events straight
in; nothing is ever recomputed for the whole cluster on an event.

Accounting rules:

- a pod counts against its node when it is bound (`spec.nodeName`) and not
  terminal: Succeeded/Failed pods count for nothing (kube-scheduler's pod
  informer drops them). A terminating pod (deletionTimestamp) still counts
  for resources, ports and inter-pod affinity until it is deleted, as in
  kube-scheduler's NodeInfo and the kubelet's admission (it holds its room
  until its containers have stopped); only topology spreading skips it, as
  kube-scheduler's PodTopologySpread does;
- a pending pod this webhook pinned to one node (nodeAffinity mode: the
  selected-node annotation and a required `metadata.name` term naming only
  that node in every term) counts against that node too: it can land nowhere
  else, and every replica sees it, not just the one that pinned it;
- quantities are exact: cpu in millicores, everything else in units
  (bytes), both rounded up like resource.Quantity;
- tentative pods (`assume(key, ...)`) count exactly like bound pods until
  `forget(key)`. When that happens is the reservation ledger's business
  (webhook.cluster.ledger); the snapshot only counts.

Not thread-safe: the caller serialises access.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from webhook.policy.marks import RESERVATION, SELECTED_NODE, pinned_node
from webhook.policy.quantity import QuantityError, parse_quantity
from webhook.policy.selectors import (
    NOTHING,
    LabelRequirement,
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    parse_int64,
)
from webhook.policy.workloads import WORKLOAD_KINDS, ControllerRef, WorkloadSelectors

__all__ = [
    "RESERVATION_ANNOTATION",
    "SELECTED_NODE_ANNOTATION",
    "AffinityTerm",
    "ClusterSnapshot",
    "HostPort",
    "NodeView",
    "PodView",
    "QuantityError",
    "SpreadConstraint",
    "Taint",
    "Toleration",
    "WeightedAffinityTerm",
    "parse_quantity",
    "tolerates",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

RESERVATION_ANNOTATION: Final = RESERVATION
SELECTED_NODE_ANNOTATION: Final = SELECTED_NODE
CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL: Final = "ephemeral-storage"
PODS: Final = "pods"
# Non-zero defaults used for scoring pods that do not request cpu/memory
# (schedutil.DefaultMilliCPURequest / DefaultMemoryRequest).
DEFAULT_MILLI_CPU: Final = 100
DEFAULT_MEMORY: Final = 200 * 1024 * 1024
_NANO: Final = 10**9
_POD_LEVEL_RESOURCES: Final = (CPU, MEMORY)


def _nano(q: Any) -> int:
    """A quantity in integer nano-units (Quantity keeps at most 1n precision, rounding up)."""
    f = parse_quantity(q) * _NANO
    n = f.numerator // f.denominator
    return n if n == f else n + 1


def _to_units(resource: str, nano: int) -> int:
    """Quantity.MilliValue() for cpu, Quantity.Value() for everything else (ceil)."""
    div = 10**6 if resource == CPU else _NANO
    return -(-nano // div)


# --------------------------------------------------------------------- parts


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """v1.Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod (anti-)affinity term with its namespaces resolved (framework.AffinityTerm)."""

    namespaces: frozenset[str]
    namespace_selector: LabelSelector  # NOTHING when the field is nil
    selector: LabelSelector
    topology_key: str

    def matches(
        self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str]
    ) -> bool:
        if namespace in self.namespaces or self.namespace_selector.matches(ns_labels):
            return self.selector.matches(labels)
        return False


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"


# ------------------------------------------------------------------- PodView


@dataclass(frozen=True, slots=True)
class PodView:
    """Everything the policy needs from a pod, parsed once."""

    uid: str
    namespace: str
    name: str
    node_name: str | None
    scheduler_name: str
    labels: Mapping[str, str]
    requests: Mapping[str, int]
    """Effective requests (kube-scheduler's PodRequests): cpu in millicores,
    other resources in units; no "pods" entry. Zero entries are dropped."""
    nonzero_cpu: int
    nonzero_memory: int
    """cpu/memory with 100m/200Mi substituted for containers that request none (scoring)."""
    is_terminal: bool
    """Succeeded or Failed: counts against no node."""
    is_terminating: bool = False
    """Marked for deletion (deletionTimestamp) but not terminal yet: still counts
    where it is bound, except in topology spreading."""
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_affinity: NodeSelector | None = None
    preferred_node_affinity: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    images: tuple[str, ...] = ()
    num_containers: int = 0
    controller: ControllerRef | None = None
    """The controlling ownerReference (default spreading looks its selector up)."""
    reservation: str | None = None
    """The reservation key the pod carries (annotation placement-webhook.io/reservation)."""
    pinned_node: str | None = None
    """The node a pending pod was pinned to by this webhook (nodeAffinity mode)."""
    skip_reason: str | None = None

    @property
    def key(self) -> str:
        """namespace/name, the pod's identity before the API server assigns a uid."""
        return f"{self.namespace}/{self.name}"

    @property
    def counted_node(self) -> str | None:
        """The node this pod counts against while it is not terminal: bound, or pinned by us
        (a pinned pod being deleted will never be bound: it counts nowhere)."""
        if self.node_name:
            return self.node_name
        return None if self.is_terminating else self.pinned_node

    @property
    def has_pod_affinity(self) -> bool:
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )

    @staticmethod
    def from_dict(pod: Mapping[str, Any]) -> PodView:
        """Parse a v1 Pod. Raises ValueError on malformed quantities or selectors."""
        return _parse_pod(pod)


def _container_requests(c: Mapping[str, Any]) -> dict[str, int]:
    res = c.get("resources") or {}
    req = res.get("requests") or {}
    lim = res.get("limits") or {}
    out = {str(k): _nano(v) for k, v in req.items()}
    for k, v in lim.items():  # API defaulting: requests default to limits
        if k not in out:
            out[str(k)] = _nano(v)
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0) or k not in into:
            into[k] = v


_NONZERO_NANO: Final = {CPU: DEFAULT_MILLI_CPU * 10**6, MEMORY: DEFAULT_MEMORY * _NANO}


def _with_nonmissing(r: dict[str, int]) -> dict[str, int]:
    if CPU in r and MEMORY in r:
        return r
    out = dict(r)
    for k, v in _NONZERO_NANO.items():
        out.setdefault(k, v)
    return out


def _status_requests(pod: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Per-container requests from status (in-place resize): max of actual and allocated."""
    out: dict[str, dict[str, int]] = {}
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        merged: dict[str, int] = {}
        res = (cs.get("resources") or {}).get("requests") or {}
        _max(merged, {str(k): _nano(v) for k, v in res.items()})
        alloc = cs.get("allocatedResources") or {}
        _max(merged, {str(k): _nano(v) for k, v in alloc.items()})
        if merged:
            out[str(cs.get("name"))] = merged
    return out


def pod_requests(pod: Mapping[str, Any], non_missing: bool) -> dict[str, int]:
    """resourcehelper.PodRequests in nano-units (sidecar rules, pod-level resources, overhead)."""
    spec = pod.get("spec") or {}
    status_reqs = _status_requests(pod) if pod.get("status") else {}
    reqs: dict[str, int] = {}
    for c in spec.get("containers") or ():
        r = _container_requests(c)
        sr = status_reqs.get(str(c.get("name")))
        if sr:
            r = dict(r)
            _max(r, sr)
        if non_missing:
            r = _with_nonmissing(r)
        _add(reqs, r)
    restartable: dict[str, int] = {}
    init: dict[str, int] = {}
    for c in spec.get("initContainers") or ():
        r = _container_requests(c)
        if non_missing:
            r = _with_nonmissing(r)
        if c.get("restartPolicy") == "Always":
            _add(reqs, r)
            _add(restartable, r)
            r = dict(restartable)
        else:
            tmp = dict(r)
            _add(tmp, restartable)
            r = tmp
        _max(init, r)
    _max(reqs, init)
    pod_level = ((spec.get("resources") or {}).get("requests")) or {}
    for k, v in pod_level.items():
        if k in _POD_LEVEL_RESOURCES or str(k).startswith("hugepages-"):
            reqs[str(k)] = _nano(v)
    _add(reqs, {str(k): _nano(v) for k, v in (spec.get("overhead") or {}).items()})
    return reqs


def _affinity_term(
    raw: Mapping[str, Any], namespace: str, labels: Mapping[str, str]
) -> AffinityTerm:
    """framework.AffinityTerm: namespaces default to the pod's own when neither
    `namespaces` nor `namespaceSelector` is set; matchLabelKeys and
    mismatchLabelKeys are merged from the pod's labels, as the API server does
    when it persists the pod (idempotent for pods that already went through it)."""
    namespaces = frozenset(str(n) for n in raw.get("namespaces") or ())
    ns_sel_raw = raw.get("namespaceSelector")
    if not namespaces and ns_sel_raw is None:
        namespaces = frozenset((namespace,))
    ns_sel = LabelSelector.parse(ns_sel_raw) if ns_sel_raw is not None else NOTHING
    selector = LabelSelector.parse(raw.get("labelSelector"))
    if not selector.nothing:
        extra_in = {k: labels[k] for k in raw.get("matchLabelKeys") or () if k in labels}
        selector = selector.with_labels(extra_in)
        mismatch = sorted(k for k in raw.get("mismatchLabelKeys") or () if k in labels)
        if mismatch:
            reqs = list(selector.requirements)
            reqs.extend(LabelRequirement(k, "NotIn", frozenset((labels[k],))) for k in mismatch)
            selector = LabelSelector(tuple(reqs))
    return AffinityTerm(namespaces, ns_sel, selector, str(raw.get("topologyKey", "")))


def _terms(raw: Any, namespace: str, labels: Mapping[str, str]) -> tuple[AffinityTerm, ...]:
    return tuple(_affinity_term(t, namespace, labels) for t in raw or ())


def _weighted(
    raw: Any, namespace: str, labels: Mapping[str, str]
) -> tuple[WeightedAffinityTerm, ...]:
    return tuple(
        WeightedAffinityTerm(
            _affinity_term(w.get("podAffinityTerm") or {}, namespace, labels),
            int(w.get("weight", 0)),
        )
        for w in raw or ()
    )


def normalized_image_name(name: str) -> str:
    """kube-scheduler's ImageLocality normalisation: add ':latest' when untagged."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


_SKIP_VOLUMES: Final = {
    "persistentVolumeClaim": "PersistentVolumeClaim volumes (volume binding and zone checks)",
    "ephemeral": "generic ephemeral volumes (volume binding)",
    "csi": "CSI inline volumes (node volume limits)",
    "gcePersistentDisk": "gcePersistentDisk volumes (volume restrictions and limits)",
    "awsElasticBlockStore": "awsElasticBlockStore volumes (volume restrictions and limits)",
    "azureDisk": "azureDisk volumes (volume limits)",
    "cinder": "cinder volumes (volume limits)",
    "rbd": "rbd volumes (volume restrictions)",
    "iscsi": "iscsi volumes (volume restrictions)",
}


def _skip_reason(spec: Mapping[str, Any]) -> str | None:
    gates = spec.get("schedulingGates")
    if gates:
        names = ", ".join(str(g.get("name")) for g in gates)
        return f"pod has scheduling gates ({names}); the scheduler waits for them to be removed"
    if spec.get("resourceClaims"):
        return "pod uses DRA resourceClaims, which the placement policy does not model"
    for vol in spec.get("volumes") or ():
        for kind, what in _SKIP_VOLUMES.items():
            if vol.get(kind) is not None:
                return f"pod uses {what}, which the placement policy does not model"
    return None


def _parse_pod(pod: Mapping[str, Any]) -> PodView:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    namespace = str(meta.get("namespace") or "default")
    labels: Mapping[str, str] = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = meta.get("annotations") or {}

    reqs_nano = pod_requests(pod, non_missing=False)
    requests = {k: _to_units(k, v) for k, v in reqs_nano.items()}
    requests = {k: v for k, v in requests.items() if v}
    all_set = not spec.get("initContainers") and all(
        CPU in (r := _container_requests(c)) and MEMORY in r for c in spec.get("containers") or ()
    )
    if all_set:
        nz_cpu, nz_mem = requests.get(CPU, 0), requests.get(MEMORY, 0)
    else:
        nz = pod_requests(pod, non_missing=True)
        nz_cpu, nz_mem = _to_units(CPU, nz.get(CPU, 0)), _to_units(MEMORY, nz.get(MEMORY, 0))

    phase = status.get("phase")
    terminal = phase in ("Succeeded", "Failed")

    tolerations = tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or ""),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in spec.get("tolerations") or ()
    )

    affinity = spec.get("affinity") or {}
    node_aff = affinity.get("nodeAffinity") or {}
    req_na_raw = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    required_na = NodeSelector.parse(req_na_raw) if req_na_raw is not None else None
    preferred_na = tuple(
        (int(p.get("weight", 0)), NodeSelectorTerm.parse(p.get("preference") or {}))
        for p in node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    )
    pa = affinity.get("podAffinity") or {}
    paa = affinity.get("podAntiAffinity") or {}

    spreads = []
    for c in spec.get("topologySpreadConstraints") or ():
        sel = LabelSelector.parse(c.get("labelSelector"))
        keys = c.get("matchLabelKeys") or ()
        extra = {k: labels[k] for k in keys if k in labels}
        if extra and not sel.nothing:
            sel = sel.with_labels(extra)
        spreads.append(
            SpreadConstraint(
                max_skew=int(c.get("maxSkew", 1)),
                topology_key=str(c.get("topologyKey", "")),
                when_unsatisfiable=str(c.get("whenUnsatisfiable", "DoNotSchedule")),
                selector=sel,
                min_domains=int(c.get("minDomains") or 1),
                node_affinity_policy=str(c.get("nodeAffinityPolicy") or "Honor"),
                node_taints_policy=str(c.get("nodeTaintsPolicy") or "Ignore"),
            )
        )

    ports = []
    images = []
    for c in spec.get("containers") or ():
        for p in c.get("ports") or ():
            hp = int(p.get("hostPort") or 0)
            if hp > 0:
                ports.append(
                    HostPort(str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), hp)
                )
    for c in spec.get("initContainers") or ():
        if c.get("image"):
            images.append(normalized_image_name(str(c["image"])))
    for c in spec.get("containers") or ():
        if c.get("image"):
            images.append(normalized_image_name(str(c["image"])))
    n_containers = len(spec.get("initContainers") or ()) + len(spec.get("containers") or ())

    return PodView(
        uid=str(meta.get("uid") or ""),
        namespace=namespace,
        name=str(meta.get("name") or meta.get("generateName") or ""),
        node_name=str(spec["nodeName"]) if spec.get("nodeName") else None,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        labels=labels,
        requests=requests,
        nonzero_cpu=nz_cpu,
        nonzero_memory=nz_mem,
        is_terminal=terminal,
        is_terminating=meta.get("deletionTimestamp") is not None and not terminal,
        tolerations=tolerations,
        node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
        required_node_affinity=required_na,
        preferred_node_affinity=preferred_na,
        required_affinity=_terms(
            pa.get("requiredDuringSchedulingIgnoredDuringExecution"), namespace, labels
        ),
        required_anti_affinity=_terms(
            paa.get("requiredDuringSchedulingIgnoredDuringExecution"), namespace, labels
        ),
        preferred_affinity=_weighted(
            pa.get("preferredDuringSchedulingIgnoredDuringExecution"), namespace, labels
        ),
        preferred_anti_affinity=_weighted(
            paa.get("preferredDuringSchedulingIgnoredDuringExecution"), namespace, labels
        ),
        spread_constraints=tuple(spreads),
        host_ports=tuple(ports),
        images=tuple(images),
        num_containers=n_containers,
        controller=ControllerRef.of(meta),
        reservation=str(annotations[RESERVATION_ANNOTATION])
        if RESERVATION_ANNOTATION in annotations
        else None,
        pinned_node=None if spec.get("nodeName") else pinned_node(pod),
        skip_reason=_skip_reason(spec),
    )


# ------------------------------------------------------------------ NodeView


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: Mapping[str, int]
    images: tuple[tuple[tuple[str, ...], int], ...]

    @staticmethod
    def from_dict(node: Mapping[str, Any]) -> NodeView:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        alloc_raw = status.get("allocatable")
        if alloc_raw is None:  # API defaulting: allocatable defaults to capacity
            alloc_raw = status.get("capacity") or {}
        allocatable = {str(k): _to_units(str(k), _nano(v)) for k, v in alloc_raw.items()}
        taints = tuple(
            Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
            for t in spec.get("taints") or ()
        )
        images = tuple(
            (tuple(str(n) for n in img.get("names") or ()), int(img.get("sizeBytes") or 0))
            for img in status.get("images") or ()
        )
        return NodeView(
            name=str(meta.get("name") or ""),
            labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            taints=taints,
            unschedulable=bool(spec.get("unschedulable")),
            allocatable=allocatable,
            images=images,
        )


# ------------------------------------------------------------------ snapshot


def _name_hash(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


_BASE_RESOURCES: Final = (CPU, MEMORY, EPHEMERAL, PODS)
_RES_PREFIX: Final = "\x00reservation/"


class LabelColumn:
    """One node label key: a value code per node slot (-1 = label absent)."""

    __slots__ = ("_nums", "codes", "index", "values")

    def __init__(self, cap: int) -> None:
        self.codes: npt.NDArray[np.int32] = np.full(cap, -1, dtype=np.int32)
        self.index: dict[str, int] = {}
        self.values: list[str] = []
        self._nums: tuple[int, npt.NDArray[np.int64], BoolArray] | None = None

    def code(self, value: str) -> int:
        c = self.index.get(value)
        if c is None:
            c = len(self.values)
            self.index[value] = c
            self.values.append(value)
        return c

    def numbers(self) -> tuple[npt.NDArray[np.int64], BoolArray]:
        """Per value code: the int64 value and whether it parsed (for Gt/Lt)."""
        if self._nums is None or self._nums[0] != len(self.values):
            parsed = [parse_int64(v) for v in self.values]
            nums = np.array([p if p is not None else 0 for p in parsed], dtype=np.int64)
            ok = np.array([p is not None for p in parsed], dtype=np.bool_)
            self._nums = (len(self.values), nums, ok)
        return self._nums[1], self._nums[2]


class ClusterSnapshot:
    """Nodes, pods, namespaces and tentative pods, with incremental indexes."""

    def __init__(self) -> None:
        self.version = 0
        # nodes
        self._cap = 0
        self._node_slot: dict[str, int] = {}
        self._nodes: list[NodeView | None] = []
        self._free: list[int] = []
        self._res_col: dict[str, int] = {r: i for i, r in enumerate(_BASE_RESOURCES)}
        self.alive: BoolArray = np.zeros(0, dtype=np.bool_)
        self.allocatable: IntArray = np.zeros((0, len(_BASE_RESOURCES)), dtype=np.int64)
        self.requested: IntArray = np.zeros((0, len(_BASE_RESOURCES)), dtype=np.int64)
        self.nonzero_requested: IntArray = np.zeros((0, 2), dtype=np.int64)
        self.unschedulable: BoolArray = np.zeros(0, dtype=np.bool_)
        self.taint_set: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.name_hash: npt.NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_set_index: dict[tuple[Taint, ...], int] = {(): 0}
        self.label_columns: dict[str, LabelColumn] = {}
        self._sorted: npt.NDArray[np.int64] | None = None
        self._node_names_sorted: list[str] | None = None
        # pods (all known pods, by uid) and counted entries (by entry key)
        self._pods: dict[str, PodView] = {}
        self._entries: dict[str, tuple[PodView, str, int]] = {}  # key -> (pod, node, pslot)
        self._by_node: dict[str, dict[str, PodView]] = {}
        self._pcap = 0
        self._pfree: list[int] = []
        self.pod_node: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.pod_ns: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.pod_views: list[PodView | None] = []
        self._pod_entry_node: list[str] = []
        self._label_index: dict[str, dict[str, set[int]]] = {}
        self._key_index: dict[str, set[int]] = {}
        self._ns_index: dict[int, set[int]] = {}
        self._all_pslots: set[int] = set()
        self._terminating_pslots: set[int] = set()
        # host ports: node -> Counter(HostPort); (protocol, port) -> Counter(node)
        self._node_ports: dict[str, Counter[HostPort]] = {}
        self._port_nodes: dict[tuple[str, int], Counter[str]] = {}
        # images: name -> {node: size}
        self._image_nodes: dict[str, dict[str, int]] = {}
        # grouped affinity terms of counted pods: kind -> term -> Counter(node)
        self.term_groups: dict[str, dict[Any, Counter[str]]] = {
            "req_aff": {},
            "req_anti": {},
            "pref_aff": {},
            "pref_anti": {},
        }
        # namespaces
        self._ns_ids: dict[str, int] = {}
        self._ns_names: list[str] = []
        self._ns_labels: dict[str, Mapping[str, str]] = {}
        self._image_cache: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
        # Service and controller selectors (default spreading)
        self.workloads = WorkloadSelectors()

    # ------------------------------------------------------------ builders

    @classmethod
    def from_objects(
        cls,
        nodes: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]],
        namespaces: Iterable[Mapping[str, Any]] = (),
    ) -> ClusterSnapshot:
        snap = cls()
        for ns in namespaces:
            snap.upsert_namespace(ns)
        for n in nodes:
            snap.upsert_node(n)
        for p in pods:
            snap.upsert_pod(p)
        return snap

    @classmethod
    def from_list(cls, doc: Mapping[str, Any]) -> ClusterSnapshot:
        """From a `kubectl get nodes,pods[,namespaces,services,replicasets,...] -A -o json` List."""
        items = doc.get("items")
        if not isinstance(items, list):
            raise ValueError("snapshot must be a v1 List with an 'items' array")
        nodes, pods, nss, workloads = [], [], [], []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ValueError(f"items[{i}] is not an object")
            kind = item.get("kind")
            if kind == "Node":
                nodes.append(item)
            elif kind == "Pod":
                pods.append(item)
            elif kind == "Namespace":
                nss.append(item)
            elif kind in WORKLOAD_KINDS:
                workloads.append(item)
        snap = cls.from_objects(nodes, pods, nss)
        for item in workloads:
            snap.workloads.upsert(str(item["kind"]), item)
        return snap

    # ------------------------------------------------------------ queries

    def __len__(self) -> int:
        return len(self._node_slot)

    def node_names(self) -> list[str]:
        """Node names, sorted."""
        if self._node_names_sorted is None:
            self._node_names_sorted = sorted(self._node_slot)
        return list(self._node_names_sorted)

    def node(self, name: str) -> NodeView | None:
        slot = self._node_slot.get(name)
        return None if slot is None else self._nodes[slot]

    def node_at(self, slot: int) -> NodeView:
        n = self._nodes[slot]
        assert n is not None
        return n

    def slot_of(self, name: str) -> int | None:
        return self._node_slot.get(name)

    def name_at(self, slot: int) -> str:
        return self.node_at(slot).name

    def names_at(self, slots: Iterable[int]) -> list[str]:
        """Names of many slots at once (the hot path: every feasible node, every decision)."""
        nodes = self._nodes
        return [nodes[s].name for s in slots]  # type: ignore[union-attr]

    def sorted_slots(self) -> npt.NDArray[np.int64]:
        """Alive node slots in node-name order (the deterministic scan order)."""
        if self._sorted is None:
            names = sorted(self._node_slot)
            self._sorted = np.array([self._node_slot[n] for n in names], dtype=np.int64)
        return self._sorted

    def pods_on(self, node_name: str) -> list[PodView]:
        """Pods counted against the node, reservations included."""
        return list(self._by_node.get(node_name, {}).values())

    def pod(self, uid: str) -> PodView | None:
        return self._pods.get(uid)

    def pods(self) -> Iterator[PodView]:
        return iter(self._pods.values())

    def tentative(self, key: str) -> tuple[PodView, str] | None:
        """The pod counted under `assume(key, ...)` and its node, or None."""
        entry = self._entries.get(_RES_PREFIX + key)
        return None if entry is None else (entry[0], entry[1])

    def total_allocatable(self, resource: str) -> int:
        """Allocatable `resource` summed over every node (0 when no node has it)."""
        col = self._res_col.get(resource)
        if col is None or not len(self.alive):
            return 0
        return int(self.allocatable[self.alive, col].sum())

    def resource_column(self, name: str) -> int | None:
        return self._res_col.get(name)

    @property
    def resource_names(self) -> list[str]:
        return list(self._res_col)

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        """Labels of a namespace; unknown namespaces get the automatic name label."""
        labels = self._ns_labels.get(name)
        if labels is None:
            return {"kubernetes.io/metadata.name": name}
        return labels

    def namespace_id(self, name: str) -> int:
        i = self._ns_ids.get(name)
        if i is None:
            i = len(self._ns_names)
            self._ns_ids[name] = i
            self._ns_names.append(name)
        return i

    def namespace_ids_matching(self, term: AffinityTerm) -> npt.NDArray[np.int32] | None:
        """Namespace ids a term covers; None means every namespace."""
        if term.namespace_selector.empty:
            return None
        ids = {self.namespace_id(n) for n in term.namespaces}
        if not term.namespace_selector.nothing:
            for name in list(self._ns_names):
                if term.namespace_selector.matches(self.namespace_labels(name)):
                    ids.add(self._ns_ids[name])
        return np.fromiter(sorted(ids), dtype=np.int32, count=len(ids))

    def label_codes(self, key: str) -> npt.NDArray[np.int32] | None:
        col = self.label_columns.get(key)
        return None if col is None else col.codes

    def image_nodes(self, image: str) -> Mapping[str, int]:
        return self._image_nodes.get(image, {})

    def image_slots(self, image: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(node slots, image sizes) of the nodes holding `image`; cached until nodes change."""
        hit = self._image_cache.get(image)
        if hit is None:
            holders = self._image_nodes.get(image, {})
            slots = [self._node_slot[n] for n in holders if n in self._node_slot]
            sizes = [s for n, s in holders.items() if n in self._node_slot]
            hit = (np.array(slots, dtype=np.int64), np.array(sizes, dtype=np.int64))
            if len(self._image_cache) > 4096:
                self._image_cache.clear()
            self._image_cache[image] = hit
        return hit

    def port_users(self, protocol: str, port: int) -> Mapping[str, int]:
        return self._port_nodes.get((protocol, port), {})

    def node_ports(self, node_name: str) -> Mapping[HostPort, int]:
        return self._node_ports.get(node_name, {})

    def match_pods(
        self,
        selector: LabelSelector,
        namespaces: npt.NDArray[np.int32] | None,
        *,
        terminating: bool = True,
    ) -> npt.NDArray[np.int64]:
        """Pod slots of counted pods matching `selector` in `namespaces` (None = all);
        `terminating=False` leaves out pods being deleted (topology spreading does)."""
        if selector.nothing:
            return np.zeros(0, dtype=np.int64)
        positive: list[set[int]] = []
        negative: list[set[int]] = []
        for r in selector.requirements:
            if r.op == "In":
                vals = self._label_index.get(r.key, {})
                if len(r.values) == 1:
                    (v,) = r.values
                    positive.append(vals.get(v, set()))
                else:
                    positive.append(set().union(*(vals.get(v, set()) for v in r.values)))
            elif r.op == "Exists":
                positive.append(self._key_index.get(r.key, set()))
            elif r.op == "NotIn":
                vals = self._label_index.get(r.key, {})
                negative.append(set().union(*(vals.get(v, set()) for v in r.values)))
            else:
                negative.append(self._key_index.get(r.key, set()))
        if positive:
            positive.sort(key=len)
            result = set(positive[0])
            for s in positive[1:]:
                result &= s
                if not result:
                    break
        elif namespaces is not None:
            result = set()
            for ns in namespaces.tolist():
                result |= self._ns_index.get(ns, set())
        else:
            result = set(self._all_pslots)
        for s in negative:
            if result:
                result -= s
        if not terminating and self._terminating_pslots and result:
            result -= self._terminating_pslots
        arr = np.fromiter(result, dtype=np.int64, count=len(result))
        if namespaces is not None and len(arr):
            arr = arr[np.isin(self.pod_ns[arr], namespaces)]
        return arr

    # ------------------------------------------------------------ namespaces

    def upsert_namespace(self, ns: Mapping[str, Any]) -> None:
        meta = ns.get("metadata") or {}
        name = str(meta.get("name") or "")
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        labels.setdefault("kubernetes.io/metadata.name", name)
        self.namespace_id(name)
        if self._ns_labels.get(name) != labels:
            self._ns_labels[name] = labels
            self.version += 1

    def remove_namespace(self, name: str) -> None:
        if self._ns_labels.pop(name, None) is not None:
            self.version += 1

    # ------------------------------------------------------------ nodes

    def _grow_nodes(self) -> None:
        new = max(16, self._cap * 2)
        extra = new - self._cap
        self.alive = np.concatenate([self.alive, np.zeros(extra, dtype=np.bool_)])
        r = self.allocatable.shape[1]
        self.allocatable = np.concatenate([self.allocatable, np.zeros((extra, r), dtype=np.int64)])
        self.requested = np.concatenate([self.requested, np.zeros((extra, r), dtype=np.int64)])
        self.nonzero_requested = np.concatenate(
            [self.nonzero_requested, np.zeros((extra, 2), dtype=np.int64)]
        )
        self.unschedulable = np.concatenate([self.unschedulable, np.zeros(extra, dtype=np.bool_)])
        self.taint_set = np.concatenate([self.taint_set, np.zeros(extra, dtype=np.int32)])
        self.name_hash = np.concatenate([self.name_hash, np.zeros(extra, dtype=np.uint64)])
        for col in self.label_columns.values():
            col.codes = np.concatenate([col.codes, np.full(extra, -1, dtype=np.int32)])
        self._nodes.extend([None] * extra)
        self._free.extend(range(new - 1, self._cap - 1, -1))
        self._cap = new

    def _res_index(self, name: str) -> int:
        col = self._res_col.get(name)
        if col is None:
            col = len(self._res_col)
            self._res_col[name] = col
            zeros = np.zeros((self._cap, 1), dtype=np.int64)
            self.allocatable = np.hstack([self.allocatable, zeros])
            self.requested = np.hstack([self.requested, zeros.copy()])
        return col

    def _column(self, key: str) -> LabelColumn:
        col = self.label_columns.get(key)
        if col is None:
            col = LabelColumn(self._cap)
            self.label_columns[key] = col
        return col

    def upsert_node(self, node: Mapping[str, Any] | NodeView) -> None:
        view = node if isinstance(node, NodeView) else NodeView.from_dict(node)
        slot = self._node_slot.get(view.name)
        if slot is not None:
            old = self._nodes[slot]
            if old == view:
                return
            assert old is not None
            self._clear_node_static(slot, old)
        else:
            if not self._free:
                self._grow_nodes()
            slot = self._free.pop()
            self._node_slot[view.name] = slot
            self._sorted = None
            self._node_names_sorted = None
            self.alive[slot] = True
            self.name_hash[slot] = _name_hash(view.name)
            self.requested[slot] = 0
            self.nonzero_requested[slot] = 0
            for pv in self._by_node.get(view.name, {}).values():
                self._apply_requests(slot, pv, 1)
            for ek in self._entry_keys_on(view.name):
                self.pod_node[self._entries[ek][2]] = slot
        self._nodes[slot] = view
        for res_name, amount in view.allocatable.items():
            col_i = self._res_index(res_name)  # may widen the matrices: index afterwards
            self.allocatable[slot, col_i] = amount
        for key, value in view.labels.items():
            col = self._column(key)
            col.codes[slot] = col.code(value)
        self.unschedulable[slot] = view.unschedulable
        ts = self._taint_set_index.get(view.taints)
        if ts is None:
            ts = len(self.taint_sets)
            self.taint_sets.append(view.taints)
            self._taint_set_index[view.taints] = ts
        self.taint_set[slot] = ts
        for names, size in view.images:
            for n in names:
                self._image_nodes.setdefault(n, {})[view.name] = size
        self._image_cache.clear()
        self.version += 1

    def _entry_keys_on(self, node_name: str) -> list[str]:
        return list(self._by_node.get(node_name, ()))

    def _clear_node_static(self, slot: int, old: NodeView) -> None:
        for k in old.labels:
            self.label_columns[k].codes[slot] = -1
        self.allocatable[slot] = 0
        for names, _ in old.images:
            for n in names:
                m = self._image_nodes.get(n)
                if m is not None:
                    m.pop(old.name, None)
                    if not m:
                        del self._image_nodes[n]

    def remove_node(self, name: str) -> None:
        slot = self._node_slot.pop(name, None)
        if slot is None:
            return
        old = self._nodes[slot]
        assert old is not None
        self._clear_node_static(slot, old)
        for ek in self._entry_keys_on(name):
            self.pod_node[self._entries[ek][2]] = -1
        self._nodes[slot] = None
        self.alive[slot] = False
        self.requested[slot] = 0
        self.nonzero_requested[slot] = 0
        self.unschedulable[slot] = False
        self.taint_set[slot] = 0
        self._free.append(slot)
        self._image_cache.clear()
        self._sorted = None
        self._node_names_sorted = None
        self.version += 1

    # ------------------------------------------------------------ pods

    def _apply_requests(self, slot: int, pv: PodView, sign: int) -> None:
        row = self.requested[slot]
        for k, v in pv.requests.items():
            col = self._res_col.get(k)
            if col is None:
                col = self._res_index(k)
                row = self.requested[slot]
            row[col] += sign * v
        row[3] += sign
        nz = self.nonzero_requested[slot]
        nz[0] += sign * pv.nonzero_cpu
        nz[1] += sign * pv.nonzero_memory

    def _grow_pods(self) -> None:
        new = max(64, self._pcap * 2)
        extra = new - self._pcap
        self.pod_node = np.concatenate([self.pod_node, np.full(extra, -1, dtype=np.int32)])
        self.pod_ns = np.concatenate([self.pod_ns, np.full(extra, -1, dtype=np.int32)])
        self.pod_views.extend([None] * extra)
        self._pfree.extend(range(new - 1, self._pcap - 1, -1))
        self._pcap = new

    def _count(self, ek: str, pv: PodView, node_name: str) -> None:
        if not self._pfree:
            self._grow_pods()
        pslot = self._pfree.pop()
        self._entries[ek] = (pv, node_name, pslot)
        self._by_node.setdefault(node_name, {})[ek] = pv
        slot = self._node_slot.get(node_name)
        self.pod_node[pslot] = -1 if slot is None else slot
        ns = self.namespace_id(pv.namespace)
        self.pod_ns[pslot] = ns
        self.pod_views[pslot] = pv
        self._all_pslots.add(pslot)
        if pv.is_terminating:
            self._terminating_pslots.add(pslot)
        self._ns_index.setdefault(ns, set()).add(pslot)
        for k, v in pv.labels.items():
            self._label_index.setdefault(k, {}).setdefault(v, set()).add(pslot)
            self._key_index.setdefault(k, set()).add(pslot)
        if slot is not None:
            self._apply_requests(slot, pv, 1)
        if pv.host_ports:
            np_ = self._node_ports.setdefault(node_name, Counter())
            for hp in pv.host_ports:
                np_[hp] += 1
                self._port_nodes.setdefault((hp.protocol, hp.port), Counter())[node_name] += 1
        if pv.has_pod_affinity:
            self._terms_update(pv, node_name, 1)
        self.version += 1

    def _uncount(self, ek: str) -> None:
        entry = self._entries.pop(ek, None)
        if entry is None:
            return
        pv, node_name, pslot = entry
        on = self._by_node.get(node_name)
        if on is not None:
            on.pop(ek, None)
            if not on:
                del self._by_node[node_name]
        slot = self._node_slot.get(node_name)
        if slot is not None:
            self._apply_requests(slot, pv, -1)
        ns = int(self.pod_ns[pslot])
        self._all_pslots.discard(pslot)
        self._terminating_pslots.discard(pslot)
        s = self._ns_index.get(ns)
        if s is not None:
            s.discard(pslot)
        for k, v in pv.labels.items():
            vals = self._label_index.get(k)
            if vals is not None:
                sv = vals.get(v)
                if sv is not None:
                    sv.discard(pslot)
                    if not sv:
                        del vals[v]
                if not vals:
                    del self._label_index[k]
            ks = self._key_index.get(k)
            if ks is not None:
                ks.discard(pslot)
                if not ks:
                    del self._key_index[k]
        if pv.host_ports:
            np_ = self._node_ports.get(node_name)
            for hp in pv.host_ports:
                if np_ is not None:
                    np_[hp] -= 1
                    if np_[hp] <= 0:
                        del np_[hp]
                users = self._port_nodes.get((hp.protocol, hp.port))
                if users is not None:
                    users[node_name] -= 1
                    if users[node_name] <= 0:
                        del users[node_name]
                    if not users:
                        del self._port_nodes[(hp.protocol, hp.port)]
            if np_ is not None and not np_:
                del self._node_ports[node_name]
        if pv.has_pod_affinity:
            self._terms_update(pv, node_name, -1)
        self.pod_node[pslot] = -1
        self.pod_ns[pslot] = -1
        self.pod_views[pslot] = None
        self._pfree.append(pslot)
        self.version += 1

    def _terms_update(self, pv: PodView, node_name: str, sign: int) -> None:
        groups: list[tuple[str, Iterable[Any]]] = [
            ("req_aff", pv.required_affinity),
            ("req_anti", pv.required_anti_affinity),
            ("pref_aff", pv.preferred_affinity),
            ("pref_anti", pv.preferred_anti_affinity),
        ]
        for kind, terms in groups:
            table = self.term_groups[kind]
            for t in terms:
                c = table.get(t)
                if c is None:
                    if sign < 0:
                        continue
                    c = table[t] = Counter()
                c[node_name] += sign
                if c[node_name] <= 0:
                    del c[node_name]
                    if not c:
                        del table[t]

    def upsert_pod(self, pod: Mapping[str, Any] | PodView) -> None:
        """Add or update a pod (moves, phase changes, deletion marks all handled)."""
        pv = pod if isinstance(pod, PodView) else PodView.from_dict(pod)
        uid = pv.uid or pv.key
        old = self._pods.get(uid)
        if old is not None and old == pv:
            return
        if old is not None:
            self._uncount(uid)
        self._pods[uid] = pv
        node = pv.counted_node
        if node and not pv.is_terminal:
            self._count(uid, pv, node)
        self.version += 1

    def remove_pod(self, uid: str) -> None:
        """Remove a pod by uid (namespace/name for pods without a uid)."""
        if self._pods.pop(uid, None) is not None:
            self._uncount(uid)
            self.version += 1

    # ------------------------------------------------------------ tentative pods

    def assume(self, key: str, pod: PodView, node_name: str) -> None:
        """Count `pod` on `node_name` under `key` until `forget(key)`.

        A pod that is already counted as itself (it exists, bound or pinned)
        is not counted a second time.
        """
        self.forget(key)
        if pod.uid and pod.uid in self._entries:
            return
        self._count(_RES_PREFIX + key, replace(pod, node_name=node_name), node_name)

    def forget(self, key: str) -> None:
        """Stop counting the tentative pod `key` (no-op when it is not counted)."""
        self._uncount(_RES_PREFIX + key)
