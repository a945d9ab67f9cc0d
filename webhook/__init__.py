"""placement-webhook: place Kubernetes pods at admission time.

`webhook.policy` is the pure kube-scheduler-style core; `webhook.cluster` keeps
the cached view it decides against; `webhook.admission` is the HTTP shell;
`webhook.devcluster` runs a real local control plane for demo and tests.
"""
