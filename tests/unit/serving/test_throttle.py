"""One log line per category per interval, counting what was held back."""

from __future__ import annotations

from webhook.logs import Throttle


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, msg: str, *args: object) -> None:
        self.lines.append(msg % args if args else msg)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_first_line_of_a_category_is_logged_and_the_rest_counted_in_the_next() -> None:
    out, clock = Recorder(), Clock()
    throttle = Throttle(out, interval=60, clock=clock)
    for i in range(1000):
        throttle.warning("malformed", "bad body %d", i)
    assert out.lines == ["bad body 0"]
    clock.now = 61
    throttle.warning("malformed", "bad body %d", 1000)
    assert out.lines[1] == "bad body 1000 (999 more like it in the last 60s)"


def test_categories_are_throttled_apart_and_their_number_is_capped() -> None:
    out, clock = Recorder(), Clock()
    throttle = Throttle(out, interval=60, clock=clock, max_categories=3)
    for name in ("a", "b", "a", "c", "d", "e"):
        throttle.warning(name, name)
    assert out.lines == ["a", "b", "c", "d", "e"]
    assert len(throttle._last) == 3
