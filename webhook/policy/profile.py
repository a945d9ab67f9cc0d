"""Scheduling profiles: what a KubeSchedulerConfiguration document says, as `Profile`s.

A `kubescheduler.config.k8s.io/v1` KubeSchedulerConfiguration is taken as
kube-scheduler takes it: plugin sets are merged with kube-scheduler's v1
defaults (`mergePluginSet`, then multiPoint expansion with per-extension-point
overrides, score weights from `score` taking precedence over `multiPoint`,
weight 0 meaning 1), and every plugin's args are validated by the plugin
(webhook.policy.registry). Decoding is strict: unknown fields, unknown
plugins, bad args or values raise `PolicyError` with the line
(webhook.policy.policy_yaml).

The webhook's own settings are another document and another type
(webhook.policy.placement_policy); webhook.policy.policy_file reads both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from webhook.policy.interface import ArgsError, FilterPlugin, PreFilterPlugin, ScorePlugin
from webhook.policy.marks import DEFAULT_SCHEDULER
from webhook.policy.policy_yaml import Document
from webhook.policy.registry import REGISTRY, PluginSpec, validate_unmodeled_args

__all__ = [
    "SCHEDULER_API",
    "Profile",
    "build_profile",
    "scheduler_profiles",
]

SCHEDULER_API: Final = "kubescheduler.config.k8s.io/v1"

# kube-scheduler v1 default plugins (multiPoint, in order, with score weights).
DEFAULT_MULTIPOINT: Final[tuple[tuple[str, int | None], ...]] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", None),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
)
EXTENSION_POINTS: Final = (
    "multiPoint",
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
_CONFIG_FIELDS: Final = frozenset(
    {
        "apiVersion",
        "kind",
        "parallelism",
        "leaderElection",
        "clientConnection",
        "healthzBindAddress",
        "metricsBindAddress",
        "enableProfiling",
        "enableContentionProfiling",
        "percentageOfNodesToScore",
        "podInitialBackoffSeconds",
        "podMaxBackoffSeconds",
        "profiles",
        "extenders",
        "delayCacheUntilActive",
    }
)
_PROFILE_FIELDS: Final = frozenset(
    {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
)


@dataclass(frozen=True)
class Profile:
    """One scheduling profile: its plugins per extension point, in order, scorers weighted."""

    name: str
    filters: tuple[FilterPlugin, ...]
    scorers: tuple[tuple[ScorePlugin, int], ...]
    percentage_of_nodes_to_score: int | None = None
    """None or 0: kube-scheduler's adaptive default (50 - nodes/125, at least 5%)."""
    pre_filters: tuple[PreFilterPlugin, ...] = ()
    """The enabled filter plugins that have a pre-filter, in filter order."""

    @property
    def scheduler_name(self) -> str:
        return self.name

    @property
    def filter_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.filters)

    @property
    def score_weights(self) -> dict[str, int]:
        return {p.name: w for p, w in self.scorers}

    def plugin(self, name: str) -> Any:
        for f in self.filters:
            if f.name == name:
                return f
        for s, _ in self.scorers:
            if s.name == name:
                return s
        return None


# ---------------------------------------------------------------- plugin sets


@dataclass
class _PluginRef:
    name: str
    weight: int | None
    path: str


@dataclass
class _PluginSet:
    enabled: list[_PluginRef] = field(default_factory=list)
    disabled: list[_PluginRef] = field(default_factory=list)


def _plugin_set(doc: Document, path: str, raw: Any) -> _PluginSet:
    body = doc.fields(path, raw, frozenset({"enabled", "disabled"}))
    out = _PluginSet()
    for kind in ("enabled", "disabled"):
        for i, item in enumerate(doc.items(f"{path}.{kind}", body.get(kind))):
            p = f"{path}.{kind}[{i}]"
            entry = doc.fields(p, item, frozenset({"name", "weight"}))
            name = entry.get("name")
            if not isinstance(name, str) or not name:
                raise doc.error(f"{p}.name", "plugin name is required")
            if not (kind == "disabled" and name == "*") and name not in REGISTRY:
                raise doc.error(f"{p}.name", f"unknown plugin {name!r}")
            weight = entry.get("weight")
            if weight is not None:
                weight = doc.integer(f"{p}.weight", weight, 0)
                if kind == "disabled":
                    raise doc.error(f"{p}.weight", "weight is not allowed for disabled plugins")
            ref = _PluginRef(name, weight, p)
            (out.enabled if kind == "enabled" else out.disabled).append(ref)
    return out


