"""`placement-webhook explain`: why a pod would (not) be placed, offline.

Reads a cluster dump (`kubectl get` of SNAPSHOT_KINDS as a v1 List; Nodes
and Pods at least), a Pod manifest and an optional policy file, runs exactly
the same `schedule()` the webhook runs, and prints each node's filter verdict
(with kube-scheduler's reason strings) and per-plugin scores.

A raw manifest has not been through admission yet, so a `runtimeClassName`
gets what the RuntimeClass admission plugin would add (its overhead,
nodeSelector and tolerations) from the RuntimeClasses in the dump; a dump
without RuntimeClasses is said to be one in the output, and the pod is
evaluated without them.

Exit codes: 0 placed, 3 not placed (unschedulable, or skipped because the
policy cannot evaluate the pod), 2 bad input (one line on stderr), 1 internal
error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from webhook import bodies
from webhook.bodies import ObjectRef
from webhook.policy.dump import snapshot_from_list
from webhook.policy.framework import Decision, schedule
from webhook.policy.model import PodView
from webhook.policy.policy_file import Policy, PolicyError, default_policy, load_policy
from webhook.policy.snapshot import ClusterSnapshot
from webhook.policy.status import Code

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_PLACED",
    "EXIT_UNSCHEDULABLE",
    "SNAPSHOT_KINDS",
    "add_arguments",
    "admit_runtime_class",
    "explain",
    "run",
]

EXIT_PLACED = 0
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_UNSCHEDULABLE = 3
FULL_TABLE_MAX_NODES = 50
TOP_NODES = 20
SNAPSHOT_KINDS = (
    "nodes,pods,namespaces,services,replicationcontrollers,replicasets,statefulsets,runtimeclasses"
)


class InputError(Exception):
    """Bad input: reported as one line on stderr, exit code 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--snapshot",
        required=True,
        metavar="FILE",
        help=f"cluster dump: `kubectl get {SNAPSHOT_KINDS} -A -o json` (a v1 List)",
    )
    parser.add_argument(
        "--pod", required=True, metavar="FILE", help="the Pod manifest (YAML or JSON)"
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="policy file (KubeSchedulerConfiguration and/or PlacementPolicy);"
        " kube-scheduler's default profile if omitted",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="output format (default: table)",
    )
    parser.add_argument(
        "--all-nodes",
        action="store_true",
        help="list every node in the table, even in large clusters",
    )


# ---------------------------------------------------------------- input


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{what} {path} is not UTF-8 text") from None


