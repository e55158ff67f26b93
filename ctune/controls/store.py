"""Controls files stored by content: ``<root>/<sha256>.acf``, written atomically, read checked.

A controls file (an advanced-controls file, ``--apply-controls``) is opaque, encrypted
bytes, and the same engine decision gives different bytes each time: the file is named by
the sha256 of its bytes, which is also the ``acf_*`` gene's value. A search keeps its files
in ``<cache_dir>/controls``, the registry beside its artifacts in ``<registry>/controls``;
the compiler looks a digest up through both (:class:`StoreChain`). Every read checks the
bytes against their name, so a file changed behind ctune's back is refused, not built.

A folder of controls files carries ``NOTICE``: CompileIQ's licence lets its output files be
published with that notice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ctune.errors import UserError
from ctune.files import MAX_CONTROLS_BYTES, InputFileError, read_capped
from ctune.records import is_sha256_hex, sha256_hex
from ctune.writes import is_disk_full, write_atomic

if TYPE_CHECKING:
    from ctune.config import Settings

#: a store's folder name under a cache directory or a registry, and in registry-relative flags
FOLDER = "controls"
SUFFIX = ".acf"
NOTICE_NAME = "NOTICE"
NOTICE_TEXT = (
    "The .acf files in this folder are compiler controls files (nvcc/ptxas --apply-controls),\n"
    "named by the sha256 of their bytes. Files produced by NVIDIA CompileIQ are\n"
    "© NVIDIA Corporation, 2026.\n"
)


class ControlsError(UserError):
    """A controls file that cannot be stored, found or trusted (one line, with the fix)."""


def file_name(digest: str) -> str:
    """``<digest>.acf``: the one naming rule for a stored controls file."""
    return f"{digest}{SUFFIX}"


def registry_relative(digest: str) -> str:
    """``controls/<digest>.acf``: where a registry's file is, from the registry's root (what
    an artifact's flags name, so an export works from a checkout of the registry)."""
    return f"{FOLDER}/{file_name(digest)}"


def digest_of_path(text: str) -> str | None:
    """The digest a stored file's path names (``.../<digest>.acf``), else None."""
    name = text.rsplit("/", 1)[-1]
    stem = name.removesuffix(SUFFIX)
    return stem if name.endswith(SUFFIX) and is_sha256_hex(stem) else None


APPLY_OPTION = "--apply-controls"


def applied_digest(item: str) -> str | None:
    """The digest of a stored file an argv item applies (``--apply-controls=.../D.acf``),
    else None: how a key or an artifact's flags name the file whatever store held it."""
    option, sep, path = item.partition("=")
    return digest_of_path(path) if option == APPLY_OPTION and sep else None


def check_digest(digest: object, where: str) -> str:
    """``digest`` if it is 64 lower-case hex, else a ControlsError naming ``where``."""
    if not is_sha256_hex(digest):
        raise ControlsError(
            f"{where}: {digest!r} is not a controls file's sha256 digest (64 lower-case hex)"
        )
    assert isinstance(digest, str)
    return digest


class ControlsStore:
    """One folder of controls files named by content; safe for threads and processes."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ControlsStore({str(self.root)!r})"

    def file(self, digest: str) -> Path:
        """Where the file of ``digest`` is or would be (no check)."""
        return self.root / file_name(check_digest(digest, str(self.root)))

    def has(self, digest: str) -> bool:
        return is_sha256_hex(digest) and (self.root / file_name(digest)).is_file()

    def put(self, data: bytes) -> str:
        """Store ``data``; its digest. Idempotent, atomic (a reader never sees half a file)."""
        if not data:
            raise ControlsError(
                "an empty file is not a controls file; give one CompileIQ wrote (a .acf file)"
            )
        if len(data) > MAX_CONTROLS_BYTES:
            raise ControlsError(
                f"a controls file of {len(data)} bytes: larger than the "
                f"{MAX_CONTROLS_BYTES}-byte limit"
            )
        digest = sha256_hex(data)
        target = self.root / file_name(digest)
        with contextlib.suppress(ControlsError):
            self._checked(target, digest)
            return digest  # held already, intact
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if not (self.root / NOTICE_NAME).is_file():
                write_atomic(self.root / NOTICE_NAME, NOTICE_TEXT)
            write_atomic(target, data)
        except OSError as exc:
            if is_disk_full(exc):
                raise  # the command line names the file: exit 3
            raise ControlsError(
                f"cannot store a controls file in {self.root}: {exc.strerror or exc}; "
                "make the folder writable or set another cache_dir"
            ) from None
        return digest

    def put_file(self, path: Path, what: str = "controls file") -> str:
        """Store the user's file at ``path``; its digest. A refusal (unreadable, empty, not
        storable) is one line naming ``what`` gave it (the option: ``--acf-file``) and it."""
        data = read_capped(path, MAX_CONTROLS_BYTES, what)
        try:
            return self.put(data)
        except ControlsError as exc:
            raise ControlsError(f"{what} {path}: {exc}") from None

    def read(self, digest: str) -> bytes:
        """The bytes of ``digest``: a ControlsError if not held or not what the name says."""
        return self._checked(self.file(digest), digest)

    def path(self, digest: str) -> Path:
        """The checked file of ``digest``, for a compiler's command line."""
        target = self.file(digest)
        self._checked(target, digest)
        return target

    def digests(self) -> list[str]:
        """The digests held (by name; :meth:`read` checks each)."""
        if not self.root.is_dir():
            return []
        return sorted(d for p in self.root.glob(f"*{SUFFIX}") if (d := digest_of_path(p.name)))

    def _checked(self, target: Path, digest: str) -> bytes:
        try:
            data = read_capped(target, MAX_CONTROLS_BYTES, "controls file")
        except InputFileError as exc:
            raise ControlsError(str(exc)) from None
        if sha256_hex(data) != digest:
            raise ControlsError(
                f"controls file {target}: its bytes do not match its name (changed after it "
                "was stored); delete it, and store the file again"
            )
        return data


