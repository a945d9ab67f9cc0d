"""Where the CPU of a profiled window went: stacks from pprof and py-spy, by cause.

A stack is a tuple of frames, root first, with a weight (seconds for pprof,
samples for py-spy). `attribute` gives each stack the first cause (in the
rule order) one of whose patterns occurs in any of its frames, so a cause is
everything done on behalf of it, callees included. `per_pod` turns weights
into milliseconds per pod.

    python -m experiments.breakdown FILE.pprof|FILE.pyspy [--rules apiserver|webhook|admission]
        [--pods N | --per-pod-ms MS]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

Stack = tuple[tuple[str, ...], float]
Rule = tuple[str, tuple[str, ...]]

#: py-spy samples per second (experiments.profiling records at this rate): enough for
#: ms-per-pod figures over a few seconds.
PYSPY_RATE = 200

_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "hrs": 3600.0}
_VALUE = re.compile(r"^\s*([0-9.]+)(ns|us|µs|ms|s|min|hrs)\s+(\S.*)$")


def go_tool() -> str:
    return "go"


def pprof_stacks(path: Path) -> list[Stack]:
    """The CPU samples of a pprof file as stacks (`go tool pprof -traces`), in seconds."""
    text = subprocess.run(
        [go_tool(), "tool", "pprof", "-traces", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return parse_traces(text)


def parse_traces(text: str) -> list[Stack]:
    """`go tool pprof -traces` output: blocks of `VALUE leaf` then callers, `-----` between."""
    stacks: list[Stack] = []
    frames: list[str] = []
    weight = 0.0
    for line in text.splitlines():
        if line.startswith("-----"):
            if frames:
                stacks.append((tuple(reversed(frames)), weight))
            frames, weight = [], 0.0
            continue
        match = _VALUE.match(line)
        if match and not frames:
            weight = float(match.group(1)) * _UNIT[match.group(2)]
            frames.append(match.group(3).strip())
        elif frames and line.strip():
            frames.append(line.strip())
    if frames:
        stacks.append((tuple(reversed(frames)), weight))
    return stacks


def pyspy_stacks(path: Path) -> list[Stack]:
    """py-spy `--format raw` lines (`frame;frame;... count`, root first), in samples."""
    stacks: list[Stack] = []
    for line in path.read_text(errors="replace").splitlines():
        body, _, count = line.rpartition(" ")
        if not body or not count.isdigit():
            continue
        stacks.append((tuple(body.split(";")), float(count)))
    return stacks


def _short(frame: str) -> str:
    """py-spy frames are `function (file:line)`: keep the function and the file's name."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    file = where.rsplit("/", 1)[-1].split(":", 1)[0]
    return f"{name} ({file})" if file else name


def top(
    stacks: Sequence[Stack], *, count: int = 25, cumulative: bool = False
) -> list[tuple[str, float]]:
    """Heaviest frames by own weight (the leaf), or by weight of the stacks they are in."""
    totals: defaultdict[str, float] = defaultdict(float)
    for frames, weight in stacks:
        if not frames:
            continue
        if cumulative:
            for frame in set(frames):
                totals[_short(frame)] += weight
        else:
            totals[_short(frames[-1])] += weight
    return sorted(totals.items(), key=lambda kv: -kv[1])[:count]


def attribute(stacks: Iterable[Stack], rules: Sequence[Rule]) -> dict[str, float]:
    """Weight per cause: a stack goes to the first rule with a pattern in one of its frames."""
    out: defaultdict[str, float] = defaultdict(float)
    for frames, weight in stacks:
        joined = "\n".join(frames)
        for cause, patterns in rules:
            if any(p in joined for p in patterns):
                out[cause] += weight
                break
        else:
            out["other"] += weight
    return dict(out)


def table(
    shares: dict[str, float],
    *,
    unit: float,
    pods: int | None,
    label: str,
    per_pod_ms: float | None = None,
) -> str:
    """A markdown table of causes: total and, with `pods`, milliseconds per pod.

    `per_pod_ms` (a process's CPU per pod from an unprofiled run) spreads that
    figure over the causes by their shares: a profile's window rarely covers
    exactly the pods it is divided by, and profiling slows what it watches.
    """
    total = sum(shares.values()) or 1.0
    extra = " ms per pod |" if pods or per_pod_ms else ""
    lines = [f"| {label} | ms total | share |" + extra]
    lines.append("|---|---:|---:|" + ("---:|" if extra else ""))
    for cause, weight in sorted(shares.items(), key=lambda kv: -kv[1]):
        ms = weight * unit * 1000
        row = f"| {cause} | {ms:,.0f} | {weight / total:.0%} |"
        if per_pod_ms is not None:
            row += f" {per_pod_ms * weight / total:.2f} |"
        elif pods:
            row += f" {ms / pods:.3f} |"
        lines.append(row)
    ms = total * unit * 1000
    last = (
        f" {per_pod_ms:.2f} |" if per_pod_ms is not None else f" {ms / pods:.3f} |" if pods else ""
    )
    lines.append(f"| **total** | {ms:,.0f} | 100% |" + last)
    return "\n".join(lines)


