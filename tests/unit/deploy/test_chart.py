"""The Helm chart renders the objects the kustomize overlays do, for the same settings.

deploy/helm/placement-webhook is written beside deploy/base, not generated
from it; this file keeps the two from drifting. Each case renders both, with
the pinned kubectl and the pinned Helm, and compares every object field by
field once the differences that are the tools' own are taken out:
- kustomize names the policy ConfigMap by a hash of its content; Helm keeps
  the name and rolls the pods through a checksum annotation instead;
- Helm labels what it renders (managed-by, helm.sh/chart);
- with Helm, the Namespace is the operator's (created and labelled before the
  install, as deploy/README.md says), so it is not in the chart;
- the policy file is compared as parsed YAML (base/policy.yaml has comments).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.deploy.manifests import (
    CHART,
    DEPLOY,
    NAMESPACE,
    REPO,
    Obj,
    containers,
    find,
    helm,
    of_kind,
    render,
    render_chart,
    render_dir,
)
from tests.unit.deploy.readme import block
from webhook.policy.profile import load_policy

HELM_ONLY_LABELS = ("app.kubernetes.io/managed-by", "helm.sh/chart")
POLICY_CHECKSUM = "checksum/policy"
Key = tuple[str, str, str]


def _key(obj: Obj) -> Key:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def _parse_policy(obj: Obj) -> None:
    if obj["kind"] == "ConfigMap" and "policy.yaml" in obj.get("data", {}):
        obj["data"]["policy.yaml"] = list(yaml.safe_load_all(obj["data"]["policy.yaml"]))


def _unhashed(name: str) -> str:
    return name.rsplit("-", 1)[0]


def from_kustomize(objects: Iterable[Obj]) -> dict[Key, Obj]:
    """Kustomize's objects, with generated ConfigMap names back to the names written."""
    out = {}
    for obj in map(copy.deepcopy, objects):
        if obj["kind"] == "Namespace":
            continue
        if obj["kind"] == "ConfigMap":
            obj["metadata"]["name"] = _unhashed(obj["metadata"]["name"])
        for deployment in of_kind([obj], "Deployment"):
            for volume in deployment["spec"]["template"]["spec"].get("volumes", []):
                if "configMap" in volume:
                    volume["configMap"]["name"] = _unhashed(volume["configMap"]["name"])
        _parse_policy(obj)
        out[_key(obj)] = obj
    return out


def from_helm(objects: Iterable[Obj]) -> dict[Key, Obj]:
    """Helm's objects, without its own labels and the policy checksum."""
    out = {}
    for obj in map(copy.deepcopy, objects):
        labels = obj["metadata"].get("labels", {})
        for label in HELM_ONLY_LABELS:
            assert label in labels, (_key(obj), label)
            del labels[label]
        for deployment in of_kind([obj], "Deployment"):
            template = deployment["spec"]["template"]["metadata"]
            annotations = template.get("annotations", {})
            annotations.pop(POLICY_CHECKSUM, None)
            if not annotations:
                template.pop("annotations", None)
        _parse_policy(obj)
        out[_key(obj)] = obj
    return out


def assert_same_objects(kustomized: dict[Key, Obj], charted: dict[Key, Obj]) -> None:
    assert sorted(charted) == sorted(kustomized)
    for key, obj in kustomized.items():
        assert charted[key] == obj, key


def operator_overlay(tmp_path: Path, policy: str) -> Path:
    """An operator's own overlay over self-managed: their registry, their policy, 3 replicas."""
    folder = tmp_path / "my-placement-webhook"
    folder.mkdir()
    (folder / "policy.yaml").write_text(policy)
    base = os.path.relpath(DEPLOY / "overlays" / "self-managed", folder)
    replicas = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "placement-webhook", "namespace": NAMESPACE},
        "spec": {"replicas": 3},
    }
    kustomization = {
        "resources": [base],
        "images": [
            {
                "name": "placement-webhook",
                "newName": "example.com/placement-webhook",
                "newTag": "9.9.9",
            }
        ],
        "configMapGenerator": [
            {
                "name": "placement-webhook-policy",
                "namespace": NAMESPACE,
                "behavior": "replace",
                "files": ["policy.yaml"],
            }
        ],
        "patches": [{"patch": yaml.safe_dump(replicas)}],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return folder


# ------------------------------------------------------------------ the same objects


def test_the_chart_defaults_render_the_self_managed_overlay() -> None:
    assert_same_objects(from_kustomize(render("self-managed")), from_helm(render_chart()))


def test_the_chart_with_cert_manager_renders_the_cert_manager_overlay() -> None:
    charted = render_chart({"certificates": {"mode": "cert-manager"}})

    assert_same_objects(from_kustomize(render("cert-manager")), from_helm(charted))


def test_an_operators_overlay_and_the_same_helm_values_render_the_same_objects(
    tmp_path: Path,
) -> None:
    policy = (DEPLOY / "base" / "policy.yaml").read_text()
    affinity = re.sub(r"(?m)^mode: nodeName$", "mode: nodeAffinity", policy)
    assert affinity != policy
    values = {
        "image": {"repository": "example.com/placement-webhook", "tag": "9.9.9"},
        "mode": "nodeAffinity",
        "webhook": {"replicas": 3},
    }

    kustomized = from_kustomize(render_dir(operator_overlay(tmp_path, affinity)))

    assert_same_objects(kustomized, from_helm(render_chart(values)))


def test_the_namespace_the_readme_makes_for_helm_is_labelled_as_the_base_one() -> None:
    """deploy/README.md's Helm install creates and labels the namespace by hand."""
    base = find(render("self-managed"), "Namespace", NAMESPACE)["metadata"]["labels"]
    made = re.search(r"kubectl label namespace \S+ (.+)", block("Install", "With Helm"))
    assert made is not None
    labels = dict(pair.split("=", 1) for pair in made.group(1).split())

    pod_security = {k: v for k, v in base.items() if k.startswith("pod-security.kubernetes.io/")}
    assert labels == pod_security


# ------------------------------------------------------------------ what only the chart has


def test_the_chart_version_is_the_projects() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)

    assert version is not None
    assert chart["appVersion"] == chart["version"] == version.group(1)


