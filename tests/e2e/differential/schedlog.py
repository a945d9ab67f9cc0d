"""kube-scheduler's own account of a scheduling cycle, read from its klog text log. Pure.

The lines (pkg/scheduler/schedule_one.go and eventhandlers.go, v1.37) and the
verbosity that logs them, with `--vmodule=schedule_one=10,eventhandlers=4,batch=3`:

    V(10) "Plugin scored node for pod" pod="ns/name" plugin="P" node="n" score=S
          (S is the plugin's normalised score times its weight; one line per
          plugin and feasible node, only when more than one node is feasible)
    V(10) "Calculated node's final score for pod" pod="ns/name" node="n" score=T
    V(2)  "Successfully bound pod to node" pod=.. node=.. evaluatedNodes=E feasibleNodes=F
    V(2)  "Unable to schedule pod; no fit; waiting" pod=.. err="0/N nodes are available: ..."
    V(3)  "OpportunisticBatch provided node hint" pod=.. hint=..  (filters skipped)
    E     "Error scheduling pod; retrying" pod=.. err=..
    V(3)/V(4) "Add event for node", "Update event for node", "Delete event for node",
          "Delete event for (un)scheduled pod": the scheduler's informers have seen it

A klog text line is `Lmmdd hh:mm:ss.uuuuuu pid file:line] "message" k1=v1 k2="v 2"`,
with Go-quoted strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

SCORED = "Plugin scored node for pod"
FINAL = "Calculated node's final score for pod"
BOUND = "Successfully bound pod to node"
NO_FIT = "Unable to schedule pod; no fit; waiting"
NO_NODES = "Unable to schedule pod; no nodes are registered to the cluster; waiting"
HINT = "OpportunisticBatch provided node hint"
FAILED = "Error scheduling pod; retrying"  # a plugin or API error: no verdict to compare
NODE_ADD, NODE_UPDATE, NODE_DELETE = (
    "Add event for node",
    "Update event for node",
    "Delete event for node",
)
POD_DELETE = ("Delete event for unscheduled pod", "Delete event for scheduled pod")
PREEMPTION = " preemption:"

_LINE = re.compile(r'^[IWEF]\d{4} [\d:.]+\s+\d+ [^\]]+\] (?P<msg>"(?:[^"\\]|\\.)*")(?P<rest>.*)$')
_PAIR = re.compile(r'(?P<key>[A-Za-z][\w.-]*)=(?P<value>"(?:[^"\\]|\\.)*"|\S+)')


def _unquote(text: str) -> str:
    if not text.startswith('"'):
        return text
    try:
        return str(json.loads(text))
    except ValueError:  # a Go escape JSON lacks (\x..): keep the text
        return text[1:-1]


@dataclass(frozen=True)
class Line:
    message: str
    values: dict[str, str]


def parse_line(text: str) -> Line | None:
    """One klog text line, or None for anything else (continuations, other formats)."""
    m = _LINE.match(text)
    if m is None:
        return None
    values = {p["key"]: _unquote(p["value"]) for p in _PAIR.finditer(m["rest"])}
    return Line(_unquote(m["msg"]), values)


@dataclass
class Cycle:
    """What kube-scheduler said about one pod."""

    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    """node -> plugin -> weighted score."""
    totals: dict[str, int] = field(default_factory=dict)
    node: str | None = None
    evaluated: int | None = None
    feasible: int | None = None
    error: str | None = None
    hint: str | None = None
    """The node OpportunisticBatching offered; taken when the pod is bound there unscored."""

    @property
    def done(self) -> bool:
        return self.node is not None or self.error is not None

    @property
    def message(self) -> str | None:
        """The FitError message without the PostFilter's preemption part."""
        return None if self.error is None else self.error.split(PREEMPTION)[0]


def read_cycle(lines: Iterable[Line], pod: str) -> Cycle:
    """The last scheduling attempt of `pod` (namespace/name) among `lines`."""
    cycle = Cycle()
    for line in lines:
        if line.values.get("pod") != pod:
            continue
        v = line.values
        if line.message == SCORED:
            if cycle.done:  # a new attempt after a finished one
                cycle = Cycle()
            cycle.scores.setdefault(v["node"], {})[v["plugin"]] = int(v["score"])
        elif line.message == FINAL:
            cycle.totals[v["node"]] = int(v["score"])
        elif line.message == BOUND:
            cycle.node = v["node"]
            cycle.evaluated, cycle.feasible = int(v["evaluatedNodes"]), int(v["feasibleNodes"])
        elif line.message == NO_FIT:
            cycle.error = v.get("err", "")
        elif line.message == NO_NODES:
            cycle.error = "no nodes available to schedule pods"
        elif line.message == FAILED:
            cycle.error = f"kube-scheduler error: {v.get('err', '')}"
        elif line.message == HINT:
            cycle.hint = v.get("hint")
    return cycle


def seen(lines: Iterable[Line], message: str | tuple[str, ...], key: str) -> set[str]:
    """Values of `key` (node or pod) on the lines with `message`."""
    messages = (message,) if isinstance(message, str) else message
    return {line.values[key] for line in lines if line.message in messages and key in line.values}
