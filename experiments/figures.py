"""Run figures from two metric scrapes and from the per-pod records: no I/O.

The runner takes the scrapes and keeps the records; what they amount to (API
writes per pod, webhook and extender calls, where pods went around an outage)
is computed here, where a unit test can feed it text and records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from experiments.promtext import Histogram, Samples, api_writes, delta
from experiments.stats import Columns, percentile

if TYPE_CHECKING:
    from experiments.load import PodRecord

WEBHOOK_CONFIGURATION = "pods.placement-webhook.io"


def _ms(value: float) -> float | None:
    return None if value != value else round(value * 1000, 3)  # NaN -> None


def _histogram(before: Samples, after: Samples, metric: str, /, **labels: str) -> dict[str, Any]:
    h = Histogram.between(before, after, metric, **labels)
    return {
        "count": int(h.count),
        "meanMs": _ms(h.mean),
        "p50Ms": _ms(h.quantile(0.5)),
        "p99Ms": _ms(h.quantile(0.99)),
    }


def measure_metrics(
    before: dict[str, Samples], after: dict[str, Samples], pods: int
) -> dict[str, Any]:
    """API writes, webhook and extender calls between the two scrapes."""
    api_before, api_after = before["apiserver"], after["apiserver"]
    out: dict[str, Any] = {"apiWrites": _api_writes(api_before, api_after, pods)}
    admission = _admission_calls(api_before, api_after)
    if admission["count"]:
        out["admissionWebhook"] = admission
    if "webhook" in after:
        out["webhook"] = _webhook_decisions(before.get("webhook", Samples({})), after["webhook"])
    if "extender" in after:
        ext_before, ext_after = before["extender"], after["extender"]
        out["extender"] = {
            verb: _extender_calls(ext_before, ext_after, verb)
            for verb in ("filter", "prioritize", "bind")
        }
    return out


def _api_writes(before: Samples, after: Samples, pods: int) -> dict[str, Any]:
    """Mutating requests, in total and per pod; lease renewals are listed but not counted."""
    writes = api_writes(before, after)
    counted = sum(v for k, v in writes.items() if not k.startswith("leases"))
    return {
        "total": counted,
        "perPod": round(counted / pods, 3) if pods else None,
        "byResource": dict(sorted(writes.items())),
    }


def _admission_calls(before: Samples, after: Samples) -> dict[str, Any]:
    """The API server's calls to our webhook configuration, and how many failed open."""
    metric = "apiserver_admission_webhook_admission_duration_seconds"
    calls = _histogram(before, after, metric, name=WEBHOOK_CONFIGURATION)
    fail_open = delta(before, after, "apiserver_admission_webhook_fail_open_count_total")
    return calls | {"failOpen": int(sum(fail_open.values()))}


def _webhook_decisions(before: Samples, after: Samples) -> dict[str, Any]:
    """The webhook's decision latency, and its decisions by result:reason."""
    counts = delta(before, after, "placement_webhook_decisions_total")
    decisions = {f"{dict(k)['result']}:{dict(k)['reason']}": int(v) for k, v in counts.items() if v}
    return _histogram(before, after, "placement_webhook_decision_seconds") | {
        "decisions": decisions
    }


def _extender_calls(before: Samples, after: Samples, verb: str) -> dict[str, Any]:
    """One extender verb's latency, its calls by result and the request bytes it read."""
    counts = delta(before, after, "placement_extender_requests_total", verb=verb)
    body = delta(before, after, "placement_extender_request_bytes_total", verb=verb)
    return _histogram(before, after, "placement_extender_request_seconds", verb=verb) | {
        "results": {dict(k)["result"]: int(v) for k, v in counts.items() if v},
        "requestBytes": int(sum(body.values())),
    }


def columns_of(records: Sequence[PodRecord], t0: float, *, kubelets: bool) -> Columns:
    """The records as columns, times from `t0`; running and rejected only with kubelets."""

    def since(when: float | None) -> float | None:
        return None if when is None else when - t0

    return Columns(
        names=tuple(r.name for r in records),
        sent=tuple(r.sent - t0 for r in records),
        created=tuple(since(r.created) for r in records),
        bound=tuple(since(r.bound) for r in records),
        nodes=tuple(r.node for r in records),
        errors=tuple(r.error for r in records),
        running=tuple(since(r.running) for r in records) if kubelets else (),
        rejected=tuple(r.rejected for r in records) if kubelets else (),
    )


def cpu_spent(
    before: Mapping[str, float], after: Mapping[str, float], retired: Mapping[str, float]
) -> dict[str, float]:
    """CPU seconds per process over the window.

    A process stopped during the window (`retired`, what it spent until then)
    and replaced under its name adds its successor's whole time.
    """
    cpu = {name: round(after.get(name, 0.0) - value, 3) for name, value in before.items()}
    for name, spent in retired.items():
        cpu[name] = round(spent + after.get(name, 0.0), 3)
    return cpu


def outage_figures(records: list[Any], t0: float, outage: dict[str, Any]) -> dict[str, Any]:
    """Where the pods went around an outage, and how long healing took."""
    start, end = outage.get("startedAt"), outage.get("endedAt")
    at_admission = [r for r in records if r.placed_at_create]
    later = [r for r in records if r.bound is not None and not r.placed_at_create]
    pending = [r for r in records if r.bound is None]
    during = [
        r for r in records if start is not None and end is not None and start <= r.sent - t0 <= end
    ]
    last = max((r.bound - t0 for r in records if r.bound is not None), default=None)
    waits = sorted(r.bound - r.sent for r in later)
    return {
        "placedAtAdmission": len(at_admission),
        "placedLater": len(later),
        "placedLaterLatencyMs": {
            "p50": round(percentile(waits, 50) * 1000, 1) if waits else None,
            "p99": round(percentile(waits, 99) * 1000, 1) if waits else None,
        },
        "pending": len(pending),
        "sentDuringOutage": len(during),
        "healSeconds": None if pending or last is None or end is None else round(last - end, 3),
    }
