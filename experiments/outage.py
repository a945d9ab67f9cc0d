"""Arm F: arm B with the webhook stopped part way, and its fallback binder healing.

The webhook is registered with failurePolicy Ignore, so while it is down the
API server admits pods unplaced. There is no kube-scheduler in this arm: the
pods are created with schedulerName `placement-webhook` (the webhook places
them like any other pod while it is up), and once a new webhook process holds
the decision Lease its fallback binder places the ones admitted unplaced.
There is no separate reconciler: with one decision authority it could never
take the Lease the webhook holds. Reported: pods placed at admission, pods
placed later (and how long they waited), pods still pending, when the outage
started and ended, and the time to heal (outage end -> every pod bound).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.arms import Arm
from experiments.runner import run_outage
from experiments.scenario import Scenario


def run_outage_arm(
    scenario: Scenario,
    arm: Arm,
    workdir: Path,
    *,
    bin_dir: Path | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    after = scenario.outage.get("after", 0.3)
    length = scenario.outage.get("for", 5.0)
    say(f"[{scenario.name} / {arm.key}] outage after {after:.0%} of the pods, for {length:g}s")
    started = time.monotonic()
    result = run_outage(
        scenario, arm, workdir, bin_dir=bin_dir, say=say, after=after, length=length
    )
    result.setdefault("timings", {})["armSeconds"] = round(time.monotonic() - started, 2)
    return result
