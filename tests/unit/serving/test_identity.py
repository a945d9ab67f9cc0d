"""The caller's names from a verified client certificate, and whether they may call."""

from __future__ import annotations

from webhook.serving.identity import ClientIdentity, identity_from_peercert, is_allowed

PEERCERT = {
    "subject": ((("organizationName", "ops"),), (("commonName", "kube-apiserver"),)),
    "subjectAltName": (("DNS", "apiserver.example"), ("IP Address", "10.0.0.1")),
}


def test_names_are_the_common_name_and_the_dns_sans() -> None:
    identity = identity_from_peercert(PEERCERT)
    assert identity == ClientIdentity("kube-apiserver", ("apiserver.example",))
    assert identity.names == ("kube-apiserver", "apiserver.example")


def test_no_verified_certificate_is_no_identity() -> None:
    assert identity_from_peercert({}) is None
    assert identity_from_peercert(None) is None


def test_any_verified_caller_is_allowed_when_no_names_are_required() -> None:
    assert is_allowed(ClientIdentity("anyone"), ())
    assert is_allowed(None, ())


def test_a_required_name_may_be_the_cn_or_a_dns_san() -> None:
    identity = identity_from_peercert(PEERCERT)
    assert is_allowed(identity, ["kube-apiserver"])
    assert is_allowed(identity, ["apiserver.example"])
    assert not is_allowed(identity, ["10.0.0.1", "other"])
    assert not is_allowed(None, ["kube-apiserver"])
