"""Sharing the registry between machines: ``push``, ``pull``, ``status`` (rules G2, G9, G10).

Writes stay local and work offline (:mod:`ctune.registry.git`); sharing is an explicit
push that never forces: when another machine pushed first, this machine's commits are
rebuilt on the fetched tip and pushed again, and a same-path conflict, a rewritten remote
or a remote failure stops with one line and nothing lost (:class:`~ctune.errors.RemoteError`,
exit 5). ``pull`` is the same fetch and rebuild without the push; ``status`` reads only
what was last fetched, so it works offline. The whole procedure: docs/registry.md.
"""

from __future__ import annotations

import enum
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from ctune.errors import RegistryError, RemoteError, UserError
from ctune.interrupts import Interrupted, blocked, deferred, keep
from ctune.registry import folder
from ctune.registry import git as git_module
from ctune.registry.git import GitRegistry
from ctune.registry.layout import PIN_PREFIX, key_from_relpath

#: Pushes tried before giving up while other machines keep winning the race (the
#: contention measured behind it: docs/registry.md).
PUSH_MAX_ATTEMPTS = 20
#: Wall-clock budget for one ``ctune registry push``, checked before each retry (every
#: network command is also killed after git.NETWORK_TIMEOUT_S).
PUSH_BUDGET_S = 180.0
#: Backoff after push attempt n: uniform(0, min(CAP, BASE * 2**n)) ("full jitter":
#: pushers that collided spread out instead of colliding again).
PUSH_BACKOFF_BASE_S = 0.1
PUSH_BACKOFF_CAP_S = 5.0
#: A pull retries this often when the local ref moves under it (a plain `git commit`).
PULL_MAX_ATTEMPTS = 5
#: ``status`` names at most this many unpushed commits, then counts the rest.
STATUS_LIST_MAX = 20
#: Where ctune keeps its copy of a remote's pin tags (git has no remote-tracking tags).
TAG_COPIES = "refs/ctune/remote-tags"
#: Where the remote-tracking copy of a registry ref outside refs/heads/ lives.
REF_COPIES = "refs/ctune/remote-refs"

_REMOTE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PIN_REFS = f"refs/tags/{PIN_PREFIX}/"
# Rejections another push can cause, retried after a fetch; the rest (hooks, permissions)
# are final. The remote-side ones are a concurrent push holding or moving the ref between
# receive-pack's check and its update (seen with 4 machines pushing at once).
_MOVED = (
    "fetch first",
    "non-fast-forward",
    "already exists",
    "stale info",
    "failed to update ref",
    "atomic transaction failed",
    "cannot lock ref",
    "incorrect old value",
)

# (needles in git's stderr, lower case) -> (what happened, what to do); first match wins.
_FAILURES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("timeout:",),
        "no answer within {timeout_s:.0f} s (offline?)",
        "check the network",
    ),
    (
        (
            "authentication failed",
            "could not read username",
            "could not read password",
            "terminal prompts disabled",
            "permission denied",
            "invalid username or password",
            "access denied",
            "error: 401",
            "error: 403",
        ),
        "authentication failed",
        "fix the credentials (credential helper, token or SSH key)",
    ),
    (
        (
            "could not resolve host",
            "temporary failure in name resolution",
            "failed to connect",
            "couldn't connect",
            "connection refused",
            "connection timed out",
            "network is unreachable",
            "no route to host",
        ),
        "unreachable (offline?)",
        "check the network",
    ),
    (
        (
            "does not appear to be a git repository",
            "repository not found",
            "not found",
            "no such file or directory",
        ),
        "no repository at that address",
        "check `git remote get-url {remote}`",
    ),
)


def classify_failure(stderr: str, remote: str) -> tuple[str, str]:
    """(what happened, what to do) for a network git command that failed."""
    text = stderr.lower()
    for needles, what, todo in _FAILURES:
        if any(n in text for n in needles):
            return what.format(timeout_s=git_module.NETWORK_TIMEOUT_S), todo.format(remote=remote)
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("hint")]
    return (lines[-1][:200] if lines else "git failed without a message"), "fix that"


