"""The decision core's settings come from `serve`'s and from `reconcile`'s command lines alike."""

from __future__ import annotations

import pytest

from webhook.cli import build_parser
from webhook.reconciler.options import DEFAULT_LEASE_NAME
from webhook.reconciler.run import settings_from_args


@pytest.mark.parametrize("command", [["serve"], ["reconcile"]])
def test_both_commands_make_core_settings_on_the_one_decision_lease(command: list[str]) -> None:
    args = build_parser().parse_args([*command, "--identity", "replica-0", "--lease-duration", "6",
                                      "--renew-deadline", "4", "--retry-period", "1"])  # fmt: skip
    settings = settings_from_args(args)
    assert settings.lease_name == DEFAULT_LEASE_NAME == "placement-webhook"
    assert settings.identity == "replica-0"
    assert (settings.election.lease_duration, settings.election.renew_deadline) == (6.0, 4.0)


def test_serve_takes_the_replica_flags() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--advertise-url",
            "https://10.0.0.7:8443",
            "--peer-name",
            "svc.ns.svc",
            "--forward-budget",
            "0.5",
            "--webhook-timeout",
            "3",
        ]
    )
    assert (args.advertise_url, args.peer_name) == ("https://10.0.0.7:8443", "svc.ns.svc")
    assert (args.forward_budget, args.webhook_timeout) == (0.5, 3.0)


def test_impossible_lease_timings_stop_start_up_with_the_reason() -> None:
    args = build_parser().parse_args(["serve", "--lease-duration", "5", "--renew-deadline", "9"])
    with pytest.raises(SystemExit, match="lease duration must exceed the renew deadline"):
        settings_from_args(args)
