"""The pure placement policy core: no I/O, no clock, no threads.

Entry points: `model.ClusterSnapshot`, `model.PodView`, `profile.load_policy`,
`profile.default_policy`, `framework.schedule`.
"""