def redact_url(url: str) -> str:
    """The URL without user:token@ (credentials must not reach logs)."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url, flags=re.IGNORECASE)


def check_remote_name(name: str) -> str:
    if not _REMOTE_RE.fullmatch(name):
        raise UserError(f"remote name {ascii(name)[:80]} is not allowed (use e.g. origin)")
    return name


def short_ref(ref: str) -> str:
    return ref.removeprefix("refs/heads/")


def tracking_ref(ref: str, remote: str) -> str:
    """Where this machine remembers ``remote``'s copy of the registry ref."""
    if ref.startswith("refs/heads/"):
        return f"refs/remotes/{remote}/{short_ref(ref)}"
    return f"{REF_COPIES}/{remote}/{ref.removeprefix('refs/')}"


@dataclass(frozen=True, slots=True)
class PushResult:
    ref: str
    remote: str
    commit: str  # what the remote ref points at now
    previous: str | None  # the remote's tip before this push; None: the ref was new there
    commits: int  # commits the remote gained
    tags: tuple[str, ...]  # pin tags pushed
    rejections: int  # pushes refused because another machine pushed first
    rebuilt: int  # commits rebuilt on a newer remote tip
    #: the remote's commits the ref gained while the registry folder stayed as it was (the
    #: ref is not checked out): ``ctune registry pull`` writes their artifact files
    unsynced: int = 0

    @property
    def up_to_date(self) -> bool:
        return self.commit == self.previous and not self.tags


@dataclass(frozen=True, slots=True)
class PullResult:
    ref: str
    remote: str
    commit: str | None  # the local tip now; None: neither side has the ref
    previous: str | None  # the local tip before this pull; None: the ref was new here
    remote_tip: str | None  # None: the remote has no such ref
    gained: int  # the remote's commits the local ref gained
    rebuilt: int  # unpushed commits rebuilt on the remote's tip
    unpushed: int  # commits the remote still lacks (``ctune registry push`` shares them)
    tags: tuple[str, ...]  # pin tags brought here
    tag_conflicts: tuple[str, ...]  # remote pin tags named like a local one elsewhere: ours kept
    checked_out: bool  # the ref is the checked-out branch: git moved worktree and index
    written: tuple[str, ...]  # artifact keys written into the registry folder
    local_only: tuple[str, ...]  # artifact files the folder has and the ref lacks: kept
    skipped: tuple[str, ...]  # *.json on the ref below the registry root that are not artifacts
    controls_written: int = 0  # controls files (and NOTICE) written into the registry folder
    journals_written: int = 0  # journal copies written beside artifacts in the folder


@dataclass(frozen=True, slots=True)
class _Step:
    """What :meth:`_Link.integrate` did."""

    tip: str  # the local ref now
    rebuilt: int  # commits rebuilt on the remote tip
    written: tuple[str, ...]  # artifact keys written into the registry folder
    diff: folder.FolderDiff | None  # the folder against ``tip`` before writing; None: not synced


class Tracking(enum.Enum):
    NO_REMOTE = "no-remote"  # no such remote configured
    NEVER_FETCHED = "never-fetched"  # nothing known about the remote
    ABSENT = "absent"  # fetched, and the remote had no such ref then
    TRACKED = "tracked"  # compared with the remote-tracking ref


@dataclass(frozen=True, slots=True)
class UnpushedCommit:
    commit: str
    subject: str
    keys: tuple[str, ...]  # artifact keys it touches
    other_paths: int  # paths it touches outside the registry's artifacts


@dataclass(frozen=True, slots=True)
class SyncStatus:
    """What the local registry ref has that the remote (as last seen) lacks."""

    ref: str
    remote: str
    url: str | None  # redacted; None when the remote is not configured
    tracking: Tracking
    tracking_ref: str
    local: str | None  # the local tip; None when the ref does not exist yet
    # newest first, at most STATUS_LIST_MAX, only those touching the registry folder: where
    # the registry shares a branch with code, the code's commits are counted, not listed
    commits: tuple[UnpushedCommit, ...]
    total_commits: int
    tags: tuple[str, ...]  # pin tags the remote lacks
    tag_conflicts: tuple[str, ...]  # pin tags the remote has pointing elsewhere
    behind: int  # commits the remote-tracking ref has that the local ref lacks
    fetch_error: str = ""  # set when --fetch could not reach the remote
    #: artifact and controls files of the ref the folder lacks or holds other bytes of
    folder_behind: int = 0
    registry_commits: int = 0  # of total_commits, those that touch the registry folder

    @property
    def unpushed(self) -> bool:
        return bool(self.total_commits or self.tags)


