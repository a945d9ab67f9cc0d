"""Puts a case on the real control plane and reads kube-scheduler's verdict from its log.

One control plane, one kube-scheduler, cases back to back with no timers:
every wait is for a line kube-scheduler itself writes.

1. namespaces, Services and controllers are created first (kube-scheduler's
   listers for them have no event log; they are a watch ahead of the nodes);
2. nodes are created and their status written (capacity, images), then the
   driver waits for kube-scheduler's "Add event for node" and "Update event
   for node" of every one of them, so its cache holds the nodes as they are;
3. the bound pods are created (`spec.nodeName`), those the case marks
   terminating are deleted gracefully (no kubelet confirms: they stay, with a
   deletionTimestamp), then the pod to schedule:
   one pod informer delivers them in order, so the scheduler counts every
   bound pod before it sees the new one;
4. the driver waits for "Successfully bound pod to node" or "Unable to
   schedule pod" and collects the cycle's score lines (schedlog);
5. the pod is deleted and the driver waits for kube-scheduler's delete event
   (an unschedulable pod would be retried on the next case's nodes); then the
   bound pods and the nodes go, again waiting for the node delete events.

Names are unique per case, so nothing left behind can be mistaken for a
case's object; the objects the API server returned are what the policy is
given, so both schedulers read the same defaulted, admitted objects.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.differential import schedlog
from tests.e2e.differential.generate import CASE_LABEL, TERMINATING_ANNOTATION, Case
from webhook.kube import Kube

Obj = dict[str, Any]
INTERESTING = frozenset(
    {
        schedlog.SCORED,
        schedlog.FINAL,
        schedlog.BOUND,
        schedlog.NO_FIT,
        schedlog.NO_NODES,
        schedlog.HINT,
        schedlog.NODE_ADD,
        schedlog.NODE_UPDATE,
        schedlog.NODE_DELETE,
        *schedlog.POD_DELETE,
        schedlog.FAILED,
    }
)
FORCE = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
GRACEFUL = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 300}
PLURAL = {
    "Service": "services",
    "ReplicationController": "replicationcontrollers",
    "ReplicaSet": "replicasets",
    "StatefulSet": "statefulsets",
}


class DriverError(AssertionError):
    """kube-scheduler did not say what the driver waited for."""


class SchedulerLog:
    """kube-scheduler's log file, parsed as it grows (only the lines the driver reads)."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: list[schedlog.Line] = []
        self._offset = 0
        self._partial = b""

    def poll(self) -> None:
        with open(self.path, "rb") as log:
            log.seek(self._offset)
            data = log.read()
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        for raw in complete:
            if b'"' not in raw:
                continue
            line = schedlog.parse_line(raw.decode(errors="replace"))
            if line is not None and line.message in INTERESTING:
                self.lines.append(line)

    def mark(self) -> int:
        self.poll()
        return len(self.lines)

    def forget(self) -> int:
        """Drop the lines read so far (each step waits only on lines after its own mark)."""
        self.poll()
        self.lines.clear()
        return 0

    def wait(
        self, mark: int, done: Callable[[list[schedlog.Line]], bool], what: str, timeout: float
    ) -> list[schedlog.Line]:
        """Poll until `done(lines since mark)`; the lines, or DriverError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            lines = self.lines[mark:]
            if done(lines):
                return lines
            if time.monotonic() > deadline:
                raise DriverError(f"kube-scheduler did not log {what} within {timeout:.0f}s")
            time.sleep(0.003)


@dataclass
class Applied:
    """The case's objects as the API server returned them (what the policy reads)."""

    namespaces: list[Obj]
    workloads: list[Obj]
    nodes: list[Obj]
    pods: list[Obj]

    def items(self) -> list[Obj]:
        return [*self.namespaces, *self.workloads, *self.nodes, *self.pods]


def _marked_terminating(pod: Obj) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(TERMINATING_ANNOTATION) == "true"


def _path(obj: Obj) -> str:
    kind, ns = obj["kind"], obj["metadata"].get("namespace")
    if kind == "Namespace":
        return "/api/v1/namespaces"
    if kind == "Pod":
        return f"/api/v1/namespaces/{ns}/pods"
    group = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
    return f"{group}/namespaces/{ns}/{PLURAL[kind]}"


