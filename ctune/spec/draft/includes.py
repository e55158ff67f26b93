"""The local files a kernel file includes, as ``ctune init`` reads them. Text only.

A project's kernel file often keeps its kernel, its element type (``#define DATA_TYPE
float``) or its array lengths in files it ``#include``s. ``init`` follows the includes it
can find (``"name"`` beside the including file, then in the include folders the author
gave; ``<name>`` in those folders only, never the system's): a file that defines a
``__global__`` function is put in the text where it is included (its kernels are the
file's), any other is a header whose macros and typedefs ``init`` may read. An included
file ``init`` cannot read (too large, unreadable) is left to the compiler.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ctune.files import MAX_SOURCE_BYTES, InputFileError, read_text_capped

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)[^\n]*$', re.M)
_GLOBAL = re.compile(r"\b__global__\b")
#: how many files one kernel file may pull in: a draft reads a project, not a library
MAX_FILES = 64


@dataclass
class Included:
    """The kernel file's text with included kernel files spliced in, and the headers."""

    text: str
    headers: list[str] = field(default_factory=list)


def read_with_includes(path: Path, include_dirs: Sequence[Path] = ()) -> Included:
    """``path``'s text with each local file it includes that defines a kernel spliced in
    where it is included (once), and the texts of the other local files it includes."""
    seen: set[Path] = {path.resolve()}
    headers: list[str] = []

    def expand(text: str, folder: Path, depth: int) -> str:
        def include(match: re.Match[str]) -> str:
            found = _find(match.group(1), match.group(2), folder, include_dirs)
            if found is None or found in seen or len(seen) >= MAX_FILES or depth > 8:
                return match.group(0)
            seen.add(found)
            try:
                inner = read_text_capped(found, MAX_SOURCE_BYTES, "included file", errors="replace")
            except InputFileError:  # too large, unreadable: the compiler reads it, init does not
                return match.group(0)
            inner = expand(inner, found.parent, depth + 1)
            if _GLOBAL.search(inner):
                return inner
            headers.append(inner)
            return match.group(0)

        return _INCLUDE.sub(include, text)

    raw = read_text_capped(path, MAX_SOURCE_BYTES, "kernel file", errors="replace")
    return Included(expand(raw, path.parent, 0), headers)


def _find(
    quoted: str | None, angled: str | None, folder: Path, include_dirs: Sequence[Path]
) -> Path | None:
    """Where an include resolves among the files init may read; None elsewhere."""
    name = quoted or angled or ""
    places = [folder, *include_dirs] if quoted else list(include_dirs)
    for place in places:
        candidate = place / name
        if candidate.is_file():
            return candidate.resolve()
    return None


__all__ = ["MAX_FILES", "Included", "read_with_includes"]
