"""Certificates: names, usages, lifetimes, rotation and atomic writes."""

from __future__ import annotations

import base64
import datetime as dt
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

import certs
from certs.__main__ import main as certs_main

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_serving_certificate_has_the_names_and_serves_and_authenticates_clients() -> None:
    ca = certs.new_authority(now=NOW)
    leaf = certs.issue_serving_certificate(
        ca, certs.service_dns_names("pw", "ns"), ["127.0.0.1"], now=NOW
    ).certificate
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {
        "pw",
        "pw.ns",
        "pw.ns.svc",
        "pw.ns.svc.cluster.local",
    }
    assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    assert leaf.issuer == ca.certificate.subject
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_serving_certificate_never_outlives_its_ca() -> None:
    ca = certs.new_authority(lifetime=dt.timedelta(days=10), now=NOW)
    leaf = certs.issue_serving_certificate(ca, lifetime=dt.timedelta(days=365), now=NOW)
    assert leaf.certificate.not_valid_after_utc == ca.certificate.not_valid_after_utc


def test_client_certificate_carries_user_and_groups() -> None:
    ca = certs.new_authority(now=NOW)
    cert = certs.issue_client_certificate(ca, "admin", ["system:masters"], now=NOW).certificate
    assert cert.subject.rfc4514_string() == "O=system:masters,CN=admin"


def test_a_certificate_with_a_third_of_its_life_left_needs_rotation() -> None:
    ca = certs.new_authority(now=NOW)
    pem = certs.issue_serving_certificate(ca, lifetime=dt.timedelta(days=30), now=NOW).cert_pem
    assert certs.needs_rotation(pem, now=NOW + dt.timedelta(days=15)) is None
    assert "lifetime" in str(certs.needs_rotation(pem, now=NOW + dt.timedelta(days=21)))
    assert certs.needs_rotation(pem, now=NOW + dt.timedelta(days=31)) == "expired"


def test_a_certificate_missing_a_requested_name_needs_rotation() -> None:
    ca = certs.new_authority(now=NOW)
    pem = certs.issue_serving_certificate(ca, ["a"], [], now=NOW).cert_pem
    assert (
        certs.needs_rotation(pem, dns_names=["a", "b"], now=NOW)
        == "missing subject alternative names: b"
    )


def test_ensure_serving_pair_keeps_the_ca_and_reissues_only_when_due(tmp_path: Path) -> None:
    assert certs.ensure_serving_pair(tmp_path, ["localhost"], ["127.0.0.1"], now=NOW) == "created"
    ca_before = (tmp_path / "ca.crt").read_bytes()
    leaf_before = (tmp_path / "tls.crt").read_bytes()
    assert certs.ensure_serving_pair(tmp_path, ["localhost"], ["127.0.0.1"], now=NOW) is None
    assert (tmp_path / "tls.crt").read_bytes() == leaf_before

    later = NOW + dt.timedelta(days=300)
    assert certs.ensure_serving_pair(tmp_path, ["localhost"], ["127.0.0.1"], now=later)
    assert (tmp_path / "ca.crt").read_bytes() == ca_before
    assert (tmp_path / "tls.crt").read_bytes() != leaf_before


def test_written_pair_loads_into_a_tls_server_context(tmp_path: Path) -> None:
    certs.ensure_serving_pair(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600


def test_atomic_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    certs.write_pem_atomically(tmp_path / "x.pem", b"one")
    certs.write_pem_atomically(tmp_path / "x.pem", b"two")
    assert [p.name for p in tmp_path.iterdir()] == ["x.pem"]
    assert (tmp_path / "x.pem").read_bytes() == b"two"


def test_cli_prints_the_ca_bundle_and_injects_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert certs_main(["init", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert certs_main(["ca-bundle", "--dir", str(tmp_path)]) == 0
    bundle = capsys.readouterr().out.strip()
    assert base64.b64decode(bundle) == (tmp_path / "ca.crt").read_bytes()

    manifest = tmp_path / "hook.yaml"
    manifest.write_text(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\n"
        "metadata: {name: x}\nwebhooks:\n- name: a.b.c\n  clientConfig: {url: 'https://h/mutate'}\n"
    )
    assert certs_main(["inject", "--dir", str(tmp_path), str(manifest)]) == 0
    assert f"caBundle: {bundle}" in capsys.readouterr().out


def test_cli_check_fails_on_a_missing_name(tmp_path: Path) -> None:
    certs_main(["init", "--dir", str(tmp_path)])
    assert certs_main(["check", "--dir", str(tmp_path), "--dns", "other.example"]) == 1


def test_a_serving_certificate_without_client_auth_is_reissued() -> None:
    ca = certs.new_authority(now=NOW)
    old = certs.authority._issue(
        ca,
        x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "localhost")]),
        [ExtendedKeyUsageOID.SERVER_AUTH],
        [x509.DNSName("localhost")],
        dt.timedelta(days=365),
        NOW,
    )
    assert "client auth" in str(certs.needs_rotation(old.cert_pem, now=NOW))
    fresh = certs.issue_serving_certificate(ca, ["localhost"], [], now=NOW)
    assert certs.needs_rotation(fresh.cert_pem, now=NOW) is None
    assert certs.needs_rotation(ca.cert_pem, now=NOW) is None  # a CA is not a serving certificate
