"""Profiles of one arm's measured window: the API server with Go's pprof, our processes with py-spy.

`python -m experiments run ... --profile` starts, at the first pod create,
a CPU profile of kube-apiserver (`/debug/pprof/profile?seconds=N`; the
control plane then runs with `--profiling=true`) and a py-spy recording of
each placement process of ours (the webhook replicas, the extender, the
reconciler). Both last `seconds` (the measured window and the settling that
follows: what "CPU ms per pod" counts). Files land in `<out>/profiles/`:

- `<scenario>-<arm>-apiserver.pprof` (read with `go tool pprof -top FILE`)
  and its `.top.txt`;
- `<scenario>-<arm>-<process>.pyspy` (py-spy's collapsed stacks, one
  `frame;frame;... count` line per stack) and its `.top.txt`.

Profiling costs CPU on the same cores (py-spy samples from outside the
process), so a profiled run's throughput is not a figure to quote: the
profiles say where the time goes, unprofiled runs say how much there is.
`experiments.breakdown` turns the files into per-pod milliseconds by cause.
"""

from __future__ import annotations

import contextlib
import shutil
import ssl
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from experiments import breakdown
from experiments.breakdown import PYSPY_RATE
from webhook.devcluster import DevCluster

#: Our processes that py-spy samples (the rest are Go, profiled through the API server).
PROFILED = frozenset({"webhook", "extender", "reconciler"})


def pyspy_binary() -> str | None:
    """py-spy beside this interpreter (the venv), or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@dataclass
class WindowProfiler:
    """Profiles that start together at the first pod create and last `seconds`."""

    cluster: DevCluster
    python_pids: dict[str, int]
    """Our processes to sample (name -> pid; children, such as gunicorn's worker, included)."""
    folder: Path
    prefix: str
    seconds: float
    notes: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    _threads: list[threading.Thread] = field(default_factory=list)
    _spies: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        thread = threading.Thread(target=self._apiserver, name="pprof", daemon=True)
        thread.start()
        self._threads.append(thread)
        spy = pyspy_binary()
        if self.python_pids and spy is None:
            self.notes.append("py-spy not installed (pip install py-spy): no Python profiles")
            return
        for name, pid in self.python_pids.items():
            path = self.folder / f"{self.prefix}-{name}.pyspy"
            assert spy is not None
            self._spies[name] = subprocess.Popen(
                [spy, "record", "--pid", str(pid), "--subprocesses", "--nonblocking", "--gil",
                 "--rate", str(PYSPY_RATE), "--duration", str(round(self.seconds)),
                 "--format", "raw", "--output", str(path)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            self.files[name] = str(path)

    def _apiserver(self) -> None:
        path = self.folder / f"{self.prefix}-apiserver.pprof"
        pki = self.cluster.pki
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        url = f"{self.cluster.server}/debug/pprof/profile?seconds={round(self.seconds)}"
        try:
            with urllib.request.urlopen(url, context=context, timeout=self.seconds + 30) as r:
                path.write_bytes(r.read())
        except OSError as err:
            self.notes.append(f"no API server profile: {err}")
            return
        self.files["apiserver"] = str(path)

    def finish(self) -> dict[str, object]:
        """Wait for every profile, write the `.top.txt` summaries; what was written."""
        for thread in self._threads:
            thread.join(self.seconds + 60)
        for name, spy in self._spies.items():
            try:
                _, err = spy.communicate(timeout=self.seconds + 60)
            except subprocess.TimeoutExpired:
                spy.kill()
                _, err = spy.communicate()
            if spy.returncode != 0 or not Path(self.files[name]).exists():
                self.notes.append(
                    f"py-spy for {name} failed: {err.decode(errors='replace')[-300:]}"
                )
                self.files.pop(name, None)

        for name, file in list(self.files.items()):
            with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
                top = Path(file).with_suffix(Path(file).suffix + ".top.txt")
                if name == "apiserver":
                    top.write_text(breakdown.pprof_top(Path(file)))
                else:
                    top.write_text(breakdown.pyspy_top(Path(file)))
        return {"seconds": self.seconds, "files": dict(self.files), "notes": list(self.notes)}
