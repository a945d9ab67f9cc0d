import argparse
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from policy_builders import make_node, make_pod

from webhook import explain

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "policy"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    explain.add_arguments(parser)
    code = explain.run(parser.parse_args(list(argv)))
    out, err = capsys.readouterr()
    return code, out, err


def _write(tmp_path: Path, name: str, data: Any) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return str(p)


def _cluster(tmp_path: Path, nodes: list[dict[str, Any]], pods: list[dict[str, Any]] = []) -> str:  # noqa: B006
    return _write(
        tmp_path, "cluster.json", {"apiVersion": "v1", "kind": "List", "items": nodes + pods}
    )


def test_example_pod_is_placed_and_exit_code_is_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys,
        "--snapshot",
        str(EXAMPLES / "cluster.json"),
        "--pod",
        str(EXAMPLES / "pod.yaml"),
        "--config",
        str(EXAMPLES / "policy.yaml"),
    )
    assert code == 0, err
    assert "PLACED: placed on node-b1" in out
    assert "node(s) had untolerated taint(s)" in out


def test_unschedulable_pod_exits_with_three_and_kube_scheduler_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(
        capsys,
        "--snapshot",
        str(EXAMPLES / "cluster.json"),
        "--pod",
        str(EXAMPLES / "pod-gpu.yaml"),
        "-o",
        "json",
    )
    assert code == 3
    doc = json.loads(out)
    assert doc["selectedNode"] is None
    assert doc["message"].startswith("0/6 nodes are available: ")
    assert doc["unschedulableReasons"]["gpu-b1"] == ["Insufficient nvidia.com/gpu"]


def test_json_output_has_the_documented_fields(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    snap = _cluster(tmp_path, [make_node("a"), make_node("b", cpu="1")])
    pod = _write(tmp_path, "pod.yaml", make_pod("p", "2"))
    code, out, _ = _run(capsys, "--snapshot", snap, "--pod", pod, "-o", "json")
    doc = json.loads(out)
    assert code == 0
    assert doc["selectedNode"] == "a"
    assert doc["feasibleNodes"] == ["a"]
    assert doc["unschedulableReasons"] == {"b": ["Insufficient cpu"]}
    assert set(doc["scores"]["a"]) >= {"NodeResourcesFit", "TaintToleration", "total"}
    assert "message" in doc


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ({"snapshot": None}, "cannot read snapshot"),
        ({"snapshot": "{not json"}, "snapshot"),
        ({"snapshot": {"kind": "Pod"}}, "expected a v1 List"),
        ({"pod": {"kind": "Deployment"}}, "expected kind Pod"),
        ({"pod": "spec: [unclosed"}, "pod"),
        (
            {
                "config": "apiVersion: placement-webhook.io/v1alpha1\n"
                "kind: PlacementPolicy\nmode: x\n"
            },
            ":3: ",
        ),
        (
            {
                "pod": {
                    "kind": "Pod",
                    "metadata": {"name": "p"},
                    "spec": {"schedulerName": "other", "containers": []},
                }
            },
            "no profile",
        ),
        (
            {
                "pod": {
                    "kind": "Pod",
                    "metadata": {"name": "p"},
                    "spec": {
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]
                    },
                }
            },
            "invalid quantity",
        ),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_code_two(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Any], fragment: str
) -> None:
    paths = {
        "snapshot": _cluster(tmp_path, [make_node("a")]),
        "pod": _write(tmp_path, "pod.yaml", make_pod("p")),
    }
    for key, content in files.items():
        p = tmp_path / f"bad-{key}.txt"
        if content is None:
            paths[key] = str(tmp_path / "missing.json")
            continue
        p.write_text(content if isinstance(content, str) else json.dumps(content))
        paths[key] = str(p)
    argv = ["--snapshot", paths["snapshot"], "--pod", paths["pod"]]
    if "config" in paths:
        argv += ["--config", paths["config"]]
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert fragment in err
    assert "Traceback" not in err


