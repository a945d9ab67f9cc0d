"""detect(): every placement conflict in one snapshot of nodes and pods. Pure.

What is checked, and why each check looks the way it does:

- Overcommit: the node's counted pods request more than its allocatable of
  some resource, or are more than its `pods`. Culprits are found the way a
  kubelet admits pods: in arrival order, a pod that does not fit in what the
  earlier admitted pods left is rejected and takes nothing. For a node
  overcommitted by one pod that is the last to arrive; it is also the
  smallest set whose removal brings the node back within capacity in that
  order. Extended resources the node does not report are skipped (the
  kubelet drops them before its check); cpu, memory, ephemeral-storage,
  hugepages and pods are always checked.
- HostPort: two counted pods on one node use the same protocol and port
  with overlapping host IPs (0.0.0.0 overlaps every address); the later one
  loses, again in arrival order.
- NodeAffinity: the pod's nodeSelector or required node affinity does not
  match its node (labels changed later, or a scheduler ignored them).
- Taint: the node has a NoSchedule/NoExecute taint the pod does not
  tolerate. `node.kubernetes.io/*` taints are skipped: the control plane
  adds them for node conditions and cordons after placement, which is not a
  scheduler's doing (NoExecute ones evict by themselves).
- PodAntiAffinity: a pod's required anti-affinity term matches another pod
  in the same topology domain; the later of the two loses.
- TopologySpread: a DoNotSchedule constraint's skew (matching pods in the
  domain minus the minimum over eligible domains, which is 0 while fewer than
  minDomains domains exist) exceeds maxSkew; the last arrivals in the
  domain beyond the allowed count lose.
- KubeletRejected: the kubelet refused the pod at admission (phase Failed,
  reason OutOf<resource>, NodeAffinity, NodePorts, TaintToleration...): the
  placement was wrong when it reached the node.

Where the question is the scheduler's (does this pod fit this node, which
nodes a spread constraint counts), the policy's rules answer it
(`webhook.policy.nodematch`, the NodePorts, NodeResourcesFit and
PodTopologySpread plugins). `detect` is one full pass; `incremental.Detector`
keeps the result between changes and re-checks only what a change touches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.conflicts.incremental import Detector, NamespaceLabels
from webhook.conflicts.model import Conflict, PodRecord
from webhook.conflicts.nodefit import format_quantity
from webhook.policy.model import NodeView

__all__ = ["detect", "format_quantity"]


def detect(
    nodes: Mapping[str, NodeView],
    pods: Iterable[PodRecord],
    namespace_labels: NamespaceLabels | None = None,
) -> list[Conflict]:
    """All conflicts, sorted by kind, node and scope (deterministic output)."""
    det = Detector(namespace_labels)
    for view in nodes.values():
        det.put_node(view)
    for rec in pods:
        det.put_pod(rec)
    return det.conflicts()