def _parse_doc(text: str, path: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise InputError(f"{what} {path}{where}: {problem}") from None
    if len(docs) != 1:
        raise InputError(f"{what} {path}: expected one document, found {len(docs)}")
    return docs[0]


@dataclass(frozen=True)
class Cluster:
    """What explain reads from a dump: the snapshot, and the RuntimeClasses by name."""

    snapshot: ClusterSnapshot
    runtime_classes: Mapping[str, Mapping[str, Any]] | None
    """None when the dump holds no RuntimeClass at all (taken without them)."""


def load_snapshot(path: str) -> Cluster:
    doc = _parse_doc(_read(path, "snapshot"), path, "snapshot")
    if not isinstance(doc, Mapping) or not isinstance(doc.get("items"), list):
        raise InputError(
            f"snapshot {path}: expected a v1 List with items (kubectl get ... -o json)"
        )
    try:
        snapshot = snapshot_from_list(doc)
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError(f"snapshot {path}: {exc}") from None
    classes = {
        ObjectRef.of(item).name: item
        for item in doc["items"]
        if isinstance(item, Mapping) and item.get("kind") == "RuntimeClass"
    }
    return Cluster(snapshot, classes or None)


def load_pod_manifest(path: str) -> Mapping[str, Any]:
    doc = _parse_doc(_read(path, "pod"), path, "pod")
    if not isinstance(doc, Mapping):
        raise InputError(f"pod {path}: expected a Pod object")
    kind = doc.get("kind", "Pod")
    if kind != "Pod":
        raise InputError(f"pod {path}: expected kind Pod, got {kind!r}")
    return doc


def parse_pod(doc: Mapping[str, Any], path: str) -> PodView:
    try:
        return PodView.from_dict(doc)
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError(f"pod {path}: {exc}") from None


def admit_runtime_class(
    pod: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]] | None
) -> tuple[Mapping[str, Any], list[str]]:
    """The pod as RuntimeClass admission leaves it, and notes on what was (not) added.

    A pod that already has `spec.overhead` went through admission (it comes
    from the API): it is left as it is. Raises InputError where admission
    would reject the pod.
    """
    spec = bodies.spec(pod)
    name = spec.get("runtimeClassName")
    if not name or spec.get("overhead"):
        return pod, []
    if classes is None:
        return pod, [
            f"runtimeClassName {name}: the snapshot holds no RuntimeClasses, so the pod's"
            " overhead (and the class's nodeSelector and tolerations) are not counted;"
            " add runtimeclasses to the kubectl get"
        ]
    found = classes.get(str(name))
    if found is None:
        raise InputError(
            f"pod rejected: RuntimeClass {name!r} not found"
            f" (the snapshot's RuntimeClasses: {', '.join(sorted(classes))})"
        )
    new_spec = dict(spec)
    notes = []
    overhead = (found.get("overhead") or {}).get("podFixed")
    if overhead:
        new_spec["overhead"] = dict(overhead)
        listed = ", ".join(f"{k}={v}" for k, v in sorted(overhead.items()))
        notes.append(f"runtimeClassName {name}: overhead {listed} added, as admission would")
    scheduling = found.get("scheduling") or {}
    selector = dict(spec.get("nodeSelector") or {})
    for key, value in (scheduling.get("nodeSelector") or {}).items():
        if key in selector and selector[key] != value:
            raise InputError(
                f"pod rejected: conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value};"
                f" pod.spec.nodeSelector[{key}] = {selector[key]}"
            )
        selector[key] = value
    if scheduling.get("nodeSelector"):
        new_spec["nodeSelector"] = selector
        notes.append(f"runtimeClassName {name}: its scheduling.nodeSelector added")
    if scheduling.get("tolerations"):
        new_spec["tolerations"] = [*(spec.get("tolerations") or ()), *scheduling["tolerations"]]
        notes.append(f"runtimeClassName {name}: its scheduling.tolerations added")
    return {**pod, "spec": new_spec}, notes


def load_config(path: str | None) -> Policy:
    if path is None:
        return default_policy()
    text = _read(path, "policy")
    try:
        return load_policy(text, source=path)
    except PolicyError as exc:
        raise InputError(str(exc)) from None


# ---------------------------------------------------------------- output


def explain(pod: PodView, snapshot: ClusterSnapshot, policy: Policy) -> tuple[Decision, str]:
    """The decision and the name of the profile used."""
    profile = policy.profile_for(pod.scheduler_name)
    if profile is None:
        raise InputError(
            f"no profile for schedulerName {pod.scheduler_name!r} "
            f"(profiles: {', '.join(sorted(policy.profiles))})"
        )
    return schedule(pod, snapshot, profile), profile.name


def to_json(
    decision: Decision, pod: PodView, profile: str, notes: Sequence[str] = ()
) -> dict[str, Any]:
    return {
        "pod": f"{pod.namespace}/{pod.name}",
        "profile": profile,
        "code": decision.code.value,
        "selectedNode": decision.node,
        "message": decision.message,
        "feasibleNodes": list(decision.feasible_nodes),
        "unschedulableReasons": {n: list(r) for n, r in sorted(decision.node_reasons.items())},
        "rejectedBy": dict(sorted(decision.node_plugins.items())),
        "reasonCounts": dict(sorted(decision.reason_counts.items())),
        "scores": {n: dict(s) for n, s in decision.scores.items()},
        "weights": dict(decision.weights),
        "evaluatedNodes": decision.evaluated_nodes,
        "totalNodes": decision.total_nodes,
        "notes": list(notes),
    }


