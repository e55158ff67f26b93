"""A search's journal kept beside its artifact: ``<kernel>/<problem>/<device-class>.jsonl.gz``.

An artifact holds the winners; its search's journal holds every trial, the slow and the
failed ones too, which is what the cost model needs to bound what loses. Kept in the
registry beside the artifact (gzip, committed with it, pushed and pulled with it), it lets
a search on another machine or GPU learn from it (docs/cost-model.md, "Warm starts").

The copy beside an artifact is always that artifact's journal: the sha256 of its
uncompressed bytes is the artifact's ``provenance.journal_sha256``. The rule lives here,
beside the journal it copies, because the search reads the copies and the registry writes
them (the search never imports the registry).
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path, PurePosixPath
from typing import TypeVar

from ctune.errors import UserError

#: the copy's name: the artifact file's, with this suffix for ``.json``
SUFFIX = ".jsonl.gz"
#: the largest copy kept: some 50 times a search of 280 trials (16 evaluations and their
#: fillers, about 320 KiB packed)
MAX_COPY_BYTES = 16 << 20


P = TypeVar("P", Path, PurePosixPath)


def copy_path(artifact_path: P) -> P:
    """Where the journal of the artifact file ``artifact_path`` is kept."""
    return artifact_path.with_name(artifact_path.name.removesuffix(".json") + SUFFIX)


def artifact_path(copy: P) -> P:
    """The artifact file a copy at ``copy`` is the journal of (:func:`copy_path` undone)."""
    return copy.with_name(copy.name.removesuffix(SUFFIX) + ".json")


def is_copy(path: Path | PurePosixPath) -> bool:
    """Named as a journal copy (the reader unpacks it; it is never resumed)."""
    return path.name.endswith(SUFFIX)


def pack(journal: bytes) -> bytes:
    """The copy of a journal's bytes: gzip with no name and no time in its header, so the
    same journal always packs to the same bytes (one blob in git, however often written)."""
    return gzip.compress(journal, compresslevel=9, mtime=0)


def unpack(data: bytes, where: str, limit: int) -> bytes:
    """A copy's journal bytes; one clear error for anything that is not a whole gzip
    stream of at most ``limit`` bytes (a truncated copy, a gzip bomb)."""
    inflate = zlib.decompressobj(wbits=31)  # gzip header and trailer
    try:
        out = inflate.decompress(data, limit + 1)
        whole = inflate.eof and not inflate.unconsumed_tail
    except zlib.error as exc:
        raise UserError(f"{where}: not a gzip journal copy ({exc})") from None
    if len(out) > limit:
        raise UserError(f"{where}: unpacks to more than the {limit}-byte limit")
    if not whole:
        raise UserError(f"{where}: a truncated gzip journal copy")
    return out


def registry_copies(registry: Path, kernel: str | None = None) -> list[Path]:
    """The journal copies the registry at ``registry`` keeps for ``kernel``'s artifacts
    (None: every kernel's)."""
    folder = Path(registry) / kernel if kernel is not None else Path(registry)
    if not folder.is_dir():
        return []
    pattern = f"*/*{SUFFIX}" if kernel is not None else f"*/*/*{SUFFIX}"
    return sorted(p for p in folder.glob(pattern) if p.is_file())


__all__ = [
    "MAX_COPY_BYTES",
    "SUFFIX",
    "artifact_path",
    "copy_path",
    "is_copy",
    "pack",
    "registry_copies",
    "unpack",
]
