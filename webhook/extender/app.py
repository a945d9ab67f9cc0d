"""The Flask app: /filter, /prioritize, /bind, /healthz, /readyz, /metrics.

A body that is not what kube-scheduler sends is answered 400 with the
result type's Error field, so a scheduler reads it as a failed call (it
checks the status code first) and a person reading the body sees why.
The verbs' paths are the defaults of `scheduler_configuration`; kube-scheduler
joins urlPrefix and verb with a slash.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from werkzeug.exceptions import HTTPException

from webhook.extender import wire
from webhook.extender.metrics import ExtenderMetrics
from webhook.extender.service import Extender


def _json(data: object, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status=status, mimetype="application/json")


def create_app(extender: Extender, metrics: ExtenderMetrics | None = None) -> Flask:
    app = Flask("placement-webhook-extender")
    app.config["MAX_CONTENT_LENGTH"] = wire.MAX_BODY_BYTES
    stats = metrics or ExtenderMetrics.create()
    app.extensions["placement-webhook.extender-metrics"] = stats

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> Response:
        return _json({"Error": err.description or err.name}, err.code or 500)

    def serve(verb: str, parse: Callable[[bytes], Any], run: Callable[[Any], Any]) -> Response:
        started = time.perf_counter()
        body = request.get_data(cache=False)
        stats.request_bytes.labels(verb).inc(len(body))
        try:
            args = parse(body)
        except wire.WireError as err:
            stats.requests.labels(verb, "bad-request").inc()
            return _json({"Error": str(err)}, 400)
        if isinstance(args, wire.ExtenderArgs):
            stats.request_nodes.labels(verb).observe(len(args.node_names))
        answer, result = run(args)
        stats.requests.labels(verb, result).inc()
        stats.request_seconds.labels(verb).observe(time.perf_counter() - started)
        return _json(answer)

    @app.post("/filter")
    def filter_() -> Response:
        return serve("filter", wire.parse_args, extender.filter)

    @app.post("/prioritize")
    def prioritize() -> Response:
        return serve("prioritize", wire.parse_args, extender.prioritize)

    @app.post("/bind")
    def bind() -> Response:
        def run(args: wire.BindingArgs) -> tuple[wire.BindingResultJSON, str]:
            answer, result = extender.bind(args)
            stats.binds.labels(result).inc()
            return answer, result

        return serve("bind", wire.parse_binding, run)

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        state = extender.view.sync_state()
        ready = extender.ready()
        body = {
            "ready": ready,
            "synced": state.synced,
            "cacheAgeSeconds": round(state.age_seconds, 3),
            "nodes": extender.view.node_count(),
        }
        return _json(body, 200 if ready else 503)

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        state = extender.view.sync_state()
        stats.cache_synced.set(1 if state.synced else 0)
        stats.cache_age.set(state.age_seconds)
        stats.nodes.set(extender.view.node_count())
        stats.assumed.set(extender.assumed)
        return Response(generate_latest(stats.registry), mimetype=CONTENT_TYPE_LATEST)

    return app
