import pytest

from webhook.policy.placement_policy import ConflictPolicy, Mode
from webhook.policy.policy_file import PolicyError, default_policy, load_policy

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def test_default_profile_has_kube_scheduler_v1_plugins_and_weights() -> None:
    prof = default_policy().default_profile
    assert prof.name == "default-scheduler"
    assert prof.filter_names[:4] == (
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
    )
    weights = prof.score_weights
    assert weights["TaintToleration"] == 3
    assert weights["NodeAffinity"] == 2
    assert weights["NodeResourcesFit"] == 1


@pytest.mark.parametrize("name", ["", "default-scheduler", "placement-webhook"])
def test_default_profile_serves_the_default_scheduler_names(name: str) -> None:
    policy = default_policy()
    assert policy.profile_for(name) is policy.default_profile


def test_unknown_scheduler_name_has_no_profile() -> None:
    assert default_policy().profile_for("other") is None


def test_disabling_a_default_plugin_removes_it_everywhere() -> None:
    policy = load_policy(
        HEADER
        + "profiles:\n  - plugins:\n      multiPoint:\n"
        + "        disabled: [{name: TaintToleration}]\n"
    )
    prof = policy.default_profile
    assert "TaintToleration" not in prof.filter_names
    assert "TaintToleration" not in prof.score_weights


def test_disabling_a_plugin_for_score_keeps_its_filter() -> None:
    prof = load_policy(
        HEADER
        + "profiles:\n  - plugins:\n      score:\n        disabled: [{name: TaintToleration}]\n"
    ).default_profile
    assert "TaintToleration" in prof.filter_names
    assert "TaintToleration" not in prof.score_weights


def test_score_weight_overrides_the_multipoint_weight() -> None:
    prof = load_policy(
        HEADER
        + "profiles:\n  - plugins:\n      score:\n"
        + "        enabled: [{name: NodeResourcesFit, weight: 7}]\n"
    ).default_profile
    assert prof.score_weights["NodeResourcesFit"] == 7


def test_star_disables_every_default_filter() -> None:
    prof = load_policy(
        HEADER
        + "profiles:\n  - plugins:\n      filter:\n        disabled: [{name: '*'}]\n"
        + "        enabled: [{name: NodeResourcesFit}]\n"
    ).default_profile
    assert prof.filter_names == ("NodeResourcesFit",)


def test_weight_zero_means_one() -> None:
    prof = load_policy(
        HEADER
        + "profiles:\n  - plugins:\n      multiPoint:\n"
        + "        enabled: [{name: NodeAffinity, weight: 0}]\n"
    ).default_profile
    assert prof.score_weights["NodeAffinity"] == 1


def test_several_profiles_are_keyed_by_scheduler_name() -> None:
    policy = load_policy(
        HEADER
        + "profiles:\n  - schedulerName: default-scheduler\n  - schedulerName: bin-packing\n"
        + "    percentageOfNodesToScore: 100\n"
    )
    assert set(policy.profiles) == {"default-scheduler", "bin-packing"}
    prof = policy.profile_for("bin-packing")
    assert prof is not None and prof.percentage_of_nodes_to_score == 100


def test_placement_policy_document_sets_mode_and_profile() -> None:
    policy = load_policy(
        HEADER
        + "profiles:\n  - schedulerName: tight\n---\n"
        + "apiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\nmode: nodeAffinity\n"
        + "schedulerName: tight\nreservationGraceSeconds: 1.5\nmaxUnconfirmedShare: 0.25\n"
        + "conflictPolicy: evict\n"
    )
    assert policy.placement.mode is Mode.NODE_AFFINITY
    assert policy.placement.reservation_grace_seconds == 1.5
    assert policy.placement.max_unconfirmed_share == 0.25
    assert policy.placement.conflict_policy is ConflictPolicy.EVICT
    assert policy.profile_for("placement-webhook") is policy.profiles["tight"]


def test_a_single_profile_with_another_name_places_the_webhooks_pods() -> None:
    policy = load_policy(HEADER + "profiles:\n  - schedulerName: placement-webhook\n")
    assert policy.placement.scheduler_name == "placement-webhook"
    for name in ("", "default-scheduler", "placement-webhook"):
        assert policy.profile_for(name) is policy.profiles["placement-webhook"]


