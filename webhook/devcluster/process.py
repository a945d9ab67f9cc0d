"""A process of ours running beside the local control plane, and its HTTP(S) endpoint.

The webhook, the reconciler and the extender are started as real processes;
tests, the demo and the experiments talk to their endpoints (/readyz,
/metrics, ...) and stop them through this one handle.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass
class ServedProcess:
    """A running process with an endpoint at `url` (https when `ca_file` is set)."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path
    ca_file: Path | None = None

    def _context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=str(self.ca_file)) if self.ca_file else None

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, Any]:
        """Status and decoded JSON of GET `path` (text for /metrics)."""
        try:
            with urllib.request.urlopen(
                self.url + path, context=self._context(), timeout=timeout
            ) as answer:
                status, body = answer.status, answer.read()
        except urllib.error.HTTPError as err:
            status, body = err.code, err.read()
        if path == "/metrics":
            return status, body.decode()
        return status, orjson.loads(body or b"{}")

    def metrics(self) -> str:
        return str(self.get("/metrics", timeout=5)[1])

    def stop(self, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
        """Signal the process; SIGKILL goes to its whole process group when it leads one.

        gunicorn runs the app in a worker process: a SIGKILL of the arbiter alone
        would leave the worker serving. A container runtime, an OOM kill or a
        node crash takes both, which is what a killed replica means.
        """
        if self.process.poll() is None:
            if sig == signal.SIGKILL and _leads_group(self.process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
            else:
                self.process.send_signal(sig)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def tail_log(self, lines: int = 30) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False
