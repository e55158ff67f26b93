"""GitRegistry: commit artifact files without ever losing one, and read them back.

The registry is a folder of the project's git repository, so CI reads plain files and the
project's history versions them. A write is an atomic file write plus a commit made with
a private index and a compare-and-swap on the ref (rule G1), so concurrent writers lose
nothing and unrelated staged files are never included; writes never need the network
(G9), and registry content is read with ``cat-file`` with hooks off, so it cannot run code
(X3). The decisions and their reasons: docs/registry.md.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from ctune.errors import RegistryError
from ctune.registry import schema
from ctune.registry.locks import FLOCK_NAME, writer_lock

MIN_GITPYTHON = (3, 1, 49)  # ref-name traversal fixed in 3.1.48, config injection in 3.1.49
ZERO_SHA = "0" * 40
#: A network command (ls-remote, fetch, push) still running after this is killed, so an
#: unreachable host that never answers cannot hang a CI job.
NETWORK_TIMEOUT_S = 120.0
#: Objects asked of one ``cat-file --batch``: bounds the bytes held at once (artifacts are
#: ~1 MB at most, schema.MAX_BYTES caps them at 16 MiB).
_BATCH = 64
# Never prompt: ctune runs in CI and scripts, where a prompt is a hang (credential
# helpers and SSH agents still work).
_NETWORK_ENV = {"GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "never"}
_SAFE_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "protocol.ext.allow=never",
)
_REF_RE = re.compile(r"^refs/[A-Za-z0-9._/-]{1,200}$")
_REV_RE = re.compile(r"^[A-Za-z0-9._/~^@{}-]{1,200}$")
#: what git says when a write fails for a full disk, quota or size limit (not localised
#: in the C locale GitPython runs it in)
_DISK_FULL_WORDS = {
    "No space left on device": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "File too large": errno.EFBIG,
}
#: (file in the git directory, what it means, the command that continues or aborts it)
_UNFINISHED = (
    ("MERGE_HEAD", "a merge", "git merge"),
    ("rebase-merge", "a rebase", "git rebase"),
    ("rebase-apply", "a rebase (or `git am`)", "git rebase"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick"),
    ("REVERT_HEAD", "a revert", "git revert"),
    ("BISECT_LOG", "a bisect", "git bisect"),
)
_FALLBACK_IDENT = {
    "GIT_AUTHOR_NAME": "ctune",
    "GIT_AUTHOR_EMAIL": "ctune@localhost",
    "GIT_COMMITTER_NAME": "ctune",
    "GIT_COMMITTER_EMAIL": "ctune@localhost",
}


@dataclass(frozen=True, slots=True)
class TreeChange:
    """One path a commit changed; ``mode == "0"`` (and ``sha == ZERO_SHA``) when deleted."""

    mode: str
    sha: str
    path: str


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One entry of ``ls-tree -r``; ``size_bytes`` is None for a submodule."""

    mode: str
    sha: str
    size_bytes: int | None
    path: str


@dataclass(frozen=True, slots=True)
class CommitResult:
    commit: str  # the new commit, or the unchanged tip when nothing changed
    ref: str
    paths: tuple[str, ...]
    changed: bool
    attempts: int


def _index_entry(mode: str, sha: str, path: str) -> bytes:
    """One entry of ``git update-index -z --index-info``: the path as the bytes it is (a
    folder name that is not UTF-8 is held as surrogates, :func:`os.fsdecode`), unquoted,
    ended by NUL (so a newline or a leading quote in it is plain text)."""
    return f"{mode} {sha}\t".encode() + os.fsencode(path) + b"\0"


class NotInRepository(RegistryError):
    """The registry folder is in no git repository (a write without a commit needs none)."""


def _check_gitpython() -> Any:
    import git

    parts = tuple(int(p) for p in re.findall(r"\d+", git.__version__)[:3])
    if parts < MIN_GITPYTHON:
        raise RegistryError(
            f"GitPython {git.__version__} is too old (ref-name and config-injection "
            f"vulnerabilities); install gitpython>={'.'.join(map(str, MIN_GITPYTHON))}"
        )
    return git


