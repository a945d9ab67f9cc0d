"""A kubelet scenario's nodes as hollow kubelets, and the kubelets' CPU folded into one figure."""

from __future__ import annotations

from experiments.kubelets import fold_cpu, specs
from experiments.scenario import parse_scenario


def test_each_node_manifest_becomes_a_hollow_kubelet_of_the_same_shape() -> None:
    scenario = parse_scenario({
        "name": "k", "kubelets": True,
        "nodes": [{"count": 2, "prefix": "gpu", "cpu": "8", "cpuStep": "2", "memory": "16Gi",
                   "pods": 50, "zones": ["a", "b"], "labels": {"pool": "gpu"},
                   "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}],
        "pods": [{"count": 1}],
    })  # fmt: skip

    made = specs(scenario.node_manifests())

    assert [(s.name, s.cpu, s.memory, s.pods) for s in made] == [
        ("gpu-00000", "8", str(16 * 2**30), 50),
        ("gpu-00001", "10", str(16 * 2**30), 50),
    ]
    assert made[1].labels == {"pool": "gpu", "topology.kubernetes.io/zone": "b"}
    assert made[0].taints == ({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},)


def test_every_kubelets_cpu_is_summed_into_one_entry() -> None:
    cpu = {"kube-apiserver": 2.0, "kubelet-n1": 0.25, "kubelet-n2": 0.5, "webhook": 1.0}

    assert fold_cpu(cpu) == {"kube-apiserver": 2.0, "webhook": 1.0, "kubelets": 0.75}
    assert fold_cpu({"etcd": 1.0}) == {"etcd": 1.0}
