"""Issue, load, rotate and write certificates.

Keys are ECDSA P-256: fast to generate (tests make many), accepted by the
kube-apiserver for serving, client and service-account signing. The clock is a
parameter (`now`) so rotation decisions are testable without waiting.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME = dt.timedelta(days=3650)
SERVING_LIFETIME = dt.timedelta(days=365)
#: Re-issue a serving certificate once less than this share of its life is left.
ROTATE_WHEN_REMAINING = 1 / 3
#: Tolerate clocks that run a little behind ours.
BACKDATE = dt.timedelta(minutes=5)

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA that signs the serving (and, for the dev cluster, client) certificates."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)


@dataclass(frozen=True)
class ServingCertificate:
    """A leaf certificate and its key, PEM encoded."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def new_authority(
    common_name: str = "placement-webhook-ca",
    *,
    lifetime: dt.timedelta = CA_LIFETIME,
    now: dt.datetime | None = None,
) -> CertificateAuthority:
    """Create a self-signed CA (CA:true, pathlen 0, keyCertSign)."""
    now = now or _utcnow()
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(key=key, certificate=cert)


def _issue(
    ca: CertificateAuthority,
    subject: x509.Name,
    usages: Sequence[x509.ObjectIdentifier],
    sans: Sequence[x509.GeneralName],
    lifetime: dt.timedelta,
    now: dt.datetime | None,
) -> ServingCertificate:
    now = now or _utcnow()
    key = _new_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + lifetime, ca.certificate.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    return ServingCertificate(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM), key_pem=_key_pem(key)
    )


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server may use to reach a Service-backed webhook."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def issue_serving_certificate(
    ca: CertificateAuthority,
    dns_names: Iterable[str] = ("localhost",),
    ip_addresses: Iterable[str] = ("127.0.0.1",),
    *,
    lifetime: dt.timedelta = SERVING_LIFETIME,
    now: dt.datetime | None = None,
) -> ServingCertificate:
    """A certificate for the given DNS names and IP addresses, for serving and for client auth.

    Client auth too, because replicas present their serving certificate as a
    client certificate when one forwards a review to another (the webhook's
    own CA is in its client CA bundle).
    """
    dns = list(dict.fromkeys(dns_names))
    ips = list(dict.fromkeys(ip_addresses))
    if not dns and not ips:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, (dns or ips)[0])])
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    return _issue(ca, subject, usages, sans, lifetime, now)


def issue_client_certificate(
    ca: CertificateAuthority,
    common_name: str,
    organizations: Iterable[str] = (),
    *,
    lifetime: dt.timedelta = SERVING_LIFETIME,
    now: dt.datetime | None = None,
) -> ServingCertificate:
    """A ClientAuth certificate; Kubernetes reads CN as user and O as groups."""
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return _issue(ca, x509.Name(attrs), [ExtendedKeyUsageOID.CLIENT_AUTH], [], lifetime, now)


def write_pem_atomically(path: str | os.PathLike[str], data: bytes, mode: int = 0o600) -> None:
    """Write `data` so that readers see the old file or the new one, never a mix."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_authority(directory: str | os.PathLike[str]) -> CertificateAuthority:
    """Load `ca.crt` and `ca.key` from a folder."""
    folder = Path(directory)
    cert = x509.load_pem_x509_certificate((folder / CA_CERT).read_bytes())
    key = serialization.load_pem_private_key((folder / CA_KEY).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{folder / CA_KEY}: expected an ECDSA key")
    return CertificateAuthority(key=key, certificate=cert)


def needs_rotation(
    cert_pem: bytes,
    *,
    dns_names: Iterable[str] = (),
    ip_addresses: Iterable[str] = (),
    now: dt.datetime | None = None,
) -> str | None:
    """Why the certificate should be re-issued, or None while it is good."""
    now = now or _utcnow()
    cert = x509.load_pem_x509_certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    if now >= end:
        return "expired"
    if end - now < (end - start) * ROTATE_WHEN_REMAINING:
        return f"expires {end.isoformat()}, less than a third of its lifetime left"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        san = x509.SubjectAlternativeName([])
    have_dns = set(san.get_values_for_type(x509.DNSName))
    have_ips = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    missing = (set(dns_names) - have_dns) | (set(ip_addresses) - have_ips)
    if missing:
        return "missing subject alternative names: " + ", ".join(sorted(missing))
    if not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
        try:
            usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            usages = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
        if ExtendedKeyUsageOID.CLIENT_AUTH not in usages:
            return "not valid for client auth (replicas present it when forwarding a review)"
    return None


def ensure_serving_pair(
    directory: str | os.PathLike[str],
    dns_names: Iterable[str] = ("localhost",),
    ip_addresses: Iterable[str] = ("127.0.0.1",),
    *,
    lifetime: dt.timedelta = SERVING_LIFETIME,
    now: dt.datetime | None = None,
) -> str | None:
    """Make sure `directory` holds a CA and a valid serving pair; return what was done.

    Keeps an existing CA (so the caBundle the API server trusts stays valid) and
    re-issues the serving certificate when it is missing, near expiry or lacks a
    name. The key is written before the certificate: a reloader that sees the new
    certificate always finds its key.
    """
    folder = Path(directory)
    dns, ips = list(dns_names), list(ip_addresses)
    created_ca = False
    if (folder / CA_CERT).exists() and (folder / CA_KEY).exists():
        ca = load_authority(folder)
    else:
        ca = new_authority(now=now)
        write_pem_atomically(folder / CA_KEY, ca.key_pem)
        write_pem_atomically(folder / CA_CERT, ca.cert_pem, mode=0o644)
        created_ca = True
    cert_path = folder / TLS_CERT
    reason = "created" if created_ca or not cert_path.exists() else None
    if reason is None:
        reason = needs_rotation(cert_path.read_bytes(), dns_names=dns, ip_addresses=ips, now=now)
    if reason is None:
        return None
    leaf = issue_serving_certificate(ca, dns, ips, lifetime=lifetime, now=now)
    write_pem_atomically(folder / TLS_KEY, leaf.key_pem)
    write_pem_atomically(cert_path, leaf.cert_pem, mode=0o644)
    return reason


def ca_bundle(ca_cert_pem: bytes) -> str:
    """The base64 form that `clientConfig.caBundle` takes."""
    return base64.b64encode(ca_cert_pem).decode("ascii")
