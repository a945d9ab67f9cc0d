"""Replay a case that disagreed, or run more random cases than `make test` does.

    python -m tests.e2e.differential replay build/differential/c17.json [--offline]
    python -m tests.e2e.differential run --cases 2000 [--seed 14] [--first 0]

`replay` puts the case on a fresh control plane and compares again (or, with
`--offline`, compares the recorded kube-scheduler log against the policy as
it is now: the quick loop while fixing the policy). `run` prints one line per
disagreeing case and a summary; each disagreement leaves a replay file.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.e2e.differential.bench import failure_message, started
from tests.e2e.differential.compare import compare
from tests.e2e.differential.driver import Applied
from tests.e2e.differential.generate import Case, small_case
from tests.e2e.differential.policies import CONFIG
from tests.e2e.differential.schedlog import Cycle
from webhook.policy.policy_file import load_policy


def _replay(path: Path, offline: bool) -> int:
    doc = json.loads(path.read_text())
    if doc["config"] != CONFIG:
        print("note: the file was recorded with another policies.CONFIG", file=sys.stderr)
    if offline:
        applied = Applied(**doc["applied"])
        comparison = compare(
            applied.items(),
            doc["pod"],
            Cycle(**doc["kubeScheduler"]),
            load_policy(doc["config"], str(path)),
        )
        differences = comparison.differences
    else:
        with (
            tempfile.TemporaryDirectory(prefix="differential-") as tmp,
            started(Path(tmp) / "cluster") as bench,
        ):
            differences = bench.run(Case.from_dict(doc["case"])).comparison.differences
    for line in differences:
        print(line)
    print("agrees" if not differences else f"{len(differences)} difference(s)")
    return 0 if not differences else 1


def _run(cases: int, seed: int, first: int) -> int:
    failed = 0
    start = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="differential-") as tmp,
        started(Path(tmp) / "cluster") as bench,
    ):
        for index in range(first, first + cases):
            result = bench.run(small_case(seed, index))
            if not result.comparison.agrees:
                failed += 1
                print(failure_message(result), flush=True)
    took = time.monotonic() - start
    print(f"{cases - failed} of {cases} cases agree (seed {seed}, {took:.0f}s)")
    return 0 if not failed else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.differential")
    sub = parser.add_subparsers(dest="command", required=True)
    replay = sub.add_parser("replay", help="replay a recorded case")
    replay.add_argument("file", type=Path)
    replay.add_argument("--offline", action="store_true", help="no cluster: the recorded log")
    run = sub.add_parser("run", help="run random small-cluster cases")
    run.add_argument("--cases", type=int, default=1000)
    run.add_argument("--seed", type=int, default=14)
    run.add_argument("--first", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "replay":
        return _replay(args.file, args.offline)
    return _run(args.cases, args.seed, args.first)


if __name__ == "__main__":
    sys.exit(main())
