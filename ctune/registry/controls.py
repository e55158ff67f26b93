"""An artifact's controls files in the registry: ``<registry>/controls/<sha256>.acf``.

A member built with an advanced-controls file names it twice: its ``acf_ptxas`` /
``acf_nvcc`` gene holds the file's sha256 (so the digest is part of the member's key) and
its flags apply it as the registry holds it (``-Xptxas --apply-controls=controls/<sha256>.acf``,
so a build key keys its content). An artifact is only whole with those files: publishing
copies each one into the registry's controls folder in the same commit as the artifact,
with the ``NOTICE`` the CompileIQ licence asks published outputs to carry; ``registry
verify`` checks every referenced file is there and matches its name.

The folder holds nothing else: ``<sha256>.acf`` files and ``NOTICE`` (:func:`entry_problem`
says why anything else is refused).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ctune.controls.store import (
    FOLDER,
    NOTICE_NAME,
    NOTICE_TEXT,
    ControlsError,
    StoreChain,
    applied_digest,
    registry_relative,
)
from ctune.errors import RegistryError, UserError
from ctune.files import (
    MAX_CONTROLS_BYTES,
    InputFileError,
    read_capped,
    unlinked_file_problem,
)
from ctune.records import is_sha256_hex, sha256_hex
from ctune.registry.layout import contained_path
from ctune.registry.schema import Artifact, FrontMember
from ctune.spec.space.nvcc import ACF, ACF_GENES
from ctune.writes import write_atomic

#: the names the registry's controls folder may hold
_ENTRY_NAME = re.compile(r"^[0-9a-f]{64}\.acf$")
#: the toolchain an artifact with controls files needs, as an export says it
NEEDS = {
    "ptxas": "ptxas 13.3 or later (CUDA 13.3+, or an older nvcc that runs a 13.3 ptxas)",
    "nvcc": "nvcc 13.3 or later, for sm_100 and later",
}


@dataclass(frozen=True, slots=True)
class ControlsRef:
    """One controls file a member is built with: the compiler it is for and its digest."""

    compiler: str  # "ptxas" or "nvcc"
    digest: str

    @property
    def relpath(self) -> str:
        """Where the registry holds it, from the registry's root (``controls/<sha256>.acf``)."""
        return registry_relative(self.digest)


def member_controls(m: FrontMember) -> tuple[ControlsRef, ...]:
    """The controls files ``m`` is built with, from its genes and from its flags (a file
    either names is needed), in the order nvcc renders them."""
    found: set[ControlsRef] = set()
    for name, value in m.candidate.genes:
        if name in ACF_GENES and is_sha256_hex(value):
            found.add(ControlsRef(ACF_GENES[name].space, str(value)))
    for i, item in enumerate(m.nvcc_flags):
        digest = applied_digest(item)
        if digest is not None:
            ptxas = i > 0 and m.nvcc_flags[i - 1] == "-Xptxas"
            found.add(ControlsRef("ptxas" if ptxas else "nvcc", digest))
    order = list(ACF)
    return tuple(sorted(found, key=lambda r: (order.index(r.compiler), r.digest)))


def distinct_members(a: Artifact) -> list[FrontMember]:
    """The front, then the baseline when it is not a front member."""
    seen: dict[str, FrontMember] = {}
    for m in (*a.front, a.baseline):
        seen.setdefault(m.key, m)
    return list(seen.values())


def artifact_controls(a: Artifact) -> dict[str, list[str]]:
    """{digest: keys of the members built with it} for every controls file ``a`` needs."""
    out: dict[str, list[str]] = {}
    for m in distinct_members(a):
        for ref in member_controls(m):
            keys = out.setdefault(ref.digest, [])
            if m.key not in keys:
                keys.append(m.key)
    return out


def _key(a: Artifact) -> str:
    return f"{a.kernel}/{a.problem}/{a.device_class}"


def controls_files(artifacts: Iterable[Artifact], chain: StoreChain) -> dict[str, bytes]:
    """{registry-relative path: bytes} of every controls file ``artifacts`` need, read
    (checked) from ``chain``, plus ``controls/NOTICE`` when there is any: what a publish
    writes and commits beside them. Empty when none needs one. A file no store holds, or
    holds altered, is one RegistryError naming the artifact, the member and the stores."""
    out: dict[str, bytes] = {}
    for a in artifacts:
        for digest, keys in artifact_controls(a).items():
            rel = registry_relative(digest)
            if rel in out:
                continue
            where = f"{_key(a)}: member {keys[0]}"
            if not chain.has(digest):
                looked = " nor ".join(str(s.root) for s in chain.stores)
                raise RegistryError(
                    f"{where} is built with controls file {digest}, which neither {looked} "
                    f"holds; copy {digest}.acf from the search's cache_dir/controls into "
                    f"{chain.first.root}, then publish again"
                )
            try:
                out[rel] = chain.read(digest, where)
            except ControlsError as exc:
                raise RegistryError(f"{where}: {exc}") from None
    if out:
        out[f"{FOLDER}/{NOTICE_NAME}"] = NOTICE_TEXT.encode()
    return out


