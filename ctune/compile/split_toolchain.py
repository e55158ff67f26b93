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
import errno
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from ctune.compile.toolchain import (
    SPLIT_MARKER,
    dryrun,
    dryrun_value,
    find_nvcc,
    nvcc_home,
    probe_run,
    release,
    version_in,
)
from ctune.errors import ToolchainError, UserError
from ctune.files import program_problem, read_text_capped
from ctune.records import canonical_json, sha256_hex
from ctune.writes import is_disk_full

log = logging.getLogger(__name__)

#: an nvcc.profile larger than this is not one
MAX_PROFILE_BYTES = 64 * 1024
#: entries of nvcc's folder the split folder makes itself rather than links
OWN = ("nvcc", "nvcc.profile", "ptxas", SPLIT_MARKER)
_PATH_LINE = re.compile(r"^\s*PATH\s*[+=]")
#: the lock under the toolchains folder held while a split folder is made or remade
LOCK_NAME = ".lock"
LOCK_TIMEOUT_S = 300


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


def _marker(home: Path, ptxas: Path) -> dict[str, str]:
    """What the marker of the split folder of nvcc in ``home`` with ``ptxas`` records."""
    return {"nvcc": str(home / "nvcc"), "cuda_bin": str(home), "ptxas": str(ptxas)}


def _links(home: Path, ptxas: Path) -> dict[str, Path]:
    """The split folder's links and where each points: ``ptxas`` to the given one, every
    other entry of nvcc's folder but those the folder makes itself to the original."""
    links = {entry.name: entry for entry in sorted(home.iterdir()) if entry.name not in OWN}
    return {**links, "ptxas": ptxas}


def _make(scratch: Path, home: Path, profile: str, ptxas: Path) -> None:
    """The folder's content, in ``scratch``; checked to run the given ptxas."""
    bin_dir = scratch / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy2(home / "nvcc", bin_dir / "nvcc")
    (bin_dir / "nvcc.profile").write_text(split_profile(profile, home))
    for name, target in _links(home, ptxas).items():
        (bin_dir / name).symlink_to(target)
    runs = _first_ptxas_folder(bin_dir / "nvcc")
    if runs != bin_dir.resolve():
        raise ToolchainError(
            f"cannot split the toolchain of {home / 'nvcc'}: with its nvcc.profile, nvcc "
            f"would run the ptxas in {runs or 'no folder'}, not the given one"
        )
    (bin_dir / SPLIT_MARKER).write_text(json.dumps(_marker(home, ptxas), indent=2) + "\n")


def _damage(bin_dir: Path, home: Path, profile: str, ptxas: Path) -> str | None:
    """What in the split folder ``bin_dir`` is not as :func:`_make` made it (its marker,
    the nvcc copy, the profile, each link and its target), or None: a folder whose ptxas
    link was lost would have nvcc run the first ptxas on PATH instead, silently."""
    try:
        if json.loads((bin_dir / SPLIT_MARKER).read_text()) != _marker(home, ptxas):
            return f"its {SPLIT_MARKER} records another toolchain"
        copy = bin_dir / "nvcc"
        if copy.is_symlink() or copy.stat().st_size != (home / "nvcc").stat().st_size:
            return "its nvcc is not a copy of the original"
        if not os.access(copy, os.X_OK):
            return "its nvcc is not executable"
        if (bin_dir / "nvcc.profile").read_text() != split_profile(profile, home):
            return "its nvcc.profile is not the one made for it"
        for name, target in _links(home, ptxas).items():
            link = bin_dir / name
            if not link.is_symlink() or os.readlink(link) != str(target):
                return f"its {name} is not a link to {target}"
    except FileNotFoundError as exc:
        return f"{Path(str(exc.filename)).name} is missing"
    except OSError as exc:
        return f"{exc.filename}: {exc.strerror or exc}"
    except ValueError:
        return f"its {SPLIT_MARKER} is not readable"
    return None


def _version(program: Path) -> tuple[int, ...] | None:
    """(major, minor) of the CUDA release ``program --version`` names (the toolchain's own
    probe: once per process, bounded); None if it names none (the toolchain probe then says
    what is wrong with it)."""
    done = probe_run((str(program), "--version"))
    found = None if done.failure else version_in(done.stdout)
    parsed = release(found) if found else None
    return parsed[:2] if parsed else None


