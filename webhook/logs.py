"""Logging set-up: one JSON object a line (for log pipelines) or plain text (for people)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "msg", ...extra fields}` per record."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """Plain lines with the extra fields appended as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if extra:
            line += " " + " ".join(f"{k}={v}" for k, v in extra.items())
        return line


def configure(fmt: str = "json", level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else TextFormatter("%(asctime)s %(levelname)s %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class Throttle:
    """One log line per category per interval; the lines held back are counted in the next.

    For what a client can cause at will (malformed bodies, refused handshakes,
    stalled connections): a flood of them must not become a flood of log
    lines, while the first of each kind is still seen at once. Categories are
    fixed words chosen by the caller, and their number is capped.
    """

    def __init__(
        self,
        logger: logging.Logger | Any,
        *,
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        max_categories: int = 256,
    ):
        self.logger, self.interval, self.clock = logger, interval, clock
        self.max_categories = max_categories
        self._last: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def allow(self, category: str) -> int | None:
        """None to stay quiet; else how many lines of `category` were held back since the last."""
        now = self.clock()
        with self._lock:
            last = self._last.get(category)
            if last is not None and now - last[0] < self.interval:
                self._last[category] = (last[0], last[1] + 1)
                return None
            if last is None and len(self._last) >= self.max_categories:
                self._last.pop(next(iter(self._last)))
            self._last[category] = (now, 0)
            return last[1] if last is not None else 0

    def log(self, level: str, category: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        held = self.allow(category)
        if held is None:
            return False
        if held:
            msg += f" ({held} more like it in the last {self.interval:.0f}s)"
        getattr(self.logger, level)(msg, *args, **kwargs)
        return True

    def warning(self, category: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        return self.log("warning", category, msg, *args, **kwargs)

    def info(self, category: str, msg: str, *args: Any, **kwargs: Any) -> bool:
        return self.log("info", category, msg, *args, **kwargs)
