"""A policy file: a KubeSchedulerConfiguration, a PlacementPolicy, or both, as one `Policy`.

A policy file is multi-document YAML. The KubeSchedulerConfiguration gives
the scheduling profiles (webhook.policy.profile), the PlacementPolicy the
webhook's own settings (webhook.policy.placement_policy); either may be
left out (kube-scheduler's default profile, the default settings).

Which profile places the webhook's pods (schedulerName "", default-scheduler
or placement-webhook): the one the PlacementPolicy names in `schedulerName`;
without that, the profile named default-scheduler, or else the only profile.
Several profiles, none of them default-scheduler and none named, is an error
that lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from webhook.policy.marks import DEFAULT_SCHEDULER, HANDLED_SCHEDULERS
from webhook.policy.placement_policy import PLACEMENT_API, PlacementSettings, placement_settings
from webhook.policy.policy_yaml import Document, PolicyError, read_documents
from webhook.policy.profile import SCHEDULER_API, Profile, build_profile, scheduler_profiles

__all__ = ["Policy", "PolicyError", "default_policy", "load_policy"]


@dataclass(frozen=True)
class Policy:
    """The scheduling profiles by schedulerName, and the webhook's own settings."""

    profiles: Mapping[str, Profile]
    placement: PlacementSettings = field(default_factory=PlacementSettings)

    def profile_for(self, scheduler_name: str) -> Profile | None:
        """The profile for a pod's schedulerName; the PlacementPolicy's for the ones we handle."""
        if scheduler_name in HANDLED_SCHEDULERS:
            return self.profiles.get(self.placement.scheduler_name)
        return self.profiles.get(scheduler_name)

    @property
    def default_profile(self) -> Profile:
        p = self.profile_for("")
        assert p is not None
        return p


def load_policy(text: str, source: str = "<policy>") -> Policy:
    """Parse a policy file. Raises PolicyError (with line numbers) when invalid."""
    profiles: dict[str, Profile] | None = None
    profiles_doc: Document | None = None
    placement: PlacementSettings | None = None
    placement_doc: Document | None = None
    named = False
    for i, (data, doc) in enumerate(read_documents(text, source)):
        if not isinstance(data, Mapping):
            raise doc.error("", f"document {i + 1} must be an object")
        api, kind = data.get("apiVersion"), data.get("kind")
        if kind == "KubeSchedulerConfiguration":
            doc.prefix = "KubeSchedulerConfiguration "
            if api != SCHEDULER_API:
                raise doc.error("apiVersion", f"must be {SCHEDULER_API!r}, got {api!r}")
            if profiles is not None:
                raise doc.error("kind", "more than one KubeSchedulerConfiguration")
            profiles = scheduler_profiles(data, doc)
            profiles_doc = doc
        elif kind == "PlacementPolicy":
            doc.prefix = "PlacementPolicy "
            if api != PLACEMENT_API:
                raise doc.error("apiVersion", f"must be {PLACEMENT_API!r}, got {api!r}")
            if placement is not None:
                raise doc.error("kind", "more than one PlacementPolicy")
            placement = placement_settings(data, doc)
            placement_doc = doc
            named = "schedulerName" in data
        else:
            raise doc.error(
                "kind",
                f"unknown kind {kind!r}: expected KubeSchedulerConfiguration or PlacementPolicy",
            )
    if profiles is None:
        profiles = dict(default_policy().profiles)
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
            err_doc = profiles_doc or Document(source)
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
        prof = build_profile({}, Document("<default>"), "profiles[0]", None)
        _DEFAULT = Policy(profiles={prof.name: prof}, placement=PlacementSettings())
    return _DEFAULT
