"""Each artifact's search journal, kept beside it in the registry (``search/journal_copy.py``).

A publish takes the journal its result names (``provenance.journal_sha256``) where it can
find it and commits the copy with the artifact; an artifact written without its journal
drops a copy that is no longer its own, so a copy beside an artifact is always that
artifact's journal. ``registry verify`` checks it. The copies let a search elsewhere (a new
machine, a new GPU) learn from every trial the registry's searches measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ctune.errors import RegistryError, UserError
from ctune.files import InputFileError
from ctune.records import sha256_hex
from ctune.registry.layout import ArtifactKey, contained_path
from ctune.registry.schema import Artifact
from ctune.search import journal as journal_mod
from ctune.search.journal_copy import MAX_COPY_BYTES, copy_path, pack, unpack


def journal_sha256(artifact: Artifact) -> str | None:
    """The sha256 of the journal that made ``artifact`` (None: its result named none)."""
    value = artifact.provenance.get("journal_sha256")
    return value if isinstance(value, str) and value else None


def relpath(key: ArtifactKey) -> PurePosixPath:
    """Where the registry keeps ``key``'s journal, from the registry's root."""
    return copy_path(key.artifact.relpath())


@dataclass(frozen=True, slots=True)
class Found:
    """An artifact's journal as a publish takes it: the copy's bytes, or why there is none."""

    data: bytes | None
    note: str


def find(artifact: Artifact, places: Iterable[Path], *, strict: bool = False) -> Found:
    """The journal of ``artifact`` among ``places`` (journal files or copies, the first
    that is it), packed; a missing or other journal is a note, never an error: the
    artifact publishes without it. ``strict`` (a file a user named, ``registry journal
    KEY FILE``): one that cannot be read is its own error (no such file, damaged)."""
    want = journal_sha256(artifact)
    if want is None:
        return Found(None, "its result names no journal")
    looked: list[str] = []
    for path in places:
        if not strict and not path.is_file():
            continue
        looked.append(str(path))
        try:
            journal = journal_mod.read_bytes(path)
        except (UserError, OSError):
            if strict:
                raise
            continue
        if sha256_hex(journal) != want:
            continue
        packed = pack(journal)
        if len(packed) > MAX_COPY_BYTES:
            return Found(None, f"{path} packs to more than {MAX_COPY_BYTES} bytes; not kept")
        return Found(packed, f"kept {path}")
    seen = f" ({', '.join(looked)} is another search's)" if looked else ""
    return Found(None, f"journal sha256 {want[:12]} not found{seen}")


def copy_sha256(root: Path, key: ArtifactKey) -> str | None:
    """The sha256 of the journal kept for ``key`` (None: none kept, or unreadable)."""
    path = contained_path(root, relpath(key))
    if not path.is_file():
        return None
    try:
        return sha256_hex(journal_mod.read_bytes(path))
    except (UserError, InputFileError, OSError):
        return None


@dataclass(frozen=True, slots=True)
class Copies:
    """What a write does to the journal copies: files to write, files to delete."""

    write: dict[str, bytes]
    delete: tuple[str, ...]


def copies_for(
    root: Path,
    written: Sequence[tuple[ArtifactKey, Artifact]],
    gone: Sequence[ArtifactKey],
    journals: Mapping[ArtifactKey, bytes],
) -> Copies:
    """The copies beside ``written`` artifacts after a write: ``journals``' (each checked
    against its artifact), else the one already there if it is still the artifact's, else
    none; those beside ``gone`` artifacts are deleted."""
    write: dict[str, bytes] = {}
    delete: list[str] = []
    for key, artifact in written:
        rel = relpath(key).as_posix()
        data = journals.get(key.artifact)
        if data is not None:
            got = sha256_hex(unpack(data, rel, journal_mod.MAX_JOURNAL_BYTES))
            if got != journal_sha256(artifact):
                raise RegistryError(f"{key}: the journal given is not the one its search wrote")
            write[rel] = data
        elif contained_path(root, PurePosixPath(rel)).exists() and copy_sha256(
            root, key
        ) != journal_sha256(artifact):
            delete.append(rel)
    for key in gone:
        rel = relpath(key).as_posix()
        if rel not in write and contained_path(root, PurePosixPath(rel)).exists():
            delete.append(rel)
    return Copies(write, tuple(dict.fromkeys(delete)))


def problem(root: Path, key: ArtifactKey, artifact: Artifact) -> str | None:
    """What ``registry verify`` says of the copy beside ``key`` (None: none, or it is the
    artifact's journal)."""
    path = contained_path(root, relpath(key))
    if not path.exists():
        return None
    got = copy_sha256(root, key)
    if got is None:
        return f"{key}: journal copy {relpath(key)} cannot be read (a damaged gzip)"
    if got != journal_sha256(artifact):
        return (
            f"{key}: journal copy {relpath(key)} is not the journal the artifact names "
            "(provenance.journal_sha256); `ctune registry journal KEY FILE` replaces it"
        )
    return None


__all__ = [
    "Copies",
    "Found",
    "copies_for",
    "copy_sha256",
    "find",
    "journal_sha256",
    "problem",
    "relpath",
]
