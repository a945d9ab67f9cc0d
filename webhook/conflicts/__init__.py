"""Where this webhook and other schedulers placed pods that do not fit together.

`model` parses pods once into `PodRecord`s (the policy's PodView plus who
placed the pod and when it arrived), `detect` finds conflicts over records and
node views with no I/O, `remediation` picks what evict mode may evict. The
shell (`store`, `report`) keeps records in step with watches and reports:
Warning events, metrics, the JSON list, evictions.
"""
