"""What the API server will refuse anyway: found before a decision reserves anything.

A mutating webhook sees the pod *before* the API server validates it
(mutation runs first), so a create that can never succeed still reaches us.
Deciding for it would reserve capacity for a pod that will never exist, and a
negative request would even *add* room to a node. The checks here follow the
pinned API server's pod validation for what the policy reads (resource
names, quantities, the request/limit rules, labels) and add one bound of our
own: amounts beyond 2^48 units are refused, so that the int64 arithmetic of
the snapshot cannot overflow (no real pod asks for 2^48 bytes or millicores).

Only the admission path runs these checks: pods the watch delivers were
validated by the API server already.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from webhook.policy.quantity import QuantityError, parse_quantity

__all__ = ["MAX_AMOUNT", "invalid_reason"]

MAX_AMOUNT: Final = 2**48
_STANDARD: Final = frozenset({"cpu", "memory", "ephemeral-storage"})
_POD_LEVEL: Final = frozenset({"cpu", "memory"})
_NAME_PART: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN: Final = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_VALUE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def invalid_reason(pod: Mapping[str, Any]) -> str | None:
    """Why the API server will reject this pod (or why its amounts cannot be counted), or None."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return None
    for group in ("initContainers", "containers"):
        containers = spec.get(group)
        if containers is None:
            continue
        if not isinstance(containers, list):
            return f"spec.{group} is not a list"
        for i, container in enumerate(containers):
            if not isinstance(container, Mapping):
                return f"spec.{group}[{i}] is not an object"
            where = f"spec.{group}[{i}].resources"
            problem = _requirements(container.get("resources"), where, level="container")
            if problem:
                return problem
    problem = _requirements(spec.get("resources"), "spec.resources", level="pod")
    if problem:
        return problem
    overhead = spec.get("overhead")
    if overhead is not None:
        problem = _amounts(overhead, "spec.overhead", level="overhead")[1]
        if problem:
            return problem
    meta = pod.get("metadata")
    if isinstance(meta, Mapping):
        return _labels(meta.get("labels"))
    return None


def _requirements(raw: Any, where: str, *, level: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return f"{where} is not an object"
    limits, problem = _amounts(raw.get("limits"), f"{where}.limits", level=level)
    if problem:
        return problem
    requests, problem = _amounts(raw.get("requests"), f"{where}.requests", level=level)
    if problem:
        return problem
    for name, amount in requests.items():
        limit = limits.get(name)
        exact = not _overcommit_allowed(name)
        if limit is None:
            if exact:
                return f"{where}.limits[{name}] must be set ({name} cannot be overcommitted)"
        elif exact and amount != limit:
            return f"{where}.requests[{name}] must equal its limit ({name} cannot be overcommitted)"
        elif amount > limit:
            return f"{where}.requests[{name}] must be less than or equal to its limit"
    return None


def _amounts(raw: Any, where: str, *, level: str) -> tuple[dict[str, int], str | None]:
    """Resource name -> amount in nano-units, or the first problem found."""
    out: dict[str, int] = {}
    if raw is None:
        return out, None
    if not isinstance(raw, Mapping):
        return out, f"{where} is not an object"
    for name, value in raw.items():
        name = str(name)
        problem = _resource_name(name, level)
        if problem:
            return out, f"{where}[{name}]: {problem}"
        try:
            amount = parse_quantity(value)
        except (QuantityError, TypeError, ValueError) as err:
            return out, f"{where}[{name}] is not a quantity: {err}"
        if amount < 0:
            return out, f"{where}[{name}] must be non-negative, got {value}"
        if _is_extended(name) and amount.denominator != 1:
            return out, f"{where}[{name}] must be a whole number, got {value}"
        scale = 1000 if name == "cpu" else 1
        if amount * scale > MAX_AMOUNT:
            return out, f"{where}[{name}] of {value} is too large to account for"
        nano = amount * 10**9
        out[name] = nano.numerator // nano.denominator
    return out, None


def _resource_name(name: str, level: str) -> str | None:
    """Which names the API server accepts in containers, at pod level, in the overhead."""
    if level == "container":
        if "/" not in name:
            if name in _STANDARD or name.startswith("hugepages-"):
                return None
            return "must be a standard resource for containers"
        if _is_native(name) or _qualified(name):
            return None
        return "doesn't follow the extended resource name standard"
    if level == "pod":
        if name in _POD_LEVEL or name.startswith("hugepages-"):
            return None
        return "is not supported in pod-level resources (cpu, memory, hugepages-*)"
    return None if ("/" not in name or _qualified(name)) else "is not a valid resource name"


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    return not _is_native(name) and not name.startswith("requests.")


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not name.startswith("hugepages-")


def _qualified(name: str) -> bool:
    """metav1 IsQualifiedName: [prefix/]name, name <= 63 chars, prefix a DNS subdomain."""
    prefix, _, part = name.rpartition("/")
    if "/" in prefix or not part or len(part) > 63 or not _NAME_PART.match(part):
        return False
    return not prefix or (len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.match(prefix)))


def _labels(raw: Any) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return "metadata.labels is not an object"
    for key, value in raw.items():
        if not isinstance(key, str) or not _qualified(key):
            return f"metadata.labels: {str(key)[:80]!r} is not a valid label key"
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            return f"metadata.labels[{key}]: {str(value)[:80]!r} is not a valid label value"
    return None