def _merge(default: _PluginSet, custom: _PluginSet) -> _PluginSet:
    """kube-scheduler's mergePluginSet."""
    disabled = {p.name for p in custom.disabled} | {p.name for p in default.disabled}
    custom_by_name = {p.name: (i, p) for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[_PluginRef] = []
    if "*" not in disabled:
        for p in default.enabled:
            if p.name in disabled:
                continue
            hit = custom_by_name.get(p.name)
            if hit is not None:
                replaced.add(hit[0])
                p = hit[1]
            enabled.append(p)
    enabled.extend(p for i, p in enumerate(custom.enabled) if i not in replaced)
    return _PluginSet(enabled, [*custom.disabled, *default.disabled])


def _implements(spec: PluginSpec, point: str) -> bool:
    return point in spec.points


def _expand(doc: Document, point: str, specific: _PluginSet, multi: _PluginSet) -> list[_PluginRef]:
    """The plugins of one extension point after multiPoint expansion (framework.go)."""
    enabled: list[_PluginRef] = []
    seen: set[str] = set()
    for p in specific.enabled:
        spec = REGISTRY[p.name]
        if not _implements(spec, point):
            raise doc.error(f"{p.path}.name", f"plugin {p.name!r} does not extend {point} plugin")
        if p.name in seen:
            raise doc.error(f"{p.path}.name", f"plugin {p.name!r} already registered as {point}")
        seen.add(p.name)
        enabled.append(p)
    disabled = {p.name for p in specific.disabled}
    if "*" in disabled:
        return enabled
    overrides: set[str] = set()
    multi_enabled: list[_PluginRef] = []
    multi_seen: set[str] = set()
    for p in multi.enabled:
        spec = REGISTRY[p.name]
        if not _implements(spec, point) or p.name in disabled:
            continue
        if p.name in seen:
            overrides.add(p.name)
            continue
        if p.name in multi_seen:
            raise doc.error(f"{p.path}.name", f"plugin {p.name!r} already registered as {point}")
        multi_seen.add(p.name)
        multi_enabled.append(p)
    return (
        [p for p in enabled if p.name in overrides]
        + multi_enabled
        + [p for p in enabled if p.name not in overrides]
    )


def _score_weights(point_refs: list[_PluginRef]) -> dict[str, int]:
    weights: dict[str, int] = {}
    for p in point_refs:
        if not _implements(REGISTRY[p.name], "score") or p.name in weights:
            continue
        weights[p.name] = p.weight or 1
    return weights


def _default_set() -> _PluginSet:
    return _PluginSet([_PluginRef(n, w, "") for n, w in DEFAULT_MULTIPOINT if n in REGISTRY], [])


def build_profile(
    raw: Mapping[str, Any],
    doc: Document,
    path: str,
    global_percentage: int | None,
) -> Profile:
    prof = doc.fields(path, raw, _PROFILE_FIELDS)
    name = prof.get("schedulerName") or DEFAULT_SCHEDULER
    if not isinstance(name, str):
        raise doc.error(f"{path}.schedulerName", "must be a string")
    pct = prof.get("percentageOfNodesToScore")
    if pct is not None:
        pct = doc.integer(f"{path}.percentageOfNodesToScore", pct, 0, 100)
    else:
        pct = global_percentage

    plugins_raw = doc.fields(f"{path}.plugins", prof.get("plugins"), frozenset(EXTENSION_POINTS))
    sets = {
        point: _plugin_set(doc, f"{path}.plugins.{point}", plugins_raw.get(point))
        for point in EXTENSION_POINTS
    }
    multi = _merge(_default_set(), sets["multiPoint"])

    # args (validated for every configured plugin, enabled or not)
    args_by_name: dict[str, tuple[Any, str]] = {}
    for i, item in enumerate(doc.items(f"{path}.pluginConfig", prof.get("pluginConfig"))):
        p = f"{path}.pluginConfig[{i}]"
        entry = doc.fields(p, item, frozenset({"name", "args"}))
        pname = entry.get("name")
        if not isinstance(pname, str) or pname not in REGISTRY:
            raise doc.error(f"{p}.name", f"unknown plugin {pname!r}")
        if pname in args_by_name:
            raise doc.error(f"{p}.name", f"duplicate pluginConfig for plugin {pname!r}")
        args = entry.get("args")
        if args is not None and not isinstance(args, Mapping):
            raise doc.error(f"{p}.args", "must be an object")
        if isinstance(args, Mapping):
            kind = args.get("kind")
            expected = f"{pname}Args"
            if kind is not None and kind != expected:
                raise doc.error(f"{p}.args.kind", f"must be {expected!r}, got {kind!r}")
            api = args.get("apiVersion")
            if api is not None and api != SCHEDULER_API:
                raise doc.error(f"{p}.args.apiVersion", f"must be {SCHEDULER_API!r}, got {api!r}")
            args = {k: v for k, v in args.items() if k not in ("kind", "apiVersion")}
        args_by_name[pname] = (args, f"{p}.args")

    built: dict[str, Any] = {}

    def instance(pname: str) -> Any:
        if pname not in built:
            spec = REGISTRY[pname]
            args, apath = args_by_name.get(pname, (None, f"{path}.pluginConfig"))
            try:
                if spec.build is None:
                    validate_unmodeled_args(spec, args)
                    built[pname] = None
                else:
                    built[pname] = spec.build(args)
            except ArgsError as exc:
                sub = f"{apath}.{exc.field}" if exc.field else apath
                raise doc.error(sub, exc.message) from None
        return built[pname]

    for pname in args_by_name:
        instance(pname)

    filter_refs = _expand(doc, "filter", sets["filter"], multi)
    score_refs = _expand(doc, "score", sets["score"], multi)
    # other extension points: validate that the plugins implement them
    for point in EXTENSION_POINTS:
        if point in ("multiPoint", "filter", "score"):
            continue
        for ref in sets[point].enabled:
            if not _implements(REGISTRY[ref.name], point):
                raise doc.error(f"{ref.path}.name", f"plugin {ref.name!r} does not extend {point}")
    weights = _score_weights(sets["score"].enabled + multi.enabled)

    filters = tuple(inst for p in filter_refs if (inst := instance(p.name)) is not None)
    scorers = tuple(
        (inst, weights.get(p.name, 1)) for p in score_refs if (inst := instance(p.name)) is not None
    )
    pre_filters = tuple(f for f in filters if isinstance(f, PreFilterPlugin))
    return Profile(
        name=name,
        filters=filters,
        scorers=scorers,
        percentage_of_nodes_to_score=pct,
        pre_filters=pre_filters,
    )


def scheduler_profiles(cfg: Mapping[str, Any], doc: Document) -> dict[str, Profile]:
    """The profiles of a KubeSchedulerConfiguration document, by schedulerName."""
    doc.fields("", cfg, _CONFIG_FIELDS)
    pct = cfg.get("percentageOfNodesToScore")
    if pct is not None:
        pct = doc.integer("percentageOfNodesToScore", pct, 0, 100)
    if doc.items("extenders", cfg.get("extenders")):
        raise doc.error("extenders", "scheduler extenders are not supported by placement-webhook")
    profiles_raw = doc.items("profiles", cfg.get("profiles")) or [{}]
    profiles: dict[str, Profile] = {}
    for i, raw in enumerate(profiles_raw):
        prof = build_profile(raw or {}, doc, f"profiles[{i}]", pct)
        if prof.name in profiles:
            raise doc.error(f"profiles[{i}].schedulerName", f"duplicate profile {prof.name!r}")
        profiles[prof.name] = prof
    return profiles
