"""The install on a real node, both ways, with deploy/README.md's steps as written.

One control plane (with kube-scheduler and kube-controller-manager) and one
real kubelet with containerd and runc (webhook/devcluster/realnode.py); the
project's image built by `hack/image.sh` (`make image`) and imported into
containerd as an operator loads an image onto a node, under the name an
operator's registry would give it (`localhost/placement-webhook`). The
README's blocks run in a shell on the cluster's network, against a copy of
deploy/ with the README's own overlay beside it.

Each way (kustomize, then Helm on a cluster of its own): install, the
certificates made in the cluster, the webhook Ready, a namespace opted in,
the README's verify steps, a Deployment's pods placed by the webhook and
Running on the node, the webhook's memory limit enforced by the runtime,
(Helm) an upgrade that keeps the caBundle, the README's uninstall, nothing
left in the cluster; and once the node is stopped, nothing of it left on
the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.e2e.test_deploy import leftovers
from tests.unit.deploy.manifests import NAMESPACE, REPO
from tests.unit.deploy.readme import block, blocks, operator_checkout, with_registry
from webhook.admission.rules import ENABLED_LABEL
from webhook.devcluster import DevCluster
from webhook.devcluster.netns import NODE_IP
from webhook.devcluster.realnode import SYSTEM_PATH, RealNode, cluster_with_real_node
from webhook.kube import ApiError, Kube

pytestmark = pytest.mark.e2e

REGISTRY = "localhost"  # `make image` tags localhost/placement-webhook:VERSION
DEPLOYMENTS = ("placement-webhook-certs", "placement-webhook")
APP_NAMESPACE = "my-apps"  # the README's
T = TypeVar("T")


@pytest.fixture(scope="module")
def images() -> list[Path]:
    """The project's image and the pause image, built (or found cached) by hack/image.sh."""
    archives = []
    for target in ("webhook", "pause"):
        done = subprocess.run(
            ["bash", str(REPO / "hack" / "image.sh"), target], stdout=subprocess.PIPE, text=True
        )
        assert done.returncode == 0, f"hack/image.sh {target} failed (its output is above)"
        archives.append(Path(done.stdout.strip().splitlines()[-1]))
    return archives


class Shell:
    """An operator's shell on the cluster's network, in their checkout, with kubectl and helm."""

    def __init__(self, cluster: DevCluster, node: RealNode, checkout: Path, home: Path):
        self.node = node
        self.checkout = checkout
        home.mkdir()
        self.env = {
            "PATH": f"{cluster.bin_dir}{os.pathsep}{SYSTEM_PATH}",
            "KUBECONFIG": str(node.inner_kubeconfig),
            # kubectl's and Helm's caches and settings stay in the test's folder.
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / "cache"),
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_DATA_HOME": str(home / "data"),
        }

    def _run(self, script: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.node.command(["bash", "-euo", "pipefail", "-c", script]),
            cwd=self.checkout,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def run(self, script: str, timeout: float = 300) -> str:
        """Run `script` as a README block is run; on failure, say what the cluster shows."""
        try:
            done = self._run(script, timeout)
        except subprocess.TimeoutExpired as err:
            raise AssertionError(
                f"{script}\ntimed out after {timeout:.0f}s\n{self.diagnose()}"
            ) from err
        output = f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        assert done.returncode == 0, f"{script}\n{output}\n{self.diagnose()}"
        return done.stdout

    def diagnose(self) -> str:
        """Pods, recent events, our containers' logs and the kubelet's: what a person would read."""
        script = (
            "kubectl get pods -A -o wide;"
            " kubectl get events -A --sort-by=.lastTimestamp | tail -40;"
            f" kubectl -n {NAMESPACE} logs --all-containers --prefix --tail=20"
            " -l app.kubernetes.io/name=placement-webhook"
        )
        try:
            done = self._run(script, 60)
            shown = done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            shown = "(kubectl did not answer within 60s)"
        return f"--- the cluster\n{shown}\n--- kubelet\n{self.node.cluster.tail_log('kubelet', 30)}"


def until(what: str, probe: Callable[[], T | None], timeout: float = 120) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _pods(admin: Kube, namespace: str, selector: str) -> list[dict[str, Any]]:
    return list(admin.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)["items"])


def _running_on_node(pods: list[dict[str, Any]], count: int) -> list[dict[str, Any]] | None:
    ready = [
        p
        for p in pods
        if p["status"].get("phase") == "Running"
        and all(c.get("ready") for c in p["status"].get("containerStatuses", []))
    ]
    return ready if len(ready) == count else None


def web_deployment(replicas: int) -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "pause",
                            "image": "registry.k8s.io/pause:3.10.2",
                            "resources": {"requests": {"cpu": "50m", "memory": "16Mi"}},
                        }
                    ]
                },
            },
        },
    }


def webhook_calls(cluster: DevCluster) -> tuple[int, float]:
    """Calls of our webhook the API server made, and their total seconds (its own metric)."""
    metric = "apiserver_admission_webhook_admission_duration_seconds"
    found = {"count": 0.0, "sum": 0.0}
    for line in cluster.kubectl("get", "--raw", "/metrics").splitlines():
        if line.startswith(f"{metric}_") and 'name="pods.placement-webhook.io"' in line:
            kind = line.split("{", 1)[0].removeprefix(f"{metric}_")
            if kind in found:
                found[kind] += float(line.rsplit(" ", 1)[1])
    return int(found["count"]), found["sum"]