def pprof_top(path: Path) -> str:
    stacks = pprof_stacks(path)
    return _top_text(stacks, unit=1.0)


def pyspy_top(path: Path) -> str:
    return _top_text(pyspy_stacks(path), unit=1.0 / PYSPY_RATE)


def _top_text(stacks: Sequence[Stack], *, unit: float) -> str:
    total = sum(w for _, w in stacks) * unit
    lines = [f"total {total * 1000:,.0f} ms", "", "own (leaf) ms:"]
    lines += [f"{w * unit * 1000:10.1f}  {name}" for name, w in top(stacks, count=40)]
    lines += ["", "cumulative ms:"]
    lines += [
        f"{w * unit * 1000:10.1f}  {name}" for name, w in top(stacks, count=60, cumulative=True)
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.breakdown", description=__doc__)
    parser.add_argument("file")
    parser.add_argument("--pods", type=int, help="divide by this many pods")
    parser.add_argument(
        "--per-pod-ms", type=float, help="spread this CPU ms per pod (unprofiled) by share"
    )
    parser.add_argument("--rules", choices=sorted(RULES), help="attribute to causes")
    parser.add_argument("--top", action="store_true", help="print the heaviest frames")
    args = parser.parse_args(argv)
    path = Path(args.file)
    if path.suffix == ".pprof":
        stacks, unit = pprof_stacks(path), 1.0
    else:
        stacks, unit = pyspy_stacks(path), 1.0 / PYSPY_RATE
    if args.top or not args.rules:
        print(_top_text(stacks, unit=unit))
    if args.rules:
        shares = attribute(stacks, RULES[args.rules])
        print(table(shares, unit=unit, pods=args.pods, label="cause", per_pod_ms=args.per_pod_ms))
    return 0


#: Causes, most specific first (from what the burst-100 profiles showed); a stack
#: goes to the first cause one of whose patterns is in one of its frames.
RULES: dict[str, Sequence[Rule]] = {
    "apiserver": (
        ("mutating webhook call (encode review, HTTPS, decode, patch)", ("mutatingDispatcher",)),
        ("other admission (in-tree plugins, managed fields)", ("admission.", "fieldmanager")),
        ("etcd write and read (client, protobuf)", ("etcd3.", "go.etcd.io/etcd/client")),
        ("watch fan-out (cacher, watch encode)", ("cacher.", "watchcache", "WatchServer")),
        ("client-certificate verification (per request)", ("crypto/x509", "x509.(*Authenticator)")),
        ("request decode / response encode", ("serializer", "encoding/json")),
        ("handler chain (authz, audit, filters, restful)", ("apiserver/pkg/endpoints", "filters.")),
        ("TLS and HTTP/2 framing", ("crypto/tls", "http2", "net/http")),
        ("garbage collection", ("gcBgMarkWorker", "runtime.gcStart", "bgsweep", "scavenge")),
    ),
    "webhook": (
        ("re-check on reinvocation (policy core)", ("Placer._recheck",)),
        ("decision (policy core: filter, score, reserve)", ("Placer.decide", "ClusterView.place")),
        (
            "review parse, triage and answer",
            ("parse_review", "triage", "build_response", "mutate ("),
        ),
        ("Scheduled event writes", ("EventRecorder",)),
        ("Flask request / response", ("flask/", "werkzeug/")),
        ("gunicorn HTTP parse, TLS, worker", ("gunicorn/", "ssl.py", "worker.py", "framing.py")),
        ("watches and view upkeep", ("Informer", "informer.py", "source.py", "view.py")),
        ("leader election, conflict loop", ("election.py", "report.py", "ledger.py")),
    ),
    # One admission's path through `serve` (bench_admission's load; py-spy --gil on the worker).
    "admission": (
        ("logging (the decision line)", ("logging/__init__", "_log_decision")),
        ("metrics (prometheus)", ("prometheus_client", "_record (")),
        ("reservation ledger", ("ledger.py",)),
        ("decision (policy core: filter, score)", ("framework.py",)),
        ("pod parse (PodView.from_dict)", ("policy/model.py",)),
        ("cluster view (lock, node labels)", ("cluster/view.py",)),
        ("patch build", ("patch.py", "Placer._answer")),
        ("parse_review", ("parse_review",)),
        ("triage (rules, limits, validation)", ("triage",)),
        ("response encode", ("build_response", "response_body", "_json (")),
        ("route and decide (rest)", ("Placer.decide", "route (")),
        ("werkzeug request and response objects", ("werkzeug/",)),
        ("/mutate handler (rest)", ("mutate (",)),
        ("Flask dispatch", ("flask/",)),
        (
            "gunicorn request parse",
            ("gunicorn/http/parser", "gunicorn/http/message", "gunicorn/http/unreader"),
        ),
        ("gunicorn environ and response write", ("gunicorn/http/wsgi",)),
        ("TLS read and write", ("ssl.py",)),
        ("HTTP framing", ("framing.py",)),
        (
            "event loop and thread hand-off",
            ("worker.py", "gthread.py", "selectors.py", "futures/thread.py", "futures/_base.py"),
        ),
        ("garbage-collector freeze thread", ("memory.py",)),
    ),
}


if __name__ == "__main__":
    sys.exit(main())
