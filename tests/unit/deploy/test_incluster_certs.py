"""`certs in-cluster`: when certificates are made, rotated and published, and in what order.

`plan` is pure (the clock is a parameter), so a year of rotations runs in
milliseconds. The order of writes in `sync_once` is checked against a
recording stand-in for the API; the real API server is in
tests/e2e/test_cert_rotation_incluster.py.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import replace
from typing import Any

import pytest
from cryptography import x509

from certs.authority import service_dns_names
from certs.incluster import (
    CA_CERT,
    CA_KEY,
    TLS_CERT,
    TLS_KEY,
    TRUSTED,
    Names,
    Plan,
    Settings,
    Stored,
    plan,
    signed_by,
    split_pems,
    sync_once,
)

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
SETTINGS = Settings(dns_names=tuple(service_dns_names("placement-webhook", "placement-webhook")))


EMPTY = Stored()


def stored_after(result: Plan, before: Stored = EMPTY, *, published: bool = True) -> Stored:
    """What the cluster holds once `result` is written (and, if `published`, injected)."""
    ca = result.ca_data
    tls = result.tls_data
    return Stored(
        ca_cert=ca[CA_CERT] if ca else before.ca_cert,
        ca_key=ca[CA_KEY] if ca else before.ca_key,
        trusted=ca[TRUSTED] if ca else before.trusted,
        tls_cert=tls[TLS_CERT] if tls else before.tls_cert,
        tls_key=tls[TLS_KEY] if tls else before.tls_key,
        tls_ca=tls[CA_CERT] if tls else before.tls_ca,
        published=(result.bundle,) if published else before.published,
    )


def serving(stored: Stored) -> x509.Certificate:
    assert stored.tls_cert is not None
    return x509.load_pem_x509_certificate(stored.tls_cert)


def ca(stored: Stored) -> x509.Certificate:
    assert stored.ca_cert is not None
    return x509.load_pem_x509_certificate(stored.ca_cert)


def bundle(stored: Stored) -> list[x509.Certificate]:
    assert stored.published is not None
    return split_pems(base64.b64decode(stored.published[0]))


@pytest.fixture
def installed() -> Stored:
    """A cluster right after the first pass (configuration present, caBundle empty)."""
    return stored_after(plan(Stored(published=("",)), SETTINGS, NOW))


def test_a_first_pass_creates_a_ca_and_a_serving_certificate_for_the_service_names() -> None:
    result = plan(Stored(published=("",)), SETTINGS, NOW)
    state = stored_after(result)
    names = serving(state).extensions.get_extension_for_class(x509.SubjectAlternativeName).value

    assert result.reasons == ("CA created", "serving certificate issued (created)")
    assert set(names.get_values_for_type(x509.DNSName)) == set(SETTINGS.dns_names)
    assert signed_by(serving(state), ca(state))
    assert bundle(state) == [ca(state)]
    assert state.tls_ca == state.trusted == state.ca_cert


def test_a_pass_over_a_synced_cluster_changes_nothing(installed: Stored) -> None:
    result = plan(installed, SETTINGS, NOW + 30 * DAY)

    assert not result.changes
    assert result.reasons == ()
    assert result.bundle == installed.published[0]  # type: ignore[index]


def test_the_serving_certificate_is_kept_until_a_third_of_its_life_is_left(
    installed: Stored,
) -> None:
    assert plan(installed, SETTINGS, NOW + 240 * DAY).tls_data is None

    result = plan(installed, SETTINGS, NOW + 250 * DAY)
    renewed = stored_after(result, installed)

    assert result.tls_data is not None and result.ca_data is None
    assert "less than a third of its lifetime left" in result.reasons[0]
    assert serving(renewed).serial_number != serving(installed).serial_number
    assert signed_by(serving(renewed), ca(installed))  # same CA: the caBundle stays valid
    assert result.bundle == installed.published[0]  # type: ignore[index]


def test_a_requested_rotation_issues_a_new_key_at_once(installed: Stored) -> None:
    result = plan(installed, SETTINGS, NOW + DAY, rotate_serving=True)

    assert result.reasons == ("serving certificate issued (rotation requested)",)
    assert result.tls_data is not None
    assert result.tls_data[TLS_KEY] != installed.tls_key


def test_a_new_service_name_gets_a_new_certificate(installed: Stored) -> None:
    wider = replace(SETTINGS, dns_names=(*SETTINGS.dns_names, "webhook.example.com"))
    result = plan(installed, wider, NOW + DAY)

    assert result.reasons == (
        "serving certificate issued (missing subject alternative names: webhook.example.com)",
    )


def test_a_serving_secret_whose_key_does_not_match_is_replaced(installed: Stored) -> None:
    other = stored_after(plan(Stored(), SETTINGS, NOW))
    broken = replace(installed, tls_key=other.tls_key)

    result = plan(broken, SETTINGS, NOW)

    assert result.reasons == ("serving certificate issued (replaced (unreadable or key mismatch))",)


def test_a_ca_rotation_publishes_the_new_ca_before_any_certificate_it_signs(
    installed: Stored,
) -> None:
    first = plan(installed, SETTINGS, NOW + DAY, rotate_ca=True)
    # The first pass writes the CA Secret and the caBundle, not the serving certificate.
    rotating = stored_after(first, installed, published=False)

    assert first.reasons == ("CA rotated (rotation requested)",)
    assert first.waiting is not None and "waiting for the new CA" in first.waiting
    assert first.tls_data is not None  # only its ca.crt: the certificate stays
    assert first.tls_data[TLS_CERT] == installed.tls_cert
    assert split_pems(rotating.trusted) == [ca(rotating), ca(installed)]
    # Until the caBundle is seen published, later passes keep waiting.
    early = plan(rotating, SETTINGS, NOW + DAY)
    assert early.waiting is not None and not early.changes

    published = replace(rotating, published=(first.bundle,))
    second = plan(published, SETTINGS, NOW + DAY)
    rotated = stored_after(second, published)

    assert second.reasons == ("serving certificate issued (signed by a previous CA)",)
    assert signed_by(serving(rotated), ca(rotated))
    assert bundle(rotated) == [ca(rotated), ca(installed)]  # the old CA is still trusted


def test_the_old_ca_leaves_the_bundle_once_the_new_certificate_has_been_out_long_enough(
    installed: Stored,
) -> None:
    first = plan(installed, SETTINGS, NOW, rotate_ca=True)
    published = replace(stored_after(first, installed, published=False), published=(first.bundle,))
    rotated = stored_after(plan(published, SETTINGS, NOW), published)

    assert plan(rotated, SETTINGS, NOW + dt.timedelta(minutes=30)).ca_data is None
    later = plan(rotated, SETTINGS, NOW + dt.timedelta(hours=2))
    retired = stored_after(later, rotated)

    assert later.reasons == ("retired 1 previous CA(s) from the bundle",)
    assert bundle(retired) == [ca(rotated)]
    assert later.tls_data is not None and later.tls_data[TLS_CERT] == rotated.tls_cert


def test_the_ca_itself_is_rotated_when_a_third_of_its_ten_years_is_left(installed: Stored) -> None:
    assert plan(installed, SETTINGS, NOW + 2400 * DAY).ca_data is None

    result = plan(installed, SETTINGS, NOW + 2450 * DAY)

    assert result.reasons[0].startswith("CA rotated (expires")
    assert result.ca_data is not None


def test_without_a_webhook_configuration_a_due_certificate_is_issued_at_once(
    installed: Stored,
) -> None:
    orphan = replace(installed, published=None)
    result = plan(orphan, SETTINGS, NOW + DAY, rotate_ca=True)

    assert result.waiting is None
    assert result.reasons == (
        "CA rotated (rotation requested)",
        "serving certificate issued (signed by a previous CA)",
    )


# ------------------------------------------------------------------ the shell


class ApiError(Exception):
    def __init__(self, status: int):
        super().__init__(f"HTTP {status}")
        self.status = status


class RecordingApi:
    """Holds secrets and one webhook configuration; records each write in order."""

    def __init__(self, config: dict[str, Any] | None):
        self.objects: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.version = 0
        self.hidden: set[str] = set()
        if config is not None:
            self.objects[f"{CONFIG}/placement-webhook"] = config

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        if method == "GET":
            if path not in self.objects or path in self.hidden:
                raise ApiError(404)
            return self.objects[path]
        self.version += 1
        if method == "POST":
            path = f"{path}/{body['metadata']['name']}"
            if path in self.objects:
                raise ApiError(409)
        if method == "PUT":
            assert (
                body["metadata"]["resourceVersion"]
                == self.objects[path]["metadata"]["resourceVersion"]
            )
        if method == "PATCH":
            for op in body:
                if op["op"] == "test":
                    index = int(op["path"].split("/")[2])
                    assert self.objects[path]["webhooks"][index]["name"] == op["value"]
                else:
                    index = int(op["path"].split("/")[2])
                    self.objects[path]["webhooks"][index]["clientConfig"]["caBundle"] = op["value"]
        else:
            meta = {**body["metadata"], "resourceVersion": str(self.version)}
            self.objects[path] = {**body, "metadata": meta}
        self.writes.append((method, path.rsplit("/", 1)[-1]))
        return self.objects[path]


CONFIG = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def webhook_config() -> dict[str, Any]:
    return {
        "metadata": {"name": "placement-webhook"},
        "webhooks": [{"name": "pods.placement-webhook.io", "clientConfig": {"service": {}}}],
    }


def test_a_pass_writes_the_ca_then_the_ca_bundle_then_the_serving_secret() -> None:
    api = RecordingApi(webhook_config())

    done = sync_once(api, Names("placement-webhook"), SETTINGS, now=NOW)

    assert api.writes == [
        ("POST", "placement-webhook-ca"),
        ("PATCH", "placement-webhook"),
        ("POST", "placement-webhook-tls"),
    ]
    tls = api.objects["/api/v1/namespaces/placement-webhook/secrets/placement-webhook-tls"]
    hook = api.objects[f"{CONFIG}/placement-webhook"]["webhooks"][0]
    assert tls["type"] == "kubernetes.io/tls"
    assert hook["clientConfig"]["caBundle"] == tls["data"]["ca.crt"]
    assert done.injected


def test_a_second_pass_writes_nothing_and_a_rotation_updates_with_the_version_read() -> None:
    api = RecordingApi(webhook_config())
    sync_once(api, Names("placement-webhook"), SETTINGS, now=NOW)
    api.writes.clear()

    sync_once(api, Names("placement-webhook"), SETTINGS, now=NOW + DAY)
    assert api.writes == []

    sync_once(api, Names("placement-webhook"), SETTINGS, now=NOW + DAY, rotate_serving=True)
    assert api.writes == [("PUT", "placement-webhook-tls")]


def test_a_ca_bundle_reset_by_a_reapply_is_injected_again() -> None:
    api = RecordingApi(webhook_config())
    sync_once(api, Names("placement-webhook"), SETTINGS, now=NOW)
    api.objects[f"{CONFIG}/placement-webhook"] = webhook_config()
    api.writes.clear()

    sync_once(api, Names("placement-webhook"), SETTINGS, now=NOW + DAY)

    assert api.writes == [("PATCH", "placement-webhook")]


def test_without_a_webhook_configuration_the_secrets_are_made_and_the_pass_is_pending() -> None:
    api = RecordingApi(None)

    done = sync_once(api, Names("placement-webhook"), SETTINGS, now=NOW)

    assert [w[1] for w in api.writes] == ["placement-webhook-ca", "placement-webhook-tls"]
    assert done.waiting == "the webhook configuration to appear"


def test_a_runner_that_loses_the_create_race_fails_its_pass_instead_of_overwriting() -> None:
    api = RecordingApi(webhook_config())
    sync_once(api, Names("placement-webhook"), SETTINGS, now=NOW)  # the winner
    tls = "/api/v1/namespaces/placement-webhook/secrets/placement-webhook-tls"
    written = api.objects[tls]
    api.hidden.add(tls)  # the loser read before the winner wrote

    with pytest.raises(ApiError) as lost:
        sync_once(api, Names("placement-webhook"), SETTINGS, now=NOW)

    assert lost.value.status == 409
    assert api.objects[tls] is written
