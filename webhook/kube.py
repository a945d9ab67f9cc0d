"""The one module that imports `kubernetes`: configuration, raw JSON requests, watches.

The official client loads kubeconfig / in-cluster credentials (exec plugins,
token files, client certificates) and owns the connection pool. Everything
else bypasses its generated model classes: bodies go out and come back as
plain dicts through orjson, because model deserialisation is far too slow for
list+watch of tens of thousands of pods.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import quote

import orjson
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

JSON = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer from the API server, with its Status body."""

    def __init__(self, status: int, body: Mapping[str, Any] | None, method: str, path: str):
        self.status = status
        self.body = dict(body or {})
        self.reason = str(self.body.get("reason", ""))
        message = self.body.get("message") or f"HTTP {status}"
        super().__init__(f"{method} {path}: {status} {message}")

    @property
    def is_conflict(self) -> bool:
        return self.status == 409

    @property
    def is_not_found(self) -> bool:
        return self.status == 404

    @property
    def is_gone(self) -> bool:
        return self.status == 410


class Requester(Protocol):
    """What a component needs of a client to send one request (Kube, or a test fake)."""

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = 30.0,
    ) -> JSON: ...


class Kube:
    """A small raw-JSON client on top of the official client's auth and pool.

    It does no client-side rate limiting (client-go's qps/burst have no
    counterpart here): a caller that must not flood the API server limits
    itself (the extender's bind has a token bucket, webhook.extender.ratelimit).
    """

    def __init__(self, kubeconfig: str | os.PathLike[str] | None = None, *, pool_size: int = 8):
        configuration = k8s_client.Configuration()
        if kubeconfig:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig), client_configuration=configuration
            )
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            k8s_config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        configuration.connection_pool_maxsize = pool_size
        self.configuration = configuration
        self.api = k8s_client.ApiClient(configuration)

    @property
    def host(self) -> str:
        return str(self.configuration.host)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = 30.0,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        query = [(k, v) for k, v in (params or {}).items() if v is not None]
        request = self.api.param_serialize(
            method,
            path,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        return self.api.call_api(*request, _request_timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = 30.0,
    ) -> JSON:
        """One request; the decoded JSON answer, or ApiError for a non-2xx status."""
        response = self._send(
            method, path, params=params, body=body, content_type=content_type, timeout=timeout
        )
        return _answer(response, method, path)

    def create_with_warnings(
        self, path: str, body: Mapping[str, Any], **params: Any
    ) -> tuple[JSON, list[str]]:
        """Create, and return the API server's `Warning` headers too (admission warnings)."""
        response = self._send("POST", path, params=params, body=dict(body))
        return _answer(response, "POST", path), parse_warnings(response.headers.getlist("Warning"))

    def get(self, path: str, **params: Any) -> JSON:
        return self.request("GET", path, params=params)

    def create(self, path: str, body: Mapping[str, Any], **params: Any) -> JSON:
        return self.request("POST", path, params=params, body=dict(body))

    def patch_merge(self, path: str, patch: Mapping[str, Any], **params: Any) -> JSON:
        return self.request(
            "PATCH",
            path,
            params=params,
            body=dict(patch),
            content_type="application/merge-patch+json",
        )

    def delete(self, path: str, **params: Any) -> JSON:
        return self.request("DELETE", path, params=params)

    def watch(
        self, path: str, *, resource_version: str, timeout_seconds: int = 300, **params: Any
    ) -> Iterator[JSON]:
        """Yield watch events ({"type", "object"}) as dicts until the server closes.

        Asks for bookmarks so a resumed watch rarely needs a re-list; the read
        timeout is longer than the server-side timeout so a dead connection
        ends with an error instead of hanging.
        """
        response = self._send(
            "GET",
            path,
            params={
                "watch": "true",
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": timeout_seconds,
                **params,
            },
            timeout=(10.0, timeout_seconds + 30.0),
        )
        if not 200 <= response.status < 300:
            raw = response.read()
            raise ApiError(response.status, _loads_or_none(raw), "WATCH", path)
        stream = response.response
        pending = b""
        try:
            for chunk in stream.stream(65536, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield orjson.loads(line)
            if pending.strip():
                yield orjson.loads(pending)
        finally:
            stream.release_conn()


def _answer(response: Any, method: str, path: str) -> JSON:
    """The decoded JSON body of a response, or ApiError for a non-2xx status."""
    raw = response.read()
    try:
        data = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        data = {"message": raw[:500].decode(errors="replace")}
    if not 200 <= response.status < 300:
        raise ApiError(response.status, data if isinstance(data, dict) else None, method, path)
    return data if isinstance(data, dict) else {"items": data}


def _loads_or_none(raw: bytes) -> JSON | None:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"message": raw[:500].decode(errors="replace")}
    return value if isinstance(value, dict) else None


def parse_warnings(headers: list[str]) -> list[str]:
    """Texts of RFC 7234 `Warning: 299 - "text"` headers (the API server's format)."""
    texts = []
    for header in headers:
        for part in header.split(", 299 "):
            _, _, quoted = part.partition('"')
            texts.append(quoted.rsplit('"', 1)[0].replace('\\"', '"'))
    return texts


def pod_path(namespace: str, name: str = "", subresource: str = "") -> str:
    path = f"/api/v1/namespaces/{quote(namespace)}/pods"
    if name:
        path += f"/{quote(name)}"
    if subresource:
        path += f"/{subresource}"
    return path