class StoreChain:
    """Stores looked up in order (a search's, then the registry's): where a digest is."""

    def __init__(self, stores: Sequence[ControlsStore]) -> None:
        if not stores:
            raise ValueError("a store chain needs a store")
        self.stores = tuple(stores)

    @classmethod
    def of(cls, *roots: Path) -> StoreChain:
        """Stores at ``roots`` (made absolute: a compiler runs in a folder of its own)."""
        return cls([ControlsStore(Path(r).resolve()) for r in roots])

    @classmethod
    def of_run(cls, cache_dir: Path | None, registry: Path, *first: Path) -> StoreChain:
        """A run's chain: the stores at ``first``, then ``<cache_dir>/controls`` (no cache:
        none), then ``<registry>/controls``."""
        cache = [Path(cache_dir) / FOLDER] if cache_dir is not None else []
        return cls.of(*first, *cache, Path(registry) / FOLDER)

    @classmethod
    def for_settings(cls, settings: Settings, *first: Path) -> StoreChain:
        """:meth:`of_run` of the settings' cache and registry."""
        return cls.of_run(Path(settings.cache_dir), Path(settings.registry), *first)

    @property
    def first(self) -> ControlsStore:
        """The store new files go into (the search's)."""
        return self.stores[0]

    def has(self, digest: str) -> bool:
        return any(s.has(digest) for s in self.stores)

    def path(self, digest: str, where: str = "acf") -> Path:
        """The checked file of ``digest`` in the first store holding it; one line naming the
        digest and every folder looked in when none does."""
        return self.holder(digest, where).path(digest)

    def read(self, digest: str, where: str = "acf") -> bytes:
        return self.holder(digest, where).read(digest)

    def holder(self, digest: str, where: str = "acf") -> ControlsStore:
        """The first store holding ``digest``."""
        check_digest(digest, where)
        for store in self.stores:
            if store.has(digest):
                return store
        looked = ", ".join(str(s.root) for s in self.stores)
        raise ControlsError(
            f"{where}: no controls file {digest} in {looked}; store it first "
            "(ctune compile --acf-file FILE) or pull the registry that holds it"
        )


__all__ = [
    "APPLY_OPTION",
    "FOLDER",
    "NOTICE_TEXT",
    "ControlsError",
    "ControlsStore",
    "StoreChain",
    "applied_digest",
    "check_digest",
    "digest_of_path",
    "file_name",
    "registry_relative",
]