def _ca_bundle(admin: Kube) -> str:
    config = admin.get(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/placement-webhook"
    )
    return str(config["webhooks"][0]["clientConfig"].get("caBundle", ""))


TIMINGS = REPO / "build" / "install-e2e.txt"


def _say(line: str) -> None:
    """A measured figure: on stderr, and in build/install-e2e.txt for CI's log."""
    print(f"[install] {line}", file=sys.stderr, flush=True)
    TIMINGS.parent.mkdir(exist_ok=True)
    with TIMINGS.open("a") as out:
        out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")


@pytest.mark.parametrize("way", ["kustomize", "Helm"])
def test_the_readme_installs_verifies_and_uninstalls_on_a_real_node(
    way: str, images: list[Path], tmp_path: Path
) -> None:
    checkout = operator_checkout(tmp_path / "checkout", REGISTRY)
    with cluster_with_real_node(tmp_path / "run", images=images) as (cluster, node):
        admin = Kube(cluster.kubeconfig)
        shell = Shell(cluster, node, checkout, tmp_path / "home")
        install = block("Install", f"With {way}")

        started = time.monotonic()
        shell.run(with_registry(install, REGISTRY) if way == "Helm" else install)
        installed = time.monotonic() - started
        _say(f"{way}: installed and Ready in {installed:.1f}s")

        # The webhook replicas Ready; the certificates made in the cluster.
        for name in DEPLOYMENTS:
            deployment = admin.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}")
            status = deployment["status"]
            assert status.get("readyReplicas") == deployment["spec"]["replicas"], (name, status)
            image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
            assert image.startswith(f"{REGISTRY}/placement-webhook:"), image
        ca_bundle_check, leader_check = blocks("Install", "Check")
        assert len(shell.run(ca_bundle_check).strip()) == 40
        shell.run(leader_check)
        _say(f"{way}: a replica decides {time.monotonic() - started:.1f}s after the install began")
        bundle = _ca_bundle(admin)
        admin.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/placement-webhook-tls")

        # A namespace opted in; the README's verify steps.
        admin.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APP_NAMESPACE}},
        )
        shell.run(block("Opt a namespace in"))
        dry_run, real, health = blocks("Verify")[:3]
        shown = shell.run(dry_run)
        assert "nodeName: node-1" in shown, shown
        assert "placement-webhook.io/selected-node: node-1" in shown, shown
        events = shell.run(real)
        assert "Scheduled" in events and f"{APP_NAMESPACE}/placement-check to node-1" in events
        report = shell.run(health).splitlines()
        replicas = {
            p["metadata"]["name"]
            for p in _pods(admin, NAMESPACE, "app.kubernetes.io/component=webhook")
        }
        assert replicas & set(report), report  # the Lease holder, alone on its line
        assert any(line.startswith("{") and '"msg"' in line for line in report), report  # logs
        assert isinstance(json.loads(report[-1]), dict | list), report[-1]  # /debug/conflicts

        # An application's pods: placed at admission by the webhook, Running on the real node.
        admin.create(f"/apis/apps/v1/namespaces/{APP_NAMESPACE}/deployments", web_deployment(3))
        pods = until(
            "3 web pods Running",
            lambda: _running_on_node(_pods(admin, APP_NAMESPACE, "app=web"), 3),
        )
        for pod in pods:
            annotations = pod["metadata"].get("annotations", {})
            assert annotations.get("placement-webhook.io/selected-node") == "node-1", annotations
            assert pod["spec"]["nodeName"] == "node-1"
            assert pod["status"]["hostIP"] == NODE_IP
            assert pod["status"]["podIP"].startswith("10.244.0.")
        _say(f"{way}: {len(pods)} pods placed by the webhook, Running on {NODE_IP} (node-1)")
        calls, seconds = webhook_calls(cluster)
        assert (
            calls >= 5
        )  # the dry run, placement-check, 3 web pods (and no more than reinvocations)
        _say(
            f"{way}: {calls} webhook calls by the API server, mean {1000 * seconds / calls:.1f} ms"
        )

        # The runtime enforces the webhook's memory limit (a real cgroup, not a field).
        webhook_pod = _pods(admin, NAMESPACE, "app.kubernetes.io/component=webhook")[0]
        container = webhook_pod["status"]["containerStatuses"][0]["containerID"]
        assert node.memory_limit(container.removeprefix("containerd://")) == 1024**3

        # The README's upgrade (kustomize: apply again; Helm: upgrade) keeps the caBundle.
        started = time.monotonic()
        shell.run(blocks("Upgrade")[0 if way == "kustomize" else 1])
        _say(f"{way}: upgraded in {time.monotonic() - started:.1f}s")
        assert _ca_bundle(admin) == bundle

        # The README's uninstall leaves nothing of the install in the cluster.
        started = time.monotonic()
        shell.run(block("Uninstall", f"With {way}"))
        _say(f"{way}: uninstalled in {time.monotonic() - started:.1f}s")
        assert leftovers(admin) == []
        with pytest.raises(ApiError) as gone:
            admin.get(f"/api/v1/namespaces/{NAMESPACE}")
        assert gone.value.is_not_found
        labels = admin.get(f"/api/v1/namespaces/{APP_NAMESPACE}")["metadata"].get("labels") or {}
        assert ENABLED_LABEL not in labels
        # The application's pods are the operator's: still running where they were placed.
        assert _running_on_node(_pods(admin, APP_NAMESPACE, "app=web"), 3)
        admin.close()
    # The node is stopped: none of its containers, mounts, cgroups or files are left.
    assert node.leftovers() == []
