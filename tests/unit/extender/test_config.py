"""The KubeSchedulerConfiguration that points a real kube-scheduler at the extender."""

from __future__ import annotations

import pytest
import yaml

from webhook.extender.config import (
    ExtenderEntry,
    dump,
    scheduler_configuration,
    scheduler_document,
)

POLICY = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
  - schedulerName: default-scheduler
    plugins:
      score:
        enabled: [{name: NodeResourcesFit, weight: 3}]
---
apiVersion: placement-webhook.io/v1alpha1
kind: PlacementPolicy
mode: nodeName
"""


def test_the_extender_entry_uses_kube_scheduler_field_names() -> None:
    entry = ExtenderEntry("http://127.0.0.1:8888", node_cache_capable=False, weight=2)

    assert entry.to_dict() == {
        "urlPrefix": "http://127.0.0.1:8888",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": 2,
        "bindVerb": "bind",
        "nodeCacheCapable": False,
        "httpTimeout": "5s",
        "ignorable": False,
    }


def test_an_https_extender_enables_https_and_names_its_ca() -> None:
    entry = ExtenderEntry("https://127.0.0.1:8888", ca_file="/tls/ca.crt").to_dict()

    assert entry["enableHTTPS"] is True
    assert entry["tlsConfig"] == {"caFile": "/tls/ca.crt"}


def test_a_prioritizing_extender_needs_a_positive_weight() -> None:
    with pytest.raises(ValueError, match="positive weight"):
        ExtenderEntry("http://x", weight=0).to_dict()


def test_the_policy_profiles_are_kept_and_the_placement_document_dropped() -> None:
    base = scheduler_document(POLICY)

    config = scheduler_configuration(ExtenderEntry("http://x"), base=base, extender_decides=False)

    assert config["percentageOfNodesToScore"] == 100
    assert config["profiles"][0]["plugins"]["score"]["enabled"][0]["weight"] == 3
    assert config["extenders"][0]["urlPrefix"] == "http://x"


def test_when_the_extender_decides_every_profile_scores_nothing_itself() -> None:
    config = scheduler_configuration(ExtenderEntry("http://x"), base=scheduler_document(POLICY))

    assert config["profiles"][0]["plugins"]["score"] == {"disabled": [{"name": "*"}]}


def test_a_policy_without_profiles_gets_a_default_scheduler_profile_without_scores() -> None:
    config = scheduler_configuration(ExtenderEntry("http://x"), base=scheduler_document(None))

    assert config["profiles"] == [
        {"schedulerName": "default-scheduler", "plugins": {"score": {"disabled": [{"name": "*"}]}}}
    ]


def test_client_connection_carries_the_kubeconfig_and_rate_limits() -> None:
    config = scheduler_configuration(
        ExtenderEntry("http://x"), kubeconfig="/k.conf", qps=100.0, burst=200
    )

    assert config["clientConnection"] == {"kubeconfig": "/k.conf", "qps": 100.0, "burst": 200}


def test_the_dump_is_one_yaml_document_kube_scheduler_can_read() -> None:
    text = dump(scheduler_configuration(ExtenderEntry("http://x")))

    docs = list(yaml.safe_load_all(text))
    assert [d["kind"] for d in docs] == ["KubeSchedulerConfiguration"]
    assert docs[0]["apiVersion"] == "kubescheduler.config.k8s.io/v1"
