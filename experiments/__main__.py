"""`python -m experiments run SCENARIO... --out DIR` and `python -m experiments report DIR`.

A SCENARIO is a YAML file or the name of one in experiments/scenarios/.
`run` writes DIR/results.json (every figure) and DIR/pods.json.gz (per-pod
times and nodes) after every arm, so an interrupted run keeps what it
measured, then DIR/report.md and DIR/plots/*.png. `report` re-renders the
report and plots from those two files.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import gzip
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import orjson

from experiments import parity, report
from experiments.arms import ARMS
from experiments.outage import run_outage_arm
from experiments.runner import run_arm
from experiments.scenario import Scenario, ScenarioError, load_scenario
from webhook.devcluster import DevClusterError, locate_binaries
from webhook.policy.policy_file import load_policy

SCENARIOS = Path(__file__).parent / "scenarios"


def resolve(name: str) -> Path:
    path = Path(name)
    if path.exists():
        return path
    bundled = SCENARIOS / f"{name.removesuffix('.yaml')}.yaml"
    if bundled.exists():
        return bundled
    known = ", ".join(sorted(p.stem for p in SCENARIOS.glob("*.yaml")))
    raise ScenarioError(f"no scenario {name!r} (a file, or one of: {known})")


def machine(bin_dir: Path) -> dict[str, Any]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpus": os.cpu_count(),
        "cpuModel": model,
        "memoryGiB": round(memory, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "kubernetes": bin_dir.name.split("-")[0],
    }


def commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
        return done.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def _write(out: Path, results: dict[str, Any]) -> None:
    """results.json (figures, readable) and pods.json.gz (per-pod and per-node data, compact)."""
    figures = copy.deepcopy(results)
    pods: dict[str, dict[str, Any]] = {}
    for block in figures["scenarios"]:
        for key, arm in block["arms"].items():
            quality = arm.get("quality") or {}
            pods.setdefault(block["scenario"]["name"], {})[key] = {
                "pods": arm.pop("pods", None),
                "cpuUtilization": quality.pop("cpuUtilization", None),
            }
    for name, data in (
        ("results.json", orjson.dumps(figures, option=orjson.OPT_INDENT_2)),
        ("pods.json.gz", gzip.compress(orjson.dumps(pods), mtime=0)),
    ):
        tmp = out / f"{name}.tmp"
        tmp.write_bytes(data)
        tmp.replace(out / name)


def load_results(out: Path) -> dict[str, Any]:
    """results.json with the per-pod columns from pods.json.gz put back."""
    results: dict[str, Any] = orjson.loads((out / "results.json").read_bytes())
    pods_file = out / "pods.json.gz"
    pods = orjson.loads(gzip.decompress(pods_file.read_bytes())) if pods_file.exists() else {}
    for block in results["scenarios"]:
        for key, arm in block["arms"].items():
            extra = pods.get(block["scenario"]["name"], {}).get(key) or {}
            arm["pods"] = extra.get("pods") or arm.get("pods")
            if arm.get("quality") is not None and extra.get("cpuUtilization") is not None:
                arm["quality"]["cpuUtilization"] = extra["cpuUtilization"]
    return results


def add_parity(block: dict[str, Any], scenario: Scenario) -> None:
    placements = {k: a["pods"]["nodes"] for k, a in block["arms"].items() if a.get("quality")}
    profile = load_policy(scenario.policy_text()).default_profile
    block["parity"] = parity.compare(
        scenario.node_manifests(), scenario.pod_manifests(), placements, profile
    )


def render(out: Path, results: dict[str, Any]) -> Path:
    plots = report.plot(results, out)
    path = out / "report.md"
    path.write_text(report.render(results, plots))
    return path


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenarios = [load_scenario(resolve(name)) for name in args.scenarios]
    only = tuple(a for a in args.arms.split(",") if a) if args.arms else None
    unknown = [a for a in only or () if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm(s) {', '.join(unknown)} (known: {', '.join(ARMS)})")
    bin_dir = locate_binaries()
    results: dict[str, Any] = {
        "command": "python -m experiments " + shlex.join(sys.argv[1:]),
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit(),
        "machine": machine(bin_dir),
        "scenarios": [],
    }
    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {message}", flush=True)

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="experiments-"))
    try:
        for scenario in scenarios:
            block: dict[str, Any] = {"scenario": scenario.summary(), "arms": {}, "notes": []}
            results["scenarios"].append(block)
            for key in only or scenario.arms:
                arm = ARMS[key]
                workdir = work / scenario.name / key
                try:
                    if arm.outage:
                        result = run_outage_arm(scenario, arm, workdir, bin_dir=bin_dir, say=say)
                    else:
                        result = run_arm(
                            scenario,
                            arm,
                            workdir,
                            bin_dir=bin_dir,
                            say=say,
                            profile_dir=(out / "profiles") if args.profile else None,
                            profile_seconds=args.profile_seconds,
                        )
                except (DevClusterError, OSError, RuntimeError) as err:
                    say(f"[{scenario.name} / {key}] FAILED: {err}")
                    traceback.print_exc()
                    block["notes"].append(f"arm {key} did not complete: {str(err)[:400]}")
                    continue
                block["arms"][key] = result
                _write(out, results)
                if not args.keep:
                    shutil.rmtree(workdir, ignore_errors=True)
            if scenario.parity:
                add_parity(block, scenario)
            _write(out, results)
    except KeyboardInterrupt:
        say("interrupted; writing what was measured")
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    path = render(out, results)
    say(f"report: {path}")
    return 0


def rerender(args: argparse.Namespace) -> int:
    out = Path(args.dir)
    print(render(out, load_results(out)))
    return 0


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # stop like Ctrl-C: every process, temp files
    parser = argparse.ArgumentParser(prog="python -m experiments", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run_cmd = sub.add_parser("run", help="run scenarios, write results.json, report.md, plots")
    run_cmd.add_argument("scenarios", nargs="+", help="YAML files or bundled scenario names")
    run_cmd.add_argument("--out", required=True, help="output folder")
    run_cmd.add_argument(
        "--arms", help="comma-separated arms to run instead of the scenario's (e.g. B0,B,BL)"
    )
    run_cmd.add_argument("--workdir", help="keep control-plane state and logs here")
    run_cmd.add_argument("--keep", action="store_true", help="keep each arm's state and logs")
    run_cmd.add_argument("--profile", action="store_true", help="profile each arm's window")
    run_cmd.add_argument("--profile-seconds", type=float, default=10.0)
    run_cmd.set_defaults(func=run)
    rep = sub.add_parser("report", help="re-render report.md and plots from DIR/results.json")
    rep.add_argument("dir")
    rep.set_defaults(func=rerender)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ScenarioError, DevClusterError) as err:
        print(f"experiments: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
