"""The MutatingWebhookConfiguration that routes pod CREATE to the webhook.

Safety settings, each for a reason:
- namespaceSelector: only namespaces labelled placement-webhook.io/enabled=true,
  and never kube-system or the webhook's own namespace (a webhook that places
  its own pods can deadlock its own recovery);
- failurePolicy Ignore + a short timeout: a dead or slow webhook never blocks
  pod creation, the pod falls back to the default scheduler (or reconciler);
- sideEffects NoneOnDryRun: dry-run requests reach us and we reserve nothing;
- matchConditions: pods that already have a nodeName never reach us, except
  the ones we placed ourselves (they carry our reservation annotation), so
  that a reinvocation can re-check them;
- reinvocationPolicy IfNeeded: when a later webhook changes the pod (a sidecar
  injector adds a container), we see it again with our own patch applied and
  re-check the placement against the changed pod: kept when it still fits
  (no patch), moved when it does not, undone and handed off when nothing fits.
"""

from __future__ import annotations

from typing import Any

from webhook.admission.rules import ENABLED_LABEL, PROTECTED_NAMESPACES
from webhook.policy.marks import DEFAULT_NAMESPACE, RESERVATION

WEBHOOK_NAME = "pods.placement-webhook.io"
#: Unbound pods, and pods bound by our own earlier call (a reinvocation).
NOT_BOUND_BY_OTHERS = (
    "!has(object.spec.nodeName) || (has(object.metadata.annotations) && "
    f"'{RESERVATION}' in object.metadata.annotations)"
)
CONFIGURATION_NAME = "placement-webhook"


def webhook_configuration(
    *,
    ca_bundle: str,
    own_namespace: str = DEFAULT_NAMESPACE,
    url: str | None = None,
    service: tuple[str, str, int] | None = None,
    timeout_seconds: int = 2,
    name: str = CONFIGURATION_NAME,
) -> dict[str, Any]:
    """A MutatingWebhookConfiguration for `url` (out of cluster) or `service` (name, ns, port)."""
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url or service")
    client_config: dict[str, Any] = {"caBundle": ca_bundle}
    if url is not None:
        client_config["url"] = url.rstrip("/") + "/mutate"
    else:
        assert service is not None
        client_config["service"] = {
            "name": service[0],
            "namespace": service[1],
            "port": service[2],
            "path": "/mutate",
        }
    excluded = sorted({*PROTECTED_NAMESPACES, own_namespace})
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "placement-webhook"}},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1"],
                "clientConfig": client_config,
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": ENABLED_LABEL, "operator": "In", "values": ["true"]},
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": excluded,
                        },
                    ]
                },
                "matchConditions": [
                    {"name": "not-bound-by-others", "expression": NOT_BOUND_BY_OTHERS},
                ],
                "failurePolicy": "Ignore",
                "sideEffects": "NoneOnDryRun",
                "timeoutSeconds": timeout_seconds,
                "reinvocationPolicy": "IfNeeded",
                "matchPolicy": "Equivalent",
            }
        ],
    }
