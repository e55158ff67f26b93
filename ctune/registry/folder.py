"""The registry folder against a registry ref that is not checked out (``ctune registry pull``).

When the registry ref is the checked-out branch, git keeps the folder and the ref together
(``read-tree -m -u``). In the CI set-up the ref is another branch, and ``registry
list/show/check/gate`` read the folder, so ``pull`` writes the ref's artifact files into
it: only artifact and controls files and the journal copies beside artifacts, only where
nothing is lost, never deleting and never touching the index. The rules that make that
safe are in docs/registry.md ("Sharing").
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ctune.errors import RegistryError, UserError
from ctune.files import MAX_CONTROLS_BYTES
from ctune.registry import schema
from ctune.registry.controls import is_entry_name, write_files
from ctune.registry.git import GitRegistry, TreeEntry
from ctune.registry.layout import (
    CONTROLS_FOLDER,
    SUFFIX,
    ArtifactKey,
    contained_path,
    key_from_relpath,
)
from ctune.registry.store import ArtifactStore
from ctune.search.journal_copy import MAX_COPY_BYTES, artifact_path, is_copy

_FILE_MODES = ("100644", "100755")


@dataclass(frozen=True, slots=True)
class FolderDiff:
    """What the registry folder lacks of a ref's tip, and what only it has."""

    missing: tuple[tuple[ArtifactKey, TreeEntry], ...]  # absent, or older bytes git holds
    blocked: tuple[tuple[str, str], ...]  # (repo-relative path, why): in the way
    local_only: tuple[str, ...]  # repo-relative paths of artifact files the ref lacks
    skipped: tuple[str, ...]  # repo-relative *.json paths on the ref that are not artifacts
    #: controls files (and NOTICE) of the ref the folder lacks, or holds older bytes of
    controls: tuple[TreeEntry, ...] = ()
    #: the journal copies kept beside artifacts (``journals.py``), likewise
    journals: tuple[TreeEntry, ...] = ()


def compare(reg: GitRegistry, tip: str) -> FolderDiff:
    """The folder (``reg.root``) against the registry files at ``tip``; reads, never writes."""
    store = ArtifactStore(reg.root)
    on_ref: dict[PurePosixPath, tuple[ArtifactKey, TreeEntry]] = {}
    side_on_ref: dict[PurePosixPath, TreeEntry] = {}
    skipped: list[str] = []
    for entry in reg.ls_tree(tip, reg.prefix.as_posix() if reg.prefix.parts else ""):
        rel = PurePosixPath(entry.path).relative_to(reg.prefix)
        size = entry.size_bytes
        if rel.parts[:1] == (CONTROLS_FOLDER,):
            fits = entry.mode in _FILE_MODES and size is not None and size <= MAX_CONTROLS_BYTES
            if len(rel.parts) == 2 and is_entry_name(rel.name) and fits:
                side_on_ref[rel] = entry
            else:
                skipped.append(entry.path)
            continue
        if is_copy(rel):  # a journal kept beside an artifact: a side file, as controls are
            fits = entry.mode in _FILE_MODES and size is not None and size <= MAX_COPY_BYTES
            if fits and _beside_an_artifact(rel):
                side_on_ref[rel] = entry
            else:
                skipped.append(entry.path)
            continue
        if not entry.path.endswith(SUFFIX):
            continue  # READMEs and the like: not the registry's business
        try:
            key = key_from_relpath(rel)
        except UserError:
            skipped.append(entry.path)
            continue
        if entry.mode not in _FILE_MODES or size is None or size > schema.MAX_BYTES:
            skipped.append(entry.path)
            continue
        on_ref[rel] = (key, entry)

    places: list[tuple[PurePosixPath, TreeEntry, ArtifactKey | None]] = [
        (rel, entry, artifact) for rel, (artifact, entry) in on_ref.items()
    ]
    places += [(rel, entry, None) for rel, entry in side_on_ref.items()]
    missing: list[tuple[ArtifactKey, TreeEntry]] = []
    side: list[TreeEntry] = []  # controls files and journal copies
    blocked: list[tuple[str, str]] = []
    present: list[tuple[Path, TreeEntry, ArtifactKey | None]] = []
    for rel, entry, owner in places:
        try:
            path = contained_path(reg.root, rel)  # refuses a symlink on the way
            mode = os.lstat(path).st_mode
        except UserError:
            blocked.append((entry.path, "has a symlink on the way"))
            continue
        except FileNotFoundError:
            _add_missing(missing, side, entry, owner)
            continue
        if stat.S_ISLNK(mode):
            blocked.append((entry.path, "is a symlink"))
        elif not stat.S_ISREG(mode):
            blocked.append((entry.path, "is not a regular file"))
        else:
            present.append((path, entry, owner))

    hashes = reg.hash_files([p for p, _, _ in present])
    differ = [
        (h, entry, owner)
        for h, (_, entry, owner) in zip(hashes, present, strict=True)
        if h != entry.sha
    ]
    known = reg.known_objects([h for h, _, _ in differ])
    for h, entry, owner in differ:
        if h in known:
            _add_missing(missing, side, entry, owner)
        else:
            blocked.append((entry.path, "has bytes git does not hold (a local change)"))

    skipped_rel = {PurePosixPath(p).relative_to(reg.prefix) for p in skipped}
    local_only = [
        reg.registry_path(rel)
        for rel, _ in store.files()
        if rel not in on_ref and rel not in skipped_rel and rel.parts[:1] != (CONTROLS_FOLDER,)
    ]
    side.sort(key=lambda e: e.path)
    return FolderDiff(
        tuple(sorted(missing, key=lambda m: m[1].path)),
        tuple(sorted(blocked)),
        tuple(sorted(local_only)),
        tuple(sorted(skipped)),
        tuple(e for e in side if not is_copy(PurePosixPath(e.path))),
        tuple(e for e in side if is_copy(PurePosixPath(e.path))),
    )


def _beside_an_artifact(rel: PurePosixPath) -> bool:
    """``<kernel>/<problem>/<device-class>.jsonl.gz``: named as an artifact's journal copy."""
    try:
        key_from_relpath(artifact_path(rel))
    except UserError:
        return False
    return True


def _add_missing(
    missing: list[tuple[ArtifactKey, TreeEntry]],
    side: list[TreeEntry],
    entry: TreeEntry,
    key: ArtifactKey | None,
) -> None:
    if key is None:
        side.append(entry)
    else:
        missing.append((key, entry))


def write(reg: GitRegistry, diff: FolderDiff) -> tuple[str, ...]:
    """Write ``diff.missing``, ``diff.controls`` and ``diff.journals`` into the folder (the
    caller refused ``diff.blocked``), the controls files first: an artifact file never shows
    before the files it is built with. Returns the artifact keys written."""
    store = ArtifactStore(reg.root)
    side = (*diff.controls, *diff.journals)
    files = reg.read_blobs([entry.sha for entry in side])
    for entry in side:
        data = files.get(entry.sha)
        if data is None:
            raise RegistryError(f"cannot read {entry.path}: blob {entry.sha[:12]} is missing")
        rel = PurePosixPath(entry.path).relative_to(reg.prefix)
        write_files(reg.root, {rel.as_posix(): data})
    blobs = reg.read_blobs([entry.sha for _, entry in diff.missing])
    written = []
    for key, entry in diff.missing:
        data = blobs.get(entry.sha)
        if data is None:
            raise RegistryError(f"cannot read {entry.path}: blob {entry.sha[:12]} is missing")
        store.write_encoded(key, data)
        written.append(str(key))
    return tuple(written)


__all__ = ["FolderDiff", "compare", "write"]
