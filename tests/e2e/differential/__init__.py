"""The differential test: the policy against the real kube-scheduler on random cases.

generate (cases) -> driver (the control plane; kube-scheduler's log) ->
schedlog (its score lines) -> compare (the policy on the same objects).
`python -m tests.e2e.differential` replays a failed case or runs more.
"""
