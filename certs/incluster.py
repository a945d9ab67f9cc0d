"""`python -m certs in-cluster`: the webhook's certificates kept in Secrets, from in the cluster.

Two Secrets in the webhook's namespace, split so that the CA key is never
mounted into the pods that face the network:

- the CA Secret (Opaque): `ca.crt`, `ca.key`, and `trusted.crt`, the CAs the
  API server must trust right now (the current one first, then older ones
  still serving somewhere);
- the serving Secret (kubernetes.io/tls): `tls.crt`, `tls.key` and `ca.crt`
  (the trusted bundle), the layout cert-manager writes, so the webhook
  Deployment is the same whichever overlay made it. The kubelet projects
  it into the webhook pods and the webhook reloads it when it changes.

A pass reads both Secrets and the MutatingWebhookConfiguration, asks the
pure `plan` what to change, and writes in the one order that never breaks
trust: the CA Secret, then every webhook's `caBundle`, then the serving
Secret. Serving certificates are re-issued when a third of their life is
left (or on demand). A CA is rotated the same way, in two steps: the new CA
is published beside the old one first, and the serving certificate is
re-issued by the new CA only in a later pass that finds it in the
published caBundle. An older CA leaves the bundle once the serving
certificate of the current CA has been out for `retire_after` (by then every
kubelet has updated every pod's volume).

Writes carry the resourceVersion that was read (create fails with 409 if
another runner was first), so two runners during a rolling update cannot
overwrite each other: the loser retries and adopts what the winner wrote.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import signal
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from certs.authority import (
    BACKDATE,
    CA_LIFETIME,
    SERVING_LIFETIME,
    CertificateAuthority,
    ServingCertificate,
    issue_serving_certificate,
    needs_rotation,
    new_authority,
)

log = logging.getLogger("certs.incluster")
_SHA256 = hashes.SHA256()

CA_CERT, CA_KEY, TRUSTED = "ca.crt", "ca.key", "trusted.crt"
TLS_CERT, TLS_KEY = "tls.crt", "tls.key"
LABELS = {
    "app.kubernetes.io/name": "placement-webhook",
    "app.kubernetes.io/part-of": "placement-webhook",
    "app.kubernetes.io/component": "certificates",
    "app.kubernetes.io/managed-by": "placement-webhook-certs",
}


# ------------------------------------------------------------------ pure core


@dataclass(frozen=True)
class Stored:
    """What the cluster holds now (None where an object or key is missing)."""

    ca_cert: bytes | None = None
    ca_key: bytes | None = None
    trusted: bytes = b""
    tls_cert: bytes | None = None
    tls_key: bytes | None = None
    tls_ca: bytes | None = None
    """`ca.crt` of the serving Secret."""
    published: tuple[str, ...] | None = None
    """caBundle of each webhook in the configuration; None when the configuration is missing."""


@dataclass(frozen=True)
class Settings:
    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...] = ()
    serving_lifetime: dt.timedelta = SERVING_LIFETIME
    ca_lifetime: dt.timedelta = CA_LIFETIME
    retire_after: dt.timedelta = dt.timedelta(hours=1)
    """How long an older CA stays trusted after the current CA's serving certificate went out."""


@dataclass(frozen=True)
class Plan:
    ca_data: dict[str, bytes] | None
    """New content of the CA Secret, None when it stays as it is."""
    tls_data: dict[str, bytes] | None
    """New content of the serving Secret, None when it stays as it is."""
    bundle: str
    """The caBundle every webhook must carry (base64 of the trusted PEMs)."""
    reasons: tuple[str, ...] = ()
    waiting: str | None = None
    """Why a due serving certificate was not re-issued in this pass (a later pass will)."""

    @property
    def changes(self) -> bool:
        return self.ca_data is not None or self.tls_data is not None


def split_pems(data: bytes) -> list[x509.Certificate]:
    """Certificates in a PEM bundle, in order; unparsable input gives none."""
    try:
        return x509.load_pem_x509_certificates(data) if data.strip() else []
    except ValueError:
        return []


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _load_ca(cert_pem: bytes | None, key_pem: bytes | None) -> CertificateAuthority | None:
    if not cert_pem or not key_pem:
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except ValueError:
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not _same_key(cert, key):
        return None
    return CertificateAuthority(key=key, certificate=cert)


