"""A kernel's input closure: the .cu plus every header it really includes.

The digest covers the bytes of the source and of every header that
``nvcc -M`` lists outside the CUDA toolkit (CUTLASS headers included, since
they are part of the kernel), so an edited header makes an artifact stale and
a cached build miss. Toolkit headers are covered by the toolchain version.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ctune.errors import UserError
from ctune.records import GeneValue

if TYPE_CHECKING:
    from ctune.kernelspec import KernelSpec


@lru_cache(maxsize=1)
def cutlass_include_dir() -> Path | None:
    """The CUTLASS/CuTe headers shipped in the nvidia-cutlass wheel, if installed."""
    try:
        import cutlass_library
    except ImportError:
        return None
    path = Path(cutlass_library.__file__).parent / "source" / "include"
    return path if (path / "cutlass").is_dir() else None


def cutlass_version() -> str:
    try:
        from importlib.metadata import version

        return version("nvidia-cutlass")
    except Exception:
        return "not installed"


def _parse_make_deps(text: str) -> list[str]:
    body = text.replace("\\\n", " ").split(":", 1)[-1]
    return [tok for tok in body.split() if tok]


def include_closure(
    nvcc: str,
    source: Path,
    include_dirs: Sequence[Path],
    defines: Mapping[str, GeneValue],
    std: str,
    arch: str,
) -> list[Path]:
    """Files the translation unit reads, from ``nvcc -M`` (toolkit headers excluded)."""
    argv = [nvcc, "-M", f"-std={std}", f"-arch={arch}", *(f"-I{d}" for d in include_dirs)]
    argv += [f"-D{k}={int(v) if isinstance(v, bool) else v}" for k, v in sorted(defines.items())]
    argv.append(str(source))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{source}: nvcc -M failed: {exc}") from None
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise UserError(f"{source}: does not preprocess: {' | '.join(tail)}")
    # the toolkit is where the nvcc on PATH lives; resolving a bare "nvcc" against the
    # working directory would drop every header below the directory above it
    toolkit = Path(shutil.which(nvcc) or nvcc).resolve().parent.parent
    files = []
    for token in _parse_make_deps(done.stdout):
        path = Path(token).resolve()
        if path.is_relative_to(toolkit) or str(path).startswith("/usr/"):
            continue  # covered by the toolchain / host-compiler fingerprint
        files.append(path)
    if source.resolve() not in files:
        files.insert(0, source.resolve())
    return sorted(set(files))


def digest_files(files: Sequence[Path], root: Path | None = None) -> str:
    """sha256 over (name, bytes) pairs; names relative to root keep it path-independent."""
    h = hashlib.sha256()
    for path in sorted(files):
        name = path.name
        if root is not None and path.is_relative_to(root):
            name = str(path.relative_to(root))
        elif "include" in path.parts:  # third-party headers: keep the path below include/
            parts = path.parts
            name = "/".join(parts[len(parts) - parts[::-1].index("include") :])
        h.update(name.encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@lru_cache(maxsize=64)
def _closure_digest(
    nvcc: str,
    source: Path,
    include_dirs: tuple[Path, ...],
    defines: tuple[tuple[str, GeneValue], ...],
    std: str,
    arch: str,
    stamp: tuple[float, int],
) -> str:
    files = include_closure(nvcc, source, include_dirs, dict(defines), std, arch)
    return digest_files(files, root=source.parent)


def source_closure_sha256(
    spec: KernelSpec, nvcc: str = "nvcc", defines: Mapping[str, GeneValue] | None = None
) -> str:
    """Digest of the kernel's source and include closure (default-build defines)."""
    stat = spec.source_path.stat()
    if defines is None:
        defines = {g.name: g.default for g in spec.genes if g.compiled}
    return _closure_digest(
        nvcc,
        spec.source_path,
        spec.include_dirs,
        tuple(sorted(defines.items())),
        spec.std,
        spec.arch,
        (stat.st_mtime, stat.st_size),
    )
