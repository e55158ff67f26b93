"""Registry operations the CLI and the search call: publish, import, pin, read, verify, migrate,
commit.

Each function opens the registry's git repository for its own duration (``with
GitRegistry(...)``) and takes the writer lock around write-and-commit, so a file and its
commit never disagree; nothing here prints. A search hands over its result either as a
result file (``store.write_result``, then ``ctune registry import PATH``) or by
``publish_artifact`` (``ctune search --commit``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ctune.controls.store import FOLDER, StoreChain
from ctune.errors import CtuneError, RegistryError, UserError
from ctune.files import read_capped
from ctune.interrupts import Interrupted, deferred, keep
from ctune.registry import journals as journal_copies
from ctune.registry import schema
from ctune.registry.controls import controls_files, registry_problems, write_files
from ctune.registry.export import resolve_member
from ctune.registry.git import CommitResult, GitRegistry, NotInRepository
from ctune.registry.layout import (
    PIN_PREFIX,
    ArtifactKey,
    contained_path,
    key_from_relpath,
    parse_key,
    parse_pin_tag,
    pin_tag,
)
from ctune.registry.member_genes import hand_edits, spec_space
from ctune.registry.migrate import decode_history, upgrade
from ctune.registry.rename import NewSpec, Renamed, plan_renames
from ctune.registry.schema import Artifact
from ctune.registry.store import (
    ArtifactStore,
    Quarantined,
    check_location,
    key_of,
    read_bytes_capped,
    read_result,
)
from ctune.search.journal_copy import copy_path
from ctune.spec.space.params import Space


@dataclass(frozen=True, slots=True)
class Published:
    path: Path
    commit: CommitResult | None  # None with commit=False
    journal: str = ""  # what became of the search's journal (``journals.Found.note``)


@dataclass(frozen=True, slots=True)
class Pin:
    tag: str
    commit: str
    digest: str
    member: str
    signed: bool


@dataclass(frozen=True, slots=True)
class PinCheck:
    tag: str
    problems: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class VerifyReport:
    artifacts: int
    quarantined: tuple[Quarantined, ...]
    pins: tuple[PinCheck, ...]
    fsck_ok: bool | None
    fsck_output: str = ""
    #: "KEY: member ...: ..." for each artifact whose genes its spec does not have
    edited: tuple[str, ...] = ()
    #: kernels whose spec could not be loaded: their values met the command-line rule only
    without_spec: tuple[str, ...] = ()
    #: "KEY: member ...: controls file controls/D.acf is missing" (or altered), one each
    controls: tuple[str, ...] = ()
    #: "KEY: journal copy ... is not the journal the artifact names" (or unreadable)
    journals: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return (
            not self.quarantined
            and not self.controls
            and not self.journals
            and not self.edited
            and self.fsck_ok is not False
            and not any(p.problems for p in self.pins)
        )


def commit_message(a: Artifact, verb: str = "") -> str:
    """``ctune: gemm sq4096 sm90-h100: p50 -7.8% vs default``, and a body naming the pinned
    member and the front's size: the subject stays short enough for ``git log --oneline``
    whatever the problem's name."""
    head = f"ctune: {verb}{a.kernel} {a.problem} {a.device_class}"
    pinned = a.pinned_member()
    body = f"front of {len(a.front)}"
    if pinned is None:
        return f"{head}\n\n{body}; none pinned"
    old, new = a.baseline.summary.get("p50_ms"), pinned.summary.get("p50_ms")
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and old > 0:
        head += f": p50 {new / old - 1:+.1%} vs default"
    return f"{head}\n\n{body}; pinned {pinned.key}"


