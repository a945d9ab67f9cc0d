"""Policy files: KubeSchedulerConfiguration profiles plus the PlacementPolicy document.

A policy file is multi-document YAML holding a
`kubescheduler.config.k8s.io/v1` KubeSchedulerConfiguration, a
`placement-webhook.io/v1alpha1` PlacementPolicy, or both. Plugin sets are
merged with kube-scheduler's v1 defaults exactly as kube-scheduler does
(`mergePluginSet`, then multiPoint expansion with per-extension-point
overrides, score weights from `score` taking precedence over `multiPoint`,
weight 0 meaning 1). Decoding is strict: unknown fields, unknown plugins,
bad args or values raise `PolicyError` naming the field path and the line in
the file (YAML node marks from `yaml.compose_all`).

Which profile places the webhook's pods (schedulerName "", default-scheduler
or placement-webhook): the one the PlacementPolicy names in `schedulerName`;
without that, the profile named default-scheduler, or else the only profile.
Several profiles, none of them default-scheduler and none named, is an error
that lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

import yaml

from webhook.policy.interface import ArgsError, FilterPlugin, ScorePlugin
from webhook.policy.registry import REGISTRY, PluginSpec, validate_unmodeled_args

__all__ = [
    "DEFAULT_SCHEDULER_NAMES",
    "PlacementSettings",
    "Policy",
    "PolicyError",
    "Profile",
    "build_profile",
    "default_policy",
    "load_policy",
]

SCHEDULER_API: Final = "kubescheduler.config.k8s.io/v1"
PLACEMENT_API: Final = "placement-webhook.io/v1alpha1"
DEFAULT_SCHEDULER: Final = "default-scheduler"
DEFAULT_SCHEDULER_NAMES: Final = frozenset({"", DEFAULT_SCHEDULER, "placement-webhook"})

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
_PLACEMENT_FIELDS: Final = frozenset(
    {
        "apiVersion",
        "kind",
        "metadata",
        "mode",
        "schedulerName",
        "reservationTTLSeconds",
        "reservationGraceSeconds",
        "decisionAnnotations",
        "scheduledEvents",
        "copyTopologyLabels",
        "maxUnconfirmedShare",
        "conflictPolicy",
    }
)


class PolicyError(ValueError):
    """An invalid policy file. The message names the source, line and field path."""

    def __init__(
        self, message: str, *, source: str = "<policy>", line: int | None = None, path: str = ""
    ):
        where = f"{source}:{line}" if line is not None else source
        text = f"{where}: {path}: {message}" if path else f"{where}: {message}"
        super().__init__(text)
        self.source = source
        self.line = line
        self.path = path
        self.reason = message


# ---------------------------------------------------------------- data types


@dataclass(frozen=True)
class Profile:
    """One scheduling profile: the ordered filters and weighted scorers."""

    name: str
    filters: tuple[FilterPlugin, ...]
    scorers: tuple[tuple[ScorePlugin, int], ...]
    percentage_of_nodes_to_score: int | None = None
    """None or 0: kube-scheduler's adaptive default (50 - nodes/125, at least 5%)."""

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


#: How much of a decision the annotations carry (PlacementPolicy decisionAnnotations).
DECISION_DETAIL: Final = ("full", "summary", "minimal")


@dataclass(frozen=True)
class PlacementSettings:
    mode: str = "nodeName"
    """nodeName: set spec.nodeName; nodeAffinity: pin with required node affinity."""
    scheduler_name: str = DEFAULT_SCHEDULER
    """Profile used for pods with schedulerName "", default-scheduler or placement-webhook
    (see the module notes for the choice when the PlacementPolicy does not name one)."""
    reservation_grace_seconds: float = 3.0
    """How long past its caller's timeout (the API server's webhook timeout, a
    bind request's) a reservation waits for its pod before giving the slot back."""
    max_unconfirmed_share: float = 0.5
    """The largest share of the cluster's cpu, memory or pod slots that
    reservations whose pods have not appeared yet may hold at once."""
    conflict_policy: str = "report"
    """report | evict: what to do when an overcommitted node is detected."""
    decision_annotations: str = "summary"
    """full | summary | minimal: how much of the decision each pod carries into etcd
    and every watcher (full: kube-scheduler-simulator's per-node results)."""
    scheduled_events: bool = True
    """Write kube-scheduler's `Scheduled` event for each pod placed by nodeName."""
    copy_topology_labels: bool = True
    """In nodeName mode, copy the node's zone and region labels onto the pod, as the
    API server's PodTopologyLabels admission does after us (its change otherwise
    makes the API server call the webhook a second time for every pod)."""