def _same_key(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def _load_serving(cert_pem: bytes | None, key_pem: bytes | None) -> x509.Certificate | None:
    """The serving certificate when it loads and matches its key, else None."""
    if not cert_pem or not key_pem:
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except ValueError:
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not _same_key(cert, key):
        return None
    return cert


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _issued_at(cert: x509.Certificate) -> dt.datetime:
    return cert.not_valid_before_utc + BACKDATE


def plan(
    stored: Stored,
    settings: Settings,
    now: dt.datetime,
    *,
    rotate_ca: bool = False,
    rotate_serving: bool = False,
) -> Plan:
    """What to write so the Secrets and the caBundle are valid, and rotated in time."""
    reasons: list[str] = []
    current = _load_ca(stored.ca_cert, stored.ca_key)
    previous = [c for c in split_pems(stored.trusted) if c.not_valid_after_utc > now]
    if current is None:
        reasons.append("CA created" if stored.ca_cert is None else "CA replaced (unreadable)")
        current = new_authority(_ca_name(now), lifetime=settings.ca_lifetime, now=now)
        previous = []  # nothing signed by an unreadable CA can be trusted on purpose
    else:
        due = "rotation requested" if rotate_ca else needs_rotation(current.cert_pem, now=now)
        if due:
            reasons.append(f"CA rotated ({due})")
            previous = [current.certificate, *previous]
            current = new_authority(_ca_name(now), lifetime=settings.ca_lifetime, now=now)

    previous = [c for c in previous if not same_certificate(c, current.certificate)]

    serving = _load_serving(stored.tls_cert, stored.tls_key)
    issue: str | None = None
    if serving is None:
        issue = "created" if stored.tls_cert is None else "replaced (unreadable or key mismatch)"
    elif rotate_serving:
        issue = "rotation requested"
    elif not signed_by(serving, current.certificate):
        issue = "signed by a previous CA"
    else:
        issue = needs_rotation(
            _pem(serving),
            dns_names=settings.dns_names,
            ip_addresses=settings.ip_addresses,
            now=now,
        )

    waiting = None
    new_serving: ServingCertificate | None = None
    if issue is not None:
        published = stored.published
        trusted_now = published is None or all(
            any(same_certificate(current.certificate, c) for c in split_pems(_b64d(b)))
            for b in published
        )
        if serving is None or trusted_now:
            new_serving = issue_serving_certificate(
                current,
                settings.dns_names,
                settings.ip_addresses,
                lifetime=settings.serving_lifetime,
                now=now,
            )
            serving = new_serving.certificate
            reasons.append(f"serving certificate issued ({issue})")
        else:
            waiting = f"serving certificate due ({issue}); waiting for the new CA in the caBundle"

    assert serving is not None
    if (
        previous
        and signed_by(serving, current.certificate)
        and new_serving is None
        and now - _issued_at(serving) >= settings.retire_after
    ):
        reasons.append(f"retired {len(previous)} previous CA(s) from the bundle")
        previous = []

    trusted = _dedupe([current.certificate, *previous])
    trusted_pem = b"".join(_pem(c) for c in trusted)
    ca_data = {CA_CERT: current.cert_pem, CA_KEY: current.key_pem, TRUSTED: trusted_pem}
    stored_ca = {CA_CERT: stored.ca_cert, CA_KEY: stored.ca_key, TRUSTED: stored.trusted}
    tls_data: dict[str, bytes] = {
        TLS_CERT: new_serving.cert_pem if new_serving else (stored.tls_cert or b""),
        TLS_KEY: new_serving.key_pem if new_serving else (stored.tls_key or b""),
        CA_CERT: trusted_pem,
    }
    stored_tls = {TLS_CERT: stored.tls_cert, TLS_KEY: stored.tls_key, CA_CERT: stored.tls_ca}
    return Plan(
        ca_data=None if ca_data == stored_ca else ca_data,
        tls_data=None if tls_data == stored_tls else tls_data,
        bundle=base64.b64encode(trusted_pem).decode("ascii"),
        reasons=tuple(reasons),
        waiting=waiting,
    )


def same_certificate(a: x509.Certificate, b: x509.Certificate) -> bool:
    return a.fingerprint(_SHA256) == b.fingerprint(_SHA256)


def _dedupe(certs: Sequence[x509.Certificate]) -> list[x509.Certificate]:
    seen: set[bytes] = set()
    out = []
    for cert in certs:
        digest = cert.fingerprint(_SHA256)
        if digest not in seen:
            seen.add(digest)
            out.append(cert)
    return out


def _ca_name(now: dt.datetime) -> str:
    """A distinct subject per CA generation, so old and new never look alike in a bundle."""
    return f"placement-webhook-ca-{now.strftime('%Y%m%d%H%M%S')}"


def _b64d(value: str) -> bytes:
    try:
        return base64.b64decode(value or "", validate=True)
    except ValueError:
        return b""


# ------------------------------------------------------------------ the shell


class Client(Protocol):
    """What a pass needs of a Kubernetes client (webhook.kube.Kube provides it)."""

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = 30.0,
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Names:
    namespace: str
    tls_secret: str = "placement-webhook-tls"
    ca_secret: str = "placement-webhook-ca"
    webhook_config: str | None = "placement-webhook"
    """MutatingWebhookConfiguration to inject the caBundle into (None: inject nothing)."""


@dataclass
class PassResult:
    reasons: list[str] = field(default_factory=list)
    waiting: str | None = None
    injected: bool = False


def _status(err: Exception) -> int | None:
    status = getattr(err, "status", None)
    return status if isinstance(status, int) else None


def _secret_path(namespace: str, name: str = "") -> str:
    path = f"/api/v1/namespaces/{namespace}/secrets"
    return f"{path}/{name}" if name else path


CONFIG_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def _get_or_none(client: Client, path: str) -> dict[str, Any] | None:
    try:
        return client.request("GET", path)
    except Exception as err:
        if _status(err) == 404:
            return None
        raise


def _data(secret: Mapping[str, Any] | None, key: str) -> bytes | None:
    if secret is None:
        return None
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value) if value else None


