"""The kustomize manifests: what they render to, and that the pieces fit each other and the code.

Rendered with the pinned kubectl (`kubectl kustomize`), so these read the
objects an operator would apply. That the API server accepts them is shown
in tests/e2e/test_deploy.py; that the RBAC is exactly enough, in
tests/e2e/test_rbac.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from certs.authority import service_dns_names
from tests.unit.deploy.manifests import (
    DEPLOY,
    NAMESPACE,
    OVERLAYS,
    PART_OF,
    REPO,
    Obj,
    containers,
    env_of,
    find,
    of_kind,
    raw,
    render,
)
from webhook.admission.registration import (
    CONFIGURATION_NAME,
    NOT_BOUND_BY_OTHERS,
    webhook_configuration,
)
from webhook.admission.rules import ENABLED_LABEL
from webhook.devcluster.webhook import DEPLOYED_REPLICAS
from webhook.extender.config import ExtenderEntry
from webhook.policy.policy_file import load_policy

WEBHOOK_SA = f"system:serviceaccount:{NAMESPACE}:placement-webhook"


@pytest.fixture(params=OVERLAYS)
def objects(request: pytest.FixtureRequest) -> list[Obj]:
    return render(request.param)


def _without_ca_bundle(hook: dict[str, Any]) -> dict[str, Any]:
    hook = dict(hook)
    hook["clientConfig"] = {k: v for k, v in hook["clientConfig"].items() if k != "caBundle"}
    return hook


# ------------------------------------------------------------------ every overlay


def test_every_object_is_labelled_part_of_placement_webhook(objects: list[Obj]) -> None:
    unlabelled = [
        f"{o['kind']}/{o['metadata']['name']}"
        for o in objects
        if not PART_OF.items() <= (o["metadata"].get("labels") or {}).items()
    ]
    assert unlabelled == []


def test_namespaced_objects_live_in_the_webhook_namespace_except_one_kube_system_binding(
    objects: list[Obj],
) -> None:
    elsewhere = {
        (o["kind"], o["metadata"]["name"], o["metadata"]["namespace"])
        for o in objects
        if o["metadata"].get("namespace") not in (None, NAMESPACE)
    }
    allowed = {("RoleBinding", "placement-extender:authentication-reader", "kube-system")}
    assert elsewhere <= allowed


def test_the_webhook_configuration_has_the_safety_settings_of_registration_py(
    objects: list[Obj],
) -> None:
    rendered = find(objects, "MutatingWebhookConfiguration", CONFIGURATION_NAME)
    expected = webhook_configuration(
        ca_bundle="", own_namespace=NAMESPACE, service=("placement-webhook", NAMESPACE, 443)
    )

    assert [_without_ca_bundle(h) for h in rendered["webhooks"]] == [
        _without_ca_bundle(h) for h in expected["webhooks"]
    ]
    (hook,) = rendered["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 2
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["matchConditions"] == [
        {"name": "not-bound-by-others", "expression": NOT_BOUND_BY_OTHERS}
    ]
    assert hook["rules"][0]["operations"] == ["CREATE"]
    assert hook["rules"][0]["resources"] == ["pods"]
    selector = {e["key"]: e for e in hook["namespaceSelector"]["matchExpressions"]}
    assert selector[ENABLED_LABEL] == {"key": ENABLED_LABEL, "operator": "In", "values": ["true"]}
    excluded = selector["kubernetes.io/metadata.name"]
    assert excluded["operator"] == "NotIn"
    assert {"kube-system", NAMESPACE} <= set(excluded["values"])


def test_the_webhook_never_places_its_own_pods(objects: list[Obj]) -> None:
    namespace = find(objects, "Namespace", NAMESPACE)
    hook = find(objects, "MutatingWebhookConfiguration", CONFIGURATION_NAME)["webhooks"][0]
    excluded = next(
        e["values"]
        for e in hook["namespaceSelector"]["matchExpressions"]
        if e["key"] == "kubernetes.io/metadata.name"
    )

    assert ENABLED_LABEL not in namespace["metadata"]["labels"]
    assert all(d["metadata"]["namespace"] in excluded for d in of_kind(objects, "Deployment"))


def test_the_webhook_configuration_reaches_the_webhook_pods_through_the_service(
    objects: list[Obj],
) -> None:
    ref = find(objects, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["service"]
    service = find(objects, "Service", ref["name"])
    deployment = find(objects, "Deployment", "placement-webhook")
    pod = deployment["spec"]["template"]
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]]
    container_ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}

    assert service["metadata"]["namespace"] == ref["namespace"]
    assert ref["path"] == "/mutate"
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert container_ports[port["targetPort"]] == 8443
    # The serving certificate names the Service the API server calls.
    assert ref["name"] == "placement-webhook"


def test_every_container_runs_as_non_root_on_a_read_only_root_without_capabilities(
    objects: list[Obj],
) -> None:
    for deployment, container in containers(objects):
        pod = deployment["spec"]["template"]["spec"]
        where = f"{deployment['metadata']['name']}/{container['name']}"
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert pod["securityContext"]["runAsUser"] != 0, where
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, where
        assert security["allowPrivilegeEscalation"] is False, where
        assert security["capabilities"] == {"drop": ["ALL"]}, where
        assert container["resources"]["requests"]["memory"], where
        assert container["resources"]["limits"]["memory"], where


def test_every_pod_has_the_priority_class_and_a_service_account_that_are_shipped(
    objects: list[Obj],
) -> None:
    classes = {o["metadata"]["name"] for o in of_kind(objects, "PriorityClass")}
    accounts = {o["metadata"]["name"] for o in of_kind(objects, "ServiceAccount")}
    for deployment in of_kind(objects, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["priorityClassName"] in classes
        assert pod["serviceAccountName"] in accounts


def test_every_mounted_config_map_is_generated_and_every_path_read_is_mounted(
    objects: list[Obj],
) -> None:
    # The API server's client CA is the operator's to give (components/client-ca).
    maps = {o["metadata"]["name"] for o in of_kind(objects, "ConfigMap")}
    maps.add("placement-webhook-client-ca")
    for deployment, container in containers(objects):
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"].get("volumes", [])}
        mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts") or []}
        for volume in volumes.values():
            if "configMap" in volume:
                assert volume["configMap"]["name"] in maps
        paths = [p for v in env_of(container).values() if v.startswith("/") for p in v.split(",")]
        paths += [a.split("=", 1)[1] for a in _args(container) if re.match(r"--\S+=/", a)]
        for path in paths:
            assert any(path.startswith(m + "/") for m in mounts), (container["name"], path)


def _args(container: dict[str, Any]) -> list[str]:
    return [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]


# ------------------------------------------------------------------ what the pods run


def _our_containers(objects: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    for deployment, container in containers(objects):
        if container["image"].startswith("placement-webhook"):
            yield deployment, container


def test_the_image_is_the_project_version_and_our_containers_use_it(objects: list[Obj]) -> None:
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert version is not None
    images = {c["image"] for _, c in _our_containers(objects)}

    assert images == {f"placement-webhook:{version.group(1)}"}


def test_every_command_line_is_one_the_cli_accepts(
    objects: list[Obj], monkeypatch: pytest.MonkeyPatch
) -> None:
    from certs.__main__ import main as certs_main
    from webhook.cli import build_parser

    parsed = []
    for _, container in _our_containers(objects):
        for name, value in env_of(container).items():
            monkeypatch.setenv(name, value)
        command = _args(container)
        if command[:3] == ["python", "-m", "certs"]:
            with pytest.raises(SystemExit) as done:  # --help: parses everything before it
                certs_main([*command[3:], "--help"])
            assert done.value.code == 0, shlex.join(command)
            parsed.append(command[3])
        else:
            args = build_parser().parse_args(command)
            parsed.append(args.command)
    assert set(parsed) <= {"serve", "reconcile", "extender", "in-cluster"}
    assert "serve" in parsed


def _policy_paths(container: Obj) -> list[str]:
    """The policy files a container is told to read (env or --policy flag)."""
    paths = [v for k, v in env_of(container).items() if k == "PLACEMENT_WEBHOOK_POLICY"]
    args = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    return paths + [a.split("=", 1)[1] for a in args if a.startswith("--policy=")]


def test_every_policy_a_deployed_process_reads_is_shipped_and_loads(objects: list[Obj]) -> None:
    """Follows each container's policy path to its mount, its ConfigMap, and the file in it."""
    config_maps = {c["metadata"]["name"]: c for c in of_kind(objects, "ConfigMap")}
    loaded: dict[str, str] = {}
    for deployment in of_kind(objects, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        for container in pod["containers"]:
            for path in _policy_paths(container):
                folder, _, filename = path.rpartition("/")
                (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == folder]
                name = volumes[mount["name"]]["configMap"]["name"]
                text = config_maps[name]["data"][filename]
                policy = load_policy(text, source=name)
                assert policy.profiles, f"{name}: no profiles"
                loaded[f"{deployment['metadata']['name']}/{container['name']}"] = name

    assert "placement-webhook/webhook" in loaded, f"the webhook reads no shipped policy: {loaded}"
    shipped = {n for n, c in config_maps.items() if "policy.yaml" in (c.get("data") or {})}
    assert shipped == set(loaded.values()), "a policy ConfigMap no process reads, or one missing"


def test_serve_gets_its_namespace_policy_and_the_mounted_certificate(objects: list[Obj]) -> None:
    deployment = find(objects, "Deployment", "placement-webhook")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = env_of(container)
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    tls_dir = mounts["tls"]["mountPath"]

    assert container["args"] == ["serve"]
    assert env["PLACEMENT_WEBHOOK_NAMESPACE"] == "<metadata.namespace>"
    assert env["PLACEMENT_WEBHOOK_TLS_CERT"] == f"{tls_dir}/tls.crt"
    assert env["PLACEMENT_WEBHOOK_TLS_KEY"] == f"{tls_dir}/tls.key"
    # Mounted as a folder, not with subPath: only then does the kubelet update it.
    assert "subPath" not in mounts["tls"]
    assert volumes["tls"]["secret"]["secretName"] == "placement-webhook-tls"
    assert mounts["tmp"]["mountPath"] == "/tmp"


# ------------------------------------------------------------------ availability


def test_the_webhook_is_spread_replicated_and_budgeted() -> None:
    objects = render("self-managed")
    deployment = find(objects, "Deployment", "placement-webhook")
    spec = deployment["spec"]
    pod = spec["template"]
    (container,) = pod["spec"]["containers"]
    budgets = [
        b
        for b in of_kind(objects, "PodDisruptionBudget")
        if b["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    ]
    (spread,) = pod["spec"]["topologySpreadConstraints"]

    assert spec["replicas"] >= 2
    # The e2e tests run the webhook with the replica count the deploy ships.
    assert spec["replicas"] == DEPLOYED_REPLICAS
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert len(budgets) == 1
    assert budgets[0]["spec"]["maxUnavailable"] < spec["replicas"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["whenUnsatisfiable"] == "DoNotSchedule"
    assert spread["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"]["cpu"]


def test_the_replicas_are_leader_elected_on_the_lease_their_role_names() -> None:
    from webhook.reconciler.options import DEFAULT_LEASE_NAME

    objects = render("self-managed")
    container = find(objects, "Deployment", "placement-webhook")["spec"]["template"]["spec"][
        "containers"
    ][0]
    role = find(objects, "Role", "placement-webhook:leader-election")
    env = env_of(container)

    assert container["args"] == ["serve"]
    assert env["PLACEMENT_WEBHOOK_IDENTITY"] == "<metadata.name>"
    assert env["PLACEMENT_WEBHOOK_NAMESPACE"] == "<metadata.namespace>"
    assert env["POD_IP"] == "<status.podIP>"
    assert env["PLACEMENT_WEBHOOK_PEER_NAME"] == "placement-webhook.placement-webhook.svc"
    deployments = {d["metadata"]["name"] for d in of_kind(objects, "Deployment")}
    assert "placement-webhook-reconciler" not in deployments  # one process decides and binds
    assert all(
        rule.get("resourceNames") == [DEFAULT_LEASE_NAME]
        for rule in role["rules"]
        if rule["verbs"] != ["create"]
    )


# ------------------------------------------------------------------ RBAC


def _grants(objects: list[Obj], user: str) -> list[dict[str, Any]]:
    """Rules of our own roles bound to `user` (system:serviceaccount:NS:NAME)."""
    _, _, namespace, name = user.split(":")
    rules = []
    for binding in of_kind(objects, "RoleBinding", "ClusterRoleBinding"):
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == name and s["namespace"] == namespace
            for s in binding["subjects"]
        ):
            continue
        ref = binding["roleRef"]
        shipped = [o for o in objects if o["kind"] == ref["kind"]]
        shipped = [o for o in shipped if o["metadata"]["name"] == ref["name"]]
        for role in shipped:
            rules += role["rules"]
    return rules


def test_no_rule_uses_wildcards_and_no_cluster_role_reads_secrets(objects: list[Obj]) -> None:
    for role in of_kind(objects, "Role", "ClusterRole"):
        for rule in role["rules"]:
            for key in ("verbs", "resources", "apiGroups", "nonResourceURLs"):
                assert "*" not in rule.get(key, []), (role["metadata"]["name"], rule)
            if role["kind"] == "ClusterRole":
                assert "secrets" not in rule.get("resources", [])


WORKLOADS = ("services", "replicationcontrollers", "replicasets", "statefulsets")


def test_the_webhook_may_decide_and_bind_but_never_read_secrets(objects: list[Obj]) -> None:
    granted = {
        (r, v)
        for rule in _grants(objects, WEBHOOK_SA)
        for r in rule["resources"]
        for v in rule["verbs"]
    }

    assert granted == {
        ("nodes", "list"),
        ("nodes", "watch"),
        ("pods", "list"),
        ("pods", "watch"),
        ("namespaces", "list"),
        ("namespaces", "watch"),
        *((kind, verb) for kind in WORKLOADS for verb in ("list", "watch")),
        ("events", "create"),
        ("pods/binding", "create"),
        ("pods", "get"),
        ("pods", "delete"),
        ("pods/status", "patch"),
        ("pods/eviction", "create"),
        ("leases", "create"),
        ("leases", "get"),
        ("leases", "update"),
        # its metrics endpoint asks the API server who calls and what they may read
        ("tokenreviews", "create"),
        ("subjectaccessreviews", "create"),
    }


def test_the_certificate_controller_may_touch_only_its_two_secrets_and_our_configuration() -> None:
    objects = render("self-managed")
    rules = _grants(objects, f"system:serviceaccount:{NAMESPACE}:placement-webhook-certs")
    named = {
        (resource, verb, tuple(rule.get("resourceNames") or ()))
        for rule in rules
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }

    secrets = ("placement-webhook-ca", "placement-webhook-tls")
    assert named == {
        ("secrets", "create", ()),
        ("secrets", "get", secrets),
        ("secrets", "update", secrets),
        ("mutatingwebhookconfigurations", "get", (CONFIGURATION_NAME,)),
        ("mutatingwebhookconfigurations", "patch", (CONFIGURATION_NAME,)),
    }


# ------------------------------------------------------------------ certificates


def test_self_managed_certs_write_the_secret_the_webhook_mounts_and_name_the_service() -> None:
    from certs.__main__ import _add_in_cluster

    objects = render("self-managed")
    container = find(objects, "Deployment", "placement-webhook-certs")["spec"]["template"]["spec"][
        "containers"
    ][0]
    parser = argparse.ArgumentParser()
    _add_in_cluster(parser.add_subparsers())
    args = parser.parse_args(_args(container)[3:])
    webhook_pod = find(objects, "Deployment", "placement-webhook")["spec"]["template"]["spec"]
    mounted = next(v["secret"]["secretName"] for v in webhook_pod["volumes"] if "secret" in v)
    service = find(objects, "Service", "placement-webhook")

    assert args.secret == mounted
    assert args.webhook_config == CONFIGURATION_NAME
    assert args.service == service["metadata"]["name"]
    assert args.once is False and args.interval <= 300
    assert env_of(container)["PLACEMENT_WEBHOOK_NAMESPACE"] == "<metadata.namespace>"


def test_cert_manager_injects_the_ca_of_the_certificate_the_webhook_mounts() -> None:
    objects = render("cert-manager")
    config = find(objects, "MutatingWebhookConfiguration", CONFIGURATION_NAME)
    namespace, name = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
    serving = find(objects, "Certificate", name)
    webhook_pod = find(objects, "Deployment", "placement-webhook")["spec"]["template"]["spec"]
    mounted = next(v["secret"]["secretName"] for v in webhook_pod["volumes"] if "secret" in v)
    issuer = find(objects, "Issuer", serving["spec"]["issuerRef"]["name"])
    ca = next(
        c
        for c in of_kind(objects, "Certificate")
        if c["spec"]["secretName"] == issuer["spec"]["ca"]["secretName"]
    )

    assert namespace == serving["metadata"]["namespace"] == NAMESPACE
    assert serving["spec"]["secretName"] == mounted
    assert serving["spec"]["dnsNames"] == service_dns_names("placement-webhook", NAMESPACE)
    assert ca["spec"]["isCA"] is True
    # Renewed well before expiry, with a fresh key, by a CA that outlives it.
    assert serving["spec"]["renewBefore"] == "720h" and serving["spec"]["duration"] == "2160h"
    assert serving["spec"]["privateKey"]["rotationPolicy"] == "Always"
    # ...and nothing of the self-managed controller is installed beside it.
    assert "placement-webhook-certs" not in {d["metadata"]["name"] for d in objects}


# ------------------------------------------------------------------ extender overlay


def test_the_second_scheduler_calls_the_extender_in_its_pod_on_loopback() -> None:
    objects = render("extender")
    deployment = find(objects, "Deployment", "placement-extender")
    pod = deployment["spec"]["template"]["spec"]
    by_name = {c["name"]: c for c in pod["containers"]}
    config_map = find(objects, "ConfigMap", "placement-extender-config")
    config = yaml.safe_load(config_map["data"]["scheduler-config.yaml"])
    (extender,) = config["extenders"]
    bind = next(a for a in by_name["extender"]["args"] if a.startswith("--bind="))
    (profile,) = config["profiles"]

    assert extender == ExtenderEntry("http://127.0.0.1:8888").to_dict()
    assert bind == "--bind=127.0.0.1:8888"
    assert profile["schedulerName"] == "placement-extender"
    assert profile["plugins"]["score"] == {"disabled": [{"name": "*"}]}
    assert (
        "--config=/etc/placement-extender/scheduler-config.yaml"
        in by_name["kube-scheduler"]["command"]
    )


def test_the_extender_policy_has_the_webhook_plugins_under_the_second_schedulers_name() -> None:
    objects = render("extender")
    extender = load_policy(
        find(objects, "ConfigMap", "placement-extender-policy")["data"]["policy.yaml"]
    )
    webhook = load_policy((DEPLOY / "base" / "policy.yaml").read_text())

    assert extender.placement.scheduler_name == "placement-extender"
    assert (
        dataclasses.replace(extender.profiles["placement-extender"], name="default-scheduler")
        == webhook.profiles["default-scheduler"]
    )


def test_the_second_schedulers_lease_is_its_own_and_its_role_allows_it() -> None:
    objects = render("extender")
    config = yaml.safe_load(
        find(objects, "ConfigMap", "placement-extender-config")["data"]["scheduler-config.yaml"]
    )
    role = find(objects, "Role", "placement-extender:leader-election")
    election = config["leaderElection"]

    assert election["leaderElect"] is True
    assert (election["resourceNamespace"], election["resourceName"]) != (
        "kube-system",
        "kube-scheduler",
    )
    assert role["metadata"]["namespace"] == election["resourceNamespace"]
    assert role["rules"][0]["resourceNames"] == [election["resourceName"]]


# ------------------------------------------------------------------ the image


def test_the_dockerfile_runs_the_cli_as_a_numeric_non_root_user() -> None:
    text = (REPO / "Dockerfile").read_text()
    final = text.split("\nFROM ")[-1]
    user = re.search(r"^USER (\d+):(\d+)$", final, re.M)

    assert user is not None and int(user.group(1)) != 0
    assert 'ENTRYPOINT ["placement-webhook"]' in final
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.\d+-slim", text, re.M)


def test_the_docker_context_holds_what_the_package_build_reads() -> None:
    allowed = {
        line[1:].rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = set(re.findall(r"^COPY (?!--from)(.+) \S+$", (REPO / "Dockerfile").read_text(), re.M))
    sources = {part for line in copied for part in line.split()}

    assert sources <= allowed
    assert {"pyproject.toml", "README.md", "webhook", "certs"} <= sources


def test_raw_rbac_files_hold_no_rule_for_resources_the_code_never_touches() -> None:
    resources = {
        r
        for relative in ("base/rbac.yaml", "overlays/self-managed/certs.yaml")
        for doc in raw(relative)
        if doc["kind"] in ("Role", "ClusterRole")
        for rule in doc["rules"]
        for r in rule["resources"]
    }
    code = "\n".join(
        p.read_text() for folder in ("webhook", "certs") for p in (REPO / folder).rglob("*.py")
    )
    for resource in resources:
        assert re.search(rf"\b{resource.split('/')[-1]}\b", code), resource


def test_the_deploy_readme_installs_opts_in_verifies_and_uninstalls() -> None:
    text = (DEPLOY / "README.md").read_text()
    for heading in ("## Install", "## Opt a namespace in", "## Verify", "## Uninstall"):
        assert heading in text
    uninstall = text.split("## Uninstall", 1)[1]
    first_delete = uninstall.index("kubectl delete")
    assert "mutatingwebhookconfiguration" in uninstall[first_delete:].splitlines()[0]


# ------------------------------------------------------------------ network exposure


def test_every_endpoint_is_bound_to_the_pod_address_and_probed_in_plain_http(
    objects: list[Obj],
) -> None:
    for name in ("placement-webhook",):
        (container,) = find(objects, "Deployment", name)["spec"]["template"]["spec"]["containers"]
        env = env_of(container)
        binds = {k: v for k, v in env.items() if k.endswith("BIND")}
        assert binds and all(v.startswith("$(POD_IP):") for v in binds.values()), binds
        assert env["POD_IP"] == "<status.podIP>"
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        for probe in ("readinessProbe", "livenessProbe"):
            get = container[probe]["httpGet"]
            assert get["port"] == "probes" and get.get("scheme", "HTTP") == "HTTP"
        assert ports["probes"] == 8081 and ports["metrics"] == 8082


def test_network_policies_close_the_namespace_and_open_each_port_to_its_caller(
    objects: list[Obj],
) -> None:
    policies = {p["metadata"]["name"]: p["spec"] for p in of_kind(objects, "NetworkPolicy")}
    deny = policies["placement-webhook-default-deny"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}
    opened: dict[tuple[str, int], list[Obj]] = {}
    for spec in policies.values():
        component = spec["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/component")
        for rule in spec.get("ingress", []):
            for port in rule["ports"]:
                opened[(component, port["port"])] = rule["from"]
    assert set(opened) == {("webhook", 8443), ("webhook", 8082)}
    monitoring = [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}]  # fmt: skip
    assert opened[("webhook", 8082)] == monitoring
    webhook_from = opened[("webhook", 8443)]
    assert {"ipBlock"} in [set(peer) for peer in webhook_from]  # the control plane setting
    replicas = [p for p in webhook_from if "podSelector" in p]
    assert replicas[0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "webhook"


def test_with_mutual_tls_serve_trusts_the_api_servers_ca_and_its_own() -> None:
    objects = render("self-managed-mtls")
    (container,) = find(objects, "Deployment", "placement-webhook")["spec"]["template"]["spec"][
        "containers"
    ]
    env = env_of(container)
    bundles = env["PLACEMENT_WEBHOOK_CLIENT_CA"].split(",")
    assert bundles == [
        "/etc/placement-webhook/client-ca/ca.crt",
        "/etc/placement-webhook/tls/ca.crt",
    ]
    assert "placement-webhook" in env["PLACEMENT_WEBHOOK_CLIENT_NAME"].split(",")
    plain = find(render("self-managed"), "Deployment", "placement-webhook")
    assert "PLACEMENT_WEBHOOK_CLIENT_CA" not in env_of(
        plain["spec"]["template"]["spec"]["containers"][0]
    )


def test_the_metrics_reader_role_grants_only_get_on_our_pages(objects: list[Obj]) -> None:
    role = find(objects, "ClusterRole", "placement-webhook:metrics-reader")
    assert role["rules"] == [
        {"nonResourceURLs": ["/metrics", "/debug/conflicts"], "verbs": ["get"]}
    ]
    bound = {b["roleRef"]["name"] for b in of_kind(objects, "RoleBinding", "ClusterRoleBinding")}
    assert "placement-webhook:metrics-reader" not in bound  # the operator says who reads