def _write_commit(
    reg: GitRegistry,
    store: ArtifactStore,
    artifacts: Sequence[Artifact],
    message: str,
    controls: StoreChain | None = None,
    removed: Sequence[ArtifactKey] = (),
    journals: Mapping[ArtifactKey, bytes] | None = None,
) -> tuple[list[Path], CommitResult]:
    """Write files (and delete the artifact files of ``removed`` that none of
    ``artifacts`` takes the place of) and commit them; the caller holds
    ``reg.writer_lock()``. ``journals``: the journal copies to keep beside artifacts
    (``registry/journals.py`` decides which copies stay and which go).

    Each controls file the artifacts are built with is read from ``controls`` (default: the
    registry's own folder) before anything is written, and goes into the same commit under
    ``controls/`` (with its ``NOTICE``): a missing one refuses the whole write.
    All or nothing: when the commit fails (a full disk, a lock held too long) the files
    written are put back as they were, and a Ctrl-C (or SIGTERM) meanwhile waits for the
    commit, then stops saying what was committed."""
    files = controls_files(artifacts, controls or registry_chain(store.root))
    with deferred() as held:
        encoded = [(key_of(a), schema.encode(a)) for a in artifacts]
        gone = sorted({k.artifact for k in removed} - {key for key, _ in encoded}, key=str)
        copies = journal_copies.copies_for(
            store.root, [(key_of(a), a) for a in artifacts], gone, journals or {}
        )
        files.update(copies.write)
        before = {key: _bytes_or_none(store.path(key)) for key, _ in encoded}
        before.update((key, _bytes_or_none(store.path(key))) for key in gone)
        files_before = {rel: _file_or_none(store.root, rel) for rel in (*files, *copies.delete)}
        blobs: dict[str, bytes] = {}
        paths = []
        try:
            write_files(store.root, {r: d for r, d in files.items() if files_before[r] != d})
            blobs.update((reg.registry_path(PurePosixPath(r)), d) for r, d in files.items())
            for key, data in encoded:
                paths.append(store.write_encoded(key, data))
                blobs[reg.registry_path(key.relpath())] = data
            for key in gone:
                store.path(key).unlink(missing_ok=True)
            for rel in copies.delete:
                contained_path(store.root, PurePosixPath(rel)).unlink(missing_ok=True)
            deleted = [reg.registry_path(key.relpath()) for key in gone]
            deleted += [reg.registry_path(PurePosixPath(rel)) for rel in copies.delete]
            result = reg.commit_blobs(blobs, message, deleted)
        except BaseException:
            _put_back(store, before, files_before)
            raise
        _prune_folders(store, gone)
        kept = f"{len(paths)} artifact file(s) written and committed ({result.commit[:12]})"
        keep(kept)  # a signal just after this block is still told the commit was made
    if held.signalled:
        raise Interrupted(f"{kept} before stopping")
    return paths, result


def _prune_folders(store: ArtifactStore, removed: Sequence[ArtifactKey]) -> None:
    """The problem and kernel folders that deleting ``removed`` left empty, removed (a
    folder that still holds anything stays)."""
    for key in removed:
        folder = store.path(key).parent
        for empty in (folder, folder.parent):
            with contextlib.suppress(OSError):
                empty.rmdir()


def registry_chain(root: Path) -> StoreChain:
    """The registry's own controls folder: where an artifact already published finds its
    files (a search's cache is added where one publishes its result)."""
    return StoreChain.of(Path(root) / FOLDER)


def _bytes_or_none(path: Path) -> bytes | None:
    """A registry file's bytes before a write (None: there was none), to put it back."""
    try:
        return read_bytes_capped(path)
    except RegistryError:
        return None


def _file_or_none(root: Path, rel: str) -> bytes | None:
    """A registry-relative file's bytes before a write (None: none, or not a plain file)."""
    try:
        return read_capped(
            contained_path(root, PurePosixPath(rel)), schema.MAX_BYTES, follow_symlinks=False
        )
    except UserError:
        return None


def _put_back(
    store: ArtifactStore,
    before: dict[ArtifactKey, bytes | None],
    files_before: dict[str, bytes | None] | None = None,
) -> None:
    """Each file as it was before a write that could not be committed (best effort: the
    failure itself, a full disk say, may refuse this too)."""
    for key, data in before.items():
        with contextlib.suppress(OSError, RegistryError):
            if data is None:
                store.path(key).unlink(missing_ok=True)
            else:
                store.write_encoded(key, data)
    for rel, old in (files_before or {}).items():
        with contextlib.suppress(OSError, UserError):
            path = contained_path(store.root, PurePosixPath(rel))
            if old is None:
                path.unlink(missing_ok=True)
            else:
                write_files(store.root, {rel: old})


