"""The manifests against a real API server: accepted as rendered, the second scheduler runs, and
the README's uninstall leaves nothing behind.

cert-manager is not installed here. Its two kinds (Issuer, Certificate) get
a minimal CustomResourceDefinition that accepts any spec, so the dry run
checks those objects' kind, version, names and namespace, not their fields;
the fields are checked against the rest of the manifests in
tests/unit/deploy/test_manifests.py (secret names, DNS names, issuer chain).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_rbac import (
    Processes,
    apply,
    certs_args,
    rbac_objects,
    token_kubeconfig,
)
from tests.unit.deploy.manifests import (
    NAMESPACE,
    OVERLAYS,
    PART_OF,
    REPO,
    find,
    render,
    render_text,
)
from tests.unit.deploy.readme import block, operator_checkout
from webhook.admission.rules import ENABLED_LABEL
from webhook.devcluster import DevCluster
from webhook.devcluster.cluster import free_port
from webhook.devcluster.objects import create_node, ensure_namespace, node_manifest, pod_manifest
from webhook.kube import ApiError, Kube
from webhook.reconciler.options import DEFAULT_LEASE_NAME

pytestmark = pytest.mark.e2e

SELECTOR = ",".join(f"{k}={v}" for k, v in PART_OF.items())


def minimal_crd(kind: str, plural: str) -> dict[str, Any]:
    """A cert-manager.io/v1 kind that accepts any spec: enough for a dry run of our objects."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster.start(tmp_path_factory.mktemp("deploy-cluster")) as running:
        yield running


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Kube]:
    client = Kube(cluster.kubeconfig)
    yield client
    client.close()


def run_kubectl(cluster: DevCluster, *args: str, input: str | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        input=input,
        cwd=REPO,
    )
    return done.returncode, done.stdout, done.stderr


# ------------------------------------------------------------------ accepted as rendered


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_passes_a_server_side_dry_run_with_no_pod_security_warning(
    cluster: DevCluster, admin: Kube, overlay: str
) -> None:
    objects = render(overlay)
    if overlay == "cert-manager":
        apply(
            cluster, [minimal_crd("Certificate", "certificates"), minimal_crd("Issuer", "issuers")]
        )
        cluster.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/certificates.cert-manager.io",
            "crd/issuers.cert-manager.io",
        )
    # A dry run persists nothing, so objects cannot land in a namespace that is only
    # being dry-run created: the namespace (with its Pod Security labels) goes first.
    apply(cluster, [find(objects, "Namespace", NAMESPACE)])

    code, out, err = run_kubectl(
        cluster,
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        "-",
        input=render_text(overlay),
    )

    assert code == 0, err
    accepted = [line for line in out.splitlines() if line.endswith("(server dry run)")]
    assert len(accepted) == len(objects), out
    # The namespace enforces (and warns about) Pod Security "restricted": a
    # Deployment whose pods would be refused gets a warning at apply time.
    assert "PodSecurity" not in err, err


# ------------------------------------------------------------------ the second scheduler