def _write_secret(
    client: Client,
    names: Names,
    name: str,
    secret_type: str,
    data: Mapping[str, bytes],
    existing: Mapping[str, Any] | None,
) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": names.namespace, "labels": dict(LABELS)}
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": secret_type,
        "data": {k: base64.b64encode(v).decode("ascii") for k, v in data.items()},
    }
    if existing is None:
        client.request("POST", _secret_path(names.namespace), body=body)
        return
    old_meta = existing.get("metadata") or {}
    meta["resourceVersion"] = old_meta["resourceVersion"]
    meta["labels"] = {**(old_meta.get("labels") or {}), **LABELS}
    if old_meta.get("annotations"):
        meta["annotations"] = old_meta["annotations"]
    client.request("PUT", _secret_path(names.namespace, name), body=body)


def sync_once(
    client: Client,
    names: Names,
    settings: Settings,
    *,
    now: dt.datetime | None = None,
    rotate_ca: bool = False,
    rotate_serving: bool = False,
) -> PassResult:
    """One pass: read, plan, write (CA Secret, caBundle, serving Secret). Raises on API errors."""
    now = now or dt.datetime.now(dt.UTC)
    ca_secret = _get_or_none(client, _secret_path(names.namespace, names.ca_secret))
    tls_secret = _get_or_none(client, _secret_path(names.namespace, names.tls_secret))
    config = None
    if names.webhook_config:
        config = _get_or_none(client, f"{CONFIG_PATH}/{names.webhook_config}")
    hooks = (config or {}).get("webhooks") or []
    stored = Stored(
        ca_cert=_data(ca_secret, CA_CERT),
        ca_key=_data(ca_secret, CA_KEY),
        trusted=_data(ca_secret, TRUSTED) or b"",
        tls_cert=_data(tls_secret, TLS_CERT),
        tls_key=_data(tls_secret, TLS_KEY),
        tls_ca=_data(tls_secret, CA_CERT),
        published=None
        if config is None
        else tuple(str((h.get("clientConfig") or {}).get("caBundle") or "") for h in hooks),
    )
    result = plan(stored, settings, now, rotate_ca=rotate_ca, rotate_serving=rotate_serving)
    done = PassResult(reasons=list(result.reasons), waiting=result.waiting)
    if result.ca_data is not None:
        _write_secret(client, names, names.ca_secret, "Opaque", result.ca_data, ca_secret)
    if config is not None and names.webhook_config:
        ops: list[dict[str, Any]] = []
        for index, hook in enumerate(hooks):
            if (hook.get("clientConfig") or {}).get("caBundle") != result.bundle:
                # `test` pins the webhook we meant: a concurrent edit that reorders
                # the list makes the patch fail instead of touching another webhook.
                ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": hook["name"]})
                ops.append(
                    {
                        "op": "add",
                        "path": f"/webhooks/{index}/clientConfig/caBundle",
                        "value": result.bundle,
                    }
                )
        if ops:
            client.request(
                "PATCH",
                f"{CONFIG_PATH}/{names.webhook_config}",
                body=ops,
                content_type="application/json-patch+json",
            )
            done.injected = True
            done.reasons.append(f"caBundle injected into {len(ops) // 2} webhook(s)")
    elif names.webhook_config:
        done.reasons.append(f"MutatingWebhookConfiguration {names.webhook_config} not found yet")
        done.waiting = done.waiting or "the webhook configuration to appear"
    if result.tls_data is not None:
        _write_secret(
            client, names, names.tls_secret, "kubernetes.io/tls", result.tls_data, tls_secret
        )
    return done


