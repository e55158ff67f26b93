"""Artifact files on disk: strict reads, atomic writes, listing with quarantine.

A registry is a plain directory (``Settings.registry``, default
``registry/``) laid out by :mod:`ctune.registry.layout`. Reads never need
git, so ``ctune check`` in CI reads the checkout's files as they are. Writes
are atomic (temporary file in the same directory, fsync, ``os.replace``,
fsync of the directory: nothing is ever half-written); committing
them is :mod:`ctune.registry.git`'s job.

A file that fails to read (digest mismatch, bad schema, symlink, wrong
place) is *quarantined* by :meth:`ArtifactStore.list`: left where it is,
reported, and skipped, so the other artifacts still work (rule G4); a command over
several artifacts then ends with exit 2 (:func:`fail_if_unreadable`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from ctune.errors import RegistryError, UserError
from ctune.files import InputFileError, read_capped, unlinked_file_problem
from ctune.registry import schema
from ctune.registry.controls import entry_problem
from ctune.registry.layout import (
    CONTROLS_FOLDER,
    SUFFIX,
    ArtifactKey,
    artifact_path,
    is_key_pattern,
    key_from_relpath,
    parse_key,
)
from ctune.registry.schema import Artifact
from ctune.writes import write_atomic


@dataclass(frozen=True, slots=True)
class Quarantined:
    """An artifact file that could not be trusted, and why."""

    path: str
    message: str


@dataclass(frozen=True, slots=True)
class Listing:
    artifacts: tuple[tuple[ArtifactKey, Artifact], ...]
    quarantined: tuple[Quarantined, ...]


def fail_if_unreadable(quarantined: Sequence[Quarantined], then: str | None = None) -> None:
    """The end of a command over several artifacts (check, gate, refresh, retune) that
    found files it could not read: it did the rest and named them (quarantined), and now
    fails, exit 2, so CI cannot pass over a damaged artifact it never looked at. ``then``:
    the failure the command would report otherwise, kept in the same line."""
    if not quarantined:
        return
    more = f" and {len(quarantined) - 1} more" if len(quarantined) > 1 else ""
    also = f"; {then}" if then else ""
    raise RegistryError(
        f"{len(quarantined)} artifact file(s) could not be read ({quarantined[0].path}{more}, "
        f"quarantined above): restore them from git or remove them{also}"
    )


def read_bytes_capped(path: Path, *, allow_symlink: bool = False) -> bytes:
    """The file's bytes by the one rule for input files (:func:`ctune.files.read_capped`):
    regular files only, at most the schema's cap; a symlink refused unless allowed."""
    try:
        return read_capped(path, schema.MAX_BYTES, "artifact file", follow_symlinks=allow_symlink)
    except InputFileError as exc:
        raise RegistryError(str(exc)) from None


