"""Any JSON, anywhere in a review: the decision never raises, the HTTP layer never answers 5xx.

Two layers, tested apart: the HTTP layer turns every exception into an
allowing answer, so a crash inside the decision would be invisible through
HTTP. `Placer.review` (triage, then the decision) has no such net:
Hypothesis fails on the first exception, and on an "error" outcome (the
policy core's own net, schedule(), turns an exception into one). Any-JSON pods
mostly stop at triage, so well-formed pods with every feature the plugins read
are fuzzed too. The HTTP layer is then fuzzed for its own
steps (parsing, the answer, the decision log line, metrics), and shown to
answer 200 even when the decision itself raises.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.admission.test_app import client_for, make_view, node, policy, review
from webhook.admission.app import create_app
from webhook.admission.placement import Placer, PlacerSettings
from webhook.admission.review import parse_review

KEYS = ["metadata", "spec", "containers", "initContainers", "resources", "requests", "limits",
        "cpu", "memory", "name", "generateName", "labels", "annotations", "namespace",
        "nodeName", "nodeSelector", "tolerations", "affinity", "nodeAffinity", "podAffinity",
        "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
        "matchExpressions", "matchFields", "key", "operator", "values", "ports", "hostPort",
        "protocol", "topologySpreadConstraints", "labelSelector", "schedulerName", "priority",
        "volumes", "overhead", "ownerReferences", "kind", "controller", "x"]  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False)
    | st.text(max_size=8) | st.sampled_from(["1", "100m", "1Gi", "In", "Exists", "TCP", "-1"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner,
                                                                max_size=5),
    max_leaves=30,
)  # fmt: skip


def pods() -> st.SearchStrategy[dict[str, Any]]:
    """Pod-shaped objects whose every part may be any JSON."""
    return st.fixed_dictionaries(
        {},
        optional={
            "metadata": json_values | st.fixed_dictionaries({}, optional={k: json_values for k in (
                "name", "generateName", "labels", "annotations", "ownerReferences")}),
            "spec": json_values | st.fixed_dictionaries({}, optional={k: json_values for k in (
                "containers", "initContainers", "nodeSelector", "tolerations", "affinity",
                "topologySpreadConstraints", "schedulerName", "overhead", "volumes")}),
        },
    )  # fmt: skip


LABEL_KEYS = st.sampled_from(
    ["zone", "kubernetes.io/hostname", "app", "topology.kubernetes.io/zone"]
)
LABEL_VALUES = st.sampled_from(["a", "b", "z", "web", ""])
selector_terms = st.fixed_dictionaries(
    {
        "key": LABEL_KEYS,
        "operator": st.sampled_from(["In", "NotIn"]),
        "values": st.lists(LABEL_VALUES, min_size=1, max_size=2),
    }
) | st.fixed_dictionaries(
    {"key": LABEL_KEYS, "operator": st.sampled_from(["Exists", "DoesNotExist"])}
)
label_selector = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2),
        "matchExpressions": st.lists(selector_terms, max_size=2),
    },
)
affinity_term = st.fixed_dictionaries(
    {"topologyKey": LABEL_KEYS}, optional={"labelSelector": label_selector}
)


def well_formed_pods() -> st.SearchStrategy[dict[str, Any]]:
    """Pods the API server would accept, with any mix of the features the plugins read,
    so the fuzz reaches every filter and score (any-JSON pods mostly stop at triage)."""
    container = st.fixed_dictionaries(
        {"name": st.just("c"), "image": st.just("i")},
        optional={
            "resources": st.fixed_dictionaries(
                {
                    "requests": st.fixed_dictionaries(
                        {},
                        optional={
                            "cpu": st.sampled_from(["0", "100m", "1", "3", "9"]),
                            "memory": st.sampled_from(["1Mi", "1Gi", "100Gi"]),
                        },
                    )
                }
            ),
            "ports": st.lists(
                st.fixed_dictionaries(
                    {"containerPort": st.integers(1, 3)},
                    optional={
                        "hostPort": st.integers(1, 3),
                        "protocol": st.sampled_from(["TCP", "UDP"]),
                    },
                ),
                max_size=2,
            ),
        },
    )
    spec = st.fixed_dictionaries(
        {"containers": st.lists(container, min_size=1, max_size=2)},
        optional={
            "nodeSelector": st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2),
            "tolerations": st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "key": LABEL_KEYS,
                        "operator": st.sampled_from(["Exists", "Equal"]),
                        "value": LABEL_VALUES,
                        "effect": st.sampled_from(["NoSchedule", "NoExecute", ""]),
                    },
                ),
                max_size=2,
            ),
            "affinity": st.fixed_dictionaries(
                {},
                optional={
                    "nodeAffinity": st.fixed_dictionaries(
                        {},
                        optional={
                            "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries(
                                {
                                    "nodeSelectorTerms": st.lists(
                                        st.fixed_dictionaries(
                                            {
                                                "matchExpressions": st.lists(
                                                    selector_terms, min_size=1, max_size=2
                                                )
                                            }
                                        ),
                                        min_size=1,
                                        max_size=2,
                                    )
                                }
                            )
                        },
                    ),
                    "podAffinity": st.fixed_dictionaries(
                        {},
                        optional={
                            "requiredDuringSchedulingIgnoredDuringExecution": st.lists(
                                affinity_term, max_size=1
                            )
                        },
                    ),
                    "podAntiAffinity": st.fixed_dictionaries(
                        {},
                        optional={
                            "requiredDuringSchedulingIgnoredDuringExecution": st.lists(
                                affinity_term, max_size=1
                            )
                        },
                    ),
                },
            ),
            "topologySpreadConstraints": st.lists(
                st.fixed_dictionaries(
                    {
                        "maxSkew": st.integers(1, 2),
                        "topologyKey": LABEL_KEYS,
                        "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
                    },
                    optional={"labelSelector": label_selector},
                ),
                max_size=2,
            ),
        },
    )
    return st.fixed_dictionaries(
        {
            "metadata": st.fixed_dictionaries(
                {"name": st.just("p")},
                optional={"labels": st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2)},
            ),
            "spec": spec,
        }
    )


FUZZ = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def placer() -> Placer:
    view = make_view([node("a", cpu="4"), node("b", cpu="8", zone="z")])
    return Placer(view, policy(), PlacerSettings())


@FUZZ
@given(obj=pods())
def test_the_decision_never_raises_on_any_pod_object(placer: Placer, obj: dict[str, Any]) -> None:
    request = parse_review(orjson.dumps(review(obj, dryRun=True)), "application/json")
    outcome = placer.review(request)
    # "error" is what schedule() makes of an exception inside the policy core
    # (its only source of Code.Error): a crash, so it fails the test.
    assert outcome.result in ("placed", "unschedulable", "skipped"), outcome.reason


@FUZZ
@given(obj=well_formed_pods())
def test_every_well_formed_pod_is_decided_without_an_internal_error(
    placer: Placer, obj: dict[str, Any]
) -> None:
    request = parse_review(orjson.dumps(review(obj, dryRun=True)), "application/json")
    outcome = placer.review(request)
    assert outcome.result in ("placed", "unschedulable", "skipped"), outcome.reason
    assert outcome.category != "malformed", outcome.reason


@FUZZ
@given(obj=pods(), namespace=json_values, uid=json_values, operation=json_values)
def test_no_body_gets_a_server_error(
    placer: Placer, obj: dict[str, Any], namespace: Any, uid: Any, operation: Any
) -> None:
    client = create_app(placer).test_client()
    body = review(obj, dryRun=True)
    for key, value in (("namespace", namespace), ("uid", uid), ("operation", operation)):
        if value is not None:
            body["request"][key] = value
    answer = client.post("/mutate", data=orjson.dumps(body), content_type="application/json")
    assert answer.status_code < 500
    assert answer.is_json


def test_the_http_layer_answers_200_allowed_even_when_the_decision_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client: FlaskClient = client_for(make_view([node("a")]))

    def broken(self: Placer, request: Any, **_: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Placer, "decide", broken)
    answer = client.post("/mutate", data=orjson.dumps(review({"spec": {}})),
                         content_type="application/json")  # fmt: skip
    assert answer.status_code == 200
    response = answer.get_json()["response"]
    assert response["allowed"] is True and "patch" not in response
    assert "internal error: RuntimeError" in response["warnings"][0]
