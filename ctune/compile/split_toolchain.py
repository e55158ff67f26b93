"""A split toolchain: PTX from one CUDA release's nvcc, cubins from another release's ptxas.

Where only a newer ptxas can be had, nvcc must run it for every build, cubin and launcher
alike. nvcc finds its tools through its own folder and the ``nvcc.profile`` there, so the
split toolchain is a private bin folder under the cache, made once per (nvcc, ptxas): a
copy of nvcc, its profile pointed back at the original CUDA root, links to the other
tools, ``ptxas`` linked to the given one, and a marker :func:`probe_toolchain` reads to
call the toolchain split. docs/advanced-controls.md, "the split path".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import threading
from pathlib import Path

from ctune.compile.toolchain import SPLIT_MARKER, dryrun, dryrun_value, find_nvcc, nvcc_home
from ctune.errors import ToolchainError
from ctune.files import program_problem, read_text_capped
from ctune.records import canonical_json, sha256_hex

#: an nvcc.profile larger than this is not one
MAX_PROFILE_BYTES = 64 * 1024
#: entries of nvcc's folder the split folder makes itself rather than links
OWN = ("nvcc", "nvcc.profile", "ptxas", SPLIT_MARKER)
_PATH_LINE = re.compile(r"^\s*PATH\s*[+=]")


def split_profile(text: str, home: Path) -> str:
    """``nvcc.profile`` for a copy of nvcc in another folder: ``$(_HERE_)`` means the
    original folder ``home`` everywhere but in ``PATH``, which must search the copy's
    folder (its ptxas) first."""
    lines = text.splitlines(keepends=True)
    return "".join(
        line if _PATH_LINE.match(line) else line.replace("$(_HERE_)", str(home)) for line in lines
    )


def _digest(real_nvcc: Path, profile: str, ptxas: Path) -> str:
    """What names the folder: the nvcc binary (path and file identity: an upgrade in place
    gets a new folder), its profile and the ptxas path."""
    stat = real_nvcc.stat()
    return sha256_hex(
        canonical_json(
            {
                "nvcc": str(real_nvcc),
                "nvcc_file": [stat.st_size, stat.st_mtime_ns, stat.st_ino],
                "profile": profile,
                "ptxas": str(ptxas),
            }
        )
    )[:16]


def _check_ptxas(ptxas: Path) -> None:
    problem = program_problem(ptxas)
    if problem is not None:
        raise ToolchainError(f"ptxas {ptxas}: {problem}; give the path of a ptxas")


def _first_ptxas_folder(nvcc: Path) -> Path | None:
    """The folder whose ptxas the nvcc at ``nvcc`` would run (the first on its PATH)."""
    search = dryrun_value(dryrun(str(nvcc)), "PATH") or ""
    for folder in search.split(os.pathsep):
        if folder and (Path(folder) / "ptxas").exists():
            return Path(folder).resolve()
    return None


def _make(scratch: Path, home: Path, profile: str, ptxas: Path) -> None:
    """The folder's content, in ``scratch``; checked to run the given ptxas."""
    bin_dir = scratch / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy2(home / "nvcc", bin_dir / "nvcc")
    (bin_dir / "nvcc.profile").write_text(split_profile(profile, home))
    for entry in sorted(home.iterdir()):
        if entry.name not in OWN:
            (bin_dir / entry.name).symlink_to(entry)
    (bin_dir / "ptxas").symlink_to(ptxas)
    runs = _first_ptxas_folder(bin_dir / "nvcc")
    if runs != bin_dir.resolve():
        raise ToolchainError(
            f"cannot split the toolchain of {home / 'nvcc'}: with its nvcc.profile, nvcc "
            f"would run the ptxas in {runs or 'no folder'}, not the given one"
        )
    marker = {"nvcc": str(home / "nvcc"), "cuda_bin": str(home), "ptxas": str(ptxas)}
    (bin_dir / SPLIT_MARKER).write_text(json.dumps(marker, indent=2) + "\n")


def split_toolchain(nvcc: str, ptxas: Path, root: Path) -> Path:
    """The nvcc of the split toolchain of ``nvcc`` (a name on PATH or a path) with
    ``ptxas``, made under ``root`` if it is not there yet: atomically (a whole folder
    renamed into place), so concurrent commands share one and a crash leaves none half
    made."""
    ptxas = Path(os.path.abspath(ptxas))
    _check_ptxas(ptxas)
    home = nvcc_home(find_nvcc(nvcc))
    real = home / "nvcc"
    profile_path = home / "nvcc.profile"
    if not real.is_file() or not profile_path.is_file():
        raise ToolchainError(
            f"cannot split the toolchain of {nvcc}: {home} has no nvcc binary and "
            "nvcc.profile (a CUDA installation's bin folder has both)"
        )
    profile = read_text_capped(profile_path, MAX_PROFILE_BYTES, "nvcc profile")
    folder = root / _digest(real, profile, ptxas)
    made = folder / "bin" / "nvcc"
    if (folder / "bin" / SPLIT_MARKER).is_file():
        return made
    root.mkdir(parents=True, exist_ok=True)
    scratch = root / f".{folder.name}.{os.getpid()}.{threading.get_ident()}"
    try:
        _make(scratch, home, profile, ptxas)
        with contextlib.suppress(FileExistsError, OSError):
            scratch.rename(folder)  # another process may have made it first: keep theirs
    except OSError as exc:
        raise ToolchainError(f"cannot make the split toolchain in {root}: {exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not (folder / "bin" / SPLIT_MARKER).is_file():
        raise ToolchainError(f"cannot make the split toolchain in {folder}")
    return made
