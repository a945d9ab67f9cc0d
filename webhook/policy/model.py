"""Pods and nodes as the policy sees them: frozen views parsed once from the wire.

Raw API objects (dicts, as decoded by orjson) are parsed exactly once into
compact frozen views (`PodView`, `NodeView`); the index store
(webhook.policy.snapshot) and every plugin read only these. Quantities are
exact: cpu in millicores, everything else in units (bytes), both rounded up
like resource.Quantity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from webhook.policy.marks import DEFAULT_SCHEDULER, RESERVATION, pinned_node
from webhook.policy.quantity import QuantityError, parse_quantity
from webhook.policy.selectors import (
    NOTHING,
    LabelRequirement,
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
)
from webhook.policy.unmodeled import unmodeled_reason
from webhook.policy.workloads import ControllerRef

__all__ = [
    "NAMESPACE_NAME_LABEL",
    "AffinityTerm",
    "HostPort",
    "NamespaceView",
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

#: The label the API server gives every namespace (namespace selectors match it).
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
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
    """A quantity in integer nano-units (Quantity keeps at most 1n precision, rounding up).

    Remembered per string: pods of one template repeat the same few quantities, and the
    exact arithmetic (Fraction) costs more than the rest of a container's parse."""
    if isinstance(q, str):
        known = _NANO_OF.get(q)
        if known is not None:
            return known
    f = parse_quantity(q) * _NANO
    n = f.numerator // f.denominator
    n = n if n == f else n + 1
    if isinstance(q, str):
        if len(_NANO_OF) >= _NANO_OF_MAX:
            _NANO_OF.clear()
        _NANO_OF[q] = n
    return n


#: _nano's answers by quantity string (bounded: forgotten all at once when full).
_NANO_OF: dict[str, int] = {}
_NANO_OF_MAX: Final = 4096


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
        scheduler_name=str(spec.get("schedulerName") or DEFAULT_SCHEDULER),
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
        reservation=str(annotations[RESERVATION]) if RESERVATION in annotations else None,
        pinned_node=None if spec.get("nodeName") else pinned_node(pod),
        skip_reason=unmodeled_reason(spec),
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


# ------------------------------------------------------------- NamespaceView


@dataclass(frozen=True, slots=True)
class NamespaceView:
    """A namespace's name and labels (pod affinity's namespaceSelector matches them)."""

    name: str
    labels: Mapping[str, str]

    @staticmethod
    def from_dict(ns: Mapping[str, Any]) -> NamespaceView:
        meta = ns.get("metadata") or {}
        name = str(meta.get("name") or "")
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        labels.setdefault(NAMESPACE_NAME_LABEL, name)
        return NamespaceView(name, labels)
