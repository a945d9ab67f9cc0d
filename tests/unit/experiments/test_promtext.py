"""Metrics between two scrapes: counter deltas and histogram quantiles."""

from __future__ import annotations

import math

import pytest

from experiments.promtext import Histogram, Samples, delta

BEFORE = """\
# TYPE req counter
req_total{verb="POST",resource="pods"} 10
# TYPE lat histogram
lat_bucket{verb="filter",le="0.001"} 5
lat_bucket{verb="filter",le="0.01"} 5
lat_bucket{verb="filter",le="+Inf"} 5
lat_count{verb="filter"} 5
lat_sum{verb="filter"} 0.002
"""
AFTER = """\
# TYPE req counter
req_total{verb="POST",resource="pods"} 110
req_total{verb="POST",resource="pods",subresource="binding"} 100
# TYPE lat histogram
lat_bucket{verb="filter",le="0.001"} 55
lat_bucket{verb="filter",le="0.01"} 105
lat_bucket{verb="filter",le="+Inf"} 105
lat_count{verb="filter"} 105
lat_sum{verb="filter"} 0.302
"""


def test_counter_deltas_treat_new_label_sets_as_starting_at_zero() -> None:
    changes = delta(Samples.parse(BEFORE), Samples.parse(AFTER), "req_total", verb="POST")

    assert sorted(changes.values()) == [100.0, 100.0]


def test_histogram_between_scrapes_counts_only_new_observations() -> None:
    h = Histogram.between(Samples.parse(BEFORE), Samples.parse(AFTER), "lat", verb="filter")

    assert h.count == 100
    assert h.mean == pytest.approx(0.003)
    assert h.quantile(0.5) == pytest.approx(0.001)
    assert h.quantile(0.75) == pytest.approx(0.0055)


def test_an_empty_histogram_has_no_quantiles() -> None:
    h = Histogram.between(Samples.parse(BEFORE), Samples.parse(BEFORE), "lat")

    assert math.isnan(h.quantile(0.5))
