"""Where a request ends, judged from its head alone, before a thread sees it."""

from __future__ import annotations

import pytest

from webhook.serving.framing import Framed, FramingLimits, Refused, frame, plain_response

LIMITS = FramingLimits(max_head_bytes=1024, max_body_bytes=4096)


def head(*headers: str, line: str = "POST /mutate HTTP/1.1") -> bytes:
    return ("\r\n".join([line, *headers]) + "\r\n\r\n").encode()


def test_an_incomplete_head_is_not_judged_yet() -> None:
    assert frame(b"POST /mutate HTTP/1.1\r\nContent-Le", LIMITS) is None


def test_content_length_gives_the_whole_length() -> None:
    data = head("Host: x", "Content-Length: 10")
    assert frame(data, LIMITS) == Framed(len(data) + 10, expects_continue=False)


def test_a_request_without_a_body_ends_with_its_head() -> None:
    data = head("Host: x", line="GET /healthz HTTP/1.1")
    assert frame(data + b"GET /next", LIMITS) == Framed(len(data), expects_continue=False)


def test_expect_continue_is_noticed_only_with_a_body() -> None:
    with_body = frame(head("Content-Length: 5", "Expect: 100-continue"), LIMITS)
    without = frame(head("Expect: 100-continue"), LIMITS)
    assert isinstance(with_body, Framed) and with_body.expects_continue
    assert isinstance(without, Framed) and not without.expects_continue


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (head("Transfer-Encoding: chunked"), 411),
        (head("Content-Length: 4097"), 413),
        (head("Content-Length: -1"), 400),
        (head("Content-Length: 1", "Content-Length: 2"), 400),
        (head("no colon here"), 400),
        (head(line="GARBAGE"), 400),
        (b"POST / HTTP/1.1\r\n" + b"X: " + b"a" * 2000, 431),
    ],
)
def test_requests_that_cannot_be_framed_safely_are_refused(data: bytes, status: int) -> None:
    verdict = frame(data, LIMITS)
    assert isinstance(verdict, Refused) and verdict.status == status


def test_a_refusal_is_a_complete_json_response_that_closes() -> None:
    text = plain_response(408, 'slow "client"').decode()
    head_text, _, body = text.partition("\r\n\r\n")
    assert head_text.startswith("HTTP/1.1 408 Request Timeout")
    assert "Connection: close" in head_text
    assert f"Content-Length: {len(body)}" in head_text
    assert body == '{"error":"slow \\"client\\"","status":408}'
