"""Where an export puts a member's controls files, and the path its text names each by.

An export must build as it is, so each controls file the member applies travels with it:
copied beside the output and named relative to its folder, or, to standard output, named
by the registry's own file's absolute path (docs/advanced-controls.md, "Exporting"). Every
copy is read from the registry and checked against its digest first, so an export never
names a file that is missing or altered.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ctune.errors import UserError
from ctune.quoting import bare_refusal
from ctune.registry.controls import ControlsRef, member_controls, read_held
from ctune.registry.schema import Artifact, FrontMember
from ctune.writes import write_atomic

#: the file an export to a folder writes, by format
EXTENSIONS = {"flags": ".flags", "header": ".h", "cmake": ".cmake", "json": ".json"}
#: how a CMake snippet names a file beside itself
CMAKE_HERE = "${CMAKE_CURRENT_LIST_DIR}"


@dataclass(frozen=True, slots=True)
class Placed:
    """Where an export's text goes (None: standard output) and each controls file's path
    as the text names it ({digest: path}), with the copies made."""

    output: Path | None
    controls: dict[str, str]
    copies: tuple[Path, ...] = ()


def _is_device(path: Path) -> bool:
    """An output that is not a file of its own (``/dev/stdout``, a FIFO): nothing goes
    beside it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def output_file(a: Artifact, fmt: str, out: str | None) -> Path | None:
    """The file an export writes: ``out`` as given, or ``out/<kernel>-<problem>.<ext>``
    when ``out`` is a folder: one that exists, or a name ending in ``/`` (``-o build/``
    means a folder even before it exists: the caller creates it); None for standard
    output. ``out`` is a string because a ``Path`` drops the trailing slash."""
    if out is None:
        return None
    path = Path(out)
    if out.endswith(("/", os.sep)) or path.is_dir():
        return path / f"{a.kernel}-{a.problem}{EXTENSIONS[fmt]}"
    return path


def copy_name(a: Artifact, ref: ControlsRef, refs: tuple[ControlsRef, ...]) -> str:
    """``<kernel>-<problem>.acf``, with ``-<compiler>`` when the member has two files."""
    suffix = f"-{ref.compiler}" if len(refs) > 1 else ""
    return f"{a.kernel}-{a.problem}{suffix}.acf"


def place_controls(
    root: Path, a: Artifact, m: FrontMember, fmt: str, output: Path | None
) -> Placed:
    """Copy ``m``'s controls files from the registry at ``root`` beside ``output`` (the file
    :func:`output_file` chose) and say how the export names each."""
    refs = member_controls(m)
    where = f"{a.kernel}/{a.problem}/{a.device_class}@{m.key}"
    files = {ref.digest: read_held(root, ref, where) for ref in refs}
    if output is None or _is_device(output):
        named = {ref.digest: str((Path(root) / ref.relpath).absolute()) for ref in refs}
        for path in named.values():
            why = bare_refusal(path)
            if why is not None:
                raise UserError(
                    f"export of {where}: the registry's controls file {path} {why}; "
                    "export with --out into a folder whose path has none"
                )
        return Placed(output, named)
    folder = output.parent
    copies = []
    named = {}
    for ref in refs:
        name = copy_name(a, ref, refs)
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / name, files[ref.digest])
        copies.append(folder / name)
        named[ref.digest] = f"{CMAKE_HERE}/{name}" if fmt == "cmake" else name
    return Placed(output, named, tuple(copies))


__all__ = ["EXTENSIONS", "Placed", "copy_name", "output_file", "place_controls"]
