"""results.json -> report.md and PNG plots.

One table per scenario with the arms side by side, ratios to the raw-create
ceiling and to arm A (kube-scheduler alone), the parity section when the
scenario asks for it, and three plots per scenario: create-to-bound latency
CDFs, bound pods over time, and sorted per-node cpu utilization. Formatting
only: every figure is computed by the runner, stats or parity modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.scenario import ARM_KEYS
from experiments.stats import Columns, bound_over_time, cdf

PLACEMENT_CPU = (
    "kube-apiserver", "etcd", "kube-scheduler", "webhook", "webhook-follower", "extender",
    "reconciler",
)  # fmt: skip


def _num(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def _ratio(value: float | None, base: float | None) -> str:
    if not value or not base or math.isnan(value) or math.isnan(base):
        return "–"
    return f"{value / base:.2f}×"


def throughput(arm: Mapping[str, Any]) -> float | None:
    """Bound pods/s, or created pods/s for the ceiling (which binds nothing)."""
    summary = arm["summary"]
    value = summary.get("boundPerSecond", summary.get("createdPerSecond"))
    return None if value is None else float(value)


def _placed(arm: Mapping[str, Any]) -> int:
    """Pods bound, or created for the ceiling (which binds nothing)."""
    summary = arm["summary"]
    return int(summary["bound"] if arm.get("quality") else summary["created"])


def _placement_cpu(arm: Mapping[str, Any]) -> float:
    return float(sum(arm["cpuSeconds"].get(k, 0.0) for k in PLACEMENT_CPU))


def cpu_ms_per_pod(arm: Mapping[str, Any]) -> float:
    """The headline cost: control plane + placement CPU per pod bound (ceiling: created)."""
    return _placement_cpu(arm) * 1000 / max(1, _placed(arm))


def _pinning(arm: Mapping[str, Any]) -> str:
    pinned = arm.get("pinning")
    if not pinned:
        return "–" if "pinning" not in arm else "unpinned (one CPU)"
    return ", ".join(f"{name} {'+'.join(map(str, cpus))}" for name, cpus in sorted(pinned.items()))


Row = tuple[str, Callable[[Mapping[str, Any]], str]]


def _rows(ceiling: float | None, base_a: float | None, cpu_a: float | None = None) -> list[Row]:
    def lat(key: str, q: str) -> Callable[[Mapping[str, Any]], str]:
        return lambda a: _num((a["summary"].get(key) or {}).get(q))

    def ext(verb: str) -> Callable[[Mapping[str, Any]], str]:
        def cell(a: Mapping[str, Any]) -> str:
            calls = (a.get("extender") or {}).get(verb)
            if not calls:
                return "–"
            return f"{calls['count']:,} / {_num(calls['p50Ms'], 2)} / {_num(calls['p99Ms'], 2)}"

        return cell

    def hook(a: Mapping[str, Any]) -> str:
        adm = a.get("admissionWebhook")
        if not adm:
            return "–"
        return f"{adm['count']:,} / {_num(adm['p50Ms'], 2)} / {_num(adm['p99Ms'], 2)}"

    def quality(key: str, digits: int = 3) -> Callable[[Mapping[str, Any]], str]:
        return lambda a: "–" if not a.get("quality") else _num(a["quality"][key], digits)

    def violations(a: Mapping[str, Any]) -> str:
        if not a.get("quality"):
            return "–"
        found = a["quality"]["violations"]
        return ", ".join(f"{k} {v}" for k, v in sorted(found.items())) or "0"

    def cpu(name: str) -> Callable[[Mapping[str, Any]], str]:
        return lambda a: _num(a["cpuSeconds"].get(name), 2) if name in a["cpuSeconds"] else "–"

    return [
        ("pods bound / created", lambda a: (
            f"{a['summary'].get('bound', 0):,} / {a['summary']['created']:,}"
            if "bound" in a["summary"] else f"– / {a['summary']['created']:,}")),
        ("**pods/s** (bound; ceiling: created)", lambda a: f"**{_num(throughput(a))}**"),
        ("× ceiling", lambda a: _ratio(throughput(a), ceiling)),
        ("× arm A", lambda a: _ratio(throughput(a), base_a)),
        ("**CPU ms per pod bound** (control plane + placement; ceiling: created)",
         lambda a: f"**{_num(cpu_ms_per_pod(a), 2)}**"),
        ("CPU per pod × arm A", lambda a: _ratio(cpu_ms_per_pod(a), cpu_a)),
        ("create request p50 (ms)", lat("createLatencyMs", "p50")),
        ("create request p99 (ms)", lat("createLatencyMs", "p99")),
        ("create→bound p50 (ms)", lat("bindLatencyMs", "p50")),
        ("create→bound p99 (ms)", lat("bindLatencyMs", "p99")),
        ("API writes per pod", lambda a: _num(a["apiWrites"]["perPod"], 2)),
        ("admission webhook calls / p50 / p99 ms", hook),
        ("admitted unplaced (webhook failed open)", lambda a: "–" if not a.get("admissionWebhook")
            else _num(a["admissionWebhook"]["failOpen"])),
        ("extender filter calls / p50 / p99 ms", ext("filter")),
        ("extender prioritize calls / p50 / p99 ms", ext("prioritize")),
        ("extender bind calls / p50 / p99 ms", ext("bind")),
        ("extender request MB (filter+prioritize)", lambda a: "–" if not a.get("extender") else
            _num(sum(a["extender"][v]["requestBytes"] for v in ("filter", "prioritize")) / 1e6, 2)),
        ("CPU s kube-apiserver", cpu("kube-apiserver")),
        ("CPU s etcd", cpu("etcd")),
        ("CPU s kube-scheduler", cpu("kube-scheduler")),
        ("CPU s webhook", cpu("webhook")),
        ("CPU s webhook follower (arm B2)", cpu("webhook-follower")),
        ("CPU s extender", cpu("extender")),
        ("CPU s load generator", cpu("runner")),
        ("CPU s reconciler", cpu("reconciler")),
        ("nodes used", quality("nodesUsed", 0)),
        ("cpu utilization mean", quality("cpuUtilizationMean")),
        ("cpu utilization stdev", quality("cpuUtilizationStdev")),
        ("cpu utilization max", quality("cpuUtilizationMax")),
        ("overcommitted nodes", quality("overcommittedNodes", 0)),
        ("pods violating constraints", violations),
        ("settling after the last bind (s)", lambda a: _num(a.get("settleSeconds"))),
        ("CPUs each process was pinned to", _pinning),
        ("1-min load average before / after", lambda a: "–" if "loadAverage" not in a else
            f"{a['loadAverage']['before']:.1f} / {a['loadAverage']['after']:.1f}"),
    ]  # fmt: skip


def _kubelet_rows() -> list[Row]:
    """Rows of a scenario on hollow kubelets (see experiments/kubelets.py)."""

    def running(q: str) -> Callable[[Mapping[str, Any]], str]:
        return lambda a: _num((a["summary"].get("runningLatencyMs") or {}).get(q))

    Cell = Callable[[Mapping[str, Any]], str]

    def kubelet(get: Callable[[Mapping[str, Any]], Any], digits: int = 1) -> Cell:
        return lambda a: "–" if not a.get("kubelets") else _num(get(a["kubelets"]), digits)

    def rejections(a: Mapping[str, Any]) -> str:
        found = a["summary"].get("kubeletRejections")
        if not found:
            return "–"
        return ", ".join(f"{k} {v}" for k, v in found.items() if k != "total") or "0"

    def writes(a: Mapping[str, Any]) -> str:
        k = a.get("kubelets")
        if not k:
            return "–"
        w = k["writes"]
        return (f"{w['pods/status']:,} / {w['events']:,} / {w['nodes/status']:,} / "
                f"{w['leases']:,}")  # fmt: skip

    def idle(a: Mapping[str, Any]) -> str:
        k = a.get("kubelets")
        if not k or not k.get("idle"):
            return "–"
        cores = k["idle"]["cpuCores"]
        parts = [_num(cores.get(c), 3) for c in ("kube-apiserver", "etcd", "kubelets")]
        return f"{k['idle']['writesPerSecond']:.1f} / " + " / ".join(parts)

    return [
        ("pods Running", lambda a: _num(a["summary"].get("running"))),
        ("create→Running p50 (ms)", running("p50")),
        ("create→Running p99 (ms)", running("p99")),
        ("kubelet rejections (by reason)", rejections),
        ("kubelet writes per pod (status + events)", kubelet(lambda k: k["podWritesPerPod"], 2)),
        ("kubelet writes: pods/status / events / nodes/status / leases", writes),
        ("CPU s hollow kubelets (all)", kubelet(lambda k: k["cpuSeconds"], 2)),
        ("hollow kubelet PSS MiB (mean)", kubelet(lambda k: k["pssMiB"]["mean"])),
        ("idle nodes: API writes/s / cores apiserver / etcd / kubelets", idle),
    ]  # fmt: skip


def scenario_table(block: Mapping[str, Any]) -> str:
    arms = block["arms"]
    keys = [k for k in ARM_KEYS if k in arms]
    ceiling = throughput(arms["ceiling"]) if "ceiling" in arms else None
    base_a = throughput(arms["A"]) if "A" in arms else None
    cpu_a = cpu_ms_per_pod(arms["A"]) if "A" in arms else None
    header = "| | " + " | ".join(f"{k}: {arms[k]['title']}" for k in keys) + " |"
    lines = [header, "|---|" + "---:|" * len(keys)]
    rows = _rows(ceiling, base_a, cpu_a)
    if any(arms[k].get("kubelets") for k in keys):
        rows += _kubelet_rows()
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(arms[k]) for k in keys) + " |")
    return "\n".join(lines)


def headline(block: Mapping[str, Any]) -> list[str]:
    """The few sentences the README quotes."""
    arms = block["arms"]
    out = []
    ceiling = throughput(arms["ceiling"]) if "ceiling" in arms else None
    a = throughput(arms["A"]) if "A" in arms else None
    if "B" in arms and (ceiling or a):
        b = throughput(arms["B"])
        cost = cpu_ms_per_pod(arms["B"])
        cost_a = cpu_ms_per_pod(arms["A"]) if "A" in arms else None
        out.append(
            f"webhook nodeName placement: {_num(cost, 2)} CPU ms per pod bound = "
            f"{_ratio(cost, cost_a)} kube-scheduler's ({_num(cost_a, 2)} ms); "
            f"{_num(b)} pods/s bound = {_ratio(b, ceiling)} the "
            f"raw create ceiling ({_num(ceiling)} pods/s) and {_ratio(b, a)} kube-scheduler "
            f"({_num(a)} pods/s)"
        )
    for key in ("D", "E"):
        if key in arms and "A" in arms:
            d = throughput(arms[key])
            ext_cpu = arms[key]["cpuSeconds"].get("extender", 0.0)
            pods = max(1, _placed(arms[key]))
            p99 = arms[key]["summary"]["bindLatencyMs"]["p99"]
            a_p99 = arms["A"]["summary"]["bindLatencyMs"]["p99"]
            out.append(
                f"extender ({arms[key]['title']}): {_num(d)} pods/s = {_ratio(d, a)} "
                f"kube-scheduler alone; create→bound p99 {_num(p99)} ms vs {_num(a_p99)} ms; "
                f"extender CPU {_num(ext_cpu * 1000 / pods, 2)} ms per pod"
            )
    return out


def outage_section(arm: Mapping[str, Any]) -> str:
    o = arm.get("outage")
    if not o:
        return "Arm F: the outage did not happen (see notes)."
    later = o.get("placedLaterLatencyMs") or {}
    heal = (
        "not healed before the deadline"
        if o.get("healSeconds") is None
        else (f"{o['healSeconds']:.2f} s")
    )
    return (
        f"Arm F: the webhook was killed at t={o['startedAt']:.2f} s (after {o['sentBefore']} "
        f"pods) and a new one was serving from t={o['endedAt']:.2f} s; {o['sentDuringOutage']} "
        f"pods were created in between. {o['placedAtAdmission']} pods were placed at admission, "
        f"{o['placedLater']} later by the restarted webhook's fallback binder "
        f"(create→bound p50 {_num(later.get('p50'))} ms, "
        f"p99 {_num(later.get('p99'))} ms), {o['pending']} were still pending at the end. "
        f"Time to heal (new webhook serving → every pod bound): {heal}."
    )  # fmt: skip


def parity_section(parity: Mapping[str, Any]) -> str:
    if parity.get("error"):
        return f"Parity: not computed ({parity['error']}).\n"
    ref = parity["reference"]
    lines = [
        "Policy-optimal: the arm's node had the policy's best score on the arm's own cluster "
        "state (the policy's choice or a tie with it). Same node: the arm chose what "
        f"{ref} chose for the same pod; disagreements on an identical state are ties, "
        "lower-scored or rejected nodes, later ones follow from an earlier one.",
        "",
        f"| arm | bound | policy-optimal | = policy's own pick | same node as {ref} | ties "
        "| scored lower | rejected | after divergence |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, row in parity["arms"].items():
        optimal = "–" if row["policyOptimalRate"] is None else f"{row['policyOptimalRate']:.1%}"
        if arm == ref:
            lines.append(
                f"| {arm} | {row['bound']} | {optimal} | {row['policyChoice']} | (reference) "
                "| | | | |"
            )
            continue
        kinds = row["disagreements"]
        same = "–" if row["agreement"] is None else f"{row['agreement']:.1%}"
        lines.append(
            f"| {arm} | {row['bound']} | {optimal} | {row['policyChoice']} | {same} "
            f"({row['agree']}/{row['compared']}) | {kinds['tie']} | {kinds['scoredLower']} | "
            f"{kinds['rejected']} | {kinds['diverged']} |"
        )
    for arm, row in parity["arms"].items():
        first_order = [d for d in row.get("details", []) if d["kind"] != "diverged"]
        if not first_order:
            continue
        later = row["disagreements"]["diverged"]
        lines += [
            "",
            f"Disagreements of {arm} with {ref} (first-order; {later} later ones followed):",
            "",
        ]
        for d in first_order[:20]:
            lines.append(f"- `{d['pod']}`: {d['kind']}: {d['reason']}")
        if len(first_order) > 20:
            lines.append(f"- ... {len(first_order) - 20} more in results.json")
    return "\n".join(lines) + "\n"


def render(results: Mapping[str, Any], plots: Mapping[str, Sequence[str]] | None = None) -> str:
    machine = results.get("machine", {})
    parts = [
        "# Placement comparison: admission webhook vs kube-scheduler vs scheduler extender",
        "",
        f"Command: `{results.get('command', '')}`  ",
        f"Started {results.get('started', '')}; commit `{results.get('commit', '?')}`; "
        f"Kubernetes {machine.get('kubernetes', '?')}.  ",
        f"Machine: {machine.get('cpus', '?')} CPUs ({machine.get('cpuModel', '?')}), "
        f"{machine.get('memoryGiB', '?')} GiB, {machine.get('kernel', '?')}, "
        f"Python {machine.get('python', '?')}. Shared with other work while it ran.",
        "",
        "Every arm ran on its own fresh control plane (etcd + kube-apiserver from the pinned "
        "upstream binaries; nodes are Node objects without a kubelet unless the scenario says "
        "hollow kubelets), with the same nodes, pods, arrival, policy (one "
        "KubeSchedulerConfiguration profile for kube-scheduler, the webhook and the extender) "
        "and API client limits. Figures cover the span from the first pod create to the last "
        "bind. See docs/comparison-method.md for what each row means.",
    ]
    for block in results["scenarios"]:
        sc = block["scenario"]
        arrival = sc["arrival"]
        parts += [
            "",
            f"## {sc['name']}: {sc['nodes']:,} "
            + ("hollow-kubelet nodes" if sc.get("kubelets") else "nodes")
            + f", {sc['pods']:,} pods, {arrival['mode']}"
            + (f" at {arrival['rate']:g} pods/s" if arrival["mode"] == "rate" else "")
            + f", {arrival['clients']} client threads",
            "",
            sc.get("description") or "",
            "",
            f"Client rate limits for every component: qps {sc['client']['qps']:g}, burst "
            f"{sc['client']['burst']}. percentageOfNodesToScore: "
            f"{sc.get('percentageOfNodesToScore') or 'adaptive (kube-scheduler default)'}.",
            "",
            scenario_table(block),
        ]
        heads = headline(block)
        if heads:
            parts += ["", "Headline:", ""] + [f"- {h}" for h in heads]
        if "F" in block["arms"]:
            parts += ["", "### Webhook outage (arm F)", "", outage_section(block["arms"]["F"])]
        if block.get("parity"):
            parts += ["", "### Policy parity", "", parity_section(block["parity"])]
        for note in block.get("notes", []):
            parts += ["", f"> {note}"]
        for path in (plots or {}).get(sc["name"], []):
            parts += ["", f"![{Path(path).stem}]({path})"]
    return "\n".join(parts).rstrip() + "\n"


def plot(results: Mapping[str, Any], out: Path) -> dict[str, list[str]]:
    """PNG plots per scenario under out/plots; returns paths relative to `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = out / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    made: dict[str, list[str]] = {}
    for block in results["scenarios"]:
        name = block["scenario"]["name"]
        arms = block["arms"]
        paths = []
        fig, ax = plt.subplots(figsize=(7, 4))
        for key, arm in arms.items():
            columns = Columns.from_dict(arm["pods"])
            values = columns.bind_latencies() if arm.get("quality") else columns.create_latencies()
            if values:
                xs, ys = cdf([v * 1000 for v in values])
                label = f"{key}: {arm['title']}" + ("" if arm.get("quality") else " (create)")
                ax.step(xs, ys, where="post", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("create → bound latency (ms, log)")
        ax.set_ylabel("fraction of pods")
        ax.set_title(f"{name}: latency CDF")
        _legend(ax)
        ax.grid(alpha=0.3)
        paths.append(_save(fig, folder / f"{name}-latency-cdf.png", out))
        fig, ax = plt.subplots(figsize=(7, 4))
        for key, arm in arms.items():
            columns = Columns.from_dict(arm["pods"])
            if arm.get("quality"):
                times, counts = bound_over_time(columns)
            else:
                times = sorted(c for c in columns.created if c is not None)
                counts = list(range(1, len(times) + 1))
            ax.step(times, counts, where="post", label=f"{key}: {arm['title']}")
        ax.set_xlabel("seconds since the first create")
        ax.set_ylabel("pods bound (ceiling: created)")
        ax.set_title(f"{name}: pods bound over time")
        _legend(ax)
        ax.grid(alpha=0.3)
        paths.append(_save(fig, folder / f"{name}-bound-over-time.png", out))
        fig, ax = plt.subplots(figsize=(7, 4))
        for key, arm in arms.items():
            if arm.get("quality"):
                values = sorted(arm["quality"]["cpuUtilization"], reverse=True)
                ax.plot(range(len(values)), values, label=f"{key}: {arm['title']}")
        ax.set_xlabel("nodes, most utilized first")
        ax.set_ylabel("cpu requested / allocatable")
        ax.set_title(f"{name}: per-node cpu utilization")
        _legend(ax)
        ax.grid(alpha=0.3)
        paths.append(_save(fig, folder / f"{name}-utilization.png", out))
        made[name] = paths
    return made


def _legend(ax: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _save(fig: Any, path: Path, root: Path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path.relative_to(root))
