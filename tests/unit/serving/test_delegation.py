"""Who may read metrics: the API server's TokenReview and SubjectAccessReview decide, cached."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.kube import ApiError
from webhook.serving.delegation import DelegatedAuthorizer


class FakeApiServer:
    """Answers the two reviews as the API server would: token -> user, allowed (user, path)."""

    def __init__(self, tokens: dict[str, str], allowed: set[tuple[str, str]]):
        self.tokens, self.allowed, self.calls, self.down = tokens, allowed, [], False

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Mapping[str, Any]:
        self.calls.append(path.rsplit("/", 1)[-1])
        if self.down:
            raise ApiError(503, {"message": "unavailable"}, method, path)
        spec = body["spec"]
        if path.endswith("tokenreviews"):
            user = self.tokens.get(spec["token"])
            return {"status": {"authenticated": user is not None,
                               "user": {"username": user, "groups": ["g"]}}}  # fmt: skip
        attrs = spec["nonResourceAttributes"]
        ok = (spec["user"], attrs["path"]) in self.allowed and attrs["verb"] == "get"
        return {"status": {"allowed": ok}}


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_token_bad_token_no_right_and_allowed() -> None:
    api = FakeApiServer({"t1": "prometheus", "t2": "nobody"}, {("prometheus", "/metrics")})
    auth = DelegatedAuthorizer(api)
    assert auth.check(None, "/metrics").status == 401
    assert auth.check("Basic abc", "/metrics").status == 401
    assert auth.check("Bearer wrong", "/metrics").status == 401
    assert auth.check("Bearer t2", "/metrics").status == 403
    assert auth.check("Bearer t1", "/debug/conflicts").status == 403
    allowed = auth.check("Bearer t1", "/metrics")
    assert (allowed.status, allowed.user) == (200, "prometheus")


def test_answers_are_cached_for_the_ttl_then_asked_again() -> None:
    api, clock = FakeApiServer({"t": "p"}, {("p", "/metrics")}), Clock()
    auth = DelegatedAuthorizer(api, ttl=10, clock=clock)
    for _ in range(5):
        assert auth.check("Bearer t", "/metrics").status == 200
    assert api.calls == ["tokenreviews", "subjectaccessreviews"]
    clock.now = 11
    auth.check("Bearer t", "/metrics")
    assert len(api.calls) == 4


def test_an_unreachable_api_server_is_503_and_not_cached() -> None:
    api = FakeApiServer({"t": "p"}, {("p", "/metrics")})
    auth = DelegatedAuthorizer(api)
    api.down = True
    assert auth.check("Bearer t", "/metrics").status == 503
    api.down = False
    assert auth.check("Bearer t", "/metrics").status == 200


def test_the_cache_is_bounded() -> None:
    api = FakeApiServer({f"t{i}": "p" for i in range(50)}, {("p", "/metrics")})
    auth = DelegatedAuthorizer(api, max_entries=10)
    for i in range(50):
        auth.check(f"Bearer t{i}", "/metrics")
    assert len(auth._cache) == 10
