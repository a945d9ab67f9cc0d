"""Who is calling: the verified client certificate's names, and whether they may call.

The TLS handshake has already checked the certificate against the client
CA bundle; this only reads the names out of it (CN and DNS SANs, as
Gatekeeper's --client-cn-name and controller-runtime's ClientCAName do) and
matches them against the allowed names, when any are configured. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

#: WSGI environ key holding the caller's ClientIdentity (None: no verified certificate).
ENVIRON_KEY = "placement_webhook.client"
#: WSGI environ key holding the monotonic time the request's first byte arrived.
RECEIVED_KEY = "placement_webhook.received"


@dataclass(frozen=True)
class ClientIdentity:
    """The names of a verified client certificate."""

    common_name: str
    dns_names: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.common_name, *self.dns_names) if self.common_name else self.dns_names

    def describe(self) -> str:
        return f"CN={self.common_name!r} DNS={list(self.dns_names)}"


def identity_from_peercert(cert: Mapping[str, Any] | None) -> ClientIdentity | None:
    """The names in `ssl.SSLSocket.getpeercert()` output; None without a verified certificate."""
    if not cert:
        return None
    common_name = ""
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                common_name = str(value)
    dns = tuple(str(v) for k, v in cert.get("subjectAltName", ()) if k == "DNS")
    return ClientIdentity(common_name, dns)


def is_allowed(identity: ClientIdentity | None, allowed: Collection[str]) -> bool:
    """True when no names are required, or the certificate carries one of them."""
    if not allowed:
        return True
    return identity is not None and any(name in allowed for name in identity.names)
