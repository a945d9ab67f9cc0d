"""Run figures the runner derives from two scrapes and from the per-pod records."""

from __future__ import annotations

from experiments.load import PodRecord
from experiments.promtext import Samples
from experiments.runner import measure_metrics, outage_figures

API_BEFORE = """\
# TYPE apiserver_request_total counter
apiserver_request_total{verb="POST",resource="pods",subresource="",dry_run=""} 5
apiserver_request_total{verb="PUT",resource="leases",subresource="",dry_run=""} 50
"""
API_AFTER = """\
# TYPE apiserver_request_total counter
apiserver_request_total{verb="POST",resource="pods",subresource="",dry_run=""} 105
apiserver_request_total{verb="POST",resource="pods",subresource="binding",dry_run=""} 100
apiserver_request_total{verb="POST",resource="events",subresource="",dry_run=""} 100
apiserver_request_total{verb="POST",resource="pods",subresource="",dry_run="All"} 7
apiserver_request_total{verb="GET",resource="pods",subresource="",dry_run=""} 900
apiserver_request_total{verb="PUT",resource="leases",subresource="",dry_run=""} 80
"""


def scrapes(before: str, after: str) -> tuple[dict[str, Samples], dict[str, Samples]]:
    return {"apiserver": Samples.parse(before)}, {"apiserver": Samples.parse(after)}


def test_writes_per_pod_count_mutations_but_not_reads_dry_runs_or_leases() -> None:
    before, after = scrapes(API_BEFORE, API_AFTER)

    writes = measure_metrics(before, after, pods=100)["apiWrites"]

    assert writes["total"] == 300
    assert writes["perPod"] == 3.0
    assert writes["byResource"]["pods/binding"] == 100
    assert writes["byResource"]["leases"] == 30


def test_extender_calls_are_counted_per_verb_and_result() -> None:
    ext_before = Samples.parse("")
    ext_after = Samples.parse(
        "# TYPE placement_extender_requests counter\n"
        'placement_extender_requests_total{verb="filter",result="passed"} 9\n'
        'placement_extender_requests_total{verb="filter",result="none-passed"} 1\n'
        "# TYPE placement_extender_request_bytes counter\n"
        'placement_extender_request_bytes_total{verb="filter"} 4096\n'
    )
    before, after = scrapes(API_BEFORE, API_AFTER)

    calls = measure_metrics(
        before | {"extender": ext_before}, after | {"extender": ext_after}, pods=10
    )["extender"]

    assert calls["filter"]["results"] == {"passed": 9, "none-passed": 1}
    assert calls["filter"]["requestBytes"] == 4096
    assert calls["bind"]["results"] == {}


def record(name: str, sent: float, bound: float | None, at_create: bool) -> PodRecord:
    return PodRecord(name, 0, sent=sent, created=sent + 0.01, bound=bound,
                     placed_at_create=at_create)  # fmt: skip


def test_an_outage_splits_pods_into_admission_placed_reconciler_placed_and_pending() -> None:
    records = [
        record("a", 1.0, 1.01, True),
        record("b", 3.5, 6.0, False),
        record("c", 4.0, 7.0, False),
        record("d", 9.0, 9.01, True),
    ]

    figures = outage_figures(records, 0.0, {"startedAt": 3.0, "endedAt": 5.0})

    assert (figures["placedAtAdmission"], figures["placedLater"], figures["pending"]) == (2, 2, 0)
    assert figures["sentDuringOutage"] == 2
    assert figures["healSeconds"] == 4.01  # last bind 9.01 - outage end 5.0


def test_an_outage_that_leaves_pods_pending_has_not_healed() -> None:
    records = [record("a", 1.0, None, False)]

    figures = outage_figures(records, 0.0, {"startedAt": 0.5, "endedAt": 2.0})

    assert figures["pending"] == 1
    assert figures["healSeconds"] is None
