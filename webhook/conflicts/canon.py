"""One object for each distinct immutable part of the parsed pods (hash-consing). Pure.

The replicas of a workload parse into equal labels, requests, tolerations,
spread constraints, affinity terms, images and owner; every pod on a node
into an equal node name. Parsed apart, each pod holds its own copies: about
1.7 KB of a record's 2.4 KB at 30 pods per node. `Canon.record` swaps the
parts of a freshly parsed `PodRecord` for the equal object it has seen
before, so the view and the conflict store (which share the record's
PodView) hold one copy per workload instead of one per pod.

Only parts that are never mutated are shared (the views are frozen; their
mappings are read-only by contract). Equality decides, as for the records
themselves, so nothing a caller can observe changes but identity. The table
is bounded: when it reaches `limit` entries it is emptied and fills again
(objects shared so far stay shared; no reference outlives its pods for long).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final

from webhook.conflicts.model import PodRecord
from webhook.policy.model import PodView

__all__ = ["Canon"]

#: PodView fields whose values are tuples, frozen dataclasses or strings.
HASHABLE_FIELDS: Final = (
    "namespace",
    "node_name",
    "scheduler_name",
    "tolerations",
    "required_node_affinity",
    "preferred_node_affinity",
    "required_affinity",
    "required_anti_affinity",
    "preferred_affinity",
    "preferred_anti_affinity",
    "spread_constraints",
    "host_ports",
    "images",
    "controller",
)
#: PodView fields whose values are str -> str|int mappings.
MAPPING_FIELDS: Final = ("labels", "requests", "node_selector")


class Canon:
    """Equal parts of parsed pods, one object each (see the module notes)."""

    def __init__(self, limit: int = 1 << 17):
        self.limit = limit
        self._table: dict[Hashable, Any] = {}

    def __len__(self) -> int:
        return len(self._table)

    def _one(self, key: Hashable, value: Any) -> Any:
        try:
            got = self._table.get(key)
        except TypeError:  # an unhashable part (a malformed object): keep it as it is
            return value
        if got is not None:
            return got
        if len(self._table) >= self.limit:
            self._table.clear()
        self._table[key] = value
        return value

    def value(self, field: str, value: Any) -> Any:
        """The shared object equal to `value` (tagged by `field`: equal tuples of different
        parts stay apart)."""
        if value is None or value == ():
            return value
        return self._one((field, value), value)

    def mapping(self, field: str, value: Mapping[str, Any]) -> Mapping[str, Any]:
        if isinstance(value, dict):
            return self._one((field, frozenset(value.items())), value)  # type: ignore[no-any-return]
        return value

    def view(self, view: PodView) -> PodView:
        """`view` with its parts swapped for the shared equal ones, in place: call it only
        on a view just parsed, that nothing else holds yet."""
        for name in HASHABLE_FIELDS:
            old = getattr(view, name)
            new = self.value(name, old)
            if new is not old:
                _set(view, name, new)
        for name in MAPPING_FIELDS:
            old = getattr(view, name)
            new = self.mapping(name, old)
            if new is not old:
                _set(view, name, new)
        return view

    def record(self, record: PodRecord) -> PodRecord:
        """`record` with its parts swapped for the shared equal ones (in place, as `view`)."""
        self.view(record.view)
        created = self.value("time", record.created)
        arrived = created if record.arrived == record.created else record.arrived
        _set(record, "phase", self.value("phase", record.phase))
        _set(record, "created", created)
        _set(record, "arrived", self.value("time", arrived))
        _set(record, "provenance", self.value("provenance", record.provenance))
        _set(record, "owner", self.value("owner", record.owner))
        return record


def _set(obj: PodView | PodRecord, name: str, value: Any) -> None:
    """Set a field of a frozen view that is not shared yet (the parse's last step)."""
    object.__setattr__(obj, name, value)
