"""The state every step of one arm's run shares, and the components it started.

One frozen `Bench` per arm, built once the control plane is up, so that each
step of the run (set up, load, settle, collect, stop) takes it as its one
shared argument. `Components` stays mutable: arm F's outage thread swaps the
webhook while the load runs.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from experiments.arms import Arm
from experiments.components import ExtenderProcess
from experiments.load import BindWatcher
from experiments.scenario import Scenario
from webhook.devcluster import DevCluster
from webhook.devcluster.webhook import WebhookProcess, WebhookSet
from webhook.kube import Kube


class Components:
    """What an arm started besides the control plane, and their pids."""

    def __init__(self) -> None:
        self.webhook: WebhookProcess | None = None
        """The webhook, or the leader of `replicas` (whose /metrics the run reads)."""
        self.replicas: WebhookSet | None = None
        self.extender: ExtenderProcess | None = None
        self.scheduler = False
        self.retired_cpu: dict[str, float] = {}
        """CPU seconds of processes stopped during the run (arm F's first webhook)."""

    def pids(self, cluster: DevCluster) -> dict[str, int]:
        pids = {name: c.pid for name, c in cluster.components.items()}
        if self.webhook is not None:
            pids["webhook"] = self.webhook.process.pid
        for member in self.replicas.members if self.replicas is not None else ():
            if member is not self.webhook:
                pids["webhook-follower"] = member.process.pid
        if self.extender is not None:
            pids["extender"] = self.extender.process.pid
        return pids

    def stop(self, grace: float = 2.0) -> None:
        if self.replicas is not None:
            with contextlib.suppress(Exception):
                self.replicas.stop(grace=grace)
        for process in (self.webhook, self.extender):
            if process is not None:
                with contextlib.suppress(Exception):
                    process.stop(grace=grace)


@dataclass(frozen=True)
class Bench:
    """What every step of one arm shares: its control plane, clients, components and watch."""

    scenario: Scenario
    arm: Arm
    cluster: DevCluster
    kube: Kube
    watch_client: Kube
    watcher: BindWatcher
    parts: Components
    say: Callable[[str], None]
    measured: threading.Event
    """Set once the arm is over: releases the outage thread (see _outage)."""
    clock: Callable[[], float] = time.monotonic

    def tell(self, message: str) -> None:
        """Say `message` under the scenario's and the arm's names."""
        self.say(f"[{self.scenario.name} / {self.arm.key}] {message}")