def test_the_second_scheduler_runs_its_config_as_its_service_account_and_binds_via_the_extender(
    cluster: DevCluster, admin: Kube, tmp_path: Path
) -> None:
    """kube-scheduler (the real binary) with the overlay's configuration and RBAC, and the
    extender beside it: a pod for schedulerName placement-extender ends up bound."""
    objects = render("extender")
    apply(cluster, rbac_objects(objects))
    identity = token_kubeconfig(cluster, admin, "placement-extender", tmp_path)
    config = yaml.safe_load(
        find(objects, "ConfigMap", "placement-extender-config")["data"]["scheduler-config.yaml"]
    )
    policy = tmp_path / "extender-policy.yaml"
    policy.write_text(
        find(objects, "ConfigMap", "placement-extender-policy")["data"]["policy.yaml"]
    )
    # Two local changes only: the kubeconfig (in a pod it is the in-cluster one) and a
    # free port for the extender (in the pod, loopback port 8888 is its own).
    port = free_port()
    config["clientConnection"] = {"kubeconfig": str(identity)}
    config["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{port}"
    (tmp_path / "scheduler.yaml").write_text(yaml.safe_dump(config))
    procs = Processes(tmp_path)
    scheduler_log = tmp_path / "kube-scheduler.log"
    try:
        procs.start("extender", [
            *shlex.split("-m webhook.cli extender --log-format text"),
            *("--kubeconfig", str(identity), "--bind", f"127.0.0.1:{port}"),
            *("--policy", str(policy)),
        ])  # fmt: skip
        with open(scheduler_log, "wb") as out:
            scheduler = subprocess.Popen(
                [
                    str(cluster.bin_dir / "kube-scheduler"),
                    f"--config={tmp_path / 'scheduler.yaml'}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={free_port()}",
                    f"--authentication-kubeconfig={identity}",
                    f"--authorization-kubeconfig={identity}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        lease = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/placement-extender"
        holder = procs.until(
            lambda: admin.get(lease)["spec"].get("holderIdentity"),
            "kube-scheduler to take its Lease",
        )
        create_node(admin, node_manifest("extender-node", cpu="4"))
        ensure_namespace(admin, "extender-check")
        admin.create(
            "/api/v1/namespaces/extender-check/pods",
            pod_manifest("p", scheduler_name="placement-extender"),
        )

        node = procs.until(
            lambda: admin.get("/api/v1/namespaces/extender-check/pods/p")["spec"].get("nodeName"),
            "the pod to be bound",
        )
    finally:
        if "scheduler" in locals():
            scheduler.terminate()
            scheduler.wait(10)
        procs.stop_all()

    log = scheduler_log.read_text(errors="replace")
    assert holder
    assert node == "extender-node"
    assert "forbidden" not in log.lower(), log[-3000:]
    assert procs.denials() == set()


# ------------------------------------------------------------------ install, uninstall


def leftovers(admin: Kube) -> list[str]:
    """Every object labelled part-of=placement-webhook, of every kind we ship or create."""
    admission = "/apis/admissionregistration.k8s.io/v1"
    kinds = {
        "/api/v1/namespaces": "Namespace",
        "/api/v1/serviceaccounts": "ServiceAccount",
        "/api/v1/services": "Service",
        "/api/v1/configmaps": "ConfigMap",
        "/api/v1/secrets": "Secret",
        "/apis/apps/v1/deployments": "Deployment",
        "/apis/policy/v1/poddisruptionbudgets": "PodDisruptionBudget",
        "/apis/rbac.authorization.k8s.io/v1/roles": "Role",
        "/apis/rbac.authorization.k8s.io/v1/rolebindings": "RoleBinding",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles": "ClusterRole",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings": "ClusterRoleBinding",
        "/apis/scheduling.k8s.io/v1/priorityclasses": "PriorityClass",
        f"{admission}/mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
    }
    found = []
    for path, kind in kinds.items():
        for item in admin.get(path, labelSelector=SELECTOR)["items"]:
            meta = item["metadata"]
            found.append(f"{kind} {meta.get('namespace', '')}/{meta['name']}")
    return found


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[tuple[DevCluster, Kube]]:
    """A control plane of its own (nothing else installed), with kube-controller-manager:
    deleting a namespace needs its namespace controller, and the Deployments' pods their GC."""
    with DevCluster.start(tmp_path / "cluster", controller_manager=True) as running:
        client = Kube(running.kubeconfig)
        yield running, client
        client.close()


def test_install_as_the_readme_says_then_its_uninstall_leaves_nothing_behind(
    fresh: tuple[DevCluster, Kube], tmp_path: Path
) -> None:
    cluster, admin = fresh
    checkout = operator_checkout(tmp_path / "checkout", "example.com")
    install = next(
        line
        for line in block("Install", "With kustomize").splitlines()
        if line.startswith("kubectl apply")
    )
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{cluster.bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", "-c", install], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # What the running install creates on its own: the certificate Secrets (and the
    # caBundle in the webhook configuration), the decision Lease.
    procs = Processes(tmp_path)
    identity = token_kubeconfig(cluster, admin, "placement-webhook-certs", tmp_path)
    assert procs.run("certs", certs_args(identity)) == 0, procs.logs()
    admin.create(
        f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": DEFAULT_LEASE_NAME},
            "spec": {},
        },
    )
    ensure_namespace(admin, "my-apps", {ENABLED_LABEL: "true"})
    before = leftovers(admin)
    assert "MutatingWebhookConfiguration /placement-webhook" in before
    assert f"Secret {NAMESPACE}/placement-webhook-tls" in before

    uninstall = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block("Uninstall", "With kustomize")],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert uninstall.returncode == 0, uninstall.stdout + uninstall.stderr
    assert leftovers(admin) == []
    with pytest.raises(ApiError) as gone:
        admin.get(f"/api/v1/namespaces/{NAMESPACE}")
    assert gone.value.is_not_found
    labels = admin.get("/api/v1/namespaces/my-apps")["metadata"].get("labels") or {}
    assert ENABLED_LABEL not in labels
    # The webhook configuration went first (the README's order, checked in unit tests too).
    assert uninstall.stdout.splitlines()[0].startswith(
        'mutatingwebhookconfiguration.admissionregistration.k8s.io "placement-webhook" deleted'
    )