def test_of_several_profiles_the_default_scheduler_one_is_used_unless_one_is_named() -> None:
    text = HEADER + "profiles:\n  - schedulerName: packing\n  - schedulerName: default-scheduler\n"
    assert load_policy(text).placement.scheduler_name == "default-scheduler"
    named = text + "---\napiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\n"
    named += "schedulerName: packing\n"
    policy = load_policy(named)
    assert policy.profile_for("") is policy.profiles["packing"]
    assert policy.profile_for("default-scheduler") is policy.profiles["packing"]


def test_several_profiles_without_a_default_need_the_placement_policy_to_name_one() -> None:
    text = HEADER + "profiles:\n  - schedulerName: spread\n  - schedulerName: packing\n"
    with pytest.raises(PolicyError) as err:
        load_policy(text, source="policy.yaml")
    assert str(err.value) == (
        "policy.yaml:3: KubeSchedulerConfiguration profiles: 2 profiles and none is named"
        " 'default-scheduler': name the one for the webhook's pods in a PlacementPolicy"
        " document's schedulerName (profiles: packing, spread)"
    )
    named = text + "---\napiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\n"
    assert load_policy(named + "schedulerName: spread\n").default_profile.name == "spread"


def test_placement_policy_alone_uses_the_default_profile() -> None:
    policy = load_policy("apiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\n")
    assert policy.placement.mode is Mode.NODE_NAME
    assert policy.placement.conflict_policy is ConflictPolicy.REPORT
    assert policy.placement.reservation_grace_seconds == 3.0
    assert policy.placement.max_unconfirmed_share == 0.5
    assert policy.profile_for("") is not None


def test_the_old_reservation_ttl_is_refused_with_what_replaced_it() -> None:
    with pytest.raises(PolicyError, match="replaced by reservationGraceSeconds"):
        load_policy(
            "apiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\n"
            "reservationTTLSeconds: 30\n"
        )


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (
            HEADER
            + "profiles:\n  - plugins:\n      score:\n        enabled:\n          - name: Bogus\n",
            7,
            "profiles[0].plugins.score.enabled[0].name: unknown plugin 'Bogus'",
        ),
        (
            HEADER
            + "profiles:\n  - pluginConfig:\n      - name: NodeResourcesFit\n        args:\n"
            + "          scoringStrategy:\n            type: Wrong\n",
            8,
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
        ),
        (
            HEADER
            + "profiles:\n  - pluginConfig:\n      - name: NodeResourcesFit\n"
            + "        args:\n          notAField: 1\n",
            7,
            "profiles[0].pluginConfig[0].args.notAField: unknown field",
        ),
        (
            HEADER + "percentageOfNodesToScore: 120\n",
            3,
            "percentageOfNodesToScore: 120 not in valid range",
        ),
        (HEADER + "bogus: 1\n", 3, "bogus: unknown field"),
        (
            HEADER + "profiles:\n  - schedulerName: a\n  - schedulerName: a\n",
            5,
            "profiles[1].schedulerName: duplicate profile",
        ),
        (
            "apiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\nmode: sideways\n",
            3,
            "mode: must be nodeName or nodeAffinity",
        ),
        (
            "apiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\nmode: [nodeName]\n",
            3,
            "mode: must be nodeName or nodeAffinity, got ['nodeName']",
        ),
        (
            "apiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\n"
            "conflictPolicy: Evict\n",
            3,
            "conflictPolicy: must be report or evict, got 'Evict'",
        ),
        (
            "apiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\n"
            "schedulerName: nope\n",
            3,
            "no profile named 'nope' (profiles: default-scheduler)",
        ),
        ("apiVersion: v1\nkind: ConfigMap\n", 2, "unknown kind"),
        (
            HEADER
            + "profiles:\n  - plugins:\n      filter:\n        enabled: [{name: DefaultBinder}]\n",
            6,
            "does not extend filter",
        ),
        ("a: [1, 2\n", 2, "invalid YAML"),
    ],
)
def test_invalid_policy_names_the_field_and_the_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(PolicyError) as err:
        load_policy(text, source="policy.yaml")
    assert err.value.line == line, str(err.value)
    assert str(err.value).startswith(f"policy.yaml:{line}: ")
    assert fragment in str(err.value)