def _check_order(nvcc: Path, ptxas: Path) -> None:
    """Refuse a ptxas of an older CUDA release than the nvcc (one line, exit 2): it cannot
    read that nvcc's PTX, so every build would fail ("Ptx assembly aborted"). The split
    goes from an older nvcc to a newer ptxas (docs/advanced-controls.md)."""
    old, new = _version(ptxas), _version(nvcc)
    if old is None or new is None or old >= new:
        return
    have, need = ".".join(map(str, old)), ".".join(map(str, new))
    raise UserError(
        f"ptxas {ptxas}: release {have}, older than nvcc {need} ({nvcc}), whose PTX it "
        f"cannot read; give a ptxas {need} or later, or choose an nvcc {have} or older"
    )


def _unmade(root: Path, exc: OSError) -> ToolchainError:
    """One line for a split folder that cannot be made under ``root`` (exit 3), with what
    to do: a read-only or not-writable cache folder, a full disk, else the path."""
    if is_disk_full(exc):
        fix = "free space and run again"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        fix = (
            f"make the cache folder {root.parent} writable, or set CTUNE_CACHE_DIR "
            "(or [tool.ctune] cache_dir) to a folder that is"
        )
    else:
        fix = f"check {exc.filename or root}"
    return ToolchainError(
        f"cannot make the split toolchain in {root}: {exc.strerror or exc}; {fix}"
    )


def _replace(folder: Path, home: Path, profile: str, ptxas: Path) -> None:
    """Make the folder whole in a scratch folder, then rename it into place; a damaged one
    there is moved aside first and removed. The caller holds the lock."""
    scratch = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}")
    aside = scratch.with_name(f"{scratch.name}.damaged")
    try:
        _make(scratch, home, profile, ptxas)
        if folder.exists() or folder.is_symlink():
            folder.rename(aside)
        scratch.rename(folder)
    finally:
        for left in (scratch, aside):
            shutil.rmtree(left, ignore_errors=True)
            with contextlib.suppress(OSError):
                left.unlink()  # a file or a link where a folder was


def _remake(folder: Path, home: Path, profile: str, ptxas: Path) -> None:
    """Under the lock: make the folder, or remake a damaged one, unless another command
    has meanwhile (checked again here: it may have while this one waited)."""
    damage = _damage(folder / "bin", home, profile, ptxas)
    if damage is None:
        return
    if folder.exists() or folder.is_symlink():
        log.warning("remaking the split toolchain in %s: %s", folder, damage)
    _replace(folder, home, profile, ptxas)


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold ``root``'s lock (``LOCK_NAME``): one command makes a folder at a time."""
    lock = FileLock(root / LOCK_NAME, timeout=LOCK_TIMEOUT_S, mode=0o644)
    try:
        lock.acquire(poll_interval=0.05)
    except Timeout:
        raise ToolchainError(
            f"another command has held {root / LOCK_NAME} for {LOCK_TIMEOUT_S} s while "
            "making a split toolchain; run again when it finishes"
        ) from None
    try:
        yield
    finally:
        lock.release()


def split_toolchain(nvcc: str, ptxas: Path, root: Path) -> Path:
    """The nvcc of the split toolchain of ``nvcc`` (a name on PATH or a path) with
    ``ptxas``, made under ``root`` if it is not there yet, or remade if it is not as made
    (a lost link, a removed marker): under a lock, atomically (a whole folder renamed into
    place), so concurrent commands share one and a crash leaves none half made."""
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
    _check_order(real, ptxas)
    profile = read_text_capped(profile_path, MAX_PROFILE_BYTES, "nvcc profile")
    folder = root / _digest(real, profile, ptxas)
    if _damage(folder / "bin", home, profile, ptxas) is not None:
        try:
            root.mkdir(parents=True, exist_ok=True)
            with _locked(root):
                _remake(folder, home, profile, ptxas)
        except OSError as exc:
            raise _unmade(root, exc) from None
    return folder / "bin" / "nvcc"