@dataclass(frozen=True, slots=True)
class _Seen:
    """The remote as of the last fetch: its tip of the registry ref and its pin tags."""

    tip: str | None
    tags: dict[str, str]  # tag name (without refs/tags/) -> tag object id


class _Link:
    """One registry ref and one remote, as seen from this repository."""

    def __init__(
        self, reg: GitRegistry, remote: str, action: Literal["push", "pull"] = "push"
    ) -> None:
        self.reg = reg
        self.remote = check_remote_name(remote)
        self.action = action  # "push" or "pull": what the messages tell a person to run again
        self.ref = reg.target_ref()
        self.tracking = tracking_ref(self.ref, remote)
        self.tag_copies = f"{TAG_COPIES}/{remote}/"
        status, out, _ = reg.run("config", "--get", f"remote.{remote}.url")
        raw = str(out).strip() if status == 0 else ""
        self.url = redact_url(raw) if raw else None
        self.last_failure = ""  # what went wrong in the last failed network command
        self.last_rejection = ""  # git's word for the last push refused because of a race

    # --- what the remote has ------------------------------------------------

    def seen(self) -> _Seen:
        copies = self.reg.refs_under(self.tag_copies)
        tags = {name[len(self.tag_copies) :]: oid for name, oid in copies.items()}
        return _Seen(self.reg.tip(self.tracking), tags)

    def not_on_remote(self) -> list[str]:
        """rev-list arguments excluding every commit the remote is known to have."""
        if self.url is None:
            return []
        return ["--not", f"--remotes={self.remote}", f"--glob={REF_COPIES}/{self.remote}/*"]

    def waiting(self) -> tuple[int, int]:
        """(commits, pin tags) this machine has that the remote lacks, as last seen."""
        local = self.reg.tip(self.ref)
        commits = self.reg.count(local, *self.not_on_remote()) if local else 0
        seen = self.seen().tags
        tags = [t for t in self.reg.tags(PIN_PREFIX + "/") if t not in seen]
        return commits, len(tags)

    def kept_locally(self) -> str:
        commits, tags = self.waiting()
        extra = f" and {tags} pin tag(s)" if tags else ""
        lead = "nothing is lost" if self.action == "push" else "nothing changed here"
        return f"{lead}: {commits} commit(s){extra} are kept locally"

    def kept_here(self, tip: str | None) -> str:
        """What a stop after the local ref moved (to ``tip``) keeps: where the ref is here."""
        return (
            f"{short_ref(self.ref)} is at {str(tip or 'nothing')[:12]} here ({self.doing()} "
            f"stopped after that step); run `ctune registry {self.action}` again"
        )

    def doing(self) -> str:
        """``push ctune/registry to origin`` / ``pull ctune/registry from origin``."""
        way = "to" if self.action == "push" else "from"
        return f"{self.action} {short_ref(self.ref)} {way} {self.remote}"

    def failure(self, stderr: str) -> RemoteError:
        """One line for a failed ls-remote, fetch or push."""
        what, todo = classify_failure(stderr, self.remote)
        self.last_failure = what
        return RemoteError(
            f"cannot {self.doing()} ({self.url}): {what}; "
            f"{todo}, then run `ctune registry {self.action}` again ({self.kept_locally()})"
        )

    def fetch(self) -> _Seen:
        """Ask the remote for the registry ref and its pin tags; refresh the local copies."""
        status, out, err = self.reg.network("ls-remote", self.remote, self.ref, f"{_PIN_REFS}*")
        if status != 0:
            raise self.failure(err)
        names = {line.partition("\t")[2] for line in out.splitlines()}
        has_ref = self.ref in names
        tag_names = {
            n[len("refs/tags/") :]
            for n in names
            if n.startswith(_PIN_REFS) and not n.endswith("^{}")
        }
        before = self.reg.tip(self.tracking)
        if before and not has_ref:
            raise self.rewritten(before, "no longer has it (deleted?)")
        refspecs = [f"+{self.ref}:{self.tracking}"] if has_ref else []
        if tag_names:
            refspecs.append(f"+{_PIN_REFS}*:{self.tag_copies}{PIN_PREFIX}/*")
        if refspecs:
            # --no-prune: fetch.pruneTags in a user's config must never delete local pins
            status, _, err = self.reg.network(
                "fetch", "--no-tags", "--no-prune", self.remote, *refspecs
            )
            if status != 0:
                raise self.failure(err)
        after = self.reg.tip(self.tracking)
        if before and after and not self.reg.is_ancestor(before, after):
            self.reg.set_refs({self.tracking: before})  # keep refusing until a person accepts
            raise self.rewritten(before, "was rewritten (force-pushed?)")
        stale: dict[str, str | None] = {}
        for name in self.reg.refs_under(self.tag_copies):
            if name[len(self.tag_copies) :] not in tag_names:
                stale[name] = None
        self.reg.set_refs(stale)
        return self.seen()

    def rewritten(self, before: str, what: str) -> RegistryError:
        """History the remote had is gone: rebuilding on it would resurrect or fork (G10)."""
        return RegistryError(
            f"{self.remote}'s {short_ref(self.ref)} {what}: {before[:12]}, which this machine "
            f"last saw there, is not in its history; ctune never builds on a rewrite: find out "
            f"why, then accept it with `git update-ref -d {self.tracking}` and {self.action} "
            f"again ({self.kept_locally()})"
        )

    # --- bringing the local ref onto the remote's tip -----------------------

    def integrate(self, seen: _Seen, *, sync_folder: bool = False) -> _Step | None:
        """Make the local ref contain the remote tip (created when it does not exist here).

        Fast-forward when nothing of ours is missing there, else our commits
        rebuilt on the remote tip (:meth:`GitRegistry.rebuild`), pin tags not
        yet pushed re-pointed with them. ``sync_folder`` (pull): when the ref
        is not checked out, the registry folder then shows the new tip
        (:mod:`ctune.registry.folder`), checked before anything moves. None
        when the local ref moved under us (a plain ``git commit``): try again.
        """
        reg = self.reg
        with reg.writer_lock():
            local = reg.tip(self.ref)
            remote_tip = seen.tip
            mapping: dict[str, str] = {}
            if remote_tip is None or remote_tip == local:
                new = local
            elif local is None or reg.is_ancestor(local, remote_tip):
                new = remote_tip  # nothing of ours is missing there: fast-forward
            elif reg.is_ancestor(remote_tip, local):
                new = local
            else:
                commits = reg.out(
                    "rev-list", "--reverse", "--first-parent", local, f"^{remote_tip}", "--"
                ).split()
                self._refuse_incomplete(commits)
                self._refuse_conflicts(local, remote_tip)
                new, mapping = reg.rebuild(commits, remote_tip)
            if new is None:
                raise RegistryError(
                    f"{self.ref} exists neither here nor on {self.remote}: nothing to {self.action}"
                )
            diff = None
            if sync_folder and self.ref != reg.head_branch():
                diff = folder.compare(reg, new)
                self._refuse_blocked(diff)
            # the worktree, the ref, the tags and the folder move together: a Ctrl-C (or
            # SIGTERM) meanwhile waits for them, then stops saying where the ref is
            written: tuple[str, ...] = ()
            with deferred() as held:
                moved = new == local or self._move(local, new)
                if moved and new != local:
                    keep(self.kept_here(new))  # a signal after this block is told it moved
                    self._repoint_tags(mapping, seen)
                if moved and diff:
                    written = tuple(folder.write(reg, diff))
        if held.signalled:
            raise Interrupted(self.kept_here(reg.tip(self.ref)))
        if not moved:
            return None
        return _Step(new, len(mapping), written, diff)

    def _refuse_incomplete(self, commits: list[str]) -> None:
        cut = self.reg.shallow_commits().intersection(commits)
        if cut:
            raise RegistryError(
                f"cannot rebuild {short_ref(self.ref)} on {self.remote}'s tip: this shallow "
                f"clone lacks the history below {sorted(cut)[0][:12]}; run `git fetch "
                f"--unshallow {self.remote}` and {self.action} again ({self.kept_locally()})"
            )

    def _refuse_conflicts(self, local: str, remote_tip: str) -> None:
        """Stop when one path was changed here and there to different contents."""
        reg = self.reg
        base = reg.merge_base(local, remote_tip)
        ours = {c.path for c in reg.tree_changes(base, local)}
        theirs = {c.path for c in reg.tree_changes(base, remote_tip)}
        differ = {c.path for c in reg.tree_changes(remote_tip, local)}
        both = sorted(ours & theirs & differ)
        if not both:
            return
        path = both[0]
        what = self._key_of(path) or path
        more = f" (and {len(both) - 1} more)" if len(both) > 1 else ""
        remote_ref = short_ref(self.tracking.removeprefix("refs/remotes/"))
        raise RegistryError(
            f"cannot {self.doing()}: {path}{more} was changed both here and on "
            f"{self.remote} (another machine published {what} differently); compare with "
            f"`ctune registry diff {remote_ref}:{what} {short_ref(self.ref)}:{what}`, keep one "
            f"with git, then {self.action} again ({self.kept_locally()})"
        )

    def _refuse_blocked(self, diff: folder.FolderDiff) -> None:
        """Stop when a local change is where the ref's artifact file would be written."""
        if not diff.blocked:
            return
        path, why = diff.blocked[0]
        more = f" (and {len(diff.blocked) - 1} more)" if len(diff.blocked) > 1 else ""
        raise RegistryError(
            f"cannot {self.doing()}: {path} {why}{more}, and {short_ref(self.ref)} has another "
            f"version there; move it away (or commit it with `ctune registry import`), then "
            f"{self.action} again ({self.kept_locally()})"
        )

    def _key_of(self, path: str) -> str | None:
        prefix = self.reg.prefix
        pure = PurePosixPath(path)
        try:
            rel = pure.relative_to(prefix) if prefix.parts else pure
            return str(key_from_relpath(rel))
        except (ValueError, UserError):
            return None

    def _move(self, local: str | None, new: str) -> bool:
        """Compare-and-swap the local ref (None: create it); the checked-out branch brings
        its worktree along."""
        reg = self.reg
        checked_out = self.ref == reg.head_branch()
        before = local or reg.empty_tree()  # an unborn checked-out branch: from nothing
        if checked_out:
            complaint = reg.checkout_move(before, new)
            if complaint:
                first = complaint.splitlines()[0].removeprefix("error: ")
                raise RegistryError(
                    f"cannot bring {self.remote}'s new commits into this checkout: {first}; "
                    f"commit or stash that change, then {self.action} again "
                    f"({self.kept_locally()})"
                )
        verb = "rebuilt on" if self.action == "push" else "pulled"
        message = f"ctune: {verb} {self.remote}'s {short_ref(self.ref)}"
        if reg.update_ref(self.ref, new, local, message):
            return True
        if checked_out:
            reg.checkout_move(new, before)  # the ref stayed: so does the worktree
        return False

    def _repoint_tags(self, mapping: dict[str, str], seen: _Seen) -> None:
        """Pins not yet pushed follow their commit to its rebuilt copy (same artifact bytes)."""
        reg = self.reg
        moved = {old: new for old, new in mapping.items() if old != new}
        if not moved:
            return
        for name in reg.tags(PIN_PREFIX + "/"):
            if name in seen.tags:
                continue  # shared already: never touched
            target = reg.resolve(f"refs/tags/{name}")
            if target not in moved:
                continue
            message = re.sub(
                r"^commit: [0-9a-f]+$",
                f"commit: {moved[target]}",
                reg.tag_message(name),
                flags=re.MULTILINE,
            )
            reg.retag(name, moved[target], message, sign=reg.can_sign())

    def adopt_tags(self, seen: _Seen) -> tuple[list[str], list[str]]:
        """Create the remote's pin tags this machine lacks: (adopted, clashing names).

        Each is created only where no local tag of that name exists (update-ref
        with the zero old value), so a local pin is never overwritten: a name
        held here pointing elsewhere is reported, as ``status`` does.
        """
        local = self.reg.refs_under(_PIN_REFS)
        adopted, clashes = [], []
        for name, oid in sorted(seen.tags.items()):
            ref = f"refs/tags/{name}"
            mine = local.get(ref)
            if mine == oid:
                continue
            if mine is None and self.reg.update_ref(ref, oid, None, f"ctune: pull {name}"):
                adopted.append(name)
            else:
                clashes.append(name)
        return adopted, clashes

    # --- pushing ------------------------------------------------------------

    def tags_to_push(self, seen: _Seen, new: str) -> list[str]:
        """Local pin tags the remote lacks whose commit is on ``new``; conflicts refused."""
        out = []
        for ref, oid in sorted(self.reg.refs_under(_PIN_REFS).items()):
            name = ref[len("refs/tags/") :]
            theirs = seen.tags.get(name)
            if theirs == oid:
                continue
            if theirs is not None:
                raise RegistryError(
                    f"pin tag {name} exists on {self.remote} pointing elsewhere ({theirs[:12]}, "
                    f"here {oid[:12]}); pins are immutable and ctune never overwrites one: "
                    f"delete the local tag (`git tag -d {name}`) and pin under a new release name"
                )
            commit = self.reg.resolve(ref)
            if commit is not None and self.reg.is_ancestor(commit, new):
                out.append(name)
        return out

    def push(self, new: str, tags: list[str]) -> bool:
        """One ``git push`` (atomic with tags). False: the remote moved first; retry.

        A Ctrl-C (or SIGTERM) meanwhile stops ``git push`` (the terminal's reaches it) but
        stops ctune only once git has ended: a push that went through is recorded here
        (:meth:`record_pushed`) and said, whenever the signal came."""
        args = ["push", "--porcelain", *(["--atomic"] if tags else []), self.remote]
        args += [f"{new}:{self.ref}", *(f"refs/tags/{t}:refs/tags/{t}" for t in tags)]
        with deferred(children_too=False) as held:
            status, out, err = self.reg.network(*args)
            if status == 0:
                with blocked():  # a local git command: never killed half way
                    self.record_pushed(new, tags)
                keep(self.kept_pushed(new, tags))
        if held.signalled:
            raise Interrupted(self.kept_pushed(new, tags) if status == 0 else self.unpushed(new))
        if status == 0:
            return True
        rejected = [
            line.split("\t")[2]
            for line in out.splitlines()
            if line.startswith("!\t") and line.count("\t") >= 2
        ]
        if not rejected:
            raise self.failure(err)  # never reached the refs: network or auth
        causes = [r for r in rejected if "atomic push fail" not in r] or rejected
        if all(any(m in r for m in _MOVED) for r in causes):
            self.last_rejection = causes[0]
            return False
        raise RemoteError(
            f"remote {self.remote} ({self.url}) refused the push: {causes[0]}; ask whoever "
            f"runs it (protected branch? hook?), then push again ({self.kept_locally()})"
        )

    def kept_pushed(self, new: str, tags: list[str]) -> str:
        """What a stop after a push that went through keeps."""
        extra = f" with {len(tags)} pin tag(s)" if tags else ""
        return f"{short_ref(self.ref)} pushed to {self.remote} ({new[:12]}){extra}"

    def unpushed(self, new: str) -> str:
        """What a stop that stopped ``git push`` keeps: the ref here, as it was to go."""
        return (
            f"{short_ref(self.ref)} is at {new[:12]} here; `git push` to {self.remote} was "
            "stopped before it finished: run `ctune registry push` again"
        )

    def record_pushed(self, new: str, tags: list[str]) -> None:
        oids = self.reg.refs_under(_PIN_REFS)
        updates: dict[str, str | None] = {self.tracking: new}
        updates.update({f"{self.tag_copies}{t}": oids[f"refs/tags/{t}"] for t in tags})
        self.reg.set_refs(updates)


