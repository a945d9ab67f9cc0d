"""The cluster snapshot: the index store every decision reads.

The `ClusterSnapshot` keeps the per-node state that plugins need as numpy
arrays indexed by a node *slot* (allocatable and requested matrices, label
value codes per label key, taint set ids, unschedulable flags) plus small
Python indexes over pods (label index, host ports, grouped inter-pod
affinity terms). Every mutation is incremental and idempotent, so the live
cache can feed watch events straight in; nothing is ever recomputed for the
whole cluster on an event.

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
- tentative pods (`assume(key, ...)`) count exactly like bound pods until
  `forget(key)`. When that happens is the reservation ledger's business
  (webhook.cluster.ledger); the snapshot only counts.

The store takes parsed views only (webhook.policy.model); whole clusters
of API objects come in through webhook.policy.dump. Not thread-safe: the
caller serialises access.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from webhook.policy.arrays import member_mask
from webhook.policy.label_column import LabelColumn
from webhook.policy.model import (
    CPU,
    EPHEMERAL,
    MEMORY,
    NAMESPACE_NAME_LABEL,
    PODS,
    AffinityTerm,
    HostPort,
    NamespaceView,
    NodeView,
    PodView,
    Taint,
    WeightedAffinityTerm,
)
from webhook.policy.pod_index import PodLabelIndex
from webhook.policy.selectors import LabelSelector
from webhook.policy.term_index import TermTable
from webhook.policy.workload_index import WorkloadSelectors

__all__ = ["ClusterSnapshot"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def _name_hash(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


_BASE_RESOURCES: Final = (CPU, MEMORY, EPHEMERAL, PODS)
_RES_PREFIX: Final = "\x00reservation/"


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
        self._slot_names: tuple[str, ...] | None = None
        # pods (all known pods, by uid) and counted entries (by entry key)
        self._pods: dict[str, PodView] = {}
        self._entries: dict[str, tuple[PodView, str, int]] = {}  # key -> (pod, node, pslot)
        self._by_node: dict[str, dict[str, PodView]] = {}
        self._pcap = 0
        self._pfree: list[int] = []
        self.pod_node: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.pod_ns: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.pod_views: list[PodView | None] = []
        self._labels = PodLabelIndex()
        # host ports: node -> Counter(HostPort); (protocol, port) -> Counter(node)
        self._node_ports: dict[str, Counter[HostPort]] = {}
        self._port_nodes: dict[tuple[str, int], Counter[str]] = {}
        # images: name -> {node: size}
        self._image_nodes: dict[str, dict[str, int]] = {}
        # grouped affinity terms of counted pods: kind -> term -> Counter(node)
        self.term_groups: dict[str, TermTable[Any]] = {
            "req_aff": TermTable[AffinityTerm](),
            "req_anti": TermTable[AffinityTerm](),
            "pref_aff": TermTable[WeightedAffinityTerm](),
            "pref_anti": TermTable[WeightedAffinityTerm](),
        }
        # namespaces
        self._ns_ids: dict[str, int] = {}
        self._ns_names: list[str] = []
        self._ns_labels: dict[str, Mapping[str, str]] = {}
        self._image_cache: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
        self._domain_cache: dict[str, tuple[npt.NDArray[np.int64], int]] = {}
        # Service and controller selectors (default spreading)
        self.workloads = WorkloadSelectors()

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

    def sorted_slots(self) -> npt.NDArray[np.int64]:
        """Alive node slots in node-name order (the deterministic scan order); read-only."""
        if self._sorted is None:
            names = sorted(self._node_slot)
            order = np.array([self._node_slot[n] for n in names], dtype=np.int64)
            order.flags.writeable = False
            self._sorted = order
        return self._sorted

    def slot_names(self) -> tuple[str, ...]:
        """The node name of every slot ("" for a free slot), until nodes come or go.

        A new table replaces the old one then, so a decision can keep it."""
        if self._slot_names is None:
            self._slot_names = tuple("" if n is None else n.name for n in self._nodes)
        return self._slot_names

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
            return {NAMESPACE_NAME_LABEL: name}
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

    def topology_domains(self, key: str) -> tuple[npt.NDArray[np.int64], int]:
        """(domain per node slot, number of domains) for topology key `key`; read-only,
        cached until a node changes.

        A domain is the label value's code; a node without the label gets the code of
        "" (kube-scheduler reads node.Labels[key] as "") or, when no node has "", the
        extra domain len(values). Free slots read as that missing domain."""
        hit = self._domain_cache.get(key)
        if hit is None:
            col = self.label_columns.get(key)
            if col is None:
                domains = np.zeros(self._cap, dtype=np.int64)
                hit = (domains, 1)
            else:
                missing = col.index.get("", len(col.values))
                domains = np.where(col.codes >= 0, col.codes, missing).astype(np.int64)
                hit = (domains, len(col.values) + 1)
            domains.flags.writeable = False
            self._domain_cache[key] = hit
        return hit

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
        wanted = None if namespaces is None else namespaces.tolist()
        result = self._labels.match(selector, wanted, terminating)
        arr = np.fromiter(result, dtype=np.int64, count=len(result))
        if namespaces is not None and len(arr):
            arr = arr[member_mask(self.pod_ns[arr], wanted or ())]
        return arr

    # ------------------------------------------------------------ namespaces

    def upsert_namespace(self, ns: NamespaceView) -> None:
        self.namespace_id(ns.name)
        if self._ns_labels.get(ns.name) != ns.labels:
            self._ns_labels[ns.name] = ns.labels
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
        self._domain_cache.clear()

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

    def upsert_node(self, view: NodeView) -> None:
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
            self._node_set_changed()
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
        self._domain_cache.clear()
        self.version += 1

    def _node_set_changed(self) -> None:
        """Nodes came or went: the orders and name tables are rebuilt when next asked for
        (and the old ones, which decisions may hold, stay as they were)."""
        self._sorted = None
        self._node_names_sorted = None
        self._slot_names = None

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
        self._domain_cache.clear()
        self._node_set_changed()
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
        self._labels.add(pslot, ns, pv.labels, pv.is_terminating)
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
        self._labels.remove(pslot, ns, pv.labels)
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
                table.count(t, node_name, sign)

    def upsert_pod(self, pv: PodView) -> None:
        """Add or update a pod (moves, phase changes, deletion marks all handled)."""
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
