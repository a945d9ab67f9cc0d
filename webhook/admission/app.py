"""The Flask app: /mutate, /healthz, /readyz; the pages of the probe and metrics endpoints.

The app never fails closed on a pod: every well-formed review gets an allowing
answer (with or without a patch); only a request that is not a well-formed
AdmissionReview gets a 4xx, always as JSON and with the uid when readable.
/mutate routes each review of a pod that is ours (webhook.reconciler.
authority): the replica that holds the decision Lease decides; a follower
forwards the review to it (webhook.admission.forward) and relays the answer;
when no leader can answer in time, the pod is handed to the fallback binder.
Without a router (one process, `serve --snapshot`), every review is decided here.

`/metrics` and `/debug/conflicts` are not served here but on the metrics
endpoint, where callers are authorized (webhook.serving.endpoints): the
webhook port may face callers that are not authenticated.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl

import orjson
from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from werkzeug.exceptions import HTTPException

from webhook import bodies
from webhook.admission.forward import CALLER_TIMEOUT_HEADER, FORWARDED_HEADER, Forwarder
from webhook.admission.metrics import AdmissionMetrics
from webhook.admission.placement import DEFAULT_TIMEOUT_SECONDS, Outcome, Placer
from webhook.admission.review import (
    MAX_BODY_BYTES,
    AdmissionRequest,
    ReviewError,
    parse_review,
    parse_timeout,
    response_body,
)
from webhook.logs import Throttle
from webhook.serving.endpoints import Page, json_page
from webhook.serving.identity import ENVIRON_KEY

log = logging.getLogger("webhook.admission")
#: Anyone who reaches the port can send bad bodies: one line per kind per minute.
_throttle = Throttle(log, interval=60.0)

#: Route vocabulary of webhook.reconciler.authority.Route ("decide", "forward", "hand-off").
Router = Callable[[], tuple[str, str]]
#: Time kept back from the caller's timeout for our own answer to travel.
ANSWER_MARGIN = 0.15


def _json(data: object, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status=status, mimetype="application/json")


def _error(message: str, status: int, uid: str | None = None) -> Response:
    body: dict[str, object] = {"error": message, "status": status}
    if uid:
        body["uid"] = uid
    return _json(body, status)


def pages(
    placer: Placer,
    stats: AdmissionMetrics,
    *,
    is_leader: Callable[[], bool] = lambda: True,
    extra_registries: Sequence[CollectorRegistry] = (),
    conflicts: Callable[[], dict[str, Any]] | None = None,
    before_scrape: Callable[[], None] = lambda: None,
) -> dict[str, Page]:
    """/healthz, /readyz, /metrics (and /debug/conflicts with a binder), for the app and
    for the probe and metrics endpoints."""

    def healthz() -> tuple[int, str, bytes]:
        return json_page(200, {"status": "ok"})

    def readyz() -> tuple[int, str, bytes]:
        state = placer.view.sync_state()
        ready = placer.ready()
        body = {
            "ready": ready,
            "synced": state.synced,
            "cacheAgeSeconds": round(state.age_seconds, 3),
            "nodes": placer.view.node_count(),
            "deciding": is_leader(),
        }
        return json_page(200 if ready else 503, body)

    def metrics() -> tuple[int, str, bytes]:
        state = placer.view.sync_state()
        stats.cache_synced.set(1 if state.synced else 0)
        stats.cache_age.set(state.age_seconds)
        stats.reservations.set(len(placer.view.reservations()))
        stats.nodes.set(placer.view.node_count())
        for how, count in placer.view.ledger_counts().items():
            if how != "open":
                stats.reservations_ended.labels(how).set(count)
        stats.leader.set(1 if is_leader() else 0)
        before_scrape()
        text = b"".join(generate_latest(r) for r in (stats.registry, *extra_registries))
        return 200, CONTENT_TYPE_LATEST, text

    found: dict[str, Page] = {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}
    if conflicts is not None:
        found["/debug/conflicts"] = lambda: json_page(200, conflicts())
    return found


def _page_response(page: Page) -> Response:
    status, content_type, body = page()
    return Response(body, status=status, content_type=content_type)


def create_app(
    placer: Placer,
    metrics: AdmissionMetrics | None = None,
    *,
    router: Router | None = None,
    forwarder: Forwarder | None = None,
    is_leader: Callable[[], bool] = lambda: True,
    extra_registries: Sequence[CollectorRegistry] = (),
    conflicts: Callable[[], dict[str, Any]] | None = None,
    before_scrape: Callable[[], None] = lambda: None,
) -> Flask:
    """Build the app around a placer (which owns the policy and the cluster view)."""
    app = Flask("placement-webhook")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    stats = metrics or AdmissionMetrics.create()
    app.extensions["placement-webhook.metrics"] = stats
    own_pages = pages(
        placer, stats, is_leader=is_leader, extra_registries=extra_registries,
        conflicts=conflicts, before_scrape=before_scrape,
    )  # fmt: skip
    app.extensions["placement-webhook.pages"] = own_pages

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        status = err.code or 500
        if 400 <= status < 500:
            stats.child(stats.bad_requests, str(status)).inc()
        return _error(err.description or err.name, status)

    def route(review: AdmissionRequest, body: bytes, received: float) -> Outcome | Response:
        """Decide here, relay the leader's answer, or hand off (see the module notes)."""
        timeout = review.timeout_seconds or DEFAULT_TIMEOUT_SECONDS
        give_up_at = received + timeout - ANSWER_MARGIN
        kind, detail = router() if router is not None else ("decide", "")
        kind = str(getattr(kind, "value", kind))
        if kind == "forward" and request.environ.get(_FORWARDED_KEY):
            kind, detail = "hand-off", "the replica it was forwarded to does not lead"
        stats.child(stats.routes, kind).inc()
        if kind == "decide":
            return placer.decide(review, give_up_at=give_up_at)
        if kind == "forward" and forwarder is not None:
            budget = give_up_at - placer.clock() - ANSWER_MARGIN
            answer = forwarder.forward(detail, body, budget=budget, caller_timeout=timeout)
            if answer is not None and answer.status == 200 and _answers(answer.body, review.uid):
                stats.forward_seconds.observe(answer.seconds)
                return Response(answer.body, status=200, mimetype="application/json")
            stats.child(stats.routes, "forward-failed").inc()
            detail = "the leading replica did not answer in time"
        return placer.hand_off(review, detail or "no replica can decide right now")

    @app.post("/mutate")
    def mutate() -> Response:
        started = time.perf_counter()
        received = placer.clock()
        environ = request.environ
        body = request.get_data(cache=False)
        try:
            review = parse_review(
                body, environ.get("CONTENT_TYPE"), timeout_seconds=_caller_timeout(environ)
            )
        except ReviewError as err:
            stats.child(stats.bad_requests, str(err.status)).inc()
            _throttle.warning(err.category, "bad admission request: %s", err.message[:300])
            return _error(err.message, err.status, err.uid)
        try:
            routed = placer.triage(review) or route(review, body, received)
            if isinstance(routed, Response):
                return routed  # the leader's answer, relayed as it is
            outcome = routed
            answer = response_body(
                review.uid, patch=outcome.patch, warnings=outcome.warnings, audit=outcome.audit
            )
        except Exception as err:  # a bug after parsing: allow the pod untouched, never a 5xx
            if _throttle.allow("answer-failed") is not None:
                log.exception("no answer for a review in namespace %s", review.namespace)
            outcome = Outcome("error", f"internal error: {type(err).__name__}", "internal-error")
            answer = response_body(review.uid, warnings=outcome.warnings)
        elapsed = time.perf_counter() - started
        with contextlib.suppress(Exception):  # bookkeeping must not turn an answer into a 500
            _record(stats, outcome, elapsed)
            caller = environ.get(ENVIRON_KEY)
            _log_decision(review, outcome, elapsed, caller.common_name if caller else None)
        return Response(answer, status=200, content_type="application/json")

    @app.get("/healthz")
    def healthz() -> Response:
        return _page_response(own_pages["/healthz"])

    @app.get("/readyz")
    def readyz() -> Response:
        return _page_response(own_pages["/readyz"])

    return app