def run(
    client: Client,
    names: Names,
    settings: Settings,
    *,
    once: bool,
    interval: float,
    settle: float,
    rotate_ca: bool = False,
    rotate_serving: bool = False,
    stop: threading.Event | None = None,
) -> int:
    """Keep the certificates in sync until stopped (or, with `once`, until nothing is pending).

    A pass that leaves something pending (a CA waiting to be published, a
    configuration not yet created) or fails is followed by another after
    `settle` seconds instead of `interval`.
    """
    stop = stop or threading.Event()
    forced = (rotate_ca, rotate_serving)
    attempts = 0
    while not stop.is_set():
        attempts += 1
        try:
            done = sync_once(client, names, settings, rotate_ca=forced[0], rotate_serving=forced[1])
        except Exception as err:
            log.warning("certificate pass failed: %s", err)
            if once and attempts >= 3:
                return 1
            stop.wait(settle)
            continue
        forced = (False, False)  # a requested rotation happens once
        for reason in done.reasons:
            log.info("%s", reason)
        if done.waiting:
            log.info("pending: %s", done.waiting)
        if once and (not done.waiting or attempts >= 5):
            return 0 if not done.waiting else 1
        stop.wait(settle if done.waiting else interval)
    return 0


def main(args: Any) -> int:
    """Entry point for `python -m certs in-cluster` (argparse namespace from certs.__main__)."""
    from certs.authority import service_dns_names
    from webhook import logs
    from webhook.kube import Kube

    logs.configure(args.log_format, args.log_level)
    dns = [*service_dns_names(args.service, args.namespace), *args.dns]
    settings = Settings(
        dns_names=tuple(dict.fromkeys(dns)),
        ip_addresses=tuple(dict.fromkeys(args.ip)),
        serving_lifetime=dt.timedelta(days=args.serving_days),
        ca_lifetime=dt.timedelta(days=args.ca_days),
        retire_after=dt.timedelta(seconds=args.retire_after),
    )
    names = Names(
        namespace=args.namespace,
        tls_secret=args.secret,
        ca_secret=args.ca_secret,
        webhook_config=args.webhook_config or None,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    client = Kube(args.kubeconfig)
    try:
        return run(
            client,
            names,
            settings,
            once=args.once,
            interval=args.interval,
            settle=args.settle,
            rotate_ca=args.rotate_ca,
            rotate_serving=args.rotate_serving,
            stop=stop,
        )
    finally:
        client.close()
