"""deploy/README.md's steps as data, so the e2e tests run them as written.

A step is a fenced block under a heading (`## Install`, then `### With Helm`);
`operator_checkout` lays out what an operator has beside those steps: a copy
of deploy/ and the overlay of their own that the README shows, pointed at
their registry.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.unit.deploy.manifests import DEPLOY

README = DEPLOY / "README.md"
REGISTRY = "REGISTRY"  # the README's placeholder for the operator's registry


def section(heading: str, subheading: str | None = None) -> str:
    """The text under `## heading` (and under its `### subheading`), up to the next one."""
    text = README.read_text()
    body = re.split(r"(?m)^## ", text.split(f"\n## {heading}\n", 1)[1], maxsplit=1)[0]
    if subheading is not None:
        body = re.split(r"(?m)^### ", body.split(f"\n### {subheading}\n", 1)[1], maxsplit=1)[0]
    return body


def blocks(heading: str, subheading: str | None = None, lang: str = "sh") -> list[str]:
    """The ```lang blocks of a section, in order."""
    return re.findall(rf"```{lang}\n(.*?)```", section(heading, subheading), re.S)


def block(heading: str, subheading: str | None = None, lang: str = "sh") -> str:
    """The first ```lang block of a section."""
    found = blocks(heading, subheading, lang)
    assert found, (heading, subheading, lang)
    return found[0]


def with_registry(text: str, registry: str) -> str:
    """The README's text with the operator's registry in place of the placeholder."""
    assert REGISTRY in text, text
    return text.replace(REGISTRY, registry)


def operator_checkout(folder: Path, registry: str) -> Path:
    """A copy of deploy/ and, beside it, the README's own overlay naming `registry`."""
    shutil.copytree(DEPLOY, folder / "deploy")
    overlay = block("Install", "With kustomize", lang="yaml")
    name = re.search(r"^# (\S+)/kustomization\.yaml$", overlay, re.M)
    assert name is not None, overlay
    (folder / name.group(1)).mkdir()
    (folder / name.group(1) / "kustomization.yaml").write_text(with_registry(overlay, registry))
    return folder


def commands(script: str) -> list[str]:
    """The kubectl and helm commands of a shell block: continuations joined, comments cut."""
    joined = re.sub(r"\\\n\s*", "", script)
    lines = (re.sub(r"(^|\s+)#.*$", "", line).strip() for line in joined.splitlines())
    return [line for line in lines if line.startswith(("kubectl ", "helm "))]
