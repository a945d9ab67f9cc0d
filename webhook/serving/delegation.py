"""Who may read metrics and debug pages: the API server decides (TokenReview, SubjectAccessReview).

As kube-rbac-proxy and controller-runtime's metrics filters do: the
caller's bearer token is reviewed by the API server (TokenReview), and the
user it names must be allowed `get` on the non-resource URL it asked for
(SubjectAccessReview), so access is granted with ordinary RBAC:

    rules: [{nonResourceURLs: ["/metrics"], verbs: ["get"]}]

Answers are cached for `ttl` seconds (a scraper every 15 s costs two API
calls a minute, not eight), keyed by a hash of the token, in a bounded map.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.kube import ApiError, Requester

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    """The answer to one request for a protected page."""

    status: int  # 200 allowed, 401 not authenticated, 403 not allowed, 503 cannot tell
    reason: str
    user: str = ""


@dataclass(frozen=True)
class _User:
    name: str
    uid: str
    groups: tuple[str, ...]
    extra: dict[str, list[str]]


class DelegatedAuthorizer:
    """Bearer token -> TokenReview -> SubjectAccessReview (get on the URL path)."""

    def __init__(
        self,
        client: Requester,
        *,
        ttl: float = 10.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.client, self.ttl, self.max_entries, self.clock = client, ttl, max_entries, clock
        self._cache: OrderedDict[tuple[str, str], tuple[float, Verdict]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, authorization: str | None, path: str) -> Verdict:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return Verdict(401, "a bearer token is required (Authorization: Bearer ...)")
        key = (hashlib.sha256(token.strip().encode()).hexdigest(), path)
        now = self.clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < self.ttl:
                return hit[1]
        verdict = self._review(token.strip(), path)
        if verdict.status != 503:
            with self._lock:
                self._cache[key] = (now, verdict)
                self._cache.move_to_end(key)
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
        return verdict

    def _review(self, token: str, path: str) -> Verdict:
        try:
            user = self._authenticate(token)
            if user is None:
                return Verdict(401, "the token was not accepted by the API server")
            allowed, why = self._authorize(user, path)
        except (ApiError, OSError) as err:
            log.warning("cannot delegate authentication to the API server: %s", err)
            return Verdict(503, "cannot ask the API server who is calling")
        except Exception as err:  # urllib3 errors and the like: never a 500 page
            log.warning("cannot delegate authentication to the API server: %r", err)
            return Verdict(503, "cannot ask the API server who is calling")
        if not allowed:
            return Verdict(403, f'user "{user.name}" may not get {path}{why}', user.name)
        return Verdict(200, "allowed", user.name)

    def _authenticate(self, token: str) -> _User | None:
        review = self.client.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
            timeout=5.0,
        )
        status: dict[str, Any] = review.get("status") or {}
        if not status.get("authenticated"):
            return None
        info = status.get("user") or {}
        return _User(
            str(info.get("username", "")),
            str(info.get("uid", "")),
            tuple(str(g) for g in info.get("groups") or ()),
            {str(k): [str(x) for x in v] for k, v in (info.get("extra") or {}).items()},
        )

    def _authorize(self, user: _User, path: str) -> tuple[bool, str]:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": "get"},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = user.extra
        review = self.client.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
            timeout=5.0,
        )
        status = review.get("status") or {}
        reason = str(status.get("reason") or "")
        return bool(status.get("allowed")), (f": {reason}" if reason else "")


class AllowAll:
    """No authentication (a snapshot-only `serve`, or behind a NetworkPolicy by choice)."""

    def check(self, authorization: str | None, path: str) -> Verdict:
        return Verdict(200, "allowed (no authentication configured)")