class Driver:
    def __init__(self, kube: Kube, log: SchedulerLog, timeout: float = 30.0):
        self.kube, self.log, self.timeout = kube, log, timeout

    # ------------------------------------------------------------ setup

    def warm_up(self) -> None:
        """Wait until kube-scheduler's informers watch: a node's add *and* update are seen.

        Before its first list completes, a node created and then given its status
        arrives as one add of the final object, and the barrier in `apply` (add and
        update) would wait for an update that never comes.
        """
        deadline = time.monotonic() + self.timeout
        for attempt in itertools.count():
            name = f"warm-up-{attempt}"
            probe = Case(
                name=name,
                profile="",
                nodes=[
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": name, "labels": {CASE_LABEL: name}},
                        "status": {"capacity": {"cpu": "1", "pods": "1"}},
                    }
                ],
            )
            try:
                self.apply(probe, timeout=2.0)
            except DriverError:
                self.remove(probe, wait=False)
                if time.monotonic() > deadline:
                    raise
                continue
            self.remove(probe)
            return

    def apply(self, case: Case, timeout: float | None = None) -> Applied:
        kube = self.kube
        namespaces = [kube.create(_path(ns), ns) for ns in case.namespaces]
        workloads = [kube.create(_path(w), w) for w in case.workloads]
        mark = self.log.forget()
        nodes = []
        for node in case.nodes:
            kube.create("/api/v1/nodes", {**node, "status": {}})
            name = node["metadata"]["name"]
            nodes.append(
                kube.patch_merge(f"/api/v1/nodes/{name}/status", {"status": node["status"]})
            )
        names = {n["metadata"]["name"] for n in case.nodes}

        def missing(lines: list[schedlog.Line]) -> set[str]:
            added = schedlog.seen(lines, schedlog.NODE_ADD, "node")
            updated = schedlog.seen(lines, schedlog.NODE_UPDATE, "node")
            return {f"{n} (add)" for n in names - added} | {
                f"{n} (update)" for n in names - updated
            }

        try:
            self.log.wait(
                mark, lambda lines: not missing(lines), "node events", timeout or self.timeout
            )
        except DriverError as err:
            left = sorted(missing(self.log.lines[mark:]))
            raise DriverError(f"{err}: still missing {', '.join(left)}") from None
        pods = [kube.create(_path(p), p) for p in case.pods]
        pods = [self._terminating(p) if _marked_terminating(p) else p for p in pods]
        return Applied(namespaces, workloads, nodes, pods)

    def _terminating(self, pod: Obj) -> Obj:
        """Delete `pod` gracefully: no kubelet confirms, so it stays, marked for deletion.
        The same pod informer delivers the update before the target pod's create."""
        path = f"{_path(pod)}/{pod['metadata']['name']}"
        answer = self.kube.request("DELETE", path, body=GRACEFUL)
        if not (answer.get("metadata") or {}).get("deletionTimestamp"):
            raise DriverError(f"{path} was deleted at once, not marked terminating")
        return dict(answer)

    # ------------------------------------------------------------ one pod

    def schedule(self, pod: Obj) -> tuple[Obj, schedlog.Cycle]:
        """Create `pod`, wait for kube-scheduler's verdict, delete it again."""
        mark = self.log.forget()
        created = self.kube.create(_path(pod), pod)  # a rejected pod raises: nothing to delete
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        try:
            lines = self.log.wait(
                mark,
                lambda lines: schedlog.read_cycle(lines, key).done,
                f"a verdict for pod {key}",
                self.timeout,
            )
            return created, schedlog.read_cycle(lines, key)
        finally:
            gone = self.log.mark()
            self.kube.request("DELETE", f"{_path(pod)}/{pod['metadata']['name']}", body=FORCE)
            self.log.wait(
                gone,
                lambda lines: key in schedlog.seen(lines, schedlog.POD_DELETE, "pod"),
                f"the delete event of pod {key}",
                self.timeout,
            )

    # ------------------------------------------------------------ teardown

    def remove(self, case: Case, wait: bool = True) -> None:
        """Delete the case's bound pods and nodes (namespaced objects stay: names are unique);
        `wait` for kube-scheduler's delete events of the nodes."""
        for ns in case.namespaces:
            self.kube.request(
                "DELETE", f"/api/v1/namespaces/{ns['metadata']['name']}/pods", body=FORCE
            )
        mark = self.log.mark()
        self.kube.request(
            "DELETE", "/api/v1/nodes", params={"labelSelector": f"{CASE_LABEL}={case.name}"}
        )
        if not wait:
            return
        names = {n["metadata"]["name"] for n in case.nodes}
        self.log.wait(
            mark,
            lambda lines: names <= schedlog.seen(lines, schedlog.NODE_DELETE, "node"),
            f"the delete events of {len(names)} nodes",
            self.timeout,
        )
