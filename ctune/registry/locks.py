"""Find and clear git lock files left behind by a crashed writer.

A SIGKILL at the wrong moment can leave a stale ``refs/heads/*.lock``, and every later
write then fails. Normal commands only *report* such a lock (naming it); removing it is
``ctune registry doctor --fix`` (and ``ctune doctor --fix``), and only when (G3) it is
older than ``older_than_s`` (a live git process holds its lock for milliseconds) and no
live ctune writer holds the registry ``flock`` (held while clearing). Only regular files
named ``*.lock`` inside the git directory are touched; symlinks are never followed.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ctune import locking
from ctune.errors import RegistryError

# Lock files git may leave at the top of a git directory; refs/ is walked.
_TOP_LOCKS = (
    "index.lock",
    "HEAD.lock",
    "ORIG_HEAD.lock",
    "packed-refs.lock",
    "config.lock",
    "shallow.lock",
    "FETCH_HEAD.lock",
)
FLOCK_NAME = "ctune-registry.flock"


@contextlib.contextmanager
def writer_lock(common_dir: Path, timeout_s: float, busy: str) -> Iterator[None]:
    """Hold the registry's one writer lock (on ``FLOCK_NAME``, by ``ctune/locking.py``'s
    rule), waiting at most ``timeout_s`` (0: not at all); RegistryError(``busy``) when
    another process keeps it. A killed writer never leaves it held."""
    lock = locking.take(common_dir / FLOCK_NAME, timeout_s)
    if lock is None:
        raise RegistryError(busy)
    try:
        yield
    finally:
        lock.release()


@dataclass(frozen=True, slots=True)
class StaleLock:
    path: Path
    age_s: float


def _git_dirs(repo_path: Path) -> tuple[Path, Path]:
    """(git dir, common dir) of the repository holding ``repo_path``."""
    import git

    probe = Path(repo_path).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        with git.Repo(probe, search_parent_directories=True) as repo:
            return Path(repo.git_dir), Path(repo.common_dir)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise RegistryError(f"{repo_path} is not inside a git repository") from None


def _candidates(git_dir: Path, common_dir: Path) -> list[Path]:
    found = {d / name for d in {git_dir, common_dir} for name in _TOP_LOCKS}
    refs = common_dir / "refs"
    for dirpath, _dirs, files in os.walk(refs, followlinks=False):
        found.update(Path(dirpath) / f for f in files if f.endswith(".lock"))
    return sorted(found)


def find_stale_locks(repo_path: Path, older_than_s: float = 0.0) -> list[StaleLock]:
    """Git ``*.lock`` files at least ``older_than_s`` old (all of them with 0)."""
    git_dir, common_dir = _git_dirs(repo_path)
    now = time.time()
    out = []
    for path in _candidates(git_dir, common_dir):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        age = now - st.st_mtime
        if stat.S_ISREG(st.st_mode) and age >= older_than_s:
            out.append(StaleLock(path, age))
    return out


def clear_stale_locks(repo_path: Path, older_than_s: float) -> list[Path]:
    """Remove stale git lock files; returns what was removed.

    Refuses (RegistryError) while a ctune writer holds the registry lock:
    its git locks are live, not stale.
    """
    _git_dir, common_dir = _git_dirs(repo_path)
    busy = (
        "a ctune writer is running in this repository; its locks are live. "
        "Try again when it finishes"
    )
    with writer_lock(common_dir, 0, busy):
        removed = []
        for lock in find_stale_locks(repo_path, older_than_s):
            try:
                os.unlink(lock.path)
            except FileNotFoundError:
                continue
            removed.append(lock.path)
        return removed