#: WSGI environ keys of the two headers a forwarding replica sends.
_FORWARDED_KEY = "HTTP_" + FORWARDED_HEADER.upper().replace("-", "_")
_CALLER_TIMEOUT_KEY = "HTTP_" + CALLER_TIMEOUT_HEADER.upper().replace("-", "_")
#: Longer values are parsed every time rather than remembered.
_CACHED_TEXT = 64


def _caller_timeout(environ: Mapping[str, Any]) -> float | None:
    """How long the caller waits: the API server's `?timeout=`, or the forwarding replica's
    header (the longer of the two). Read from the WSGI environ, not through the request's
    parsed query and headers, and remembered per value: every review carries the same."""
    query = environ.get("QUERY_STRING") or ""
    header = environ.get(_CALLER_TIMEOUT_KEY) or ""
    if len(query) > _CACHED_TEXT or len(header) > _CACHED_TEXT:
        return _timeouts.__wrapped__(query, header)
    return _timeouts(query, header)


@functools.lru_cache(maxsize=64)
def _timeouts(query: str, header: str) -> float | None:
    values = [v for k, v in parse_qsl(query, keep_blank_values=True) if k == "timeout"]
    timeout = parse_timeout(values[0] if values else None)
    caller_timeout = parse_timeout(header + "s")
    return max(timeout or 0.0, caller_timeout or 0.0) or None


def _answers(body: bytes, uid: str) -> bool:
    """Whether `body` is an AdmissionReview answering request `uid`."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    response = data.get("response") if isinstance(data, dict) else None
    return isinstance(response, dict) and response.get("uid") == uid


def _record(stats: AdmissionMetrics, outcome: Outcome, elapsed: float) -> None:
    stats.child(stats.decision_seconds, outcome.result).observe(elapsed)
    reason = outcome.category or ("placed" if outcome.result == "placed" else outcome.result)
    stats.child(stats.decisions, outcome.result, reason).inc()


def _log_decision(
    review: AdmissionRequest, outcome: Outcome, elapsed: float, caller: str | None
) -> None:
    """One line per decision; any JSON in the pod's metadata gives a readable name."""
    if outcome.category == "not-pod-create":
        return
    meta = bodies.meta(review.obj or {})
    name, prefix = meta.get("name"), meta.get("generateName")
    if isinstance(name, str) and name:
        shown = name[:253]
    else:
        shown = (prefix[:253] if isinstance(prefix, str) else "") + "*"
    log.info(
        "decision",
        extra={
            "pod": f"{review.namespace[:253]}/{shown}",
            "result": outcome.result,
            "node": outcome.node,
            "reason": outcome.reason[:512],
            "dryRun": review.dry_run,
            "reservation": outcome.reservation,
            "latencyMs": round(elapsed * 1000, 3),
            "caller": caller,
        },
    )
