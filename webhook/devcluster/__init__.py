"""A real local control plane: etcd + kube-apiserver (+ kube-scheduler, + controller-manager,
+ hollow kubelets).

Demo, e2e tests and experiments run against upstream binaries built from the
pinned Go modules in `hack/`, never against a fake API. Everything listens on
loopback on free ports, with certificates made by `certs`. Nodes are of two
kinds, chosen per test or scenario: hollow kubelets (`kubelets.py`: the real
kubelet code over a fake runtime, so pods run and the kubelet's admission
rejects what does not fit), or bare Node objects whose capacity, labels and
taints are set through the API (`objects.py`), for experiments with
thousands of nodes.
"""

from webhook.devcluster.cluster import DevCluster, DevClusterError, locate_binaries
from webhook.devcluster.kubelets import KubeletSpec, KubeletSpecError

__all__ = ["DevCluster", "DevClusterError", "KubeletSpec", "KubeletSpecError", "locate_binaries"]
