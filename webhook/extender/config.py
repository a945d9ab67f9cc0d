"""The KubeSchedulerConfiguration that makes a real kube-scheduler call the extender. Pure.

Starts from the policy's own KubeSchedulerConfiguration document (so the
scheduler filters with the same profiles and arguments the extender scores
with) and adds one `extenders` entry. With `extender_decides`, every profile's
score plugins are disabled: kube-scheduler adds its own plugin scores to the
extender's, so without this the extender's 0..10 (times weight times 10) is
one voice among many, and the comparison would measure a mixture.

Field names are kubescheduler.config.k8s.io/v1's `Extender`: urlPrefix,
filterVerb, prioritizeVerb, bindVerb, weight, enableHTTPS, tlsConfig
(insecure, serverName, certFile, keyFile, caFile, ...), httpTimeout,
nodeCacheCapable, managedResources, ignorable. Validation there requires a
positive weight when prioritizeVerb is set and at most one binding extender.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

SCHEDULER_API = "kubescheduler.config.k8s.io/v1"
SCHEDULER_KIND = "KubeSchedulerConfiguration"


@dataclass(frozen=True)
class ExtenderEntry:
    """One `extenders` entry, with this project's verb paths."""

    url_prefix: str
    node_cache_capable: bool = True
    filter: bool = True
    prioritize: bool = True
    bind: bool = True
    weight: int = 1
    http_timeout: str = "5s"
    ignorable: bool = False
    ca_file: str | None = None
    """CA that signed the extender's serving certificate (HTTPS urlPrefix only)."""
    managed_resources: tuple[str, ...] = ()
    """Only call the extender for pods requesting one of these extended resources."""

    def to_dict(self) -> dict[str, Any]:
        if self.prioritize and self.weight <= 0:
            raise ValueError("an extender with prioritizeVerb needs a positive weight")
        entry: dict[str, Any] = {"urlPrefix": self.url_prefix}
        if self.filter:
            entry["filterVerb"] = "filter"
        if self.prioritize:
            entry["prioritizeVerb"] = "prioritize"
            entry["weight"] = self.weight
        if self.bind:
            entry["bindVerb"] = "bind"
        entry["nodeCacheCapable"] = self.node_cache_capable
        entry["httpTimeout"] = self.http_timeout
        entry["ignorable"] = self.ignorable
        if self.url_prefix.startswith("https://"):
            entry["enableHTTPS"] = True
            if self.ca_file:
                entry["tlsConfig"] = {"caFile": self.ca_file}
        if self.managed_resources:
            entry["managedResources"] = [
                {"name": r, "ignoredByScheduler": False} for r in self.managed_resources
            ]
        return entry


def scheduler_document(policy_text: str | None) -> dict[str, Any]:
    """The KubeSchedulerConfiguration in a policy file (the PlacementPolicy is dropped)."""
    for doc in yaml.safe_load_all(policy_text or ""):
        if isinstance(doc, dict) and doc.get("kind") == SCHEDULER_KIND:
            return doc
    return {"apiVersion": SCHEDULER_API, "kind": SCHEDULER_KIND}


def scheduler_configuration(
    entry: ExtenderEntry,
    *,
    base: Mapping[str, Any] | None = None,
    extender_decides: bool = True,
    kubeconfig: str | None = None,
    qps: float | None = None,
    burst: int | None = None,
) -> dict[str, Any]:
    """`base` (a KubeSchedulerConfiguration) with the extender added.

    `kubeconfig`, `qps` and `burst` go to clientConnection: kube-scheduler
    ignores its --kubeconfig flag when it is given --config.
    """
    config = copy.deepcopy(dict(base or {}))
    config["apiVersion"] = SCHEDULER_API
    config["kind"] = SCHEDULER_KIND
    config["extenders"] = [*(config.get("extenders") or []), entry.to_dict()]
    if extender_decides:
        profiles = config.get("profiles") or [{"schedulerName": "default-scheduler"}]
        config["profiles"] = [_without_scores(p) for p in profiles]
    connection = dict(config.get("clientConnection") or {})
    if kubeconfig is not None:
        connection["kubeconfig"] = kubeconfig
    if qps is not None:
        connection["qps"] = qps
    if burst is not None:
        connection["burst"] = burst
    if connection:
        config["clientConnection"] = connection
    return config


def _without_scores(profile: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(profile))
    plugins = dict(out.get("plugins") or {})
    plugins["score"] = {"disabled": [{"name": "*"}]}
    out["plugins"] = plugins
    return out


def dump(config: Mapping[str, Any], extra: Sequence[Mapping[str, Any]] = ()) -> str:
    return yaml.safe_dump_all([dict(config), *extra], sort_keys=False)
