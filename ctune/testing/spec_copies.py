"""A kernel's spec copied into a test's folder, a key set in it: how tests give a spec a
verify or vendor function (or a wrong one) without touching the files they copy."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def copy_spec(
    source: Path, names: Sequence[str], folder: Path, files: Mapping[str, str] | None = None
) -> Path:
    """``names`` (the spec's ``.yaml`` among them) copied from ``source`` into ``folder``, and
    ``files`` (name -> text) written beside them; the copied spec's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(source / name, folder / name)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    return next(folder / name for name in names if name.endswith((".yaml", ".yml")))


def with_key(path: Path, key: str, value: Any) -> Path:
    """The spec at ``path`` with top-level ``key`` set to ``value`` (rewritten in place)."""
    import yaml

    data = yaml.safe_load(path.read_text())
    data[key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


__all__ = ["copy_spec", "with_key"]
