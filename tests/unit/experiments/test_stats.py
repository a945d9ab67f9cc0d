"""Run figures from per-pod records."""

from __future__ import annotations

import math

from experiments.stats import Columns, bound_over_time, percentile, summarize


def columns(sent: list[float], created: list[float | None], bound: list[float | None]) -> Columns:
    n = len(sent)
    return Columns(
        names=tuple(f"p{i}" for i in range(n)),
        sent=tuple(sent),
        created=tuple(created),
        bound=tuple(bound),
        nodes=tuple("n" if b is not None else None for b in bound),
        errors=tuple(None if c is not None else "boom" for c in created),
    )


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]

    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50.0,
        99.0,
        100.0,
    )
    assert math.isnan(percentile([], 50))


def test_throughput_spans_first_send_to_last_bind() -> None:
    run = columns([0.0, 0.5, 1.0], [0.1, 0.6, 1.1], [0.2, 1.5, 2.0])

    summary = summarize(run)

    assert summary["boundPerSecond"] == 1.5
    assert summary["bindLatencyMs"]["p50"] == 1000.0


def test_unbound_and_failed_pods_are_counted_apart_from_latencies() -> None:
    run = columns([0.0, 0.1, 0.2], [0.1, None, 0.3], [0.2, None, None])

    summary = summarize(run)

    assert (summary["created"], summary["bound"], summary["createErrors"]) == (2, 1, 1)
    assert summary["bindLatencyMs"]["max"] == 200.0


def test_the_ceiling_has_no_bind_figures() -> None:
    summary = summarize(columns([0.0, 1.0], [0.5, 1.5], [None, None]), binds=False)

    assert "boundPerSecond" not in summary
    assert summary["createdPerSecond"] == round(2 / 1.5, 2)


def test_bound_over_time_steps_up_once_per_pod() -> None:
    times, counts = bound_over_time(columns([1.0, 1.0], [1.1, 1.1], [3.0, 2.0]))

    assert (times, counts) == ([1.0, 2.0], [1, 2])


def test_columns_survive_a_json_round_trip() -> None:
    run = columns([0.0], [0.25], [None])

    assert Columns.from_dict(run.to_dict()) == run


def test_kubelet_columns_give_create_to_running_and_rejections_by_reason() -> None:
    run = columns([0.0, 0.0, 0.0], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1])
    run = Columns(
        **{**run.__dict__, "running": (0.5, 1.5, None), "rejected": (None, None, "OutOfcpu")}
    )

    summary = summarize(run)

    assert summary["running"] == 2
    assert (summary["runningLatencyMs"]["p50"], summary["runningLatencyMs"]["max"]) == (500, 1500)
    assert summary["kubeletRejections"] == {"total": 1, "OutOfcpu": 1}
    assert Columns.from_dict(run.to_dict()) == run


def test_without_kubelets_there_are_no_running_figures() -> None:
    summary = summarize(columns([0.0], [0.1], [0.1]))

    assert "runningLatencyMs" not in summary and "kubeletRejections" not in summary
    assert "running" not in columns([0.0], [0.1], [0.1]).to_dict()
