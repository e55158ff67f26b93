"""The versioned history under the registry: the operations the registry's services need.

Artifacts are files (``store.py``); their history (commits, the pin tags
that name releases, the lock that keeps a file and its commit together)
is a backend behind :class:`History`. Git is the one backend today
(``git.GitRegistry``): the history is then reviewable, diffable and
pushable with the tools release engineers already use. Push and pull
(``remote.py``) are git's transport and stay git-specific.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from ctune.registry.git import CommitResult, NotInRepository


@runtime_checkable
class History(Protocol):
    """One opened registry history (a context manager; close it when done)."""

    def __enter__(self) -> History: ...

    def __exit__(self, *exc: object) -> None: ...

    # --- where writes go, and one writer at a time
    def target_ref(self) -> str: ...

    def writer_lock(self) -> AbstractContextManager[None]: ...

    def registry_path(self, rel: PurePosixPath) -> str: ...

    def check_ref_format(self, ref: str) -> str: ...

    # --- commits
    def commit_blobs(self, blobs: Mapping[str, bytes], message: str) -> CommitResult: ...

    def resolve(self, rev: str) -> str | None: ...

    def resolve_or_fail(self, rev: str) -> str: ...

    def read_blob(self, rev: str, path: str) -> bytes: ...

    def is_ancestor(self, ancestor: str, descendant: str) -> bool: ...

    @property
    def is_shallow(self) -> bool: ...

    # --- pins (releases)
    def tags(self, prefix: str) -> list[str]: ...

    def tag_message(self, name: str) -> str: ...

    def create_tag(self, name: str, target: str, message: str, *, sign: bool) -> None: ...

    def verify_tag(self, name: str) -> tuple[bool, str]: ...

    def can_sign(self) -> bool: ...

    def config(self, key: str) -> str | None: ...

    # --- integrity
    def fsck(self) -> tuple[bool, str]: ...


def open_history(root: Path, ref: str | None = None, **options: Any) -> History:
    """The history of the registry at ``root`` (git today); ``options`` go to the backend.
    NotInRepository (a RegistryError): ``root`` is in no repository."""
    from ctune.registry.git import GitRegistry

    history: History = GitRegistry(root, ref, **options)
    return history


__all__ = ["History", "NotInRepository", "open_history"]