def publish_artifact(
    root: Path,
    artifact: Artifact,
    *,
    ref: str | None = None,
    message: str | None = None,
    commit: bool = True,
    retry_budget_s: float = 30.0,
    serialize: bool = True,
    controls: StoreChain | None = None,
    journal: journal_copies.Found | None = None,
) -> Published:
    """Write ``artifact`` into the registry at ``root`` atomically and commit it, with the
    controls files its members are built with, found through ``controls`` (default: the
    registry's own folder; a search's result needs its cache's store first in the chain),
    and the copy of its search's journal where ``journal`` found it.

    With ``commit=False`` the files are written only; in a repository, under the same rule
    as a commit (the writer lock, and a merge, rebase or cherry-pick stopped half way
    refused: writing the file would settle the user's conflict with ctune's file just the
    same)."""
    store = ArtifactStore(root)
    found = journal or journal_copies.Found(None, "")
    journals = {key_of(artifact): found.data} if found.data is not None else {}
    if not commit:
        files = controls_files([artifact], controls or registry_chain(root))
        copies = journal_copies.copies_for(root, [(key_of(artifact), artifact)], (), journals)
        files.update(copies.write)

        def write() -> Published:
            write_files(root, files)
            for rel in copies.delete:
                contained_path(root, PurePosixPath(rel)).unlink(missing_ok=True)
            return Published(store.write(artifact), None, found.note)

        try:
            reg = GitRegistry(root, ref, retry_budget_s=retry_budget_s, serialize=serialize)
        except NotInRepository:  # a plain folder: nothing to refuse
            return write()
        with reg, reg.writer_lock():
            return write()
    with (
        GitRegistry(root, ref, retry_budget_s=retry_budget_s, serialize=serialize) as reg,
        reg.writer_lock(),
    ):
        reg.target_ref()  # refuse a detached HEAD before writing anything
        paths, result = _write_commit(
            reg,
            store,
            [artifact],
            message or commit_message(artifact),
            controls,
            journals=journals,
        )
    return Published(paths[0], result, found.note)


def committed_before(root: Path, artifact: Artifact) -> str | None:
    """The commit on the registry's branch that made its artifact at ``artifact``'s key
    when that artifact is of the same search journal (``provenance.journal_sha256``):
    a search resumed after it committed (stopped just after the commit) has its result
    committed already. None: no such artifact there, another search's, or no repository."""
    want = journal_copies.journal_sha256(artifact)
    if want is None:
        return None
    try:
        with GitRegistry(root) as reg:
            ref = reg.target_ref()
            path = reg.registry_path(key_of(artifact).relpath())
            if reg.resolve(ref) is None:
                return None  # a branch with no commit yet
            held = schema.decode(reg.read_blob(ref, path), path)
            if journal_copies.journal_sha256(held) != want:
                return None
            return reg.out("log", "-1", "--format=%H", ref, "--", path).strip() or None
    except CtuneError:  # not there, unreadable, no repository (NotInRepository)
        return None


def import_result(
    root: Path,
    result_path: Path,
    *,
    ref: str | None = None,
    commit: bool = True,
    controls: StoreChain | None = None,
    journals: Sequence[Path] = (),
) -> Published:
    """Validate a search result file and publish it (``ctune registry import``), with its
    search's journal: the copy ``ctune search`` writes beside the result file, or one of
    ``journals`` (a journal file or copy; the first that is the search's)."""
    artifact = read_result(result_path)
    found = journal_copies.find(artifact, [*journals, copy_path(Path(result_path))])
    return publish_artifact(
        root, artifact, ref=ref, commit=commit, controls=controls, journal=found
    )


def attach_journal(
    root: Path, key_text: str, journal: Path, *, ref: str | None = None
) -> Published:
    """Keep ``journal`` beside the artifact ``key_text`` in one new commit (``ctune registry
    journal``): refused unless it is the journal the artifact names."""
    key, artifact = load_artifact(root, key_text)
    if key.member is not None:
        raise UserError(f"{key}: a journal belongs to an artifact; give {key.artifact}")
    found = journal_copies.find(artifact, [journal], strict=True)
    if found.data is None:
        raise UserError(f"{journal}: not the journal of {key} ({found.note})")
    with GitRegistry(root, ref) as reg, reg.writer_lock():
        reg.target_ref()
        message = f"ctune: journal of {artifact.kernel} {artifact.problem} {artifact.device_class}"
        paths, result = _write_commit(
            reg, ArtifactStore(root), [artifact], message, journals={key.artifact: found.data}
        )
    return Published(paths[0], result, found.note)


