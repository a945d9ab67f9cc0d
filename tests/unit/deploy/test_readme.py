"""The install steps in the READMEs: the short form in README.md is the tested one.

deploy/README.md's blocks are run as written on a real node by
tests/e2e/test_install.py; README.md repeats a few of them in short, which
must stay the same commands.
"""

from __future__ import annotations

import re

from tests.unit.deploy.manifests import REPO
from tests.unit.deploy.readme import README, commands
from webhook.policy.policy_file import load_policy


def _sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_every_command_of_the_short_install_is_one_deploy_readme_runs() -> None:
    text = (REPO / "README.md").read_text()
    short_section = text.split("### Install on a cluster\n", 1)[1].split("\n### ", 1)[0]
    short = [c for block in _sh_blocks(short_section) for c in commands(block)]
    tested = {c for block in _sh_blocks(README.read_text()) for c in commands(block)}

    assert len(short) >= 4
    assert [c for c in short if c not in tested] == []


def test_commands_are_read_as_a_shell_reads_them() -> None:
    script = "kubectl apply -k x   # a comment\nhelm install a b \\\n  --set c=d\n# kubectl no\n"

    assert commands(script) == ["kubectl apply -k x", "helm install a b --set c=d"]


def test_the_readmes_policy_example_loads_with_the_settings_it_shows() -> None:
    """The front door's policy example is a file the webhook accepts (a setting that was
    renamed or removed would stop start-up; this example once named one)."""
    text = (REPO / "README.md").read_text()
    body = re.split(r"(?m)^### ", text.split("\n### Configure the policy\n", 1)[1], maxsplit=1)[0]
    example = re.findall(r"```yaml\n(.*?)```", body, re.S)[0]
    policy = load_policy(example, "README.md")  # raises PolicyError naming the line at fault
    assert policy.default_profile.score_weights.get("NodeLabelNumber") == 1
