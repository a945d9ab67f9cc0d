"""Plugin registry: name -> how to build it and which extension points it has.

One explicit line per plugin. Plugins that kube-scheduler knows but this
policy does not model (volume binding, DRA, queue sort, binding...) are
registered without a builder: they are accepted in configuration (so a stock
KubeSchedulerConfiguration loads) and do nothing; pods that would need them
are given a Skip decision by the model (see PodView.skip_reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from webhook.policy.interface import ArgsError, check_fields
from webhook.policy.plugins import (
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_label_number,
    node_name,
    node_ports,
    node_resources_balanced_allocation,
    node_resources_fit,
    node_unschedulable,
    pod_topology_spread,
    taint_toleration,
)

__all__ = ["REGISTRY", "PluginSpec", "validate_unmodeled_args"]


@dataclass(frozen=True)
class PluginSpec:
    name: str
    build: Callable[[Mapping[str, Any] | None], Any] | None
    """None: a kube-scheduler plugin accepted in configuration but not modeled."""
    points: frozenset[str]
    """Extension points (kube-scheduler names) the plugin implements."""
    args_fields: frozenset[str] | None = None
    """Allowed args fields for unmodeled plugins (None: the plugin takes no args)."""

    @property
    def modeled(self) -> bool:
        return self.build is not None


F = frozenset({"preFilter", "filter"})
S = frozenset({"preScore", "score"})
FS = F | S

_UNMODELED: Final = (
    PluginSpec("SchedulingGates", None, frozenset({"preEnqueue"})),
    PluginSpec("PrioritySort", None, frozenset({"queueSort"})),
    PluginSpec("VolumeRestrictions", None, F),
    PluginSpec("EBSLimits", None, F),
    PluginSpec("GCEPDLimits", None, F),
    PluginSpec("AzureDiskLimits", None, F),
    PluginSpec("CinderLimits", None, F),
    PluginSpec("NodeVolumeLimits", None, F),
    PluginSpec(
        "VolumeBinding",
        None,
        F | S | frozenset({"reserve", "preBind"}),
        frozenset({"bindTimeoutSeconds", "shape"}),
    ),
    PluginSpec("VolumeZone", None, F),
    PluginSpec(
        "DynamicResources",
        None,
        F | frozenset({"postFilter", "reserve", "preBind"}),
        frozenset({"filterTimeout", "bindingTimeout"}),
    ),
    PluginSpec(
        "DefaultPreemption",
        None,
        frozenset({"postFilter"}),
        frozenset({"minCandidateNodesPercentage", "minCandidateNodesAbsolute"}),
    ),
    PluginSpec("DefaultBinder", None, frozenset({"bind"})),
)

REGISTRY: Final[Mapping[str, PluginSpec]] = {
    spec.name: spec
    for spec in (
        PluginSpec(node_unschedulable.NAME, node_unschedulable.build, F),
        PluginSpec(node_name.NAME, node_name.build, F),
        PluginSpec(taint_toleration.NAME, taint_toleration.build, FS),
        PluginSpec(node_affinity.NAME, node_affinity.build, FS),
        PluginSpec(node_ports.NAME, node_ports.build, F),
        PluginSpec(node_resources_fit.NAME, node_resources_fit.build, FS),
        PluginSpec(pod_topology_spread.NAME, pod_topology_spread.build, FS),
        PluginSpec(inter_pod_affinity.NAME, inter_pod_affinity.build, FS),
        PluginSpec(
            node_resources_balanced_allocation.NAME, node_resources_balanced_allocation.build, S
        ),
        PluginSpec(image_locality.NAME, image_locality.build, S),
        PluginSpec(node_label_number.NAME, node_label_number.build, S),
        *_UNMODELED,
    )
}


def validate_unmodeled_args(spec: PluginSpec, raw: Mapping[str, Any] | None) -> None:
    """Strict field check for args of plugins we accept but do not model."""
    if raw is None:
        return
    check_fields(raw, spec.args_fields or frozenset())
    if spec.name == "DefaultPreemption":
        pct = raw.get("minCandidateNodesPercentage")
        if pct is not None and (not isinstance(pct, int) or not 0 <= pct <= 100):
            raise ArgsError("minCandidateNodesPercentage", "not in valid range [0, 100]")
        ab = raw.get("minCandidateNodesAbsolute")
        if ab is not None and (not isinstance(ab, int) or ab < 0):
            raise ArgsError("minCandidateNodesAbsolute", "not in valid range [0, inf)")
