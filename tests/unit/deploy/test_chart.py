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
    env_of,
    find,
    helm,
    of_kind,
    render,
    render_chart,
    render_dir,
)
from tests.unit.deploy.readme import block
from webhook.policy.policy_file import load_policy

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
    """Kustomize's objects, with generated ConfigMap names back to the names written.

    Only the ConfigMaps it rendered are generated ones: a volume of a ConfigMap the
    operator makes (the client CA) keeps its name.
    """
    objects = list(map(copy.deepcopy, objects))
    written = {
        cm["metadata"]["name"]: _unhashed(cm["metadata"]["name"])
        for cm in of_kind(objects, "ConfigMap")
    }
    out = {}
    for obj in objects:
        if obj["kind"] == "Namespace":
            continue
        if obj["kind"] == "ConfigMap":
            obj["metadata"]["name"] = written[obj["metadata"]["name"]]
        for deployment in of_kind([obj], "Deployment"):
            for volume in deployment["spec"]["template"]["spec"].get("volumes", []):
                if "configMap" in volume:
                    name = volume["configMap"]["name"]
                    volume["configMap"]["name"] = written.get(name, name)
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


def test_the_chart_with_client_auth_renders_the_self_managed_mtls_overlay() -> None:
    charted = render_chart({"clientAuth": {"enabled": True}})

    assert_same_objects(from_kustomize(render("self-managed-mtls")), from_helm(charted))


def test_client_auth_with_cert_manager_renders_that_overlay_with_the_client_ca_component(
    tmp_path: Path,
) -> None:
    """deploy/README.md: add components/client-ca to an overlay of your own for cert-manager."""
    folder = tmp_path / "cert-manager-mtls"
    folder.mkdir()
    kustomization = {
        "resources": [os.path.relpath(DEPLOY / "overlays" / "cert-manager", folder)],
        "components": [os.path.relpath(DEPLOY / "components" / "client-ca", folder)],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    values = {"certificates": {"mode": "cert-manager"}, "clientAuth": {"enabled": True}}

    assert_same_objects(from_kustomize(render_dir(folder)), from_helm(render_chart(values)))


def test_the_network_policy_settings_render_what_an_overlay_patching_them_does(
    tmp_path: Path,
) -> None:
    """deploy/README.md: the SETTINGs of base/networkpolicy.yaml, set by a JSON patch."""
    control_plane = [
        {"ipBlock": {"cidr": "10.0.0.0/24"}},
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}},
        },
    ]
    metrics_label = (
        "/spec/ingress/1/from/0/namespaceSelector/matchLabels/kubernetes.io~1metadata.name"
    )
    patch = [
        {"op": "remove", "path": "/spec/ingress/0/from/0"},
        *(
            {"op": "add", "path": f"/spec/ingress/0/from/{i}", "value": peer}
            for i, peer in enumerate(control_plane)
        ),
        {"op": "replace", "path": metrics_label, "value": "prometheus"},
    ]
    folder = tmp_path / "narrowed"
    folder.mkdir()
    kustomization = {
        "resources": [os.path.relpath(DEPLOY / "overlays" / "self-managed", folder)],
        "patches": [
            {
                "target": {"kind": "NetworkPolicy", "name": "placement-webhook"},
                "patch": yaml.safe_dump(patch),
            }
        ],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    values = {"networkPolicy": {"controlPlane": control_plane, "metricsNamespace": "prometheus"}}

    kustomized = from_kustomize(render_dir(folder))
    policy = find(list(kustomized.values()), "NetworkPolicy", "placement-webhook")
    assert policy["spec"]["ingress"][0]["from"][:2] == control_plane  # the patch took

    assert_same_objects(kustomized, from_helm(render_chart(values)))


@pytest.mark.parametrize("side", ["kustomize", "Helm"])
def test_the_comparison_fails_when_either_side_changes_one_field(side: str) -> None:
    kustomized = from_kustomize(render("self-managed"))
    charted = from_helm(render_chart())
    assert_same_objects(kustomized, charted)
    edited = kustomized if side == "kustomize" else charted
    policy = edited[("NetworkPolicy", NAMESPACE, "placement-webhook")]
    policy["spec"]["ingress"][1]["ports"][0]["port"] = 9090

    with pytest.raises(AssertionError):
        assert_same_objects(kustomized, charted)


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


def test_client_auth_names_the_operators_configmap_key_and_names() -> None:
    """The Service's name stays allowed: replicas present the serving certificate."""
    values = {
        "clientAuth": {
            "enabled": True,
            "caConfigMap": "apiserver-client-ca",
            "key": "bundle.pem",
            "names": ["kube-apiserver", "kube-apiserver-2"],
        }
    }
    pod = find(render_chart(values), "Deployment", "placement-webhook")["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "client-ca")
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "client-ca")
    env = env_of(container)

    assert env["PLACEMENT_WEBHOOK_CLIENT_CA"].split(",") == [
        f"{mount['mountPath']}/bundle.pem",
        "/etc/placement-webhook/tls/ca.crt",
    ]
    assert (
        env["PLACEMENT_WEBHOOK_CLIENT_NAME"] == "kube-apiserver,kube-apiserver-2,placement-webhook"
    )
    assert mount["readOnly"] is True
    assert volume["configMap"]["name"] == "apiserver-client-ca"
    default = find(render_chart(), "Deployment", "placement-webhook")
    assert "PLACEMENT_WEBHOOK_CLIENT_CA" not in env_of(
        default["spec"]["template"]["spec"]["containers"][0]
    )


def _template_error(values: dict[str, Any]) -> str:
    with pytest.raises(AssertionError) as failed:
        render_chart(values)
    return str(failed.value)


def test_bad_values_stop_the_render_with_the_value_at_fault() -> None:
    assert "mode must be nodeName or nodeAffinity" in _template_error({"mode": "fastest"})
    assert "certificates.mode must be" in _template_error({"certificates": {"mode": "vault"}})
    no_configmap = {"clientAuth": {"enabled": True, "caConfigMap": ""}}
    assert "clientAuth.caConfigMap" in _template_error(no_configmap)
    no_names = {"clientAuth": {"enabled": True, "names": []}}
    assert "clientAuth.names" in _template_error(no_names)
    closed = {"networkPolicy": {"controlPlane": []}}
    assert "networkPolicy.controlPlane must name at least one peer" in _template_error(closed)
    nowhere = {"networkPolicy": {"metricsNamespace": ""}}
    assert "networkPolicy.metricsNamespace" in _template_error(nowhere)


@pytest.mark.parametrize(
    "setting",
    ["certificates.mode=self-managed", "certificates.mode=cert-manager", "clientAuth.enabled=true"],
)
def test_helm_lint_passes_strictly(setting: str) -> None:
    done = subprocess.run(
        [str(helm()), "lint", "--strict", str(CHART), "--set", setting],
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout
