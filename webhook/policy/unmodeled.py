"""What the policy does not model: pods that need it are left to the default scheduler.

kube-scheduler's volume plugins (binding, zones, limits, restrictions), DRA
and scheduling gates decide from objects and state this policy never reads.
A pod that needs any of them gets a Skip decision with the reason, so it is
never placed without the checks it depends on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["unmodeled_reason"]

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


def unmodeled_reason(spec: Mapping[str, Any]) -> str | None:
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
