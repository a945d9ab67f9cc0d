"""The placement policy served as a kube-scheduler extender (filter, prioritize, bind)."""
