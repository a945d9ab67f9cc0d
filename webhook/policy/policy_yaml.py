"""Reading a policy file: YAML documents that remember the line of every field.

Both documents of a policy file (webhook.policy.profile's
KubeSchedulerConfiguration, webhook.policy.placement_policy's
PlacementPolicy) are decoded strictly: unknown fields, wrong types and bad
values raise `PolicyError` naming the file, the line (YAML node marks from
`yaml.compose_all`) and the field path. Unknown fields are found by the one
strict checker of the policy core, `interface.check_fields`, which plugin
args use too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from webhook.policy.interface import ArgsError, check_fields

__all__ = ["Document", "PolicyError", "read_documents"]


class PolicyError(ValueError):
    """An invalid policy file. The message names the source, line and field path."""

    def __init__(
        self, message: str, *, source: str = "<policy>", line: int | None = None, path: str = ""
    ):
        where = f"{source}:{line}" if line is not None else source
        text = f"{where}: {path}: {message}" if path else f"{where}: {message}"
        super().__init__(text)
        self.source = source
        self.line = line
        self.path = path
        self.reason = message


class Document:
    """One decoded YAML document: a map from field paths to line numbers, and checks
    that raise a PolicyError at the right line."""

    def __init__(self, source: str, prefix: str = "") -> None:
        self.source = source
        self.prefix = prefix
        """The document's kind, put before every path in errors ("PlacementPolicy ")."""
        self.lines: dict[str, int] = {}

    def error(self, path: str, message: str) -> PolicyError:
        """A PolicyError at `path`, on the line of its nearest ancestor the YAML has."""
        line = None
        p = path
        while True:
            if p in self.lines:
                line = self.lines[p]
                break
            if not p:
                break
            cut = max(p.rfind("."), p.rfind("["))
            p = p[:cut] if cut > 0 else ""
        full = f"{self.prefix}{path}" if path else self.prefix.rstrip(" ")
        return PolicyError(message, source=self.source, line=line, path=full)

    def fields(self, path: str, value: Any, allowed: frozenset[str]) -> Mapping[str, Any]:
        """`value` as an object with only `allowed` fields ({} for null)."""
        try:
            return check_fields(value, allowed, path)
        except ArgsError as exc:
            raise self.error(exc.field, exc.message) from None

    def items(self, path: str, value: Any) -> list[Any]:
        """`value` as a list ([] for null)."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(path, f"must be a list, got {type(value).__name__}")
        return value

    def integer(self, path: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(path, f"must be an integer, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
            raise self.error(path, f"{value} not in valid range {rng}")
        return value


_SCALARS = yaml.SafeLoader("")


def _decode(node: yaml.Node, path: str, doc: Document) -> Any:
    doc.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for k_node, v_node in node.value:
            key = _decode(k_node, path, doc)
            if not isinstance(key, str):
                raise doc.error(path, f"keys must be strings, got {key!r}")
            sub = f"{path}.{key}" if path else key
            if key in out:
                doc.lines[sub] = k_node.start_mark.line + 1
                raise doc.error(sub, "duplicate field")
            doc.lines[sub] = k_node.start_mark.line + 1
            out[key] = _decode(v_node, sub, doc)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            sub = f"{path}[{i}]"
            doc.lines[sub] = item.start_mark.line + 1
            items.append(_decode(item, sub, doc))
        return items
    return _SCALARS.construct_object(node, deep=True)


def read_documents(text: str, source: str) -> list[tuple[Any, Document]]:
    """Every non-empty YAML document of `text`, decoded, with its line map."""
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise PolicyError(f"invalid YAML: {problem}", source=source, line=line) from None
    out = []
    for node in nodes:
        if node is None:
            continue
        doc = Document(source)
        out.append((_decode(node, "", doc), doc))
    return out