def load_artifact(root: Path, text: str, *, ref: str | None = None) -> tuple[ArtifactKey, Artifact]:
    """``KEY`` from the registry files, or ``REV:KEY`` from a git revision (an older
    schema there is read upgraded: history is never migrated)."""
    rev, sep, key_text = text.rpartition(":")
    key = parse_key(key_text)
    if not sep:
        return key, ArtifactStore(root).read(key)
    with GitRegistry(root, ref) as reg:
        path = reg.registry_path(key.relpath())
        artifact = decode_history(reg.read_blob(rev, path), f"{rev}:{path}")
    check_location(artifact, key, f"{rev}:{path}")
    return key, artifact


def _pin_fields(message: str) -> dict[str, str]:
    return dict(re.findall(r"^([a-z_]+): (\S+)$", message, flags=re.MULTILINE))


def load_pinned(root: Path, key: ArtifactKey, release: str) -> tuple[Artifact, str]:
    """The artifact and member a release pin points at, digest checked."""
    tag = pin_tag(release, key)
    with GitRegistry(root) as reg:
        reg.check_ref_format(f"refs/tags/{tag}")
        commit = reg.resolve(f"refs/tags/{tag}")
        if commit is None:
            raise RegistryError(f"no pin {tag}; see `git tag -l '{PIN_PREFIX}/*'`")
        fields = _pin_fields(reg.tag_message(tag))
        path = reg.registry_path(key.relpath())
        artifact = schema.decode(reg.read_blob(commit, path), f"{tag}:{path}")
    if fields.get("digest") != f"sha256:{artifact.digest()}":
        raise RegistryError(f"pin {tag}: the artifact's digest does not match the tag message")
    return artifact, fields.get("candidate", artifact.pinned or "")


def pin_artifact(root: Path, key: ArtifactKey, release: str, *, ref: str | None = None) -> Pin:
    """Pin ``key``'s member (default: its pinned one) as an annotated tag.

    If the member differs from the artifact's ``pinned`` field, the artifact
    is rewritten and committed first, so the tag's commit holds exactly the
    artifact whose digest the tag message carries (rule X4).
    """
    tag = pin_tag(release, key)
    store = ArtifactStore(root)
    with GitRegistry(root, ref) as reg, reg.writer_lock():
        reg.target_ref()  # refuse a detached HEAD before touching the worktree file
        reg.check_ref_format(f"refs/tags/{tag}")
        if reg.resolve(f"refs/tags/{tag}") is not None:
            raise RegistryError(
                f"pin tag {tag} already exists; pins are immutable: choose a new release name"
            )
        artifact = store.read(key)
        if artifact.provenance.get("source_dirty"):
            raise RegistryError(
                f"{key.artifact} was tuned from an uncommitted kernel source; commit the "
                "source, re-tune, then pin"
            )
        member = resolve_member(artifact, key.member).key
        artifact = schema.with_pinned(artifact, member)
        _, result = _write_commit(reg, store, [artifact], commit_message(artifact, "pin "))
        digest = artifact.digest()
        message = (
            f"ctune pin {release} {key.artifact}@{member}\n\n"
            f"artifact: {reg.registry_path(key.relpath())}\n"
            f"digest: sha256:{digest}\n"
            f"candidate: {member}\n"
            f"commit: {result.commit}\n"
        )
        signed = reg.can_sign()
        reg.create_tag(tag, result.commit, message, sign=signed)
    return Pin(tag, result.commit, digest, member, signed)


