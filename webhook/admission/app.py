"""The Flask app: /mutate, /healthz, /readyz; the pages of the probe and metrics endpoints.

The app never fails closed on a pod: every well-formed review gets an allowing
answer (with or without a patch); only a request that is not a well-formed
AdmissionReview gets a 4xx, always as JSON and with the uid when readable.
`/metrics` is not served here but on the metrics endpoint, where callers are
authorized (webhook.serving.endpoints): the webhook port may face callers
that are not authenticated.
"""

from __future__ import annotations

import contextlib
import logging
import time

import orjson
from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from werkzeug.exceptions import HTTPException

from webhook.admission.metrics import AdmissionMetrics
from webhook.admission.placement import Outcome, Placer
from webhook.admission.review import (
    MAX_BODY_BYTES,
    AdmissionRequest,
    ReviewError,
    build_response,
    parse_review,
)
from webhook.logs import Throttle
from webhook.serving.endpoints import Page, json_page
from webhook.serving.identity import ENVIRON_KEY

log = logging.getLogger("webhook.admission")
#: Anyone who reaches the port can send bad bodies: one line per kind per minute.
_throttle = Throttle(log, interval=60.0)


def _json(data: object, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status=status, mimetype="application/json")


def _error(message: str, status: int, uid: str | None = None) -> Response:
    body: dict[str, object] = {"error": message, "status": status}
    if uid:
        body["uid"] = uid
    return _json(body, status)


def pages(placer: Placer, stats: AdmissionMetrics) -> dict[str, Page]:
    """/healthz, /readyz and /metrics, for the app and for the probe and metrics endpoints."""

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
        }
        return json_page(200 if ready else 503, body)

    def metrics() -> tuple[int, str, bytes]:
        state = placer.view.sync_state()
        stats.cache_synced.set(1 if state.synced else 0)
        stats.cache_age.set(state.age_seconds)
        stats.reservations.set(len(placer.view.reservations()))
        stats.nodes.set(placer.view.node_count())
        return 200, CONTENT_TYPE_LATEST, generate_latest(stats.registry)

    return {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}


def _page_response(page: Page) -> Response:
    status, content_type, body = page()
    return Response(body, status=status, content_type=content_type)


def create_app(placer: Placer, metrics: AdmissionMetrics | None = None) -> Flask:
    """Build the app around a placer (which owns the policy and the cluster view)."""
    app = Flask("placement-webhook")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    stats = metrics or AdmissionMetrics.create()
    app.extensions["placement-webhook.metrics"] = stats
    own_pages = pages(placer, stats)
    app.extensions["placement-webhook.pages"] = own_pages

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        status = err.code or 500
        if 400 <= status < 500:
            stats.bad_requests.labels(str(status)).inc()
        return _error(err.description or err.name, status)

    @app.post("/mutate")
    def mutate() -> Response:
        started = time.perf_counter()
        try:
            review = parse_review(request.get_data(cache=False), request.content_type)
        except ReviewError as err:
            stats.bad_requests.labels(str(err.status)).inc()
            _throttle.warning(err.category, "bad admission request: %s", err.message[:300])
            return _error(err.message, err.status, err.uid)
        try:
            outcome = placer.review(review)
            answer = build_response(
                review.uid, patch=outcome.patch, warnings=outcome.warnings, audit=outcome.audit
            )
        except Exception as err:  # a bug after parsing: allow the pod untouched, never a 5xx
            if _throttle.allow("answer-failed") is not None:
                log.exception("no answer for a review in namespace %s", review.namespace)
            outcome = Outcome("error", f"internal error: {type(err).__name__}", "internal-error")
            answer = build_response(review.uid, warnings=outcome.warnings)
        elapsed = time.perf_counter() - started
        with contextlib.suppress(Exception):  # bookkeeping must not turn an answer into a 500
            _record(stats, outcome, elapsed)
            caller = request.environ.get(ENVIRON_KEY)
            _log_decision(review, outcome, elapsed, caller.common_name if caller else None)
        return _json(answer)

    @app.get("/healthz")
    def healthz() -> Response:
        return _page_response(own_pages["/healthz"])

    @app.get("/readyz")
    def readyz() -> Response:
        return _page_response(own_pages["/readyz"])

    return app


def _record(stats: AdmissionMetrics, outcome: Outcome, elapsed: float) -> None:
    stats.decision_seconds.labels(outcome.result).observe(elapsed)
    reason = outcome.category or ("placed" if outcome.result == "placed" else outcome.result)
    stats.decisions.labels(outcome.result, reason).inc()


def _log_decision(
    review: AdmissionRequest, outcome: Outcome, elapsed: float, caller: str | None
) -> None:
    """One line per decision; any JSON in the pod's metadata gives a readable name."""
    if outcome.category == "not-pod-create":
        return
    meta = review.obj.get("metadata") if isinstance(review.obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
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