def push_registry(
    root: Path,
    *,
    ref: str | None = None,
    remote: str = "origin",
    max_attempts: int = PUSH_MAX_ATTEMPTS,
    budget_s: float = PUSH_BUDGET_S,
) -> PushResult:
    """Push the registry ref (and pin tags the remote lacks) to ``remote``; never forces.

    A rejection because the remote moved is answered by fetch, rebuild on
    the new tip, compare-and-swap of the local ref, and another push after a
    jittered backoff, within ``max_attempts`` pushes and ``budget_s`` seconds.
    """
    start = time.monotonic()
    with GitRegistry(root, ref) as reg:
        link = _Link(reg, remote)
        if link.url is None:
            raise RemoteError(_no_remote(link))
        before = reg.tip(link.ref)
        if before is None:
            raise RegistryError(f"{link.ref} does not exist here yet: nothing to push")
        checked_out = link.ref == reg.head_branch()
        rejections = rebuilt = 0
        for attempt in range(1, max_attempts + 1):
            seen = link.fetch()
            step = link.integrate(seen)
            if step is not None:
                new = step.tip
                rebuilt = max(rebuilt, step.rebuilt)  # the same commits, rebuilt on each new tip
                tags = link.tags_to_push(seen, new)
                unsynced = 0
                if seen.tip is not None and not checked_out:
                    unsynced = reg.count(seen.tip, f"^{before}")
                if new == seen.tip and not tags:
                    return PushResult(
                        link.ref, remote, new, new, 0, (), rejections, rebuilt, unsynced
                    )
                gained = reg.count(new, *link.not_on_remote())
                if link.push(new, tags):
                    return PushResult(
                        link.ref,
                        remote,
                        new,
                        seen.tip,
                        gained,
                        tuple(tags),
                        rejections,
                        rebuilt,
                        unsynced,
                    )
                rejections += 1
            delay = random.uniform(0, min(PUSH_BACKOFF_CAP_S, PUSH_BACKOFF_BASE_S * 2**attempt))
            if attempt == max_attempts or time.monotonic() + delay - start > budget_s:
                break
            time.sleep(delay)
        raise RemoteError(
            f"cannot push {short_ref(link.ref)} to {remote} ({link.url}): it kept moving "
            f"({rejections} rejection(s) in {time.monotonic() - start:.0f} s as other machines "
            f"pushed first, last: {link.last_rejection or 'none'}); run `ctune registry push` "
            f"again ({link.kept_locally()})"
        )