@dataclass(frozen=True)
class Policy:
    profiles: Mapping[str, Profile]
    placement: PlacementSettings = field(default_factory=PlacementSettings)

    def profile_for(self, scheduler_name: str) -> Profile | None:
        if scheduler_name in DEFAULT_SCHEDULER_NAMES:
            return self.profiles.get(self.placement.scheduler_name)
        return self.profiles.get(scheduler_name)

    @property
    def default_profile(self) -> Profile:
        p = self.profile_for("")
        assert p is not None
        return p


# ---------------------------------------------------------------- YAML with lines


class _Doc:
    """A decoded YAML document with a map from field paths to line numbers."""

    def __init__(self, source: str, prefix: str = "") -> None:
        self.source = source
        self.prefix = prefix
        self.lines: dict[str, int] = {}

    def error(self, path: str, message: str) -> PolicyError:
        line = None
        p = path
        while True:
            if p in self.lines:
                line = self.lines[p]
                break
            if not p:
                break
            cut = max(p.rfind("."), p.rfind("["))
            p = p[:cut] if cut > 0 else ""
        full = f"{self.prefix}{path}" if path else self.prefix.rstrip(" ")
        return PolicyError(message, source=self.source, line=line, path=full)


_SCALARS = yaml.SafeLoader("")


def _decode(node: yaml.Node, path: str, doc: _Doc) -> Any:
    doc.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for k_node, v_node in node.value:
            key = _decode(k_node, path, doc)
            if not isinstance(key, str):
                raise doc.error(path, f"keys must be strings, got {key!r}")
            sub = f"{path}.{key}" if path else key
            if key in out:
                doc.lines[sub] = k_node.start_mark.line + 1
                raise doc.error(sub, "duplicate field")
            doc.lines[sub] = k_node.start_mark.line + 1
            out[key] = _decode(v_node, sub, doc)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            sub = f"{path}[{i}]"
            doc.lines[sub] = item.start_mark.line + 1
            items.append(_decode(item, sub, doc))
        return items
    return _SCALARS.construct_object(node, deep=True)


def _documents(text: str, source: str) -> list[tuple[Any, _Doc]]:
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise PolicyError(f"invalid YAML: {problem}", source=source, line=line) from None
    out = []
    for node in nodes:
        if node is None:
            continue
        doc = _Doc(source)
        out.append((_decode(node, "", doc), doc))
    return out


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


