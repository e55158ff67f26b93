"""A strict YAML loader: duplicate keys, anchors/aliases and large files are errors.

PyYAML's ``safe_load`` silently keeps the last of two duplicate keys and expands an alias
bomb many thousand times over; a spec or registry file that does either is rejected
instead. Nesting deeper than ``MAX_DEPTH`` and more than ``MAX_NODES`` nodes are refused
while composing, before PyYAML's recursive composer can exhaust the stack or memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ctune.files import read_text_capped

MAX_BYTES = 1024 * 1024
#: levels of nested lists and mappings; a spec needs about five
MAX_DEPTH = 32
#: scalars, lists and mappings in one document
MAX_NODES = 20_000


class StrictYamlError(ValueError):
    pass


_NODE_WORDS = {yaml.SequenceNode: "list", yaml.MappingNode: "mapping"}


class _StrictLoader(yaml.SafeLoader):
    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise StrictYamlError(f"line {event.start_mark.line + 1}: aliases are not allowed")
        event = self.peek_event()
        line = event.start_mark.line + 1
        if getattr(event, "anchor", None):
            raise StrictYamlError(f"line {line}: anchors are not allowed")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise StrictYamlError(f"line {line}: more than {MAX_NODES} values in one file")
        if self._depth >= MAX_DEPTH:
            raise StrictYamlError(f"line {line}: nested deeper than {MAX_DEPTH} levels")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        """A mapping whose keys are single values and each given once: a list or a mapping
        as a key (``? [1, 2]``) names nothing a file could mean, and cannot be hashed."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise StrictYamlError(
                    f"line {key_node.start_mark.line + 1}: a key must be a single value "
                    f"(a name or a number), not a {_NODE_WORDS.get(type(key_node), 'node')}"
                )
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise StrictYamlError(f"line {key_node.start_mark.line + 1}: duplicate key '{key}'")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_text(text: str) -> Any:
    """The one document in ``text``, under the caps above."""
    if len(text.encode()) > MAX_BYTES:
        raise StrictYamlError(f"larger than {MAX_BYTES} bytes")
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except StrictYamlError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise StrictYamlError(f"{where}{problem}") from None
    except (ValueError, OverflowError) as exc:  # a value PyYAML cannot build: 5,000 digits
        raise StrictYamlError(f"a value that cannot be read: {exc}") from None


def load_file(path: Path, what: str = "YAML file") -> Any:
    """The YAML document in ``path``, read by the one rule for input files (a regular file
    of at most ``MAX_BYTES``: :func:`ctune.files.read_text_capped`)."""
    return load_text(read_text_capped(path, MAX_BYTES, what))
