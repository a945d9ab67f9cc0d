"""The policy against the real kube-scheduler v1.37, case by random case.

One control plane runs for the module: etcd, kube-apiserver and a
kube-scheduler started with tests/e2e/differential/policies.py's
KubeSchedulerConfiguration (several profiles) and the verbosity that logs its
per-plugin scores. The policy loads the same configuration. For each seeded
case (tests/e2e/differential/generate.py) the cluster is built from bare
Node objects and bound pods, one pod is scheduled by kube-scheduler, and its
log is compared with the policy's answer on the objects the API server
returned: verdict, unschedulable message, feasible set, every plugin's
weighted score on every scored node, totals, and that kube-scheduler's
choice is among our best (tests/e2e/differential/compare.py).

Small clusters (1 to 8 nodes: every node is evaluated) make up most cases;
then a cluster of 160 nodes, where kube-scheduler scores only a sample
(percentageOfNodesToScore 30 and the adaptive default) starting at an index
that rotates from cycle to cycle.

More cases: PLACEMENT_DIFFERENTIAL_CASES (small clusters, default 240) and
PLACEMENT_DIFFERENTIAL_SAMPLED (pods on the big cluster, default 40); another
seed with PLACEMENT_DIFFERENTIAL_SEED. A disagreeing case writes a replay
file (build/differential/, or PLACEMENT_DIFFERENTIAL_OUT) and the failure
names it: `python -m tests.e2e.differential replay FILE`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.e2e.differential.bench import Bench, Result, failure_message, started
from tests.e2e.differential.driver import Applied
from tests.e2e.differential.generate import Case, big_cluster, big_target, small_case
from tests.e2e.differential.policies import SAMPLED_PROFILES

pytestmark = pytest.mark.e2e

SEED = int(os.environ.get("PLACEMENT_DIFFERENTIAL_SEED", "14"))
SMALL_CASES = int(os.environ.get("PLACEMENT_DIFFERENTIAL_CASES", "240"))
SAMPLED_CASES = int(os.environ.get("PLACEMENT_DIFFERENTIAL_SAMPLED", "40"))
BIG_NODES, BIG_PODS = 160, 240


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    with started(tmp_path_factory.mktemp("differential") / "cluster") as running:
        yield running


@pytest.fixture(scope="module")
def big(bench: Bench) -> Iterator[tuple[Case, Applied]]:
    cluster = big_cluster(SEED, BIG_NODES, BIG_PODS)
    applied = bench.driver.apply(cluster)
    yield cluster, applied
    bench.driver.remove(cluster)


def _check(result: Result) -> None:
    assert result.comparison.agrees, failure_message(result)


@pytest.mark.parametrize("index", range(SMALL_CASES), ids=lambda i: f"c{i}")
def test_the_policy_agrees_with_kube_scheduler_on_a_small_cluster(bench: Bench, index: int) -> None:
    _check(bench.run(small_case(SEED, index)))


@pytest.mark.parametrize("index", range(SAMPLED_CASES), ids=lambda i: f"big-{i}")
def test_the_policy_agrees_with_kube_scheduler_on_its_sample_of_a_big_cluster(
    bench: Bench, big: tuple[Case, Applied], index: int
) -> None:
    cluster, applied = big
    # Alternating profiles also keeps OpportunisticBatching from hinting (it needs the
    # previous cycle to be of the same profile).
    case = big_target(SEED, cluster, index, SAMPLED_PROFILES[index % len(SAMPLED_PROFILES)])
    _check(bench.run(case, keep=True, applied=applied))


def test_kube_scheduler_sampled_a_rotating_subset_of_the_big_cluster(bench: Bench) -> None:
    """What percentageOfNodesToScore means for agreement, shown on the cases above."""
    sampled = [r for r in bench.results if r.case.name.startswith("big-") and r.comparison.sampled]
    if SAMPLED_CASES == 0:
        pytest.skip("PLACEMENT_DIFFERENTIAL_SAMPLED=0: no pods were scheduled on the big cluster")
    assert len(sampled) >= SAMPLED_CASES // 2, "most big-cluster pods should fit most nodes"
    samples = {frozenset(r.cycle.scores) for r in sampled}
    assert len(samples) > 1, "kube-scheduler's scan start should move between cycles"
    same = sum(bool(r.comparison.same_node_with_own_sample) for r in sampled)
    print(
        f"\nsampled cases: {len(sampled)}, distinct samples: {len(samples)}; with its own"
        f" sample the policy chose kube-scheduler's node in {same} of {len(sampled)}"
    )


def _categories(results: list[Result]) -> dict[str, int]:
    """How many compared cases exercised each thing the comparison claims to cover."""
    counts: dict[str, int] = {}

    def count(name: str, hit: bool) -> None:
        counts[name] = counts.get(name, 0) + int(hit)

    for r in results:
        spec, cycle = r.pod["spec"], r.cycle
        spread_told_apart = len({s.get("PodTopologySpread", 0) for s in cycle.scores.values()}) > 1
        count("placed, scores compared", len(cycle.scores) > 1)
        count("placed on the only feasible node", cycle.node is not None and len(cycle.scores) <= 1)
        count("not placed, message compared", cycle.error is not None)
        count("percentageOfNodesToScore sampled", r.comparison.sampled)
        count(
            "system default spreading told nodes apart",
            spread_told_apart and not spec.get("topologySpreadConstraints"),
        )
        count("RuntimeClass overhead", bool(spec.get("overhead")))
        count(
            "sidecar containers",
            any(c.get("restartPolicy") == "Always" for c in spec.get("initContainers", ())),
        )
        count("inter-pod affinity terms", bool(set(spec.get("affinity", {})) - {"nodeAffinity"}))
    return counts


def test_the_cases_covered_what_the_comparison_claims(bench: Bench) -> None:
    """A guard on the generator: each category above was really compared, and all agreed."""
    counts = _categories(bench.results)
    agreed = sum(r.comparison.agrees for r in bench.results)
    print(f"\ndifferential: {agreed} of {len(bench.results)} cases agree with kube-scheduler")
    for name, n in counts.items():
        print(f"  {n:4d}  {name}")
    assert agreed == len(bench.results)
    if SMALL_CASES < 200:
        pytest.skip("the coverage floors are for the default case count (200 or more)")
    floors = {
        "placed, scores compared": 80,
        "not placed, message compared": 30,
        "placed on the only feasible node": 10,
        "system default spreading told nodes apart": 10,
        "RuntimeClass overhead": 10,
        "sidecar containers": 10,
        "inter-pod affinity terms": 40,
    }
    if SAMPLED_CASES >= 40:
        floors["percentageOfNodesToScore sampled"] = 20
    short = {name: counts[name] for name, floor in floors.items() if counts[name] < floor}
    assert not short, f"too few cases of {short} (floors {floors})"
