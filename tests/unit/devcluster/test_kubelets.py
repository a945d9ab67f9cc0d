"""How a hollow kubelet's node is described and turned into its flags (no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.devcluster.kubelets import (
    KubeletSpec,
    KubeletSpecError,
    new_state_folder,
    parse_pairs,
    parse_taints,
    ready_nodes,
    root_folder,
)


def test_a_spec_becomes_the_hollow_kubelets_flags() -> None:
    spec = KubeletSpec(
        "gpu-1",
        cpu="8",
        memory="32Gi",
        pods=30,
        labels={"topology.kubernetes.io/zone": "a", "pool": "gpu"},
        taints=({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                {"key": "spot", "effect": "NoExecute"}),
        extended={"example.com/gpu": "2"},
    )  # fmt: skip
    args = spec.args(Path("/k/gpu-1.kubeconfig"), Path("/k/root"))
    assert args == [
        "--name=gpu-1",
        "--kubeconfig=/k/gpu-1.kubeconfig",
        "--root-dir=/k/root",
        "--cpu=8",
        "--memory=32Gi",
        "--ephemeral-storage=100Gi",
        "--max-pods=30",
        "--node-labels=pool=gpu,topology.kubernetes.io/zone=a",
        "--register-with-taints=dedicated=gpu:NoSchedule,spot:NoExecute",
        "--extended-resources=example.com/gpu=2",
    ]


def test_node_manifest_keywords_make_the_same_node() -> None:
    spec = KubeletSpec.of("n", cpu="2", memory="4Gi", taints=[{"key": "k", "effect": "NoSchedule"}])
    assert (spec.cpu, spec.memory, spec.taints) == (
        "2",
        "4Gi",
        ({"key": "k", "effect": "NoSchedule"},),
    )
    assert KubeletSpec.of("n", **{"ephemeral-storage": "5Gi"}).ephemeral_storage == "5Gi"


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ({"cpu": "500m"}, "whole cores"),
        ({"cpu": "0"}, "whole cores"),
        ({"pods": 0}, "pods must be at least 1"),
        ({"taints": ({"key": "k", "effect": "Sometimes"},)}, "needs a key and an effect"),
        ({"taints": ({"effect": "NoSchedule"},)}, "needs a key and an effect"),
    ],
)
def test_a_node_a_hollow_kubelet_cannot_be_is_a_clear_error(
    shape: dict[str, object], message: str
) -> None:
    with pytest.raises(KubeletSpecError, match=message):
        KubeletSpec("n", **shape)  # type: ignore[arg-type]


def test_bare_node_only_fields_are_refused_by_name() -> None:
    with pytest.raises(KubeletSpecError, match="cannot be given unschedulable"):
        KubeletSpec.of("n", unschedulable=True)


@pytest.mark.parametrize("name", ["", "Upper", "-x", "a" * 64, "a_b"])
def test_a_node_name_must_be_a_dns_subdomain(name: str) -> None:
    with pytest.raises(KubeletSpecError, match="DNS subdomain"):
        KubeletSpec(name)


def test_pairs_and_taints_parse_the_kubelets_own_flag_forms() -> None:
    assert parse_pairs("a=1, b=2,,c=") == {"a": "1", "b": "2", "c": ""}
    assert parse_taints("dedicated=gpu:NoSchedule,spot:NoExecute") == (
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": "spot", "effect": "NoExecute"},
    )
    assert parse_pairs("") == {} and parse_taints("") == ()


@pytest.mark.parametrize("text", ["novalue", "=x"])
def test_a_pair_without_key_or_equals_sign_is_refused(text: str) -> None:
    with pytest.raises(KubeletSpecError, match="not key=value"):
        parse_pairs(text)


@pytest.mark.parametrize("text", ["k=v", "k=v:Never", ":NoSchedule"])
def test_a_taint_without_key_or_effect_is_refused(text: str) -> None:
    with pytest.raises(KubeletSpecError, match="not key"):
        parse_taints(text)


def test_ready_nodes_are_those_whose_ready_condition_is_true() -> None:
    def node(name: str, status: str | None) -> dict[str, object]:
        conditions = [{"type": "Ready", "status": status}] if status else []
        return {"metadata": {"name": name}, "status": {"conditions": conditions}}

    nodes = [node("a", "True"), node("b", "False"), node("c", None), node("d", "Unknown")]
    assert ready_nodes(nodes) == {"a"}


def test_state_moves_out_of_a_workdir_too_deep_for_unix_socket_paths(tmp_path: Path) -> None:
    assert root_folder(tmp_path) == tmp_path / "k"
    deep = tmp_path / ("d" * 90)
    moved = root_folder(deep)
    try:
        assert not moved.is_relative_to(deep)
        assert len(str(moved / "9999" / "pod-resources" / "kubelet.sock")) <= 107
    finally:
        moved.rmdir()


def test_every_kubelet_started_gets_a_state_folder_of_its_own(tmp_path: Path) -> None:
    first, second = new_state_folder(tmp_path), new_state_folder(tmp_path)
    assert first != second and first.is_dir() and second.is_dir()
