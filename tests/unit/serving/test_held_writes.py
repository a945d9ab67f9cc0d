"""The worker's response writes are held and sent together, in order."""

from __future__ import annotations

from typing import Any

from webhook.serving.worker import HeldWrites


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def sendall(self, data: bytes) -> None:
        self.calls.append(("sendall", data))

    def send(self, data: bytes) -> int:
        self.calls.append(("send", data))
        return len(data)


def test_head_and_body_go_out_in_one_send_when_the_response_is_complete() -> None:
    sock = Recorder()
    out = HeldWrites(sock)
    out.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    out.sendall(memoryview(b"{}"))
    assert sock.calls == []
    out.flush()
    assert sock.calls == [("sendall", b"HTTP/1.1 200 OK\r\n\r\n{}")]
    out.flush()
    assert len(sock.calls) == 1


def test_a_large_response_is_sent_as_it_passes_the_limit() -> None:
    sock = Recorder()
    out = HeldWrites(sock, limit=10)
    out.sendall(b"12345")
    out.sendall(b"67890")
    out.sendall(b"tail")
    out.flush()
    assert sock.calls == [("sendall", b"1234567890"), ("sendall", b"tail")]


def test_any_other_use_of_the_socket_sends_what_is_held_first() -> None:
    sock = Recorder()
    out = HeldWrites(sock)
    out.sendall(b"head")
    out.send(b"more")
    assert sock.calls == [("sendall", b"head"), ("send", b"more")]
