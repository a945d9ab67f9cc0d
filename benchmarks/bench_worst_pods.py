"""The costliest pods the API accepts, against a plain pod: what one review costs to answer.

Usage: python benchmarks/bench_worst_pods.py [--nodes 1000] [--repeat 15]

Each case is a whole review as the webhook gets it: the JSON body parsed,
then `Placer.review` (limits check, rules, decision, patch) against a
synthetic 1k-node / 30k-pod view, dry run (no reservation). Run twice: with
the limits of `webhook.policy.limits` (the default) and with limits so high
that every pod is decided, which is what the webhook did before. The figure
is the median of `--repeat` runs in ms, and the multiple of a plain pod's.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_policy import make_node, make_pod  # noqa: E402
from reviews import plain_pod, review_body  # noqa: E402

from webhook.admission.placement import Placer, PlacerSettings  # noqa: E402
from webhook.admission.review import parse_review  # noqa: E402
from webhook.cluster.view import ClusterView  # noqa: E402
from webhook.policy.dump import build_snapshot  # noqa: E402
from webhook.policy.limits import PodLimits  # noqa: E402
from webhook.policy.policy_file import default_policy  # noqa: E402

NAMESPACE = {"kind": "Namespace", "metadata": {"name": "bench", "labels": {
    "placement-webhook.io/enabled": "true"}}}  # fmt: skip
UNLIMITED = PodLimits(*(10**9 for _ in range(12)))


def plain() -> dict[str, Any]:
    return plain_pod(cpu="100m", app="b")


def with_spec(**spec: Any) -> dict[str, Any]:
    pod = plain()
    pod["spec"].update(spec)
    return pod


def cases() -> dict[str, dict[str, Any]]:
    terms = [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": [f"v{i}"]}]}
        for i in range(10_000)
    ]
    ports = [{"containerPort": p, "hostPort": p} for p in range(1, 20_001)]
    labelled = plain()
    labelled["metadata"]["labels"] = {f"key-{i:05d}": "v" * 60 for i in range(10_000)}
    tolerations = [{"key": f"k{i}", "operator": "Exists"} for i in range(10_000)]
    return {
        "plain pod": plain(),
        "10k node selector terms": with_spec(affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}),
        "20k host ports": with_spec(containers=[{"name": "c", "image": "i", "ports": ports}]),
        "10k labels (0.7 MB)": labelled,
        "10k tolerations": with_spec(tolerations=tolerations),
    }  # fmt: skip


def body(pod: dict[str, Any]) -> bytes:
    return review_body(pod, dry_run=True)


def measure(placer: Placer, data: bytes, repeat: int) -> tuple[float, str]:
    times, outcome = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        outcome = placer.review(parse_review(data, "application/json"))
        times.append((time.perf_counter() - started) * 1000)
    assert outcome is not None
    return statistics.median(times), f"{outcome.result}: {outcome.reason}"[:70]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--out", default=str(ROOT / "build" / "bench" / "worst_pods.json"))
    args = parser.parse_args()
    rng = random.Random(5)
    nodes = [make_node(i, rng) for i in range(args.nodes)]
    names = [n["metadata"]["name"] for n in nodes]
    pods = [make_pod(f"p-{i}", f"app-{i // 100}", rng.choice(names), rng)
            for i in range(args.nodes * 30)]  # fmt: skip
    view = ClusterView(build_snapshot(nodes, pods, [NAMESPACE]), synced=True)
    view.replace("Namespace", [[NAMESPACE]])
    policy = default_policy()
    limited = Placer(view, policy, PlacerSettings())
    unlimited = Placer(view, policy, PlacerSettings(limits=UNLIMITED))
    results: dict[str, Any] = {}
    print(f"{args.nodes} nodes, {len(pods)} pods; median of {args.repeat} reviews, ms")
    print(f"{'CASE':26} {'BODY':>8} {'LIMITED':>9} {'x':>6} {'UNLIMITED':>10} {'x':>6}  OUTCOME")
    base: dict[str, float] = {}
    for name, pod in cases().items():
        data = body(pod)
        limited_ms, outcome = measure(limited, data, args.repeat)
        unlimited_ms, _ = measure(unlimited, data, args.repeat)
        base.setdefault("limited", limited_ms)
        base.setdefault("unlimited", unlimited_ms)
        results[name] = {"bytes": len(data), "limitedMs": round(limited_ms, 3),
                         "unlimitedMs": round(unlimited_ms, 3), "outcome": outcome}  # fmt: skip
        print(f"{name:26} {len(data) / 1e6:7.2f}M {limited_ms:9.2f} "
              f"{limited_ms / base['limited']:6.1f} {unlimited_ms:10.2f} "
              f"{unlimited_ms / base['unlimited']:6.1f}  {outcome}")  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
