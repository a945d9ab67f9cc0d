"""The one KubeSchedulerConfiguration both schedulers get, and the cluster-wide fixtures.

kube-scheduler runs with this file (`--config`); the policy loads the same
text. Its profiles are the "several policy files" of the comparison: a pod
picks one with `schedulerName`, so one kube-scheduler process serves them
all. Every plugin the policy models is enabled somewhere with non-default
arguments or weights; NodeLabelNumber (ours only) is not, since
kube-scheduler has no such plugin.
"""

from __future__ import annotations

from typing import Any, Final

CONFIG: Final = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
  - schedulerName: default-scheduler
  - schedulerName: packing
    plugins:
      score:
        enabled:
          - {name: NodeResourcesFit, weight: 3}
          - {name: InterPodAffinity, weight: 1}
        disabled:
          - {name: ImageLocality}
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources: [{name: cpu, weight: 1}, {name: memory, weight: 2}]
      - name: NodeResourcesBalancedAllocation
        args:
          resources: [{name: cpu, weight: 1}, {name: memory, weight: 1},
                      {name: ephemeral-storage, weight: 1}]
      - name: InterPodAffinity
        args: {hardPodAffinityWeight: 5}
  - schedulerName: ratio
    plugins:
      multiPoint:
        enabled:
          - {name: TaintToleration, weight: 1}
          - {name: ImageLocality, weight: 4}
    pluginConfig:
      - name: NodeResourcesFit
        args:
          ignoredResources: [example.com/ignored]
          scoringStrategy:
            type: RequestedToCapacityRatio
            resources: [{name: cpu, weight: 2}, {name: memory, weight: 1},
                        {name: example.com/gpu, weight: 3}]
            requestedToCapacityRatio:
              shape: [{utilization: 0, score: 0}, {utilization: 60, score: 10},
                      {utilization: 100, score: 4}]
      - name: NodeResourcesBalancedAllocation
        args:
          resources: [{name: cpu, weight: 1}, {name: memory, weight: 1},
                      {name: example.com/gpu, weight: 1}]
      - name: InterPodAffinity
        args: {ignorePreferredTermsOfExistingPods: true}
  - schedulerName: spread-list
    plugins:
      score:
        enabled:
          - {name: PodTopologySpread, weight: 5}
          - {name: NodeAffinity, weight: 3}
        disabled:
          - {name: NodeResourcesBalancedAllocation}
    pluginConfig:
      - name: PodTopologySpread
        args:
          defaultingType: List
          defaultConstraints:
            - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}
            - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone,
               whenUnsatisfiable: ScheduleAnyway}
      - name: NodeAffinity
        args:
          addedAffinity:
            preferredDuringSchedulingIgnoredDuringExecution:
              - weight: 40
                preference:
                  matchExpressions: [{key: disk, operator: In, values: [ssd]}]
  - schedulerName: sampled
    percentageOfNodesToScore: 30
  - schedulerName: adaptive
    percentageOfNodesToScore: 0
"""

# Profiles the small clusters draw from (all nodes are evaluated there: under 100 nodes).
PROFILES: Final = ("default-scheduler", "default-scheduler", "packing", "ratio", "spread-list")
# Profiles of the big cluster, where kube-scheduler samples the nodes it scores.
SAMPLED_PROFILES: Final = ("sampled", "adaptive")

RUNTIME_CLASSES: Final[dict[str, dict[str, str]]] = {
    "kata": {"cpu": "250m", "memory": "160Mi"},
    "gvisor": {"cpu": "100m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
}


def runtime_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name},
        "handler": "runc",
        "overhead": {"podFixed": RUNTIME_CLASSES[name]},
    }
