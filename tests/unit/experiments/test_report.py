"""The report: arms side by side, ratios to the ceiling and to arm A, parity and outage."""

from __future__ import annotations

from typing import Any

from experiments.report import headline, outage_section, render, scenario_table


def arm(
    title: str, per_second: float | None, *, binds: bool = True, **extra: Any
) -> dict[str, Any]:
    summary: dict[str, Any] = {"pods": 100, "created": 100, "createdPerSecond": 1000.0,
                               "createLatencyMs": {"p50": 1.0, "p99": 2.0}}  # fmt: skip
    if binds:
        summary |= {"bound": 100, "boundPerSecond": per_second,
                    "bindLatencyMs": {"p50": 5.0, "p99": 9.0}}  # fmt: skip
    return {
        "title": title,
        "summary": summary,
        "cpuSeconds": {"kube-apiserver": 1.0, "etcd": 0.5},
        "apiWrites": {"perPod": 2.0},
        "quality": {
            "nodesUsed": 3,
            "cpuUtilizationMean": 0.5,
            "cpuUtilizationStdev": 0.1,
            "cpuUtilizationMax": 0.9,
            "overcommittedNodes": 0,
            "violations": {},
            "cpuUtilization": [0.5],
        }
        if binds
        else None,
        "pods": {"names": [], "sent": [], "created": [], "bound": [], "nodes": [], "errors": []},
        **extra,
    }


BLOCK = {
    "scenario": {"name": "s", "nodes": 3, "pods": 100, "description": "",
                 "arrival": {"mode": "burst", "rate": 0, "clients": 8},
                 "client": {"qps": 500, "burst": 1000}, "percentageOfNodesToScore": None},
    "arms": {
        "ceiling": arm("ceiling", None, binds=False),
        "A": arm("kube-scheduler", 250.0),
        "B": arm("webhook nodeName", 500.0),
        "D": arm("extender", 125.0, extender={"filter": {"count": 100, "p50Ms": 1.0,
                 "p99Ms": 2.0, "requestBytes": 1000, "results": {}},
                 "prioritize": {"count": 100, "p50Ms": 1.0, "p99Ms": 2.0,
                 "requestBytes": 1000, "results": {}}}),
    },
}  # fmt: skip


def test_the_table_puts_the_arms_side_by_side_with_ratios() -> None:
    table = scenario_table(BLOCK)

    assert table.splitlines()[0].count("|") == 6
    assert "| × ceiling | 1.00× | 0.25× | 0.50× | 0.12× |" in table
    assert "| × arm A | 4.00× | 1.00× | 2.00× | 0.50× |" in table


def test_the_headline_states_the_webhook_against_the_ceiling_and_kube_scheduler() -> None:
    lines = headline(BLOCK)

    assert lines[0].startswith(
        "webhook nodeName placement: 15.00 CPU ms per pod bound = 1.00× kube-scheduler's"
    )
    assert "500.0 pods/s bound = 0.50× the raw create ceiling" in lines[0]
    assert "2.00× kube-scheduler" in lines[0]


def test_an_outage_is_described_in_numbers() -> None:
    outage = {
        "startedAt": 3.0,
        "endedAt": 8.0,
        "sentBefore": 300,
        "sentDuringOutage": 500,
        "placedAtAdmission": 450,
        "placedLater": 550,
        "pending": 0,
        "healSeconds": 2.5,
        "placedLaterLatencyMs": {"p50": 1000.0, "p99": 3000.0},
    }

    text = outage_section({"outage": outage})

    assert "550 later by the restarted webhook's fallback binder" in text
    assert "Time to heal (new webhook serving → every pod bound): 2.50 s" in text


def test_the_report_names_the_command_and_the_machine() -> None:
    text = render({"command": "python -m experiments run s --out x", "machine": {"cpus": 2},
                   "scenarios": [BLOCK]})  # fmt: skip

    assert "`python -m experiments run s --out x`" in text
    assert "Machine: 2 CPUs" in text
    assert "## s: 3 nodes, 100 pods, burst" in text


def test_kubelet_rows_appear_only_for_a_scenario_on_hollow_kubelets() -> None:
    kubelets = {
        "count": 3, "cpuSeconds": 1.5, "pssMiB": {"mean": 20.0, "max": 22.0},
        "writes": {"pods/status": 200, "events": 400, "nodes/status": 3, "leases": 30},
        "podWritesPerPod": 6.0,
        "idle": {"writesPerSecond": 0.3, "cpuCores": {"kube-apiserver": 0.02, "etcd": 0.01,
                                                      "kubelets": 0.03}},
    }  # fmt: skip
    on_kubelets = arm("webhook nodeName", 500.0, kubelets=kubelets)
    on_kubelets["summary"] |= {"running": 99, "runningLatencyMs": {"p50": 300.0, "p99": 900.0},
                               "kubeletRejections": {"total": 1, "OutOfcpu": 1}}  # fmt: skip
    block = {**BLOCK, "arms": {"B": on_kubelets}}

    table = scenario_table(block)

    assert "| create→Running p99 (ms) | 900.0 |" in table
    assert "| kubelet rejections (by reason) | OutOfcpu 1 |" in table
    assert (
        "| kubelet writes: pods/status / events / nodes/status / leases | 200 / 400 / 3 / 30 |"
        in table
    )
    idle = "| idle nodes: API writes/s / cores apiserver / etcd / kubelets |"
    assert f"{idle} 0.3 / 0.020 / 0.010 / 0.030 |" in table
    assert "create→Running" not in scenario_table(BLOCK)