def write_beside_result(artifact: Artifact, result: Path, chain: StoreChain) -> list[Path]:
    """The controls files ``artifact``'s members apply, with their ``NOTICE``, written into
    ``controls/`` beside its result file ``result``: the result and its files travel
    together, and ``registry import`` looks there first. Nothing when none applies one."""
    written = []
    for rel, data in controls_files([artifact], chain).items():
        target = Path(result).parent / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, data)
        written.append(target)
    return written


@dataclass(frozen=True, slots=True)
class HeldFile:
    """A member's controls file as the registry folder holds it (``registry show``)."""

    compiler: str
    digest: str
    path: str  # registry-relative
    size_bytes: int | None  # None: not readable there
    state: str  # "ok", "missing" or "altered" (its bytes are not its name's)

    def to_json(self) -> dict[str, object]:
        return {
            "compiler": self.compiler,
            "digest": self.digest,
            "path": self.path,
            "size_bytes": self.size_bytes,
            "state": self.state,
        }


def _read_held(root: Path, ref: ControlsRef) -> tuple[bytes | None, str]:
    """(bytes, state) of ``ref``'s file in the registry at ``root``: read and checked,
    never trusted by its name alone, no symlink followed."""
    try:
        data = read_capped(
            contained_path(root, PurePosixPath(ref.relpath)),
            MAX_CONTROLS_BYTES,
            "controls file",
            follow_symlinks=False,
        )
    except (InputFileError, UserError):
        return None, "missing"
    return data, "ok" if sha256_hex(data) == ref.digest else "altered"


def held_file(root: Path, ref: ControlsRef) -> HeldFile:
    """How the registry at ``root`` holds ``ref``'s file."""
    data, state = _read_held(root, ref)
    size = len(data) if data is not None else None
    return HeldFile(ref.compiler, ref.digest, ref.relpath, size, state)


def read_held(root: Path, ref: ControlsRef, where: str) -> bytes:
    """The bytes of ``ref``'s file in the registry at ``root``; one RegistryError naming
    ``where`` when it is missing or altered there."""
    data, state = _read_held(root, ref)
    if data is None or state != "ok":
        what = "is not in" if data is None else "does not match its digest in"
        raise RegistryError(
            f"{where}: controls file {ref.relpath} {what} the registry {root}; pull the "
            "registry (ctune registry pull), or publish the artifact again with its file"
        )
    return data


def member_files(root: Path, m: FrontMember) -> list[HeldFile]:
    return [held_file(root, ref) for ref in member_controls(m)]


def registry_problems(root: Path, artifacts: Sequence[tuple[object, Artifact]]) -> list[str]:
    """One line per controls file an artifact needs that the registry at ``root`` lacks or
    holds altered, and for a missing ``NOTICE`` (``registry verify``)."""
    out: list[str] = []
    checked: dict[str, HeldFile] = {}
    for key, a in artifacts:
        for m in distinct_members(a):
            for ref in member_controls(m):
                if ref.digest not in checked:
                    checked[ref.digest] = held_file(root, ref)
                held = checked[ref.digest]
                if held.state == "missing":
                    out.append(f"{key}: member {m.key}: controls file {held.path} is missing")
                elif held.state == "altered":
                    out.append(
                        f"{key}: member {m.key}: controls file {held.path} does not match "
                        "its digest (altered)"
                    )
    notice = Path(root) / FOLDER / NOTICE_NAME
    if checked and not (notice.is_file() and not notice.is_symlink()):
        out.append(f"{FOLDER}/{NOTICE_NAME} is missing (the notice published controls carry)")
    return out


def entry_problem(path: Path) -> str:
    """Why an entry of the controls folder does not belong there ("" when it does): only
    regular ``<sha256>.acf`` files and ``NOTICE`` do."""
    name = path.name
    if not (_ENTRY_NAME.fullmatch(name) or name == NOTICE_NAME):
        return f"not a controls file: {FOLDER}/ holds only <sha256>.acf files and {NOTICE_NAME}"
    return unlinked_file_problem(path, "the registry")


def is_entry_name(name: str) -> bool:
    """Is ``name`` one the controls folder may hold?"""
    return bool(_ENTRY_NAME.fullmatch(name)) or name == NOTICE_NAME


def write_files(root: Path, files: Mapping[str, bytes]) -> None:
    """Write each registry-relative file atomically (no symlink on the way)."""
    for rel, data in files.items():
        path = contained_path(root, PurePosixPath(rel))
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(contained_path(root, PurePosixPath(rel)), data)


__all__ = [
    "NEEDS",
    "ControlsRef",
    "HeldFile",
    "artifact_controls",
    "controls_files",
    "distinct_members",
    "entry_problem",
    "held_file",
    "is_entry_name",
    "member_controls",
    "member_files",
    "read_held",
    "registry_problems",
    "write_files",
]