def _no_remote(link: _Link) -> str:
    return (
        f"no remote {link.remote} in {link.reg.top}: add one with `git remote add "
        f"{link.remote} URL` (or choose one with --remote / CTUNE_REGISTRY_REMOTE), then run "
        f"`ctune registry {link.action}` ({link.kept_locally()})"
    )


def pull_registry(
    root: Path,
    *,
    ref: str | None = None,
    remote: str = "origin",
    max_attempts: int = PULL_MAX_ATTEMPTS,
) -> PullResult:
    """Bring ``remote``'s registry ref and pin tags here without losing anything.

    Fetch; fast-forward the local ref, or rebuild its unpushed commits on the
    fetched tip as a push does; create the remote's pin tags this machine
    lacks; make the registry folder show the ref (git moves the worktree when
    the ref is checked out, else :mod:`ctune.registry.folder` writes the
    artifact files). Never pushes.
    """
    with GitRegistry(root, ref) as reg:
        link = _Link(reg, remote, "pull")
        if link.url is None:
            raise RemoteError(_no_remote(link))
        step = None
        for _ in range(max_attempts):
            seen = link.fetch()
            previous = reg.tip(link.ref)
            if seen.tip is None and previous is None:
                break  # nothing to bring in but pins
            step = link.integrate(seen, sync_folder=True)
            if step is not None:
                break
        else:
            raise RegistryError(
                f"cannot {link.doing()}: {link.ref} kept moving here ({max_attempts} tries; "
                f"is another git command committing to it?); pull again when it is done"
            )
        tags, clashes = link.adopt_tags(seen)
        diff = step.diff if step else None
        return PullResult(
            ref=link.ref,
            remote=remote,
            commit=step.tip if step else None,
            previous=previous,
            remote_tip=seen.tip,
            gained=reg.count(seen.tip, *([f"^{previous}"] if previous else [])) if seen.tip else 0,
            rebuilt=step.rebuilt if step else 0,
            unpushed=reg.count(step.tip, *link.not_on_remote()) if step else 0,
            tags=tuple(tags),
            tag_conflicts=tuple(clashes),
            checked_out=link.ref == reg.head_branch(),
            written=step.written if step else (),
            local_only=diff.local_only if diff else (),
            skipped=diff.skipped if diff else (),
            controls_written=len(diff.controls) if diff else 0,
            journals_written=len(diff.journals) if diff else 0,
        )