def _check_pin(reg: GitRegistry, tag: str, head: str | None, shallow: bool) -> PinCheck:
    problems: list[str] = []
    notes: list[str] = []
    try:
        _release, key = parse_pin_tag(tag)
        commit = reg.resolve_or_fail(f"refs/tags/{tag}")
        fields = _pin_fields(reg.tag_message(tag))
        path = reg.registry_path(key.relpath())
        artifact = schema.decode(reg.read_blob(commit, path), f"{tag}:{path}")
    except (RegistryError, UserError) as exc:
        return PinCheck(tag, (str(exc),), ())
    if fields.get("digest") != f"sha256:{artifact.digest()}":
        problems.append("tag message digest does not match the pinned artifact")
    if fields.get("candidate") != artifact.pinned:
        problems.append("tag message candidate does not match the artifact's pinned member")
    if reg.config("gpg.ssh.allowedSignersFile"):
        ok, output = reg.verify_tag(tag)
        if not ok:
            last = output.splitlines()[-1] if output else "no signature"
            problems.append(f"signature not verified: {last}")
    else:
        notes.append("signature not checked (gpg.ssh.allowedSignersFile not set)")
    if shallow:
        notes.append("ancestry not checked: shallow clone")
    elif head is not None and not reg.is_ancestor(commit, head):
        problems.append("pinned commit is not an ancestor of the registry ref: history rewritten?")
    return PinCheck(tag, tuple(problems), tuple(notes))


def verify_registry(
    root: Path,
    *,
    ref: str | None = None,
    fsck: bool = True,
    kernels: Path | None = None,
    nvcc: str = "nvcc",
) -> VerifyReport:
    """Every artifact's digest and gene values, its controls files (there, and matching
    their digests), its journal copy (its own), every pin tag, and ``git fsck`` (rules G4,
    X4, G10).

    A digest catches corruption, not an edit (docs/security.md): every member's genes are
    checked against its spec in ``kernels`` (``member_genes.hand_edits``), or, where that
    spec cannot be loaded, against the command-line rule alone. The ref is checked (opening
    the history) before the artifacts are read: a bad ref is one line at once, not after
    reading every file of a registry that keeps growing."""
    with GitRegistry(root, ref) as reg:
        listing = ArtifactStore(root).list()
        shallow = reg.is_shallow
        head = reg.resolve(ref or "HEAD")
        pins = tuple(_check_pin(reg, t, head, shallow) for t in reg.tags(PIN_PREFIX + "/"))
        fsck_ok, fsck_out = reg.fsck() if fsck else (None, "")
    spaces: dict[str, Space | None] = {}
    edited: list[str] = []
    for key, artifact in listing.artifacts:
        if artifact.kernel not in spaces:
            spaces[artifact.kernel] = (
                spec_space(kernels, artifact.kernel, nvcc) if kernels is not None else None
            )
        edited += [f"{key}: {line}" for line in hand_edits(artifact, spaces[artifact.kernel])]
    return VerifyReport(
        len(listing.artifacts),
        listing.quarantined,
        pins,
        fsck_ok,
        fsck_out,
        tuple(edited),
        tuple(sorted(k for k, space in spaces.items() if space is None)),
        tuple(registry_problems(root, listing.artifacts)),
        tuple(
            found
            for key, artifact in listing.artifacts
            if (found := journal_copies.problem(root, key, artifact)) is not None
        ),
    )


@dataclass(frozen=True, slots=True)
class Migration:
    migrated: tuple[Path, ...]
    failed: tuple[Quarantined, ...]
    commit: CommitResult | None


def migrate_registry(root: Path, *, ref: str | None = None, dry_run: bool = False) -> Migration:
    """Upgrade every older file to the current schema in one new commit.

    Reading and upgrading happen under the writer lock, so an artifact published
    meanwhile is never overwritten with an upgraded older copy.
    """
    paths, upgraded, failed = _upgrades(root)
    if dry_run or not upgraded:  # nothing to write: no branch or lock needed
        return Migration(tuple(paths), tuple(failed), None)
    with GitRegistry(root, ref) as reg, reg.writer_lock():
        reg.target_ref()
        paths, upgraded, failed = _upgrades(root)
        if not upgraded:
            return Migration(tuple(paths), tuple(failed), None)
        message = f"ctune: migrate {len(upgraded)} artifact(s) to schema {schema.SCHEMA_VERSION}"
        written, result = _write_commit(reg, ArtifactStore(root), upgraded, message)
    return Migration(tuple(written), tuple(failed), result)


def commit_artifacts(
    root: Path,
    artifacts: Sequence[Artifact],
    message: str,
    *,
    ref: str | None = None,
    controls: StoreChain | None = None,
) -> CommitResult:
    """Write ``artifacts`` and commit them in one commit, under the writer lock."""
    with GitRegistry(root, ref) as reg, reg.writer_lock():
        reg.target_ref()
        _, result = _write_commit(reg, ArtifactStore(root), artifacts, message, controls)
    return result