def _int(doc: _Doc, path: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise doc.error(path, f"must be an integer, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise doc.error(path, f"{value} not in valid range {rng}")
    return value


def _mapping(doc: _Doc, path: str, value: Any, allowed: frozenset[str]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise doc.error(path, f"must be an object, got {type(value).__name__}")
    for k in value:
        if k not in allowed:
            raise doc.error(f"{path}.{k}" if path else k, f"unknown field {k!r}")
    return value


def _list(doc: _Doc, path: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise doc.error(path, f"must be a list, got {type(value).__name__}")
    return value


def _plugin_set(doc: _Doc, path: str, raw: Any) -> _PluginSet:
    body = _mapping(doc, path, raw, frozenset({"enabled", "disabled"}))
    out = _PluginSet()
    for kind in ("enabled", "disabled"):
        for i, item in enumerate(_list(doc, f"{path}.{kind}", body.get(kind))):
            p = f"{path}.{kind}[{i}]"
            entry = _mapping(doc, p, item, frozenset({"name", "weight"}))
            name = entry.get("name")
            if not isinstance(name, str) or not name:
                raise doc.error(f"{p}.name", "plugin name is required")
            if not (kind == "disabled" and name == "*") and name not in REGISTRY:
                raise doc.error(f"{p}.name", f"unknown plugin {name!r}")
            weight = entry.get("weight")
            if weight is not None:
                weight = _int(doc, f"{p}.weight", weight, 0)
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


def _expand(doc: _Doc, point: str, specific: _PluginSet, multi: _PluginSet) -> list[_PluginRef]:
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
    doc: _Doc,
    path: str,
    global_percentage: int | None,
) -> Profile:
    prof = _mapping(doc, path, raw, _PROFILE_FIELDS)
    name = prof.get("schedulerName") or DEFAULT_SCHEDULER
    if not isinstance(name, str):
        raise doc.error(f"{path}.schedulerName", "must be a string")
    pct = prof.get("percentageOfNodesToScore")
    if pct is not None:
        pct = _int(doc, f"{path}.percentageOfNodesToScore", pct, 0, 100)
    else:
        pct = global_percentage

    plugins_raw = _mapping(doc, f"{path}.plugins", prof.get("plugins"), frozenset(EXTENSION_POINTS))
    sets = {
        point: _plugin_set(doc, f"{path}.plugins.{point}", plugins_raw.get(point))
        for point in EXTENSION_POINTS
    }
    multi = _merge(_default_set(), sets["multiPoint"])

    # args (validated for every configured plugin, enabled or not)
    args_by_name: dict[str, tuple[Any, str]] = {}
    for i, item in enumerate(_list(doc, f"{path}.pluginConfig", prof.get("pluginConfig"))):
        p = f"{path}.pluginConfig[{i}]"
        entry = _mapping(doc, p, item, frozenset({"name", "args"}))
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
    return Profile(name=name, filters=filters, scorers=scorers, percentage_of_nodes_to_score=pct)


# ---------------------------------------------------------------- documents


def _scheduler_config(cfg: Mapping[str, Any], doc: _Doc) -> dict[str, Profile]:
    _mapping(doc, "", cfg, _CONFIG_FIELDS)
    pct = cfg.get("percentageOfNodesToScore")
    if pct is not None:
        pct = _int(doc, "percentageOfNodesToScore", pct, 0, 100)
    if _list(doc, "extenders", cfg.get("extenders")):
        raise doc.error("extenders", "scheduler extenders are not supported by placement-webhook")
    profiles_raw = _list(doc, "profiles", cfg.get("profiles")) or [{}]
    profiles: dict[str, Profile] = {}
    for i, raw in enumerate(profiles_raw):
        prof = build_profile(raw or {}, doc, f"profiles[{i}]", pct)
        if prof.name in profiles:
            raise doc.error(f"profiles[{i}].schedulerName", f"duplicate profile {prof.name!r}")
        profiles[prof.name] = prof
    return profiles


def _placement(cfg: Mapping[str, Any], doc: _Doc) -> PlacementSettings:
    """The PlacementPolicy's settings (`schedulerName` stays the default when not given)."""
    _mapping(doc, "", cfg, _PLACEMENT_FIELDS)
    mode = cfg.get("mode", "nodeName")
    if mode not in ("nodeName", "nodeAffinity"):
        raise doc.error("mode", f"must be nodeName or nodeAffinity, got {mode!r}")
    sched = cfg.get("schedulerName", DEFAULT_SCHEDULER)
    if not isinstance(sched, str) or not sched:
        raise doc.error("schedulerName", "must be a non-empty string")
    if "reservationTTLSeconds" in cfg:
        raise doc.error(
            "reservationTTLSeconds",
            "was replaced by reservationGraceSeconds: a reservation now lasts its "
            "caller's timeout (the API server's webhook timeout) plus that grace",
        )
    grace = cfg.get("reservationGraceSeconds", 3)
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 < grace <= 60:
        raise doc.error("reservationGraceSeconds", f"must be a number in (0, 60], got {grace!r}")
    share = cfg.get("maxUnconfirmedShare", 0.5)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        raise doc.error("maxUnconfirmedShare", f"must be a number in (0, 1], got {share!r}")
    conflict = cfg.get("conflictPolicy", "report")
    if conflict not in ("report", "evict"):
        raise doc.error("conflictPolicy", f"must be report or evict, got {conflict!r}")
    detail = cfg.get("decisionAnnotations", "summary")
    if detail not in DECISION_DETAIL:
        raise doc.error("decisionAnnotations", f"must be full, summary or minimal, got {detail!r}")
    for name in ("scheduledEvents", "copyTopologyLabels"):
        if not isinstance(cfg.get(name, True), bool):
            raise doc.error(name, f"must be true or false, got {cfg[name]!r}")
    return PlacementSettings(
        mode=str(mode),
        scheduler_name=sched,
        reservation_grace_seconds=float(grace),
        max_unconfirmed_share=float(share),
        conflict_policy=str(conflict),
        decision_annotations=str(detail),
        scheduled_events=bool(cfg.get("scheduledEvents", True)),
        copy_topology_labels=bool(cfg.get("copyTopologyLabels", True)),
    )


def load_policy(text: str, source: str = "<policy>") -> Policy:
    """Parse a policy file. Raises PolicyError (with line numbers) when invalid."""
    profiles: dict[str, Profile] | None = None
    profiles_doc: _Doc | None = None
    placement: PlacementSettings | None = None
    placement_doc: _Doc | None = None
    named = False
    docs = _documents(text, source)
    for i, (data, doc) in enumerate(docs):
        if not isinstance(data, Mapping):
            raise doc.error("", f"document {i + 1} must be an object")
        api, kind = data.get("apiVersion"), data.get("kind")
        if kind == "KubeSchedulerConfiguration":
            doc.prefix = "KubeSchedulerConfiguration "
            if api != SCHEDULER_API:
                raise doc.error("apiVersion", f"must be {SCHEDULER_API!r}, got {api!r}")
            if profiles is not None:
                raise doc.error("kind", "more than one KubeSchedulerConfiguration")
            profiles = _scheduler_config(data, doc)
            profiles_doc = doc
        elif kind == "PlacementPolicy":
            doc.prefix = "PlacementPolicy "
            if api != PLACEMENT_API:
                raise doc.error("apiVersion", f"must be {PLACEMENT_API!r}, got {api!r}")
            if placement is not None:
                raise doc.error("kind", "more than one PlacementPolicy")
            placement = _placement(data, doc)
            placement_doc = doc
            named = "schedulerName" in data
        else:
            raise doc.error(
                "kind",
                f"unknown kind {kind!r}: expected KubeSchedulerConfiguration or PlacementPolicy",
            )
    if profiles is None:
        profiles = default_policy().profiles  # type: ignore[assignment]
        assert profiles is not None
    placement = placement or PlacementSettings()
    choices = ", ".join(sorted(profiles))
    if named and placement.scheduler_name not in profiles:
        assert placement_doc is not None
        raise placement_doc.error(
            "schedulerName",
            f"no profile named {placement.scheduler_name!r} (profiles: {choices})",
        )
    if not named and DEFAULT_SCHEDULER not in profiles:
        if len(profiles) != 1:
            err_doc = profiles_doc or _Doc(source)
            raise err_doc.error(
                "profiles",
                f"{len(profiles)} profiles and none is named {DEFAULT_SCHEDULER!r}: name the one"
                " for the webhook's pods in a PlacementPolicy document's schedulerName"
                f" (profiles: {choices})",
            )
        placement = replace(placement, scheduler_name=next(iter(profiles)))
    return Policy(profiles=dict(profiles), placement=placement)


_DEFAULT: Policy | None = None


def default_policy() -> Policy:
    """kube-scheduler's v1 default profile, nodeName mode, report conflicts."""
    global _DEFAULT
    if _DEFAULT is None:
        doc = _Doc("<default>")
        prof = build_profile({}, doc, "profiles[0]", None)
        _DEFAULT = Policy(profiles={prof.name: prof}, placement=PlacementSettings())
    return _DEFAULT
