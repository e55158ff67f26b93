"""Where artifacts live, what they may be called, and how a KEY is written.

Layout: ``<root>/<kernel>/<problem>/<device-class>.json``, plus the controls files in
``<root>/controls/`` (so no kernel may be called ``controls``). A KEY is
``<kernel>/<problem>/<device-class>[@<member>]``; commands over several artifacts take
glob patterns too (:func:`is_key_pattern`). Pure: no I/O beyond ``os.lstat`` in
:func:`contained_path`, and every name that reaches a path or a git ref passes
:func:`ctune.names.validate_name` first (rules X1, X2, G13). Keys: docs/registry.md.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ctune.controls.store import FOLDER as CONTROLS_FOLDER
from ctune.errors import UserError
from ctune.names import validate_name

CANDIDATE_KEY_RE = re.compile(r"^[0-9a-f]{16}$")
MEMBER_WORDS = ("pinned", "baseline")
SUFFIX = ".json"
PIN_PREFIX = "ctune/pin"


@dataclass(frozen=True, slots=True)
class ArtifactKey:
    """Names one artifact file, and optionally one member of its front."""

    kernel: str
    problem: str
    device_class: str
    member: str | None = None  # candidate key, "pinned", "baseline" or None

    def __post_init__(self) -> None:
        validate_name(self.kernel, "kernel")
        if self.kernel == CONTROLS_FOLDER:
            raise UserError(
                f"kernel {CONTROLS_FOLDER!r} is reserved: the registry keeps its controls "
                f"files in {CONTROLS_FOLDER}/; rename the kernel"
            )
        validate_name(self.problem, "problem")
        validate_name(self.device_class, "device class")
        if self.member is not None and not (
            self.member in MEMBER_WORDS or CANDIDATE_KEY_RE.fullmatch(self.member)
        ):
            raise UserError(
                f"member {ascii(self.member)[:40]} is not a 16-hex candidate key, "
                "'pinned' or 'baseline'"
            )

    @property
    def artifact(self) -> ArtifactKey:
        """The same key without a member: names the file."""
        return ArtifactKey(self.kernel, self.problem, self.device_class)

    def relpath(self) -> PurePosixPath:
        return PurePosixPath(self.kernel, self.problem, self.device_class + SUFFIX)

    def __str__(self) -> str:
        base = f"{self.kernel}/{self.problem}/{self.device_class}"
        return base if self.member is None else f"{base}@{self.member}"


def parse_key(text: str) -> ArtifactKey:
    """Parse ``kernel/problem/device-class[@member]``; one-line UserError otherwise."""
    if not isinstance(text, str) or not text:
        raise UserError("empty artifact KEY: expected <kernel>/<problem>/<device-class>[@member]")
    base, sep, member = text.partition("@")
    parts = base.split("/")
    if len(parts) != 3:
        raise UserError(
            f"artifact KEY {ascii(text)[:80]} must be <kernel>/<problem>/<device-class>[@member]"
        )
    kernel, problem, device = parts
    return ArtifactKey(kernel, problem, device, member=member if sep else None)


def is_key_pattern(text: str) -> bool:
    """A glob over keys (``gemm/*-bf16/*``) rather than one KEY: a name may not
    hold ``*``, ``?`` or ``[`` (:func:`ctune.names.validate_name`), so nothing is both."""
    return any(c in text for c in "*?[")


def key_from_relpath(rel: PurePosixPath) -> ArtifactKey:
    """Inverse of :meth:`ArtifactKey.relpath`; UserError for anything else."""
    parts = rel.parts
    if len(parts) != 3 or not parts[2].endswith(SUFFIX):
        raise UserError(f"{rel}: not at <kernel>/<problem>/<device-class>{SUFFIX}")
    return ArtifactKey(parts[0], parts[1], parts[2][: -len(SUFFIX)])


def contained_path(root: Path, rel: PurePosixPath) -> Path:
    """``root / rel``, proven to stay inside ``root`` with no symlink on the way.

    Git stores symlinks, so a hostile registry can carry one that points out
    of the tree (rule X1); every existing component is lstat'ed.
    """
    if rel.is_absolute() or any(part in ("", ".", "..") for part in rel.parts):
        raise UserError(f"{rel}: not a relative path inside the registry")
    base = root.resolve()
    path = base
    for part in rel.parts:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise UserError(f"{path}: is a symlink; the registry refuses symlinks")
    if not path.resolve().is_relative_to(base):
        raise UserError(f"{rel}: resolves outside the registry root {base}")
    return path


def artifact_path(root: Path, key: ArtifactKey) -> Path:
    return contained_path(root, key.relpath())


def pin_tag(release: str, key: ArtifactKey) -> str:
    """The annotated tag name that pins ``key`` for ``release`` (no refs/tags/ prefix)."""
    validate_name(release, "release")
    a = key.artifact
    return f"{PIN_PREFIX}/{release}/{a.kernel}/{a.problem}/{a.device_class}"


def parse_pin_tag(name: str) -> tuple[str, ArtifactKey]:
    """Inverse of :func:`pin_tag`: (release, key)."""
    prefix = PIN_PREFIX + "/"
    if not name.startswith(prefix):
        raise UserError(f"{ascii(name)[:80]} is not a ctune pin tag")
    parts = name[len(prefix) :].split("/")
    if len(parts) != 4:
        raise UserError(f"{ascii(name)[:80]} is not a ctune pin tag")
    return validate_name(parts[0], "release"), ArtifactKey(*parts[1:])
