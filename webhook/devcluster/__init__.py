"""A real local control plane: etcd + kube-apiserver (+ kube-scheduler, + controller-manager).

Demo, e2e tests and experiments run against upstream binaries built from the
pinned Go modules in `hack/`, never against a fake API. Everything listens on
loopback on free ports, with certificates made by `certs`. There is no
kubelet: nodes are Node objects whose capacity, labels and taints are set
through the API (see `nodes.py`).
"""

from webhook.devcluster.cluster import DevCluster, DevClusterError, locate_binaries

__all__ = ["DevCluster", "DevClusterError", "locate_binaries"]