def _abbrev(name: str) -> str:
    return "".join(c for c in name if c.isupper()) or name[:3].upper()


def _render(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def to_table(
    decision: Decision,
    pod: PodView,
    profile: str,
    snapshot: ClusterSnapshot,
    all_nodes: bool = False,
    notes: Sequence[str] = (),
) -> str:
    out: list[str] = [
        f"pod {pod.namespace}/{pod.name}  schedulerName={pod.scheduler_name}  profile={profile}"
    ]
    out.extend(f"note: {n}" for n in notes)
    if decision.code is Code.Skip:
        out.append(f"SKIPPED: {decision.message}")
        return "\n".join(out) + "\n"
    scores = decision.scores
    plugins = [p for p in decision.weights if any(p in s for s in scores.values())]
    header = ["", "NODE", "FILTER", *[_abbrev(p) for p in plugins], "TOTAL"]
    feasible = sorted(scores, key=lambda n: (-scores[n]["total"], n))
    node_reasons = decision.node_reasons
    rejected = sorted(node_reasons)
    evaluated = set(feasible) | set(rejected)
    not_evaluated = [n for n in snapshot.node_names() if n not in evaluated]
    big = len(snapshot) > FULL_TABLE_MAX_NODES and not all_nodes

    rows: list[list[str]] = [header]
    shown_feasible = feasible[:TOP_NODES] if big else feasible
    for n in shown_feasible:
        s = scores[n]
        mark = "*" if n == decision.node else ""
        rows.append([mark, n, "ok", *[str(s.get(p, "-")) for p in plugins], str(s["total"])])
    if not big:
        for n in rejected:
            reasons = "; ".join(node_reasons[n])
            rows.append(["", n, reasons, *["" for _ in plugins], ""])
        for n in not_evaluated:
            rows.append(["", n, "(not evaluated)", *["" for _ in plugins], ""])
    if len(rows) > 1:
        out.extend(_render(rows))
    if big:
        if len(feasible) > len(shown_feasible):
            out.append(f"... and {len(feasible) - len(shown_feasible)} more feasible nodes")
        if decision.reason_counts:
            out.append("rejected nodes by reason:")
            for line in sorted(f"{v} {k}" for k, v in decision.reason_counts.items()):
                out.append(f"  {line}")
        if not_evaluated:
            out.append(
                f"{len(not_evaluated)} nodes not evaluated (percentageOfNodesToScore: the scan "
                "stopped once enough feasible nodes were found)"
            )
    if plugins:
        out.append("scores are 0-100 per plugin; TOTAL = sum of weight * score:")
        width = max(len(_abbrev(p)) for p in plugins)
        for p in plugins:
            out.append(f"  {_abbrev(p).ljust(width)}  {p} x{decision.weights[p]}")
    verdict = {
        Code.Success: "PLACED",
        Code.Unschedulable: "UNSCHEDULABLE",
        Code.UnschedulableAndUnresolvable: "UNSCHEDULABLE",
        Code.Error: "ERROR",
    }.get(decision.code, decision.code.value)
    out.append(f"{verdict}: {decision.message}")
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    try:
        cluster = load_snapshot(args.snapshot)
        manifest, notes = admit_runtime_class(load_pod_manifest(args.pod), cluster.runtime_classes)
        pod = parse_pod(manifest, args.pod)
        policy = load_config(getattr(args, "config", None))
        decision, profile = explain(pod, cluster.snapshot, policy)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if getattr(args, "output", "table") == "json":
        sys.stdout.write(json.dumps(to_json(decision, pod, profile, notes), indent=2) + "\n")
    else:
        all_nodes = getattr(args, "all_nodes", False)
        sys.stdout.write(to_table(decision, pod, profile, cluster.snapshot, all_nodes, notes))
    if decision.code is Code.Success:
        return EXIT_PLACED
    if decision.code is Code.Error:
        return EXIT_ERROR
    return EXIT_UNSCHEDULABLE


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="placement-webhook explain", description=__doc__.split("\n")[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
