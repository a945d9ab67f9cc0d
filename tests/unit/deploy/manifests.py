"""The deploy/ manifests as data: rendered by the pinned kubectl's kustomize or Helm, or read raw.

Shared by the unit tests (shape of the manifests) and the e2e tests (the
same objects sent to a real API server).
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
OVERLAYS = ("self-managed", "cert-manager", "extender", "self-managed-mtls")
CHART = DEPLOY / "helm" / "placement-webhook"
NAMESPACE = "placement-webhook"
PART_OF = {"app.kubernetes.io/part-of": "placement-webhook"}
#: Files holding the Roles and ClusterRoles of the webhook, reconciler and certs processes.
RBAC_FILES = ("base/rbac.yaml", "overlays/self-managed/certs.yaml")

Obj = dict[str, Any]


def kubectl() -> Path:
    from webhook.devcluster import locate_binaries

    return locate_binaries() / "kubectl"


def helm() -> Path:
    """The Helm built by hack/build.sh from its pinned module."""
    from webhook.devcluster import locate_binaries

    return locate_binaries() / "helm"


@functools.cache
def _render_chart(values_json: str, namespace: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as values:
        yaml.safe_dump(json.loads(values_json), values)
        values.flush()
        done = subprocess.run(
            [
                *(str(helm()), "template", "placement-webhook", str(CHART)),
                *("--namespace", namespace, "--values", values.name),
            ],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise AssertionError(f"helm template: {done.stderr}")
    return done.stdout


def render_chart(values: Mapping[str, Any] | None = None, namespace: str = NAMESPACE) -> list[Obj]:
    """`helm template` of deploy/helm/placement-webhook with these values (cached per run)."""
    text = _render_chart(json.dumps(values or {}, sort_keys=True), namespace)
    return [d for d in yaml.safe_load_all(text) if d]


def render_dir(folder: Path) -> list[Obj]:
    """`kubectl kustomize FOLDER`: an operator's own overlay, say."""
    done = subprocess.run(
        [str(kubectl()), "kustomize", str(folder)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise AssertionError(f"kubectl kustomize {folder}: {done.stderr}")
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@functools.cache
def _render(overlay: str) -> str:
    done = subprocess.run(
        [str(kubectl()), "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise AssertionError(f"kubectl kustomize overlays/{overlay}: {done.stderr}")
    return done.stdout


def render_text(overlay: str) -> str:
    """`kubectl kustomize deploy/overlays/OVERLAY` (cached per run)."""
    return _render(overlay)


def render(overlay: str) -> list[Obj]:
    """The rendered objects of an overlay (fresh copies: callers may edit them)."""
    return [d for d in yaml.safe_load_all(_render(overlay)) if d]


def raw(relative: str) -> list[Obj]:
    """The documents of one file under deploy/, as written (no kustomize)."""
    return [d for d in yaml.safe_load_all((DEPLOY / relative).read_text()) if d]


def find(objects: Sequence[Obj], kind: str, name: str | None = None) -> Obj:
    """The one object of `kind` (and `name`, or a hash-suffixed generated name)."""
    hits = [o for o in objects if o["kind"] == kind and _name_matches(o, name)]
    if len(hits) != 1:
        raise AssertionError(f"expected one {kind} {name or ''}, found {len(hits)}")
    return hits[0]


def _name_matches(obj: Obj, name: str | None) -> bool:
    if name is None:
        return True
    actual = str(obj["metadata"]["name"])
    generated = obj["kind"] in ("ConfigMap", "Secret")  # kustomize adds a content hash
    return actual == name or (generated and actual.rsplit("-", 1)[0] == name)


def of_kind(objects: Sequence[Obj], *kinds: str) -> list[Obj]:
    return [o for o in objects if o["kind"] in kinds]


def containers(objects: Sequence[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(Deployment, container) for every container of every Deployment."""
    for deployment in of_kind(objects, "Deployment"):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            yield deployment, container


def env_of(container: Mapping[str, Any]) -> dict[str, str]:
    """Literal env values (fieldRef ones as '<fieldPath>')."""
    out = {}
    for item in container.get("env") or []:
        if "value" in item:
            out[item["name"]] = str(item["value"])
        else:
            out[item["name"]] = f"<{item['valueFrom']['fieldRef']['fieldPath']}>"
    return out


def rbac_verbs() -> list[tuple[str, str, int, str]]:
    """(kind, name, rule index, verb) for every verb of every Role/ClusterRole we ship.

    Read from the files as written, so tests can be parametrized at
    collection time without running kustomize.
    """
    out = []
    for relative in RBAC_FILES:
        for doc in raw(relative):
            if doc["kind"] in ("Role", "ClusterRole"):
                for index, rule in enumerate(doc["rules"]):
                    for verb in rule["verbs"]:
                        out.append((doc["kind"], doc["metadata"]["name"], index, verb))
    return out


def without_verb(objects: Sequence[Obj], kind: str, name: str, index: int, verb: str) -> list[Obj]:
    """A copy of `objects` where one verb is taken out of one rule (the rule goes if empty)."""
    edited = copy.deepcopy(list(objects))
    role = find(edited, kind, name)
    rule = role["rules"][index]
    assert verb in rule["verbs"], (name, index, verb)
    rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    if not rule["verbs"]:
        del role["rules"][index]
    return edited