def read_artifact_file(path: Path, *, allow_symlink: bool = False) -> Artifact:
    """Read and verify one artifact file (digest, schema, types)."""
    return schema.decode(read_bytes_capped(path, allow_symlink=allow_symlink), str(path))


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` so that readers see the old or the new bytes, never a mix (a symlink
    there is replaced, never followed)."""
    write_atomic(path, data)


def write_result(artifact: Artifact, path: Path) -> Path:
    """Write a search result file (an artifact outside the registry), atomically, or into
    the character device or read FIFO the user named (``--out /dev/stdout``), never
    replacing it (:func:`ctune.writes.write_atomic`).

    ``ctune registry import PATH`` later validates it and commits it.
    """
    data = schema.encode(artifact)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data, into_special=True)
    return path


def read_result(path: Path) -> Artifact:
    """Read a search result file written by :func:`write_result`."""
    return read_artifact_file(path, allow_symlink=True)


def require_registry_dir(root: Path) -> None:
    """A listing of a folder that is not there is a wrong path, not an empty registry."""
    if not Path(root).is_dir():
        raise UserError(
            f"registry {root}: no such directory (give --registry DIR or set `registry` "
            "in [tool.ctune]; `ctune registry import` creates it)"
        )


def require_registry(root: Path) -> None:
    """A check or gate over a missing or empty folder would pass while checking nothing."""
    require_registry_dir(root)
    if next(ArtifactStore(root).files(), None) is None:
        raise UserError(
            f"registry {root}: no artifact files in it, so there is nothing to check "
            "(is this the registry folder? --registry DIR)"
        )


class ArtifactStore:
    """The artifact files under one registry root."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, key: ArtifactKey) -> Path:
        try:
            return artifact_path(self.root, key.artifact)
        except UserError as exc:
            raise RegistryError(str(exc)) from None

    def exists(self, key: ArtifactKey) -> bool:
        return os.path.lexists(self.path(key))

    def read(self, key: ArtifactKey) -> Artifact:
        path = self.path(key)
        if not os.path.lexists(path):
            raise RegistryError(f"no artifact {key.artifact} (looked for {path})")
        artifact = read_artifact_file(path)
        check_location(artifact, key, str(path))
        return artifact

    def write(self, artifact: Artifact) -> Path:
        """Validate, then atomically write ``artifact`` at its layout path."""
        return self.write_encoded(key_of(artifact), schema.encode(artifact))

    def write_encoded(self, key: ArtifactKey, data: bytes) -> Path:
        """Atomically write bytes from :func:`schema.encode` for ``key``."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path = self.path(key)  # re-prove containment now the folders exist
        atomic_write(path, data)
        return path

    def list(self, pattern: str | None = None) -> Listing:
        """Every artifact that reads cleanly; the rest quarantined with a reason. With a
        ``pattern`` (``fnmatch`` over ``kernel/problem/device-class``), only the files at a
        matching place are read."""
        found: list[tuple[ArtifactKey, Artifact]] = []
        bad: list[Quarantined] = []
        for rel, problem in self.files():
            if pattern is not None and not fnmatchcase(
                rel.as_posix().removesuffix(SUFFIX), pattern
            ):
                continue
            path = self.root / rel
            if problem:
                bad.append(Quarantined(str(path), problem))
                continue
            try:
                key = key_from_relpath(rel)
                artifact = read_artifact_file(path)
                check_location(artifact, key, str(path))
            except (RegistryError, UserError) as exc:
                bad.append(Quarantined(str(path), str(exc)))
                continue
            found.append((key, artifact))
        # no artifact, and (nearly) nothing that looks like a damaged one: some other folder
        # (a damaged registry is mostly damaged artifacts; a wrong path is mostly other files)
        looks = sum(map(self._looks_like_artifact, bad)) if not found else 0
        if pattern is None and not found and bad and looks * 10 < len(bad):
            raise RegistryError(
                f"{self.root}: not a ctune registry: none of its {len(bad)} JSON file(s) or "
                "links is an artifact at <kernel>/<problem>/<device-class>.json; name the "
                "registry folder (--registry, CTUNE_REGISTRY or [tool.ctune] registry)"
            )
        return Listing(tuple(sorted(found, key=lambda ka: str(ka[0]))), tuple(bad))

    def select(self, texts: Sequence[str]) -> Listing:
        """The artifacts that KEYs and glob patterns name, each once, in the order given.

        A KEY (``kernel/problem/device-class[@member]``) reads its file; a missing one is an
        error. A kernel, or ``kernel/problem``, names every artifact below it. A text with
        ``*``, ``?`` or ``[`` is a pattern (``fnmatch``, ``*`` crossing
        ``/`` too) over every listed artifact's ``kernel/problem/device-class``, such as
        ``attention/*/sm90-nvidia-h200``; one that matches nothing is an error, since
        a gate or re-tune over nothing would pass while doing nothing. Keys come back
        without a member.
        """
        chosen: dict[ArtifactKey, Artifact] = {}
        quarantined: dict[str, Quarantined] = {}
        for given in texts:
            text = given
            if text and "@" not in text and text.count("/") < 2 and not is_key_pattern(text):
                text = text.rstrip("/") + "/*"  # a kernel, or kernel/problem: all below it
            if not is_key_pattern(text):
                key = parse_key(text).artifact
                chosen.setdefault(key, self.read(key))
                continue
            listing = self.list(text)
            quarantined.update((q.path, q) for q in listing.quarantined)
            if not listing.artifacts:
                raise UserError(
                    f"no artifact matches {ascii(given)[:80]}: a pattern is matched against "
                    "<kernel>/<problem>/<device-class> (`ctune registry list` shows them)"
                )
            for key, artifact in listing.artifacts:
                chosen.setdefault(key, artifact)
        return Listing(tuple(chosen.items()), tuple(quarantined.values()))

    def _looks_like_artifact(self, q: Quarantined) -> bool:
        """Is this unreadable file a damaged artifact (worth a line of its own) rather than
        someone else's file: it sits where an artifact belongs and is not JSON with fields
        no artifact has (a truncated or emptied artifact still counts)."""
        path = Path(q.path)
        if path.is_symlink() or not path.is_file():
            return False
        try:
            key_from_relpath(PurePosixPath(path.relative_to(self.root).as_posix()))
            data = read_bytes_capped(path)
        except (RegistryError, UserError, ValueError):
            return False
        try:
            raw = schema.parse_json_bytes(data, q.path)
        except RegistryError:
            return True  # not JSON where an artifact belongs: a damaged one
        return isinstance(raw, dict) and set(raw) <= schema.TOP_LEVEL_FIELDS

    def files(self) -> Iterator[tuple[PurePosixPath, str]]:
        """(relative path, problem) of every ``*.json`` of the layout's three levels (a deeper
        folder is reported, not walked: a wrong --registry must not scan a whole disk);
        no symlink followed."""
        if not self.root.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            rel_dir = PurePosixPath(Path(dirpath).relative_to(self.root).as_posix())
            if rel_dir == PurePosixPath(".") and CONTROLS_FOLDER in dirnames:
                dirnames.remove(CONTROLS_FOLDER)  # not artifacts: only its odd entries
                yield from _controls_problems(self.root)
            for d in list(dirnames):
                if os.path.islink(os.path.join(dirpath, d)):
                    yield rel_dir / d, "is a symlink; the registry refuses symlinks"
                    dirnames.remove(d)
                elif d.startswith("."):
                    dirnames.remove(d)
                elif len(rel_dir.parts) >= 2:  # below <kernel>/<problem>/: never walked
                    yield rel_dir / d, "a folder where only <device-class>.json files belong"
                    dirnames.remove(d)
            for name in sorted(filenames):
                if name.startswith(".") or not name.endswith(SUFFIX):
                    continue  # temporary files of atomic writes, READMEs
                rel = PurePosixPath(*rel_dir.parts, name)
                yield rel, unlinked_file_problem(os.path.join(dirpath, name), "the registry")


def _controls_problems(root: Path) -> Iterator[tuple[PurePosixPath, str]]:
    """(path, why) of each entry of ``<root>/controls`` that does not belong there (a
    folder, a link, a name other than ``<sha256>.acf`` or ``NOTICE``); temporary files of
    atomic writes (dot-names) are passed over, like the artifacts'."""
    folder = root / CONTROLS_FOLDER
    if folder.is_symlink():
        yield PurePosixPath(CONTROLS_FOLDER), "is a symlink; the registry refuses symlinks"
        return
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            rel = PurePosixPath(CONTROLS_FOLDER, entry.name)
            if entry.is_dir(follow_symlinks=False):
                yield rel, f"a folder in {CONTROLS_FOLDER}/, where only controls files belong"
                continue
            problem = entry_problem(folder / entry.name)
            if problem:
                yield rel, problem


def key_of(artifact: Artifact) -> ArtifactKey:
    try:
        return ArtifactKey(artifact.kernel, artifact.problem, artifact.device_class)
    except UserError as exc:
        raise RegistryError(f"artifact to write: {exc}") from None


def check_location(artifact: Artifact, key: ArtifactKey, where: str) -> None:
    """The file's content must name the place it is stored at (no copied files)."""
    if key_of(artifact) != key.artifact:
        raise RegistryError(
            f"{where}: holds {key_of(artifact)} but is stored as {key.artifact}; "
            "move it back or re-import it"
        )