#: where branches live: the only refs a write goes to (:meth:`GitRegistry.target_ref`)
BRANCHES = "refs/heads/"


def normalize_ref(ref: str) -> str:
    """``ctune/registry`` -> ``refs/heads/ctune/registry``; refs/... kept. Allowlisted."""
    full = ref if ref.startswith("refs/") else f"{BRANCHES}{ref}"
    parts = full.split("/")
    if (
        not _REF_RE.fullmatch(full)
        or ".." in full
        or any(not p or p.startswith(("-", ".")) or p.endswith(".lock") for p in parts)
    ):
        raise RegistryError(f"ref {ascii(ref)[:80]} is not allowed (use e.g. ctune/registry)")
    return full


class GitRegistry:
    """The git repository holding a registry directory.

    ``root`` is the registry directory (it need not exist yet); the
    repository is the one containing it. ``ref`` is the branch or ref that
    writes go to (default: the branch HEAD is attached to). Use it as a context
    manager (``with GitRegistry(...) as reg:``) to close the persistent ``cat-file``
    processes GitPython keeps.
    """

    def __init__(
        self,
        root: Path,
        ref: str | None = None,
        *,
        retry_budget_s: float = 30.0,
        serialize: bool = True,
    ) -> None:
        git = _check_gitpython()
        self.root = Path(root).absolute()
        self.retry_budget_s = retry_budget_s
        self.serialize = serialize
        self._ref = normalize_ref(ref) if ref else None
        probe = self.root
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        try:
            self.repo = git.Repo(probe, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise NotInRepository(
                f"{self.root} is not inside a git repository; run `git init` there "
                "or point --registry into a repository"
            ) from None
        if self.repo.working_tree_dir is None:
            self.close()
            raise RegistryError(f"{self.repo.git_dir}: a bare repository has no registry files")
        self.top = Path(self.repo.working_tree_dir).resolve()
        try:
            rel = self.root.resolve().relative_to(self.top)
        except ValueError:
            self.close()
            raise RegistryError(f"{self.root} is outside the repository {self.top}") from None
        self.prefix = PurePosixPath(rel.as_posix())
        self.git_dir = Path(self.repo.git_dir)
        self.common_dir = Path(self.repo.common_dir)
        self._ident_env: dict[str, str] | None = None
        self._head: tuple[str] | None = None
        if self._ref is not None:
            self.check_ref_format(self._ref)

    # --- lifecycle --------------------------------------------------------

    def close(self) -> None:
        self.repo.close()

    def __enter__(self) -> GitRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- running git ------------------------------------------------------

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        binary: bool = False,
        timeout_s: float | None = None,
    ) -> tuple[int, Any, str]:
        """Run ``git <safe -c options> args``; returns (status, stdout, stderr).

        ``timeout_s`` kills git (and its children) after that long; stderr then
        starts with ``Timeout:``. A local command runs in a process group of its own, so
        that the terminal's Ctrl-C, meant for ctune, cannot kill it half way through a
        commit (ctune stops between commands); a network command keeps the terminal's.
        A full disk is an OSError naming the git directory (exit 3 at the command line).
        """
        with contextlib.ExitStack() as stack:
            feed: IO[bytes] | None = None
            if stdin is not None:  # GitPython needs a real file (fileno) for stdin
                feed = stack.enter_context(tempfile.TemporaryFile())
                feed.write(stdin)
                feed.seek(0)
            status, out, err = self.repo.git.execute(
                ["git", *_SAFE_CONFIG, *args],
                istream=feed,
                with_extended_output=True,
                with_exceptions=False,
                env=dict(env or {}),
                stdout_as_string=not binary,
                strip_newline_in_stdout=not binary,
                kill_after_timeout=timeout_s,
                **({} if timeout_s is not None else {"process_group": 0}),
            )
        text = err if isinstance(err, str) else err.decode(errors="replace")
        full = next((code for words, code in _DISK_FULL_WORDS.items() if words in text), None)
        if status != 0 and full is not None:
            raise OSError(full, os.strerror(full), str(self.common_dir))
        return status, out, text

    def out(self, *args: str, **kw: Any) -> str:
        status, out, err = self.run(*args, **kw)
        if status != 0:
            raise RegistryError(f"git {args[0]} failed: {err.strip()[:300]}")
        return str(out)

    def check_ref_format(self, ref: str) -> str:
        """Validate with git itself as well as ctune's allowlist (rule X2)."""
        status, _, _ = self.run("check-ref-format", ref)
        if status != 0:
            raise RegistryError(f"{ascii(ref)[:80]} is not a valid git ref name")
        return ref

    # --- state ------------------------------------------------------------

    def head_branch(self) -> str | None:
        """The ref HEAD is attached to, or None when detached (asked once per instance)."""
        if self._head is None:
            status, out, _ = self.run("symbolic-ref", "-q", "HEAD")
            self._head = (str(out).strip() if status == 0 else "",)
        return self._head[0] or None

    def target_ref(self) -> str:
        """Where writes go: ``--ref``, else the checked-out branch; refused when detached.

        Only a branch: a remote-tracking ref moved by hand reads as a rewritten remote at the
        next push or pull, a tag is a pin's (annotated) and ``HEAD`` is no branch's name."""
        if self._ref is not None:
            if not self._ref.startswith(BRANCHES) or self._ref == f"{BRANCHES}HEAD":
                raise RegistryError(
                    f"--ref {ascii(self._ref)[:80]} is not a branch: writes go to a branch "
                    "(--ref NAME, e.g. --ref ctune/registry, or refs/heads/NAME)"
                )
            return self._ref
        branch = self.head_branch()
        if branch is None:
            raise RegistryError(
                "HEAD is detached (a CI checkout?), so there is no current branch to commit "
                "to; name one with --ref (e.g. --ref ctune/registry)"
            )
        self._ref = self.check_ref_format(normalize_ref(branch))
        return self._ref

    @property
    def is_shallow(self) -> bool:
        return self.out("rev-parse", "--is-shallow-repository").strip() == "true"

    def resolve(self, rev: str) -> str | None:
        """Commit id of ``rev`` or None; revs that look like options are refused."""
        if not _REV_RE.fullmatch(rev) or rev.startswith("-"):
            raise RegistryError(f"revision {ascii(rev)[:80]} is not allowed")
        status, out, _ = self.run(
            "rev-parse", "-q", "--verify", "--end-of-options", f"{rev}^{{commit}}"
        )
        return str(out).strip() if status == 0 else None

    def resolve_or_fail(self, rev: str) -> str:
        sha = self.resolve(rev)
        if sha is None:
            hint = (
                " (this is a shallow clone: the revision may not be fetched)"
                if self.is_shallow
                else ""
            )
            raise RegistryError(f"revision {rev!r} not found{hint}")
        return sha

    def registry_path(self, rel: PurePosixPath) -> str:
        return (self.prefix / rel).as_posix() if self.prefix.parts else rel.as_posix()

    # --- reads from git objects ---------------------------------------------

    def ls_tree(self, rev: str, under: str = "") -> list[TreeEntry]:
        """Every blob (and link, and submodule) under ``under`` at ``rev``, with sizes."""
        commit = self.resolve_or_fail(rev)
        args = ["ls-tree", "-r", "-z", "-l", "--full-tree", commit]
        if under:
            args += ["--", under]
        entries = []
        for item in self.out(*args).split("\0"):
            if item:
                meta, path = item.split("\t", 1)
                mode, _, sha, size = meta.split()
                entries.append(TreeEntry(mode, sha, int(size) if size.isdigit() else None, path))
        return entries

    def read_blob(self, rev: str, path: str) -> bytes:
        """Bytes of ``path`` at ``rev``; symlinks and oversized blobs refused."""
        entries = [e for e in self.ls_tree(rev, path) if e.path == path]
        if not entries:
            raise RegistryError(f"{path} does not exist at {rev}")
        entry = entries[0]
        if entry.mode == "120000":
            raise RegistryError(f"{path} at {rev} is a symlink; the registry refuses symlinks")
        if entry.size_bytes is None or entry.size_bytes > schema.MAX_BYTES:
            raise RegistryError(f"{path} at {rev}: {entry.size_bytes} bytes is over the cap")
        data = self.read_blobs([entry.sha]).get(entry.sha)
        if data is None:
            raise RegistryError(f"cannot read {path} at {rev}: blob {entry.sha[:12]} is missing")
        return data

    def read_blobs(self, shas: Sequence[str]) -> dict[str, bytes]:
        """{sha: bytes} of each blob that exists, one ``cat-file --batch`` per chunk."""
        found: dict[str, bytes] = {}
        for start in range(0, len(shas), _BATCH):
            data = self._batch("--batch", shas[start : start + _BATCH])
            pos = 0
            while pos < len(data):
                end = data.index(b"\n", pos)
                header = data[pos:end].split()
                pos = end + 1
                if len(header) != 3:
                    continue  # "<sha> missing": no content follows
                size = int(header[2])
                if header[1] == b"blob":
                    found[header[0].decode()] = data[pos : pos + size]
                pos += size + 1
        return found

    def known_objects(self, shas: Sequence[str]) -> set[str]:
        """Those of ``shas`` the object database holds (``cat-file --batch-check``)."""
        lines = self._batch("--batch-check", shas).decode().splitlines() if shas else []
        return {ln.split()[0] for ln in lines if ln and not ln.endswith(" missing")}

    def _batch(self, mode: str, shas: Sequence[str]) -> bytes:
        status, data, err = self.run(
            "cat-file", mode, stdin="".join(f"{s}\n" for s in shas).encode(), binary=True
        )
        if status != 0:
            raise RegistryError(f"git cat-file {mode} failed: {err.strip()[:200]}")
        return bytes(data)

    def hash_files(self, paths: Sequence[Path]) -> list[str]:
        """The blob id each file's bytes would have (nothing is written), in order."""
        if not paths:
            return []
        listing = b"".join(os.fsencode(p) + b"\n" for p in paths)
        return self.out("hash-object", "--no-filters", "--stdin-paths", stdin=listing).split()

    # --- writes -------------------------------------------------------------

    @contextlib.contextmanager
    def writer_lock(self) -> Iterator[None]:
        """Serialise ctune writers on this machine (no lock when serialize=False); every
        writer enters here, so a repository in the middle of a merge, rebase, cherry-pick,
        revert or bisect is refused here, before anything is written."""
        if not self.serialize:
            self.refuse_unfinished_operation()
            yield
            return
        busy = (
            f"another ctune process held {self.common_dir / FLOCK_NAME} for "
            f"{self.retry_budget_s:.0f} s; try again when it finishes"
        )
        with writer_lock(self.common_dir, self.retry_budget_s, busy):
            self.refuse_unfinished_operation()
            yield

    def unfinished_operation(self) -> tuple[str, str, Path] | None:
        """(what, the git command that finishes it, the file that says so) of an operation
        stopped half way in this worktree (each worktree has its own), else None."""
        asked = [arg for name, _, _ in _UNFINISHED for arg in ("--git-path", name)]
        found = self.out("rev-parse", *asked).splitlines()
        for (_, what, command), text in zip(_UNFINISHED, found, strict=True):
            path = Path(text)
            path = path if path.is_absolute() else self.top / path
            if path.exists():
                return what, command, path
        return None

    def refuse_unfinished_operation(self) -> None:
        """RegistryError (exit 2) when git stopped half way through an operation here: a
        commit made now would settle the user's conflict with ctune's file."""
        stopped = self.unfinished_operation()
        if stopped is not None:
            what, command, path = stopped
            raise RegistryError(
                f"{self.top} is in the middle of {what} ({path} exists); finish it "
                f"(`{command} --continue`) or abort it (`{command} --abort`), then run "
                "ctune again"
            )

    def _identity_env(self) -> dict[str, str]:
        # CI machines often have no user.name/email; commit-tree would fail.
        if self._ident_env is None:
            status, _, _ = self.run("var", "GIT_COMMITTER_IDENT")
            self._ident_env = {} if status == 0 else dict(_FALLBACK_IDENT)
        return self._ident_env

    def hash_blob(self, data: bytes) -> str:
        return self.out("hash-object", "-w", "--no-filters", "--stdin", stdin=data).strip()

    def commit_blobs(
        self, blobs: Mapping[str, bytes], message: str, removed: Sequence[str] = ()
    ) -> CommitResult:
        """Commit ``{repo-relative path: bytes}`` (and the deletion of ``removed``) on the
        target ref, never losing a writer.

        The worktree files are not read; callers write (atomically) or delete them and
        pass the same bytes, under :meth:`writer_lock`.
        """
        ref = self.target_ref()
        paths = tuple(sorted({*blobs, *removed}))
        for p in paths:
            pp = PurePosixPath(p)
            if pp.is_absolute() or any(part in ("", ".", "..", ".git") for part in pp.parts):
                raise RegistryError(f"refusing to commit path {ascii(p)[:80]}")
        written = b"".join(
            _index_entry("100644", self.hash_blob(blobs[p]), p) for p in sorted(blobs)
        )
        deleted = b"".join(
            _index_entry("0", ZERO_SHA, p) for p in sorted(set(removed) - set(blobs))
        )
        index_info = written + deleted
        checked_out = ref == self.head_branch()
        staged_before = self._index_entries(sorted(blobs)) if checked_out else b""
        if checked_out:
            # Index first: a crash between the two steps leaves the artifact
            # staged (harmless), never a staged deletion a later commit would keep.
            self._sync_index(written)
        scratch = Path(tempfile.mkdtemp(prefix="ctune-index-"))
        try:
            env = {**self._identity_env(), "GIT_INDEX_FILE": str(scratch / "index")}
            result = self._commit_until_done(ref, index_info, message, env, paths)
        except BaseException:
            if checked_out:
                # a commit that did not happen leaves nothing staged a plain `git commit`
                # would take: the caller puts the files back, this puts the index back
                with contextlib.suppress(RegistryError, OSError):
                    self._sync_index(staged_before)
            raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if checked_out and deleted:
            # deletions after the commit, for the same reason
            self._sync_index(deleted)
        return result

    def _commit_until_done(
        self,
        ref: str,
        index_info: bytes,
        message: str,
        env: dict[str, str],
        paths: tuple[str, ...],
    ) -> CommitResult:
        """Retry :meth:`_try_commit` while other writers move ``ref``, within the budget."""
        deadline = time.monotonic() + self.retry_budget_s
        attempt = 0
        while True:
            attempt += 1
            result = self._try_commit(ref, index_info, message, env, paths, attempt)
            if result is not None:
                return result
            if time.monotonic() > deadline:
                raise RegistryError(self._stuck_message(f"{ref}.lock", ref, attempt))
            # jitter: writers that collided spread out instead of colliding again
            time.sleep(random.uniform(0.002, 0.02) * min(attempt, 10))

    def _index_entries(self, paths: Sequence[str]) -> bytes:
        """``paths``' entries in the checked-out index as ``--index-info`` lines (a path
        not in it as a removal): what puts the index back after a commit that failed."""
        if not paths:
            return b""
        _, listed, _ = self.run("ls-files", "-s", "-z", "--", *paths, binary=True)
        staged: dict[str, bytes] = {}
        for item in bytes(listed).split(b"\0"):
            if item:
                head, _, name = item.partition(b"\t")
                mode, sha, _stage = head.decode().split(" ")
                staged[os.fsdecode(name)] = _index_entry(mode, sha, os.fsdecode(name))
        return b"".join(staged.get(p, _index_entry("0", ZERO_SHA, p)) for p in paths)

    def _try_commit(
        self,
        ref: str,
        index_info: bytes,
        message: str,
        env: dict[str, str],
        paths: tuple[str, ...],
        attempt: int,
    ) -> CommitResult | None:
        parent, parent_tree = self._tip(ref)
        self.out("read-tree", *([parent] if parent else ["--empty"]), env=env)
        self.out("update-index", "-z", "--index-info", env=env, stdin=index_info)
        tree = self.out("write-tree", env=env).strip()
        if parent and tree == parent_tree:
            return CommitResult(parent, ref, paths, changed=False, attempts=attempt)
        args = ["commit-tree", tree, "-F", "-"] + (["-p", parent] if parent else [])
        commit = self.out(*args, env=env, stdin=message.encode()).strip()
        status, _, err = self.run(
            "update-ref", "-m", message.splitlines()[0][:200], ref, commit, parent or ZERO_SHA
        )
        if status != 0:
            if self._tip(ref)[0] == parent and ".lock" not in err:
                # nobody moved the ref and it is not locked: retrying cannot help
                raise RegistryError(f"git update-ref {ref} failed: {err.strip()[:200]}")
            return None  # the ref moved (or is locked): rebuild on the new tip
        return CommitResult(commit, ref, paths, changed=True, attempts=attempt)

    def _tip(self, ref: str) -> tuple[str | None, str | None]:
        """(commit, tree) of exactly ``ref``; (None, None) while it does not exist.

        for-each-ref matches prefixes too (``ctune`` would list ``ctune/registry``),
        so only the line naming ``ref`` itself counts.
        """
        listing = self.out("for-each-ref", "--format=%(refname) %(objectname) %(tree)", ref)
        for line in listing.splitlines():
            name, _, rest = line.partition(" ")
            if name == ref:
                commit, _, tree = rest.partition(" ")
                return commit, tree
        return None, None

    def _sync_index(self, index_info: bytes) -> None:
        """Point the checked-out branch's index entries for our paths at the new blobs."""
        deadline = time.monotonic() + self.retry_budget_s
        while True:
            status, _, err = self.run("update-index", "-z", "--index-info", stdin=index_info)
            if status == 0:
                return
            if "index.lock" not in err:
                raise RegistryError(f"cannot update the index: {err.strip()[:200]}")
            if time.monotonic() > deadline:
                raise RegistryError(self._stuck_message("index.lock", "the index", 0))
            time.sleep(random.uniform(0.005, 0.05))

    def _stuck_message(self, lock_name: str, what: str, attempts: int) -> str:
        base = self.git_dir if lock_name == "index.lock" else self.common_dir
        lock = base / lock_name
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:  # released meanwhile
            age = -1.0
        if age >= 0:
            return (
                f"cannot update {what}: {lock} exists (age {age:.0f} s); another git process "
                "is writing, or one crashed. If none is running: `ctune registry doctor --fix`"
            )
        return f"cannot update {what} after {attempts} attempts (too many concurrent writers)"

    # --- plumbing for sharing (see ctune.registry.remote) ----------------------

    def network(self, *args: str) -> tuple[int, str, str]:
        """Run a git command that talks to a remote: never prompts, killed after
        :data:`NETWORK_TIMEOUT_S`."""
        status, out, err = self.run(*args, env=_NETWORK_ENV, timeout_s=NETWORK_TIMEOUT_S)
        return status, str(out), err

    def tip(self, ref: str) -> str | None:
        """The commit ``ref`` points at exactly, or None while it does not exist."""
        return self._tip(ref)[0]

    def update_ref(self, ref: str, new: str, old: str | None, message: str) -> bool:
        """Compare-and-swap ``ref`` from ``old`` (None: must not exist) to ``new``.

        False when the ref moved meanwhile or is locked; the caller decides
        whether to retry.
        """
        status, _, _ = self.run("update-ref", "-m", message[:200], ref, new, old or ZERO_SHA)
        return status == 0

    def set_refs(self, updates: Mapping[str, str | None]) -> None:
        """Point each ref at its value, deleting those mapped to None, in one transaction.

        For ctune's own bookkeeping refs (remote-tracking copies); never for
        the registry ref or tags, which move only by compare-and-swap.
        """
        if not updates:
            return
        lines = "".join(
            f"update {ref} {new}\n" if new else f"delete {ref}\n" for ref, new in updates.items()
        )
        self.out("update-ref", "--stdin", stdin=lines.encode())

    def refs_under(self, prefix: str) -> dict[str, str]:
        """{ref: object id} of every ref under ``prefix`` (which should end with '/')."""
        out = self.out("for-each-ref", "--format=%(refname) %(objectname)", prefix)
        pairs = (line.split(" ", 1) for line in out.splitlines() if line)
        return {name: oid for name, oid in pairs if name.startswith(prefix)}

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor, or None when the histories are unrelated."""
        status, out, _ = self.run("merge-base", a, b)
        base = str(out).strip()
        return base if status == 0 and base else None

    def count(self, *revs: str, paths: Sequence[str] = ()) -> int:
        """``git rev-list --count revs -- paths``: e.g. ``count(new, "^" + old)``."""
        return int(self.out("rev-list", "--count", *revs, "--", *paths).strip() or 0)

    def shallow_commits(self) -> frozenset[str]:
        """Commits whose parents this shallow clone lacks (empty when not shallow)."""
        try:
            return frozenset((self.common_dir / "shallow").read_text().split())
        except FileNotFoundError:
            return frozenset()

    def empty_tree(self) -> str:
        return self.out("mktree", stdin=b"").strip()

    def tree_changes(self, old: str | None, new: str) -> list[TreeChange]:
        """What ``new`` changed against ``old`` (a commit or tree; None: the empty tree)."""
        out = self.out(
            "diff-tree", "-r", "-z", "--no-renames", "--raw", old or self.empty_tree(), new
        )
        fields = out.split("\0")
        changes = []
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            if not meta.startswith(":"):
                continue
            _, new_mode, _, new_sha, status = meta[1:].split(" ")
            if status == "D":
                changes.append(TreeChange("0", ZERO_SHA, path))
            else:
                changes.append(TreeChange(new_mode, new_sha, path))
        return changes

    def commit_parts(self, commit: str) -> tuple[dict[str, str], bytes]:
        """(author environment, exact message bytes) of ``commit``, to rebuild it."""
        status, raw, err = self.run("cat-file", "commit", commit, binary=True)
        if status != 0:
            raise RegistryError(f"cannot read commit {commit[:12]}: {err.strip()[:200]}")
        header, _, message = bytes(raw).partition(b"\n\n")
        match = re.search(rb"^author (.*) <(.*)> (\d+) ([+-]\d{4})$", header, re.MULTILINE)
        if match is None:
            return {}, message
        name, email, when, zone = (m.decode(errors="replace") for m in match.groups())
        author = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_AUTHOR_DATE": f"{when} {zone}",
        }
        return author, message

    def rebuild(self, commits: list[str], onto: str) -> tuple[str, dict[str, str]]:
        """Re-apply each commit's changes (against its first parent) on top of ``onto``.

        A private index seeded from ``onto`` takes each commit's changed
        entries in turn; a commit whose changes are already there is dropped
        (like ``git rebase``). Author and message are kept, the committer is
        this machine. Returns (new tip, {old commit: the commit now holding
        its changes}). Only objects are written: no ref moves here.
        """
        mapping: dict[str, str] = {}
        tip = onto
        scratch = Path(tempfile.mkdtemp(prefix="ctune-rebuild-"))
        try:
            env = {**self._identity_env(), "GIT_INDEX_FILE": str(scratch / "index")}
            self.out("read-tree", onto, env=env)
            tree = self.out("rev-parse", f"{onto}^{{tree}}").strip()
            for commit in commits:
                parents = self.out("rev-list", "--parents", "-n", "1", commit).split()[1:]
                changes = self.tree_changes(parents[0] if parents else None, commit)
                info = b"".join(_index_entry(c.mode, c.sha, c.path) for c in changes)
                self.out("update-index", "-z", "--index-info", env=env, stdin=info)
                new_tree = self.out("write-tree", env=env).strip()
                if new_tree != tree:
                    author, message = self.commit_parts(commit)
                    tip = self.out(
                        "commit-tree",
                        new_tree,
                        "-p",
                        tip,
                        "-F",
                        "-",
                        env={**env, **author},
                        stdin=message,
                    ).strip()
                    tree = new_tree
                mapping[commit] = tip
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return tip, mapping

    def checkout_move(self, old: str, new: str) -> str:
        """Move the worktree and index of the checked-out branch from ``old`` to ``new``.

        ``git read-tree -m -u`` (a two-tree merge, what ``git checkout`` does):
        local changes to paths that do not differ are carried along; a path
        that differs and is dirty (or untracked where ``new`` has a file)
        refuses the whole move before anything is written. Returns "" on
        success, else git's complaint.
        """
        status, _, err = self.run("read-tree", "-m", "-u", old, new)
        return "" if status == 0 else err.strip()

    def retag(self, name: str, target: str, message: str, *, sign: bool) -> None:
        """Re-point a local, never-pushed annotated tag (after its commit was rebuilt)."""
        self._tag(name, target, message, sign=sign, force=True)

    # --- tags (pins) ----------------------------------------------------------

    def config(self, key: str) -> str | None:
        status, out, _ = self.run("config", "--get", key)
        return str(out).strip() if status == 0 and str(out).strip() else None

    def can_sign(self) -> bool:
        return self.config("gpg.format") == "ssh" and self.config("user.signingkey") is not None

    def create_tag(self, name: str, target: str, message: str, *, sign: bool) -> None:
        """Annotated (SSH-signed when ``sign``) tag ``refs/tags/<name>`` at ``target``."""
        self.check_ref_format(f"refs/tags/{name}")
        if self.resolve(f"refs/tags/{name}") is not None:
            raise RegistryError(
                f"pin tag {name} already exists; pins are immutable: choose a new release name"
            )
        self._tag(name, target, message, sign=sign, force=False)

    def _tag(self, name: str, target: str, message: str, *, sign: bool, force: bool) -> None:
        mode = ["-s"] if sign else ["-a", "--no-sign"]
        status, _, err = self.run(
            "tag",
            *(["-f"] if force else []),
            *mode,
            "-F",
            "-",
            name,
            target,
            env=self._identity_env(),
            stdin=message.encode(),
        )
        if status != 0:
            verb = "re-point" if force else "create"
            raise RegistryError(f"cannot {verb} tag {name}: {err.strip()[:300]}")

    def tags(self, prefix: str) -> list[str]:
        """Tag names (without refs/tags/) under ``prefix``."""
        out = self.out("for-each-ref", "--format=%(refname)", f"refs/tags/{prefix}")
        return [ln[len("refs/tags/") :] for ln in out.splitlines() if ln]

    def tag_message(self, name: str) -> str:
        """The annotated tag's message, signature block removed."""
        status, out, _ = self.run("cat-file", "tag", f"refs/tags/{name}")
        if status != 0:
            raise RegistryError(f"{name} is not an annotated tag")
        body = str(out).split("\n\n", 1)[1] if "\n\n" in str(out) else ""
        return body.split("-----BEGIN ", 1)[0]

    def verify_tag(self, name: str) -> tuple[bool, str]:
        status, out, err = self.run("tag", "-v", name)
        return status == 0, (str(err) or str(out)).strip()

    # --- checks -----------------------------------------------------------------

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        status, _, _ = self.run("merge-base", "--is-ancestor", ancestor, descendant)
        return status == 0

    def fsck(self) -> tuple[bool, str]:
        status, out, err = self.run("fsck", "--no-progress", "--no-dangling")
        return status == 0, (str(err) + str(out)).strip()
