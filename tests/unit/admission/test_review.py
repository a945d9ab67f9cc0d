"""AdmissionReview parsing: every malformed request is a clear 4xx, never a crash."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.admission.review import (
    MAX_BODY_BYTES,
    MAX_NESTING,
    ReviewError,
    build_response,
    parse_review,
    response_body,
)

JSON = "application/json"


def review(**request: object) -> bytes:
    body = {
        "uid": "u-1",
        "operation": "CREATE",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "ns",
        "object": {"metadata": {"name": "p"}, "spec": {}},
    }
    body.update(request)
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}
    )


def test_well_formed_pod_create_is_parsed() -> None:
    parsed = parse_review(review(), JSON)
    assert parsed.uid == "u-1"
    assert parsed.is_pod_create
    assert parsed.namespace == "ns"
    assert parsed.dry_run is False


def test_content_type_with_charset_is_accepted() -> None:
    assert parse_review(review(), "application/json; charset=utf-8").uid == "u-1"


@pytest.mark.parametrize(
    ("body", "content_type", "status", "fragment"),
    [
        (b"", JSON, 400, "empty body"),
        (b"not json", JSON, 400, "not valid JSON"),
        (b"\xff\xfe{}", JSON, 400, "not valid JSON"),
        (b"[]", JSON, 400, "JSON object"),
        (review(), "text/plain", 415, "Content-Type"),
        (review(), None, 415, "Content-Type"),
        (b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",'
         b' "request": {"uid": "x"}}', JSON, 400, "expected apiVersion"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', JSON, 400,
         "no request"),
        (review(uid=""), JSON, 400, "uid"),
        (review(uid=7), JSON, 400, "uid"),
        (review(object=[1]), JSON, 400, "request.object"),
        (review(dryRun="yes"), JSON, 400, "dryRun"),
        (review(operation=None), JSON, 400, "operation"),
        (review(kind="Pod"), JSON, 400, "request.kind"),
        (b"[" * (MAX_NESTING + 5) + b"]" * (MAX_NESTING + 5), JSON, 400, "JSON object"),
        (review(object={"a": orjson.loads(b"[" * (MAX_NESTING + 5) + b"]" * (MAX_NESTING + 5))}),
         JSON, 400, "nested deeper"),
        (b" " * (MAX_BODY_BYTES + 1), JSON, 413, "exceeds"),
    ],
)  # fmt: skip
def test_malformed_request_is_a_clear_client_error(
    body: bytes, content_type: str | None, status: int, fragment: str
) -> None:
    with pytest.raises(ReviewError) as err:
        parse_review(body, content_type)
    assert err.value.status == status
    assert fragment in err.value.message


def test_error_after_the_uid_was_read_carries_the_uid() -> None:
    with pytest.raises(ReviewError) as err:
        parse_review(review(dryRun="yes"), JSON)
    assert err.value.uid == "u-1"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, True),
        ({"operation": "UPDATE"}, False),
        ({"subResource": "binding"}, False),
        ({"kind": {"group": "apps", "version": "v1", "kind": "Deployment"}}, False),
    ],
)
def test_only_a_pod_create_without_subresource_is_a_pod_create(
    changes: dict[str, object], expected: bool
) -> None:
    assert parse_review(review(**changes), JSON).is_pod_create is expected


def test_response_echoes_uid_and_encodes_the_patch() -> None:
    patch = [{"op": "add", "path": "/spec/nodeName", "value": "n1"}]
    answer = build_response("u-9", patch=patch, warnings=["w"], audit={"decision": "placed: n1"})
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "u-9"
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(response["patch"])) == patch


@pytest.mark.parametrize(
    "fields",
    [{}, {"patch": [{"op": "add", "path": "/spec/nodeName", "value": "n1"}],
          "warnings": ["w"], "audit": {"decision": "placed: n1"}}],
)  # fmt: skip
def test_the_answer_body_is_the_response_encoded(fields: dict[str, Any]) -> None:
    assert response_body("u-9", **fields) == orjson.dumps(build_response("u-9", **fields))


def test_nesting_to_the_limit_is_read_and_one_level_more_is_refused() -> None:
    def nested(levels: int) -> bytes:
        value: Any = "x"
        for _ in range(levels - 4):  # the review, its request, the object, its field
            value = [value]
        return review(object={"a": value})

    assert parse_review(nested(MAX_NESTING), JSON).uid == "u-1"
    with pytest.raises(ReviewError, match="nested deeper"):
        parse_review(nested(MAX_NESTING + 1), JSON)


def test_the_callers_timeout_is_kept_on_the_parsed_request() -> None:
    assert parse_review(review(), JSON, timeout_seconds=2.5).timeout_seconds == 2.5
    assert parse_review(review(), JSON).timeout_seconds is None


def test_response_without_patch_has_no_patch_type() -> None:
    response = build_response("u-9")["response"]
    assert "patch" not in response
    assert "patchType" not in response


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    envelope=st.fixed_dictionaries(
        {},
        optional={
            "apiVersion": st.sampled_from(["admission.k8s.io/v1", "v1", ""]) | json_values,
            "kind": st.sampled_from(["AdmissionReview", "Pod"]) | json_values,
            "request": json_values
            | st.fixed_dictionaries(
                {},
                optional={
                    "uid": st.text(max_size=5) | json_values,
                    "operation": st.sampled_from(["CREATE", "UPDATE"]) | json_values,
                    "kind": json_values,
                    "object": json_values,
                    "dryRun": json_values,
                    "namespace": json_values,
                    "subResource": json_values,
                },
            ),
        },
    )
)
def test_generated_reviews_either_parse_or_raise_a_review_error(envelope: dict) -> None:
    try:
        parsed = parse_review(orjson.dumps(envelope), JSON)
    except ReviewError as err:
        assert 400 <= err.status < 500
        assert err.message
    else:
        assert isinstance(parsed.uid, str) and parsed.uid
        assert isinstance(parsed.dry_run, bool)
