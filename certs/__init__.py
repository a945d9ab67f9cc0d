"""CA and serving certificates for the webhook, made with `cryptography`.

The API server only talks to an admission webhook over TLS and checks the
serving certificate against the `caBundle` of the webhook configuration. This
package makes that pair (a small CA, a serving certificate it signs), writes
PEM files atomically (write to a temporary file, then rename, so a reader
never sees half a key), and renders the caBundle. Rotation keeps the CA and
re-issues the serving certificate well before it expires.
"""

from certs.authority import (
    CertificateAuthority,
    ServingCertificate,
    ca_bundle,
    ensure_serving_pair,
    issue_client_certificate,
    issue_serving_certificate,
    load_authority,
    needs_rotation,
    new_authority,
    service_dns_names,
    write_pem_atomically,
)

__all__ = [
    "CertificateAuthority",
    "ServingCertificate",
    "ca_bundle",
    "ensure_serving_pair",
    "issue_client_certificate",
    "issue_serving_certificate",
    "load_authority",
    "needs_rotation",
    "new_authority",
    "service_dns_names",
    "write_pem_atomically",
]
