"""AdmissionReview (admission.k8s.io/v1) wire format: parse strictly, answer correctly.

Parsing never trusts the body: every field the webhook reads is checked for
type, and a problem becomes a `ReviewError` carrying the HTTP status and, when
it could be read, the request uid (so even an error answer can name it).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

import orjson

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
MAX_BODY_BYTES = 3 * 1024 * 1024  # the API server caps objects at ~1.5 MiB; leave room
MAX_NESTING = 64


class PatchOperation(TypedDict, total=False):
    op: str
    path: str
    value: Any


class ReviewError(Exception):
    """The request cannot be reviewed; `status` is the HTTP status to answer with.

    `category` is a fixed word (for metrics and throttled logs), the message
    is for people and may quote the input.
    """

    def __init__(
        self, message: str, status: int = 400, uid: str | None = None, category: str = "malformed"
    ):
        super().__init__(message)
        self.message, self.status, self.uid, self.category = message, status, uid, category


@dataclass(frozen=True)
class AdmissionRequest:
    """The fields of `request` the webhook acts on."""

    uid: str
    operation: str
    namespace: str
    dry_run: bool
    kind: Mapping[str, str]
    resource: Mapping[str, str]
    sub_resource: str
    obj: Mapping[str, Any] | None
    api_version: str = API_VERSION
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    timeout_seconds: float | None = None
    """How long the caller waits for the answer (the API server's `?timeout=`), if known."""

    @property
    def is_pod_create(self) -> bool:
        return (
            self.operation == "CREATE"
            and self.kind.get("group", "") == ""
            and self.kind.get("kind") == "Pod"
            and not self.sub_resource
        )


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a decoded JSON value (a scalar counts as a level), stopping past `limit`.

    Level by level, keeping only containers: a 3 MiB body of scalars costs a
    few ms, not one Python step per value.
    """
    level = [value]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return depth
        deeper: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is dict:
                deeper += [v for v in item.values() if type(v) in _CONTAINERS]
            elif kind is list:
                deeper += [v for v in item if type(v) in _CONTAINERS]
        level = deeper
    return depth + 1


_CONTAINERS = (dict, list)


def _may_nest_deeper(body: bytes) -> bool:
    """False when the body opens too few objects and arrays to nest past MAX_NESTING (a
    scalar is a level of its own, so it takes MAX_NESTING of them): a byte count, far
    cheaper than walking the decoded value. Brackets inside strings only over-count."""
    return body.count(b"{") + body.count(b"[") >= MAX_NESTING


def _str_field(data: Mapping[str, Any], name: str, uid: str | None, *, required: bool) -> str:
    value = data.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise ReviewError(
            f"request.{name} must be a non-empty string", uid=uid, category="bad-field"
        )
    return value


def _gvk(data: Mapping[str, Any], name: str, uid: str | None) -> Mapping[str, str]:
    value = data.get(name) or {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ReviewError(
            f"request.{name} must be an object of strings", uid=uid, category="bad-field"
        )
    return value


def parse_review(
    body: bytes, content_type: str | None, *, timeout_seconds: float | None = None
) -> AdmissionRequest:
    """Decode and validate an AdmissionReview request body (once: the object is kept as
    decoded, and `timeout_seconds`, the caller's, is set here rather than on a copy)."""
    if content_type is None or content_type.split(";")[0].strip().lower() != "application/json":
        raise ReviewError(
            f"Content-Type must be application/json, got {content_type!r}",
            415,
            category="content-type",
        )
    if not body:
        raise ReviewError("empty body: expected an AdmissionReview", category="empty-body")
    if len(body) > MAX_BODY_BYTES:
        raise ReviewError(
            f"body of {len(body)} bytes exceeds {MAX_BODY_BYTES}", 413, category="too-large"
        )
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise ReviewError(
            f"body is not valid JSON (UTF-8): {err}", category="invalid-json"
        ) from None
    if not isinstance(review, dict):
        raise ReviewError("body must be a JSON object (an AdmissionReview)", category="not-review")
    if _may_nest_deeper(body) and _depth(review, MAX_NESTING) > MAX_NESTING:
        raise ReviewError(f"JSON nested deeper than {MAX_NESTING} levels", category="too-deep")
    request = review.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    uid = uid if isinstance(uid, str) and uid else None
    if review.get("apiVersion") != API_VERSION or review.get("kind") != KIND:
        raise ReviewError(
            f"expected apiVersion {API_VERSION} kind {KIND}, got "
            f"{review.get('apiVersion')!r} {review.get('kind')!r}",
            uid=uid,
            category="not-review",
        )
    if not isinstance(request, dict):
        raise ReviewError("AdmissionReview has no request object", category="not-review")
    if uid is None:
        raise ReviewError("request.uid must be a non-empty string", category="bad-field")
    obj = request.get("object")
    if obj is not None and not isinstance(obj, dict):
        raise ReviewError("request.object must be an object", uid=uid, category="bad-field")
    dry_run = request.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise ReviewError("request.dryRun must be a boolean", uid=uid, category="bad-field")
    return AdmissionRequest(
        uid=uid,
        operation=_str_field(request, "operation", uid, required=True),
        namespace=_str_field(request, "namespace", uid, required=False),
        dry_run=dry_run,
        kind=_gvk(request, "kind", uid),
        resource=_gvk(request, "resource", uid),
        sub_resource=_str_field(request, "subResource", uid, required=False),
        obj=obj,
        raw=request,
        timeout_seconds=timeout_seconds,
    )


def parse_timeout(value: str | None) -> float | None:
    """A Go duration as the API server writes it in `?timeout=` ("2s", "1.5s", "500ms")."""
    if not value:
        return None
    units = (("ms", 0.001), ("us", 1e-6), ("µs", 1e-6), ("ns", 1e-9), ("s", 1.0), ("m", 60.0))
    total, rest = 0.0, value.strip()
    while rest:
        number = ""
        while rest and (rest[0].isdigit() or rest[0] == "."):
            number, rest = number + rest[0], rest[1:]
        unit = next((u for u in units if rest.startswith(u[0])), None)
        if not number or unit is None:
            return None
        try:
            total += float(number) * unit[1]
        except ValueError:
            return None
        rest = rest[len(unit[0]) :]
    return total if 0 < total <= 60 else None


def _response(
    uid: str,
    patch: list[PatchOperation] | None,
    warnings: list[str] | None,
    audit: Mapping[str, str] | None,
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(patch)).decode("ascii")
    if warnings:
        response["warnings"] = warnings
    if audit:
        response["auditAnnotations"] = dict(audit)
    return response


def build_response(
    uid: str,
    *,
    patch: list[PatchOperation] | None = None,
    warnings: list[str] | None = None,
    audit: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An allowing AdmissionReview response, with a JSONPatch when there is one."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "response": _response(uid, patch, warnings, audit),
    }


#: The constant envelope of every answer, around its `response` object.
_PREFIX = b'{"apiVersion":' + orjson.dumps(API_VERSION) + b',"kind":' + orjson.dumps(KIND)
_PREFIX += b',"response":'


def response_body(
    uid: str,
    *,
    patch: list[PatchOperation] | None = None,
    warnings: list[str] | None = None,
    audit: Mapping[str, str] | None = None,
) -> bytes:
    """`build_response` encoded as JSON, the constant envelope prebuilt (the same bytes)."""
    return _PREFIX + orjson.dumps(_response(uid, patch, warnings, audit)) + b"}"
