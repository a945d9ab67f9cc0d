"""Where an HTTP/1.1 request ends in a byte buffer, before any thread touches it.

The worker reads requests on its event loop and hands a request to a thread
only once every byte of it has arrived, so it must know, from the head
alone, how long the request is. Only Content-Length framing is accepted:
the API server, kubelets and Prometheus send it (or no body at all); a
chunked body is refused with 411 rather than read slowly in a thread.
Pure: bytes in, a verdict out.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

HEAD_END = b"\r\n\r\n"


@dataclass(frozen=True)
class FramingLimits:
    """How big a request may be before it is refused."""

    max_head_bytes: int = 32 * 1024
    """Request line and headers together."""
    max_body_bytes: int = 3 * 1024 * 1024
    """Content-Length of the body (the API server's own request cap is 3 MiB)."""


@dataclass(frozen=True)
class Framed:
    """A request whose head has arrived: it is `length` bytes long in all."""

    length: int
    expects_continue: bool


@dataclass(frozen=True)
class Refused:
    """A request that is answered with `status` and closed, without reading further."""

    status: int
    reason: str


def frame(buffer: bytes | bytearray, limits: FramingLimits) -> Framed | Refused | None:
    """The framing of the request at the start of `buffer`; None while its head is incomplete."""
    end = buffer.find(HEAD_END, 0, limits.max_head_bytes + len(HEAD_END))
    if end < 0:
        if len(buffer) > limits.max_head_bytes:
            return Refused(431, f"request head larger than {limits.max_head_bytes} bytes")
        return None
    head = bytes(buffer[:end]).decode("latin-1")
    lines = head.split("\r\n")
    if len(lines[0].split(" ")) != 3:
        return Refused(400, "malformed request line")
    length: int | None = None
    expects_continue = False
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            return Refused(400, "malformed header line")
        name, value = name.strip().lower(), value.strip()
        if name == "transfer-encoding":
            return Refused(411, "chunked or encoded request bodies are not accepted")
        if name == "content-length":
            if not value.isdigit() or (length is not None and int(value) != length):
                return Refused(400, "invalid Content-Length")
            length = int(value)
        elif name == "expect" and value.lower() == "100-continue":
            expects_continue = True
    body = length or 0
    if body > limits.max_body_bytes:
        return Refused(413, f"body of {body} bytes exceeds {limits.max_body_bytes}")
    return Framed(end + len(HEAD_END) + body, expects_continue and body > 0)


def plain_response(status: int, message: str) -> bytes:
    """A complete JSON error response that closes the connection (sent from the event loop)."""
    reasons = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout",
               411: "Length Required", 413: "Content Too Large",
               429: "Too Many Requests", 431: "Request Header Fields Too Large"}  # fmt: skip
    body = orjson.dumps({"error": message, "status": status})
    head = (
        f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body