def _checksums(objects: list[Obj]) -> set[str]:
    return {
        d["spec"]["template"]["metadata"].get("annotations", {}).get(POLICY_CHECKSUM, "")
        for d in of_kind(objects, "Deployment")
        if any(
            "configMap" in v and v["configMap"]["name"] == "placement-webhook-policy"
            for v in d["spec"]["template"]["spec"].get("volumes", [])
        )
    }


def test_a_policy_change_rolls_the_pods_that_read_it() -> None:
    before = _checksums(render_chart())
    after = _checksums(render_chart({"policy": {"placement": {"conflictPolicy": "evict"}}}))

    assert len(before) == len(after) == 1
    assert "" not in before
    assert before != after


def test_the_rendered_policy_is_the_settings_given() -> None:
    values = {"mode": "nodeAffinity", "policy": {"placement": {"conflictPolicy": "evict"}}}
    objects = render_chart(values)

    text = find(objects, "ConfigMap", "placement-webhook-policy")["data"]["policy.yaml"]
    policy = load_policy(text, source="chart")

    assert policy.placement.mode == "nodeAffinity"
    assert policy.placement.conflict_policy == "evict"
    assert set(policy.profiles) == {"default-scheduler"}


def test_node_selector_tolerations_and_priority_class_reach_every_pod() -> None:
    values = {
        "nodeSelector": {"node-role.kubernetes.io/infra": ""},
        "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClass": {"create": False, "name": "system-cluster-critical"},
    }
    objects = render_chart(values)

    assert of_kind(objects, "PriorityClass") == []
    pods = [d["spec"]["template"]["spec"] for d in of_kind(objects, "Deployment")]
    assert len(pods) == 2  # the webhook and the certificates
    for pod in pods:
        assert pod["nodeSelector"] == values["nodeSelector"]
        assert pod["tolerations"] == values["tolerations"]
        assert pod["priorityClassName"] == "system-cluster-critical"


def test_resources_and_replicas_are_per_component() -> None:
    small = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
    objects = render_chart({"webhook": {"resources": small, "replicas": 3}})
    by_name = {d["metadata"]["name"]: c for d, c in containers(objects)}

    assert by_name["placement-webhook"]["resources"] == small
    assert by_name["placement-webhook-certs"]["resources"]["limits"]["memory"] == "256Mi"
    assert find(objects, "Deployment", "placement-webhook")["spec"]["replicas"] == 3


def test_client_auth_mounts_the_ca_and_passes_it_to_serve() -> None:
    """Ready for `serve --client-ca/--client-name` (the mTLS flags); off by default."""
    values = {
        "clientAuth": {
            "enabled": True,
            "caConfigMap": "apiserver-client-ca",
            "names": ["kube-apiserver", "kube-apiserver-2"],
        }
    }
    deployment = find(render_chart(values), "Deployment", "placement-webhook")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "client-ca")
    volume = next(v for v in pod["volumes"] if v["name"] == "client-ca")

    assert container["args"] == [
        "serve",
        f"--client-ca={mount['mountPath']}/ca.crt",
        "--client-name=kube-apiserver",
        "--client-name=kube-apiserver-2",
    ]
    assert mount["readOnly"] is True
    assert volume["configMap"]["name"] == "apiserver-client-ca"
    default = find(render_chart(), "Deployment", "placement-webhook")
    assert default["spec"]["template"]["spec"]["containers"][0]["args"] == ["serve"]


def _template_error(values: dict[str, Any]) -> str:
    with pytest.raises(AssertionError) as failed:
        render_chart(values)
    return str(failed.value)


def test_bad_values_stop_the_render_with_the_value_at_fault() -> None:
    assert "mode must be nodeName or nodeAffinity" in _template_error({"mode": "fastest"})
    assert "certificates.mode must be" in _template_error({"certificates": {"mode": "vault"}})
    assert "clientAuth.caConfigMap" in _template_error({"clientAuth": {"enabled": True}})


@pytest.mark.parametrize("mode", ["self-managed", "cert-manager"])
def test_helm_lint_passes_strictly(mode: str) -> None:
    done = subprocess.run(
        [str(helm()), "lint", "--strict", str(CHART), "--set", f"certificates.mode={mode}"],
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout
