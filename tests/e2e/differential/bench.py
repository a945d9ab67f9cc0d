"""A control plane with kube-scheduler logging its scores, and cases run against it.

Used by tests/e2e/test_differential.py and by the replay tool
(`python -m tests.e2e.differential`). A case that disagrees is written to a
replay file: the case, the objects as the API server returned them, what
kube-scheduler logged, and the differences.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.differential.compare import Comparison, compare
from tests.e2e.differential.driver import Applied, Driver, SchedulerLog
from tests.e2e.differential.generate import Case
from tests.e2e.differential.policies import CONFIG, RUNTIME_CLASSES, runtime_class
from tests.e2e.differential.schedlog import Cycle
from webhook.devcluster import DevCluster
from webhook.kube import Kube
from webhook.policy.policy_file import Policy, load_policy

REPO = Path(__file__).resolve().parents[3]
# The V(10) score lines, the V(2) verdicts, the informers' V(3)/V(4) events, batching hints.
VMODULE = "--vmodule=schedule_one=10,eventhandlers=4,batch=3"
REPLAY_DIR_ENV = "PLACEMENT_DIFFERENTIAL_OUT"


@dataclass
class Result:
    case: Case
    pod: dict[str, Any]
    """The pod to schedule as the API server returned it (admission applied)."""
    applied: Applied
    cycle: Cycle
    comparison: Comparison
    replay: Path | None = None


@dataclass
class Bench:
    cluster: DevCluster
    kube: Kube
    driver: Driver
    policy: Policy
    results: list[Result] = field(default_factory=list)

    def run(self, case: Case, *, keep: bool = False, applied: Applied | None = None) -> Result:
        """Apply the case (unless `applied`), schedule its pod, compare; remove it unless `keep`."""
        try:
            if applied is None:
                applied = self.driver.apply(case)
            created, cycle = self.driver.schedule(case.pod)
        finally:
            if not keep and applied is not None:
                self.driver.remove(case)
        comparison = compare(applied.items(), created, cycle, self.policy)
        result = Result(case, created, applied, cycle, comparison)
        if not comparison.agrees:
            result.replay = write_replay(result)
        self.results.append(result)
        return result


def replay_dir() -> Path:
    return Path(os.environ.get(REPLAY_DIR_ENV) or REPO / "build" / "differential")


def write_replay(result: Result) -> Path:
    folder = replay_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result.case.name}.json"
    path.write_text(
        json.dumps(
            {
                "config": CONFIG,
                "case": result.case.to_dict(),
                "applied": asdict(result.applied),
                "pod": result.pod,
                "kubeScheduler": asdict(result.cycle),
                "differences": result.comparison.differences,
            },
            indent=1,
        )
    )
    return path


def failure_message(result: Result) -> str:
    lines = "\n  ".join(result.comparison.differences)
    return (
        f"case {result.case.name} (profile {result.case.profile}) disagrees with kube-scheduler:"
        f"\n  {lines}\nreplay: python -m tests.e2e.differential replay {result.replay}"
    )


@contextlib.contextmanager
def started(workdir: Path) -> Iterator[Bench]:
    """etcd, kube-apiserver and kube-scheduler (CONFIG, score logging); RuntimeClasses made."""
    with DevCluster.start(workdir, scheduler=False) as cluster:
        kube = Kube(cluster.kubeconfig)
        try:
            for name in RUNTIME_CLASSES:
                kube.create("/apis/node.k8s.io/v1/runtimeclasses", runtime_class(name))
            config = workdir / "differential-scheduler.yaml"
            config.write_text(CONFIG)
            cluster.start_scheduler(config, extra_args=[VMODULE])
            driver = Driver(kube, SchedulerLog(cluster.log_path("kube-scheduler")))
            driver.warm_up()
            yield Bench(cluster, kube, driver, load_policy(CONFIG, "differential"))
        finally:
            kube.close()
