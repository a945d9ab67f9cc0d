"""Comparison experiments: admission-time placement vs kube-scheduler vs scheduler extender.

Every arm runs real components (etcd, kube-apiserver, kube-scheduler, the
webhook, the extender) on a fresh local control plane, with the same
scenario, the same policy and the same client rate limits; `python -m
experiments run SCENARIO... --out DIR` writes results.json, report.md and plots.
"""
