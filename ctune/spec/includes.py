"""The include_dirs tokens a spec may name instead of a path (``@cutlass``), and where each
resolves: folders of the nvidia-cutlass wheel when it is installed. The compiler also labels
the closure files found under a token with it (``ctune.compile.deps``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


def _cutlass_source_dir(sub: str, marker: str) -> Path | None:
    try:
        import cutlass_library
    except ImportError:
        return None
    path = Path(cutlass_library.__file__).parent / "source" / sub
    return path if (path / marker).is_dir() else None


@lru_cache(maxsize=1)
def cutlass_include_dir() -> Path | None:
    """The CUTLASS/CuTe headers shipped in the nvidia-cutlass wheel, if installed."""
    return _cutlass_source_dir("include", "cutlass")


@lru_cache(maxsize=1)
def cutlass_examples_dir() -> Path | None:
    """The wheel's examples folder: the Hopper FMHA collectives ship there, not in include/."""
    return _cutlass_source_dir("examples", "88_hopper_fmha")


#: include_dirs tokens a spec may name instead of a path, and where each resolves; a
#: token is also the closure label of the files found under it
INCLUDE_TOKENS = {"@cutlass": cutlass_include_dir, "@cutlass_examples": cutlass_examples_dir}


def include_token_dir(token: str) -> Path | None:
    """Where an include_dirs token points (None: the wheel is missing or lacks that folder)."""
    return INCLUDE_TOKENS[token]()


__all__ = ["INCLUDE_TOKENS", "cutlass_examples_dir", "cutlass_include_dir", "include_token_dir"]
