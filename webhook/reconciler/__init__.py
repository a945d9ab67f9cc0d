"""The fallback scheduler: binds the pods the admission path left pending.

Pods with `schedulerName: placement-webhook` and no node (the webhook was
down with failurePolicy Ignore, no node fitted at admission and the webhook
handed the pod over, or the pod was created while nothing listened) are
scheduled here with the same policy and the same cluster view code as the
webhook, and bound through the pods/binding subresource by the one replica
that holds the Lease. The same process runs conflict detection
(`webhook.conflicts`) and serves /healthz, /readyz, /metrics and
/debug/conflicts.

Kept light: `options` (argparse only) is imported when the CLI builds its
parser; everything else is imported by `run` when the command runs.
"""