def test_skipped_pod_is_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pod = make_pod("p", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
    code, out, _ = _run(
        capsys,
        "--snapshot",
        _cluster(tmp_path, [make_node("a")]),
        "--pod",
        _write(tmp_path, "p.yaml", pod),
    )
    assert code == 3
    assert "SKIPPED" in out and "PersistentVolumeClaim" in out


def test_large_clusters_show_top_nodes_and_a_rejection_summary(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nodes = [make_node(f"n{i:03d}", cpu="1" if i % 3 == 0 else "4") for i in range(120)]
    code, out, _ = _run(
        capsys,
        "--snapshot",
        _cluster(tmp_path, nodes),
        "--pod",
        _write(tmp_path, "p.yaml", make_pod("p", "2")),
    )
    assert code == 0
    lines = out.splitlines()
    node_rows = [line for line in lines if line.lstrip("* ").startswith("n")]
    assert len(node_rows) == 20
    assert "rejected nodes by reason:" in out
    assert "  40 Insufficient cpu" in out
    assert len(lines) < 40


def test_explain_runs_as_a_module_entry_point(capsys: pytest.CaptureFixture[str]) -> None:
    code = explain.main(
        ["--snapshot", str(EXAMPLES / "cluster.json"), "--pod", str(EXAMPLES / "pod.yaml")]
    )
    assert code == 0
    assert "PLACED" in capsys.readouterr().out


def _runtime_class(name: str, overhead: dict[str, str] | None = None, **scheduling: Any) -> Any:
    rc: dict[str, Any] = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                          "metadata": {"name": name}, "handler": "runc"}  # fmt: skip
    if overhead:
        rc["overhead"] = {"podFixed": overhead}
    if scheduling:
        rc["scheduling"] = scheduling
    return rc


def _explain_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, items: list[Any], pod: Any
) -> tuple[int, Any]:
    snap = _cluster(tmp_path, items)
    code, out, err = _run(capsys, "--snapshot", snap, "--pod", _write(tmp_path, "p.yaml", pod),
                          "-o", "json")  # fmt: skip
    return code, json.loads(out) if out else err


def test_a_runtime_class_adds_its_overhead_as_admission_would(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pod = make_pod("p", "600m", runtimeClassName="kata")
    items = [make_node("a", cpu="1"), _runtime_class("kata", {"cpu": "500m", "memory": "64Mi"})]
    code, doc = _explain_json(capsys, tmp_path, items, pod)
    assert code == 3
    assert doc["unschedulableReasons"] == {"a": ["Insufficient cpu"]}  # 600m + 500m > 1
    assert doc["notes"] == [
        "runtimeClassName kata: overhead cpu=500m, memory=64Mi added, as admission would"
    ]


def test_without_runtime_classes_in_the_snapshot_the_output_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pod = _write(tmp_path, "p.yaml", make_pod("p", "600m", runtimeClassName="kata"))
    code, out, _ = _run(capsys, "--snapshot", _cluster(tmp_path, [make_node("a", cpu="1")]),
                        "--pod", pod)  # fmt: skip
    assert code == 0
    assert out.splitlines()[1].startswith(
        "note: runtimeClassName kata: the snapshot holds no RuntimeClasses, so the pod's overhead"
    )


def test_a_runtime_class_missing_from_the_snapshot_is_what_admission_rejects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pod = make_pod("p", runtimeClassName="kata")
    code, err = _explain_json(capsys, tmp_path, [make_node("a"), _runtime_class("gvisor")], pod)
    assert code == 2
    assert (
        "pod rejected: RuntimeClass 'kata' not found (the snapshot's RuntimeClasses: gvisor)" in err
    )


def test_a_runtime_class_schedules_the_pod_onto_its_nodes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc = _runtime_class("kata", nodeSelector={"sandbox": "kata"},
                        tolerations=[{"key": "sandbox", "operator": "Exists"}])  # fmt: skip
    taint = [{"key": "sandbox", "value": "kata", "effect": "NoSchedule"}]
    items = [make_node("plain"), make_node("kata-1", labels={"sandbox": "kata"}, taints=taint), rc]
    code, doc = _explain_json(capsys, tmp_path, items, make_pod("p", runtimeClassName="kata"))
    assert code == 0 and doc["selectedNode"] == "kata-1"
    assert doc["unschedulableReasons"] == {
        "plain": ["node(s) didn't match Pod's node affinity/selector"]
    }


def test_services_and_replicasets_in_the_snapshot_drive_default_spreading(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nodes = [make_node("a"), make_node("b")]
    sibling = make_pod("w0", "100m", node="a", labels={"app": "web"})
    meta = {"name": "web", "namespace": "default"}
    service = {"kind": "Service", "metadata": meta, "spec": {"selector": {"app": "web"}}}
    pod = make_pod("w1", "100m", labels={"app": "web"})
    _, alone = _explain_json(capsys, tmp_path, [*nodes, sibling], pod)
    _, served = _explain_json(capsys, tmp_path, [*nodes, sibling, service], pod)
    assert "PodTopologySpread" not in alone["scores"]["b"]
    assert served["scores"]["b"]["PodTopologySpread"] > served["scores"]["a"]["PodTopologySpread"]