@dataclass(frozen=True, slots=True)
class Renaming:
    renamed: tuple[Renamed, ...]
    commit: CommitResult | None  # None on a dry run


def rename_registry(
    root: Path,
    mapping: Mapping[str, str],
    specs: Mapping[str, NewSpec],
    *,
    ref: str | None = None,
    dry_run: bool = False,
) -> Renaming:
    """Move every artifact of each OLD kernel of ``mapping`` to its NEW name (``specs``:
    the NEW kernels' specs), digests carried where verified (:mod:`ctune.registry.rename`),
    in one new commit; refused before anything is written when it cannot all be done.

    The plan is made again under the writer lock, from the files as they are then."""
    if dry_run:
        return Renaming(tuple(_rename_plan(root, mapping, specs)), None)
    with GitRegistry(root, ref) as reg, reg.writer_lock():
        reg.target_ref()
        renamed = _rename_plan(root, mapping, specs)
        message = rename_message(mapping, len(renamed))
        moved = {
            key_of(r.artifact): data
            for r in renamed
            if (data := _file_or_none(root, journal_copies.relpath(r.before).as_posix()))
        }
        _, result = _write_commit(
            reg,
            ArtifactStore(root),
            [r.artifact for r in renamed],
            message,
            removed=[r.before for r in renamed],
            journals=moved,
        )
    return Renaming(tuple(renamed), result)


def rename_message(mapping: Mapping[str, str], artifacts: int) -> str:
    """The rename commit's message: the pairs in its subject where they fit in 72
    characters, else a count there and the pairs in the body."""
    pairs = ", ".join(f"{old} -> {new}" for old, new in mapping.items())
    subject = f"ctune: rename {pairs} ({artifacts} artifact(s))"
    if len(subject) <= 72:
        return subject
    return f"ctune: rename {len(mapping)} kernels ({artifacts} artifact(s))\n\n{pairs}\n"


def _rename_plan(
    root: Path, mapping: Mapping[str, str], specs: Mapping[str, NewSpec]
) -> list[Renamed]:
    """The renames, refused where a file of a kernel concerned cannot be read (it could
    be neither moved nor overwritten safely)."""
    store = ArtifactStore(root)
    found: list[tuple[ArtifactKey, Artifact]] = []
    for kernel in sorted({*mapping, *mapping.values()}):
        listing = store.list(f"{kernel}/*")
        if listing.quarantined:
            q = listing.quarantined[0]
            raise RegistryError(
                f"{q.message if q.path in q.message else f'{q.path}: {q.message}'}; "
                "mend it before renaming (`ctune registry migrate` upgrades older schemas)"
            )
        found += listing.artifacts
    return plan_renames(found, mapping, specs)


def _upgrades(root: Path) -> tuple[list[Path], list[Artifact], list[Quarantined]]:
    """(paths, upgraded artifacts, unreadable files) for every file older than this schema."""
    store = ArtifactStore(root)
    upgraded: list[Artifact] = []
    paths: list[Path] = []
    failed: list[Quarantined] = []
    for rel, problem in store.files():
        path = root / rel
        if problem:
            failed.append(Quarantined(str(path), problem))
            continue
        try:
            raw = schema.parse_json_bytes(read_bytes_capped(path), str(path))
            if not isinstance(raw, dict):
                raise RegistryError(f"{path}: not a JSON object")
            if raw.get("schema_version") == schema.SCHEMA_VERSION:
                continue
            artifact = schema.from_json(upgrade(raw, str(path)), str(path))
            check_location(artifact, key_from_relpath(rel), str(path))
        except (RegistryError, UserError) as exc:
            failed.append(Quarantined(str(path), str(exc)))
            continue
        upgraded.append(artifact)
        paths.append(path)
    return paths, upgraded, failed


__all__ = [
    "Migration",
    "Pin",
    "PinCheck",
    "Published",
    "Renaming",
    "VerifyReport",
    "commit_artifacts",
    "commit_message",
    "import_result",
    "load_artifact",
    "load_pinned",
    "migrate_registry",
    "pin_artifact",
    "publish_artifact",
    "rename_registry",
    "verify_registry",
]