def registry_status(
    root: Path, *, ref: str | None = None, remote: str = "origin", fetch: bool = False
) -> SyncStatus:
    """What the registry ref has that ``remote`` lacks, as of the last fetch or push.

    Reads local refs only, unless ``fetch`` (then a failed fetch is reported
    in ``fetch_error`` and the last-known state is used).
    """
    with GitRegistry(root, ref) as reg:
        link = _Link(reg, remote)
        fetch_error = ""
        if fetch and link.url is not None:
            try:
                link.fetch()
            except RemoteError:
                fetch_error = link.last_failure
        local = reg.tip(link.ref)
        seen = link.seen()
        if link.url is None:
            tracking = Tracking.NO_REMOTE
        elif seen.tip is not None:
            tracking = Tracking.TRACKED
        elif reg.refs_under(f"refs/remotes/{remote}/") or seen.tags:
            tracking = Tracking.ABSENT
        else:
            tracking = Tracking.NEVER_FETCHED
        exclude = link.not_on_remote()
        commits: list[UnpushedCommit] = []
        total = in_registry = 0
        if local is not None:
            folder_path = reg.prefix.as_posix() if reg.prefix.parts else "."
            total = reg.count(local, *exclude)
            in_registry = reg.count(local, *exclude, paths=[folder_path])
            listing = reg.out(
                "log",
                f"--max-count={STATUS_LIST_MAX}",
                "--format=%H%x00%P%x00%s",
                local,
                *exclude,
                "--",
                folder_path,
            )
            for line in listing.splitlines():
                commit, parents, subject = line.split("\0", 2)
                commits.append(_unpushed(link, commit, parents.split(), subject))
        local_tags = reg.refs_under(_PIN_REFS)
        tags, conflicts = [], []
        for tag_ref, oid in sorted(local_tags.items()):
            name = tag_ref[len("refs/tags/") :]
            theirs = seen.tags.get(name) if link.url else None
            if theirs is None:
                tags.append(name)
            elif theirs != oid:
                conflicts.append(name)
        behind = reg.count(seen.tip, *([f"^{local}"] if local else [])) if seen.tip else 0
        folder_behind = 0
        if local is not None and link.ref != reg.head_branch():
            diff = folder.compare(reg, local)
            folder_behind = (
                len(diff.missing) + len(diff.controls) + len(diff.journals) + len(diff.blocked)
            )
        return SyncStatus(
            link.ref,
            remote,
            link.url,
            tracking,
            link.tracking,
            local,
            tuple(commits),
            total,
            tuple(tags),
            tuple(conflicts),
            behind,
            fetch_error,
            folder_behind,
            in_registry,
        )


def _unpushed(link: _Link, commit: str, parents: list[str], subject: str) -> UnpushedCommit:
    keys: list[str] = []
    other = 0
    for change in link.reg.tree_changes(parents[0] if parents else None, commit):
        key = link._key_of(change.path)
        if key is None:
            other += 1
        elif key not in keys:
            keys.append(key)
    return UnpushedCommit(commit, subject, tuple(keys), other)


__all__ = [
    "PUSH_BACKOFF_BASE_S",
    "PUSH_BACKOFF_CAP_S",
    "PUSH_BUDGET_S",
    "PUSH_MAX_ATTEMPTS",
    "PullResult",
    "PushResult",
    "SyncStatus",
    "Tracking",
    "UnpushedCommit",
    "classify_failure",
    "pull_registry",
    "push_registry",
    "redact_url",
    "registry_status",
    "tracking_ref",
]
