"""NodePorts: a pod's host ports must be free on the node.

Conflict rule (HostPortInfo.CheckConflict): same protocol and port, and
either side binds 0.0.0.0 or both bind the same IP. Only nodes that already
use one of the pod's (protocol, port) pairs are examined, via the snapshot's
port index, so the cost does not grow with the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from webhook.policy.arrays import member_mask
from webhook.policy.interface import CycleState, FilterResult, rejected
from webhook.policy.model import HostPort

NAME: Final = "NodePorts"
ERR_REASON: Final = "node(s) didn't have free ports for the requested pod ports"
ANY_IP: Final = "0.0.0.0"


def overlaps(a: HostPort, b: HostPort) -> bool:
    """HostPortInfo.CheckConflict for one pair (conflict detection names the clashing pods)."""
    if a.protocol != b.protocol or a.port != b.port:
        return False
    return a.ip == ANY_IP or b.ip == ANY_IP or a.ip == b.ip


def conflicts(want: HostPort, used: Mapping[HostPort, int]) -> bool:
    return any(overlaps(want, u) for u in used)


@dataclass(frozen=True)
class NodePorts:
    name: str = NAME

    def filter(self, state: CycleState) -> FilterResult | None:
        ports = state.pod.host_ports
        if not ports:
            return None
        snap = state.snapshot
        bad: set[int] = set()
        for hp in ports:
            for node_name in snap.port_users(hp.protocol, hp.port):
                slot = snap.slot_of(node_name)
                if slot is None or slot in bad:
                    continue
                if conflicts(hp, snap.node_ports(node_name)):
                    bad.add(slot)
        if not bad:
            return None
        fail = member_mask(state.slots, bad)
        return FilterResult.from_mask(fail, rejected(ERR_REASON, NAME, unresolvable=False))


def build(args: Any) -> NodePorts:
    return NodePorts()
