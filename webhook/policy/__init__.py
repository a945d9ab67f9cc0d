"""The pure placement policy core: no I/O, no clock, no threads.

Entry points: `model.PodView` (and the other parsed views), `dump.build_snapshot`
into a `snapshot.ClusterSnapshot`, `policy_file.load_policy` and
`policy_file.default_policy`, `framework.schedule`.
"""
