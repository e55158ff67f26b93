"""A kernel's input closure: the .cu plus every header it really includes.

The closure is ``{label: sha256 of the file's bytes}`` for the source and every
header that ``nvcc -M`` lists outside the CUDA toolkit (CUTLASS headers
included, since they are part of the kernel). A label is the file's path
relative to the root it was found under: the kernel's folder (``gemm.cu``),
the CUTLASS headers (``@cutlass/cute/tensor.hpp``), the wheel's examples
(``@cutlass_examples/88_hopper_fmha/...``) or another include folder
of the spec (its path relative to the spec's folder). Labels, not absolute
paths, make the digest the same wherever the checkout or the virtual
environment lives, and let ``ctune check`` name a changed file. Toolkit
headers are covered by the toolchain version.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ctune.compile.command import default_defines
from ctune.compile.process import run_nvcc
from ctune.errors import ToolchainError, UserError
from ctune.files import MAX_SOURCE_BYTES, open_regular, read_capped
from ctune.quoting import define_flag
from ctune.records import GeneValue
from ctune.spec.flags import language_flags
from ctune.spec.includes import INCLUDE_TOKENS
from ctune.writes import is_disk_full

if TYPE_CHECKING:
    from ctune.spec import KernelSpec

#: how long ``nvcc -M`` may take (it preprocesses once; a CUTLASS kernel takes seconds)
DEPS_TIMEOUT_S = 120.0


def uses_cutlass(include_dirs: Sequence[Path]) -> bool:
    """Whether a spec compiles against the wheel (its version then belongs to the identity)."""
    found = {resolve() for resolve in INCLUDE_TOKENS.values()} - {None}
    return any(d in found for d in include_dirs)


def cutlass_version() -> str:
    try:
        from importlib.metadata import version

        return version("nvidia-cutlass")
    except Exception:
        return "not installed"


def parse_make_deps(text: str, source: Path) -> list[str]:
    """The files ``nvcc -M`` lists for ``source``, as the paths it writes them.

    nvcc writes ``NAME.o : SOURCE`` and then one file a line, each line but the last ending
    in `` \\``; in a name it escapes only a space (``\\ ``): ``#``, ``$``, ``:``, ``;``,
    ``'`` and tabs are written as they are. So a line is split at unescaped spaces only
    (a make-style list of several files on a line is read too), and the target is cut by
    its known name, not at a ``:`` that a folder name may hold. A ``"`` it cannot write:
    the name ends there, in a ``\\`` (:func:`_truncated_at_quote`).
    """
    files = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if number == 0:
            target = f"{source.stem}.o :"
            line = line[len(target) :] if line.startswith(target) else line.partition(":")[2]
        if number < len(lines) - 1 and line.endswith(" \\"):
            line = line[:-2]
        files += [tok.replace("\\ ", " ") for tok in _TOKEN.findall(line)]
    return files


#: one file of a dependency line: anything but a space, or an escaped space
_TOKEN = re.compile(r"(?:\\ |[^ ])+")


def _truncated_at_quote(token: str, known: Mapping[str, Path]) -> list[Path]:
    """The files a name nvcc cut at a ``"`` may be: ``dir/a"b/x.h`` is listed as
    ``dir/a\\`` (``\\"`` in the preprocessor's line marker, cut at its quote). Which of the
    files found by :func:`scan_includes` starting that way it was cannot be told, so all of
    them are taken: a closure that holds a file too many is safe, one too few is not."""
    if not token.endswith("\\"):
        return []
    prefix = os.path.abspath(token[:-1]) + '"'
    return [path for shown, path in known.items() if shown.startswith(prefix)]


#: an ``#include`` line: ``"file"`` (searched beside the including file first) or ``<file>``
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)', re.MULTILINE)
#: the most files :func:`scan_includes` reads (a runaway tree is nvcc's to time out)
_MAX_SCANNED = 2000


def _findable(path: Path) -> bool:
    """Whether the preprocessor's search stops at ``path`` (a folder of that name it skips)."""
    return path.exists() and not path.is_dir()


def scan_includes(source: Path, include_dirs: Sequence[Path]) -> dict[str, Path]:
    """The files the kernel's ``#include`` lines name, checked before nvcc runs: one that is
    not a regular file is refused by the one rule for input files (``ctune/files.py``), as a
    FIFO would block the preprocessor (and ``nvcc -M``) until a writer comes.

    The lines are followed through the headers found in the kernel's folder and in the
    spec's own include folders; the CUTLASS wheel's and the system's headers are checked,
    not read (trusted code, docs/security.md). ``#if`` is not evaluated: a file found here
    may not be in the build. Returns ``{absolute path as found: resolved path}``, the
    source included.
    """
    tokens = {found.resolve() for resolve in INCLUDE_TOKENS.values() if (found := resolve())}
    own = [source.parent.resolve()] + [
        d.resolve() for d in include_dirs if d.resolve() not in tokens
    ]
    known = {os.path.abspath(source): source.resolve()}
    todo = [source]
    while todo and len(known) <= _MAX_SCANNED:
        current = todo.pop()
        what = "source file" if current is source else "header"
        text = read_capped(current, MAX_SOURCE_BYTES, what)
        for quoted, angled in _INCLUDE.findall(text):
            name = os.fsdecode(quoted or angled)
            folders = ([current.parent] if quoted else []) + list(include_dirs)
            found = next((f / name for f in folders if _findable(f / name)), None)
            if found is None or os.path.abspath(found) in known:
                continue  # a toolkit or system header, or one nvcc will say is missing
            resolved = found.resolve()
            known[os.path.abspath(found)] = resolved
            if any(resolved.is_relative_to(folder) for folder in own):
                todo.append(found)  # read (by the same rule) when its turn comes
            else:
                os.close(open_regular(found, MAX_SOURCE_BYTES, "header"))  # checked, not read
    return known


def include_closure(
    nvcc: str,
    source: Path,
    include_dirs: Sequence[Path],
    defines: Mapping[str, GeneValue],
    std: str,
    arch: str,
    *,
    scratch: Path | None = None,
    timeout_s: float = DEPS_TIMEOUT_S,
) -> list[Path]:
    """Files the translation unit reads, from ``nvcc -M`` (toolkit headers excluded).

    ``scratch``: where nvcc's private temporary folder is made (ctune's cache; None: the
    system's temporary folder, ``compile/process.py``)."""
    known = scan_includes(source, include_dirs)
    argv = [nvcc, "-M", f"-std={std}", f"-arch={arch}", *(f"-I{d}" for d in include_dirs)]
    argv += [define_flag(k, v) for k, v in sorted(defines.items())]
    argv += [*language_flags(source), str(source)]
    try:
        done = run_nvcc(argv, what=f"{source}: nvcc -M", timeout_s=timeout_s, scratch=scratch)
    except OSError as exc:  # nvcc could not be started (its temporary folder: run_nvcc's)
        if is_disk_full(exc):
            raise  # exit 3 naming the file, as every full disk (ctune.cli.main)
        raise ToolchainError(
            f"{nvcc}: could not run nvcc -M for {source.name} ({exc.strerror or exc}); "
            "check the toolchain (`ctune doctor`)"
        ) from None
    if done.timed_out:
        raise UserError(
            f"{source}: nvcc -M did not finish in {timeout_s:g} s; check the files it includes"
        )
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise UserError(f"{source}: does not preprocess: {' | '.join(tail)}")
    # the toolkit is where the nvcc on PATH lives; resolving a bare "nvcc" against the
    # working directory would drop every header below the directory above it
    toolkit = Path(shutil.which(nvcc) or nvcc).resolve().parent.parent
    files = {source.resolve()}
    # paths are bytes to the OS: decoded as the file system does (a folder name that is
    # not UTF-8 survives as surrogates and names the same file again)
    for token in parse_make_deps(os.fsdecode(done.stdout), source):
        path = Path(token).resolve()
        if path.is_relative_to(toolkit) or str(path).startswith("/usr/"):
            continue  # covered by the toolchain / host-compiler fingerprint
        if path.exists():
            files.add(path)
            continue
        meant = _truncated_at_quote(token, known)
        if not meant:
            raise UserError(
                f"{source}: nvcc -M lists {token!r}, which does not exist (nvcc cannot list "
                "a name holding '\"' or '\\' that the kernel's own #include lines do not "
                "name); rename the folder or file"
            )
        files.update(meant)
    return sorted(files)


def closure_label(path: Path, roots: Sequence[tuple[str, Path]]) -> str:
    """``path`` relative to the innermost root that holds it, prefixed with that root's name.

    A file under no root keeps its path below the last ``include`` folder (a
    third-party header found through the host compiler), else its absolute path.
    """
    best: tuple[int, str] | None = None
    for name, root in roots:
        if path.is_relative_to(root):
            depth = len(root.parts)
            if best is None or depth > best[0]:
                relative = path.relative_to(root).as_posix()
                best = (depth, f"{name}/{relative}" if name else relative)
    if best is not None:
        return best[1]
    parts = path.parts
    if "include" in parts:
        return "/".join(parts[len(parts) - parts[::-1].index("include") :])
    return path.as_posix()


def closure_roots(spec: KernelSpec) -> list[tuple[str, Path]]:
    """The named roots a spec's files are labelled by: its folder, CUTLASS, its -I folders."""
    folder = spec.source_path.parent.resolve()
    roots: list[tuple[str, Path]] = [("", folder)]
    tokens = {
        found.resolve(): token
        for token, resolve in INCLUDE_TOKENS.items()
        if (found := resolve()) is not None
    }
    for include in spec.include_dirs:
        resolved = Path(include).resolve()
        if resolved in tokens:
            roots.append((tokens[resolved], resolved))
        elif not resolved.is_relative_to(folder):
            base = spec.yaml_path.parent.resolve()
            name = (
                resolved.relative_to(base).as_posix()
                if resolved.is_relative_to(base)
                else resolved.as_posix()
            )
            roots.append((f"@{name}", resolved))
    return roots


def file_sha256(path: Path) -> str:
    """The digest of one closure file, read by the one rule for input files."""
    return hashlib.sha256(read_capped(path, MAX_SOURCE_BYTES, "source file")).hexdigest()


def closure_sha256(closure: Mapping[str, str]) -> str:
    """One digest over ``{label: file digest}`` (sorted by label, so path-independent)."""
    h = hashlib.sha256()
    for label, digest in sorted(closure.items()):
        h.update(label.encode() + b"\0" + digest.encode() + b"\0")
    return h.hexdigest()


#: what identifies a closure: nvcc, source, include folders, defines, std, arch, roots, and
#: the source's (mtime, size); not where nvcc's temporary folder goes
ClosureKey = tuple[
    str,
    Path,
    tuple[Path, ...],
    tuple[tuple[str, GeneValue], ...],
    str,
    str,
    tuple[tuple[str, Path], ...],
    tuple[float, int],
]
_CLOSURES: dict[ClosureKey, tuple[tuple[str, str], ...]] = {}
_CLOSURE_LOCKS: dict[ClosureKey, threading.Lock] = {}
_CLOSURES_LOCK = threading.Lock()
_MAX_CLOSURES = 64


def _closure(key: ClosureKey, scratch: Path | None) -> tuple[tuple[str, str], ...]:
    """The closure of ``key``, computed once per process: a search asks for the same one from
    three threads at its start (the fingerprint, the first build's key, the artifact's
    inputs), and a CUTLASS kernel's takes seconds (``nvcc -M``, ~500 headers hashed)."""
    with _CLOSURES_LOCK:
        lock = _CLOSURE_LOCKS.setdefault(key, threading.Lock())
    with lock:  # the first caller computes; the others wait for its answer
        if key not in _CLOSURES:
            nvcc, source, include_dirs, defines, std, arch, roots, _ = key
            files = include_closure(
                nvcc, source, include_dirs, dict(defines), std, arch, scratch=scratch
            )
            found = tuple(sorted((closure_label(f, roots), file_sha256(f)) for f in files))
            with _CLOSURES_LOCK:
                if len(_CLOSURES) >= _MAX_CLOSURES:
                    oldest = next(iter(_CLOSURES))
                    _CLOSURES.pop(oldest)
                    _CLOSURE_LOCKS.pop(oldest, None)
                _CLOSURES[key] = found
        return _CLOSURES[key]


def forget_closures() -> None:
    """Forget every closure computed in this process (as a new process would start)."""
    with _CLOSURES_LOCK:
        _CLOSURES.clear()
        _CLOSURE_LOCKS.clear()


def source_closure(
    spec: KernelSpec,
    nvcc: str = "nvcc",
    defines: Mapping[str, GeneValue] | None = None,
    *,
    arch: str = "",
    scratch: Path | None = None,
) -> dict[str, str]:
    """The kernel's source and include closure as ``{label: sha256}`` (default-build defines).

    ``arch`` is the arch the builds are for (``--arch``, ``CTUNE_ARCH`` or ``[tool.ctune]``;
    the spec's when empty): headers behind ``__CUDA_ARCH__`` belong to one arch's closure and
    not another's, so a closure taken for the spec's arch would miss an edit that matters.
    ``scratch``: where ``nvcc -M`` gets its temporary folder (:func:`include_closure`)."""
    stat = spec.source_path.stat()
    if defines is None:
        defines = default_defines(spec.genes)
    key: ClosureKey = (
        nvcc,
        spec.source_path,
        spec.include_dirs,
        tuple(sorted(defines.items())),
        spec.std,
        arch or spec.arch,
        tuple(closure_roots(spec)),
        (stat.st_mtime, stat.st_size),
    )
    return dict(_closure(key, scratch))


def source_closure_sha256(
    spec: KernelSpec,
    nvcc: str = "nvcc",
    defines: Mapping[str, GeneValue] | None = None,
    *,
    arch: str = "",
    scratch: Path | None = None,
) -> str:
    """Digest of :func:`source_closure`: what the build cache keys a build's sources by."""
    return closure_sha256(source_closure(spec, nvcc, defines, arch=arch, scratch=scratch))
