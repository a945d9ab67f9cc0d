"""Arm pinning: the control plane on one CPU, whatever places pods on the others.

Runs on real processes (children of this test) and reads their affinity back.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from experiments import probes


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two allowed CPUs")
def test_pin_arm_splits_control_plane_and_placing_and_leaves_the_rest() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    sleepers = {
        name: subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        for name in ("kube-apiserver", "webhook", "webhook-follower", "kubelet-n1")
    }
    try:
        pinned = probes.pin_arm({name: p.pid for name, p in sleepers.items()})

        assert pinned == {
            "kube-apiserver": [cpus[0]],
            "webhook": cpus[1:],
            "webhook-follower": cpus[1:],
        }
        assert os.sched_getaffinity(sleepers["kube-apiserver"].pid) == {cpus[0]}
        assert os.sched_getaffinity(sleepers["webhook-follower"].pid) == set(cpus[1:])
        assert os.sched_getaffinity(sleepers["kubelet-n1"].pid) == set(cpus)
    finally:
        for process in sleepers.values():
            process.kill()
            process.wait()
