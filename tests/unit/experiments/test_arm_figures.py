"""Per-pod columns and CPU figures the runner derives from its records and counters."""

from __future__ import annotations

import math

from experiments.figures import columns_of, cpu_spent
from experiments.load import PodRecord


def test_columns_count_times_from_the_window_start_and_keep_missing_ones_missing() -> None:
    bound = PodRecord("a", 0, sent=10.5, created=10.75, bound=11.0, node="n1")
    failed = PodRecord("b", 1, sent=10.25, error="denied")

    columns = columns_of([bound, failed], 10.0, kubelets=False)

    assert columns.names == ("a", "b")
    assert columns.sent == (0.5, 0.25)
    assert columns.created == (0.75, None)
    assert columns.bound == (1.0, None)
    assert columns.nodes == ("n1", None)
    assert columns.errors == (None, "denied")


def test_kubelet_columns_only_when_the_scenario_runs_kubelets() -> None:
    ran = PodRecord("a", 0, sent=1.0, bound=2.0, running=3.5)
    refused = PodRecord("b", 1, sent=1.0, bound=2.0, rejected="OutOfcpu")

    without = columns_of([ran, refused], 1.0, kubelets=False)
    with_kubelets = columns_of([ran, refused], 1.0, kubelets=True)

    assert without.running == () and without.rejected == ()
    assert with_kubelets.running == (2.5, None)
    assert with_kubelets.rejected == (None, "OutOfcpu")


def test_unsent_pods_keep_a_nan_send_time() -> None:
    columns = columns_of([PodRecord("late", 0)], 5.0, kubelets=False)

    assert math.isnan(columns.sent[0])


def test_cpu_is_the_difference_of_the_counters_per_process() -> None:
    cpu = cpu_spent({"apiserver": 1.0, "webhook": 0.5}, {"apiserver": 3.25, "webhook": 2.0}, {})

    assert cpu == {"apiserver": 2.25, "webhook": 1.5}


def test_a_process_missing_from_the_end_counters_is_kept_not_dropped() -> None:
    assert cpu_spent({"extender": 0.5}, {}, {}) == {"extender": -0.5}


def test_a_replaced_process_adds_its_successors_whole_time_to_what_it_spent() -> None:
    before, after = {"webhook": 1.0}, {"webhook": 0.75}

    cpu = cpu_spent(before, after, {"webhook": 2.0})

    assert cpu == {"webhook": 2.75}
