"""Renaming kernels in the registry: ``ctune registry migrate --rename OLD=NEW``.

An artifact names its kernel in its place (``<kernel>/...``), in ``kernel``, in every
member's candidate (whose key hashes the kernel with the genes, so the keys change too), in
``pinned`` and in member keys under ``extensions``. It names the kernel's source in its
closure (the source's label), in ``kernel_source_sha256`` (a digest over the labels) and in
the spec digests (``name`` is in the space part, ``source`` in the build part). The names are
rewritten; each digest is moved to today's value only where that is verified to be the same
input under the new name, never guessed, so ``ctune check`` gives the verdict it gave before:

- the closure entry holding today's source file (same sha256) is relabelled with the new
  spec's source label; the recorded ``kernel_source_sha256`` follows only if it was the
  digest of the recorded closure;
- each ``spec_*`` digest becomes today's only if it equals what today's spec digests to with
  its ``name`` (and ``source``) set back to the old ones.

Anything not verified is left as recorded, and ``ctune check`` reports it as any change.
Every rename of one call is one mapping (``gemm=hand_gemm`` with ``cutlass_gemm=gemm``
swaps folders), committed at once (``service.rename_registry``). Docs: docs/registry.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctune.compile.deps import closure_label, closure_roots, closure_sha256, file_sha256
from ctune.errors import UserError
from ctune.evidence.identity import spec_part_fields
from ctune.names import validate_name
from ctune.records import Candidate
from ctune.registry import schema
from ctune.registry.layout import ArtifactKey
from ctune.registry.schema import Artifact, FrontMember
from ctune.spec.model import KernelSpec

_SOURCE_DIGEST = "kernel_source_sha256"


def parse_renames(texts: Sequence[str]) -> dict[str, str]:
    """``["OLD=NEW", ...]`` as one mapping; a malformed, repeated or empty rename refused."""
    mapping: dict[str, str] = {}
    for text in texts:
        old, sep, new = text.partition("=")
        if not sep or not old or not new or "=" in new:
            raise UserError(f"--rename {ascii(text)[:80]}: expected OLD=NEW, e.g. gemm=hand_gemm")
        validate_name(old, f"--rename {text}: kernel")
        validate_name(new, f"--rename {text}: kernel")
        if old == new:
            raise UserError(f"--rename {text}: renames {old} to itself")
        if old in mapping:
            raise UserError(f"--rename {old}=...: {old} is renamed twice ({mapping[old]}, {new})")
        if new in mapping.values():
            raise UserError(f"--rename ...={new}: two kernels would both become {new}")
        mapping[old] = new
    return mapping


@dataclass(frozen=True, slots=True)
class NewSpec:
    """What a rename needs of the NEW kernel's spec, as it is today (already renamed)."""

    spec: KernelSpec
    source_label: str  # the source's label in a closure taken today
    source_sha256: str  # the source file's digest today

    @classmethod
    def of(cls, spec: KernelSpec) -> NewSpec:
        label = closure_label(spec.source_path.resolve(), closure_roots(spec))
        return cls(spec, label, file_sha256(spec.source_path))

    def spec_fields(
        self, problem: str, name: str | None = None, source: str | None = None
    ) -> dict[str, str]:
        """The ``spec_*`` digests of ``problem``; with ``name``/``source``, those the spec
        would have with its ``name`` and ``source`` keys (where it has them) set to these."""
        raw = dict(self.spec.raw)
        for key, value in (("name", name), ("source", source)):
            if value is not None and key in raw:
                raw[key] = value
        return spec_part_fields(dataclasses.replace(self.spec, raw=raw), problem)


@dataclass(frozen=True, slots=True)
class Renamed:
    """One artifact moved: where it was, what it becomes, and what each digest did."""

    before: ArtifactKey
    artifact: Artifact
    #: fields moved to today's value after verification (``closure``, a digest's name)
    carried: tuple[str, ...]
    #: "field: why" for each one left as recorded (``ctune check`` will report it)
    kept: tuple[str, ...]

    @property
    def after(self) -> ArtifactKey:
        a = self.artifact
        return ArtifactKey(a.kernel, a.problem, a.device_class)


def _with_keys(value: Any, keys: Mapping[str, str]) -> Any:
    """``value`` (free-form JSON) with each string that is an old member key mapped."""
    if isinstance(value, str):
        return keys.get(value, value)
    if isinstance(value, list):
        return [_with_keys(v, keys) for v in value]
    if isinstance(value, dict):
        return {k: _with_keys(v, keys) for k, v in value.items()}
    return value


def _member(m: FrontMember, kernel: str) -> FrontMember:
    candidate = Candidate.of(kernel, m.candidate.as_dict())
    return dataclasses.replace(m, candidate=candidate, key=candidate.key())


def _old_source_label(closure: Mapping[str, str], new: NewSpec) -> tuple[str | None, str]:
    """(the recorded label of today's source, "") or (None, why it is not known)."""
    if closure.get(new.source_label) == new.source_sha256:
        return new.source_label, ""  # the file kept its name
    found = [label for label, digest in closure.items() if digest == new.source_sha256]
    if len(found) == 1:
        return found[0], ""
    if not found:
        return None, f"no recorded file has {new.source_label}'s content today"
    return None, f"{len(found)} recorded files have {new.source_label}'s content"


def _closure(
    artifact: Artifact, new: NewSpec, carried: list[str], kept: list[str]
) -> tuple[dict[str, Any], dict[str, str], str | None]:
    """(inputs, fingerprint, the old source label or None) with the source relabelled
    where verified."""
    fingerprint = dict(artifact.fingerprint)
    inputs = dict(artifact.inputs)
    closure = inputs.get("closure")
    if not closure:
        kept.append("closure: not recorded file by file")
        return inputs, fingerprint, None
    old_label, why = _old_source_label(closure, new)
    if old_label is None:
        kept.append(f"closure: {why}")
        return inputs, fingerprint, None
    if old_label == new.source_label:
        return inputs, fingerprint, old_label
    relabelled = {(new.source_label if k == old_label else k): v for k, v in closure.items()}
    inputs["closure"] = dict(sorted(relabelled.items()))
    carried.append("closure")
    recorded = fingerprint.get(_SOURCE_DIGEST)
    if recorded is not None:
        if recorded == closure_sha256(closure):
            fingerprint[_SOURCE_DIGEST] = closure_sha256(relabelled)
            carried.append(_SOURCE_DIGEST)
        else:
            kept.append(f"{_SOURCE_DIGEST}: not the digest of the recorded closure")
    return inputs, fingerprint, old_label


def _spec_digests(
    fingerprint: dict[str, str],
    artifact: Artifact,
    new: NewSpec,
    old_source: str | None,
    carried: list[str],
    kept: list[str],
) -> None:
    """Each recorded ``spec_*`` digest that today's spec has under the old names, moved to
    today's value (in place)."""
    today = new.spec_fields(artifact.problem)
    as_old = new.spec_fields(artifact.problem, name=artifact.kernel, source=old_source)
    for name in sorted(today):
        recorded = fingerprint.get(name)
        if recorded is None or recorded == today[name]:
            continue
        if recorded == as_old[name]:
            fingerprint[name] = today[name]
            carried.append(name)
        elif old_source is None and as_old[name] == today[name] and "source" in new.spec.raw:
            kept.append(f"{name}: the old source file name is not known (closure)")
        else:
            kept.append(f"{name}: the spec differs beyond the names")


def rename_artifact(artifact: Artifact, new: NewSpec) -> Renamed:
    """``artifact`` under ``new``'s kernel name, its digests carried where verified."""
    kernel = new.spec.name
    front = tuple(_member(m, kernel) for m in artifact.front)
    baseline = _member(artifact.baseline, kernel)
    was, now = (*artifact.front, artifact.baseline), (*front, baseline)
    keys = {m.key: n.key for m, n in zip(was, now, strict=True)}
    carried: list[str] = []
    kept: list[str] = []
    inputs, fingerprint, old_source = _closure(artifact, new, carried, kept)
    _spec_digests(fingerprint, artifact, new, old_source, carried, kept)
    if "legacy_spec_sha256" in inputs:
        kept.append("legacy_spec_sha256: a whole-spec digest, its name included")
    renamed = dataclasses.replace(
        artifact,
        kernel=kernel,
        front=front,
        baseline=baseline,
        pinned=None if artifact.pinned is None else keys[artifact.pinned],
        extensions=_with_keys(artifact.extensions, keys),
        fingerprint=fingerprint,
        inputs=inputs,
    )
    before = ArtifactKey(artifact.kernel, artifact.problem, artifact.device_class)
    # what a read would check (keys, pinned, fields): a bug here must not reach a commit
    checked = schema.from_json(schema.to_json(renamed), f"{before} renamed to {kernel}")
    return Renamed(before, checked, tuple(carried), tuple(kept))


def plan_renames(
    artifacts: Sequence[tuple[ArtifactKey, Artifact]],
    mapping: Mapping[str, str],
    specs: Mapping[str, NewSpec],
) -> list[Renamed]:
    """Every artifact of each OLD kernel renamed; refused (one line, nothing renamed) when
    an OLD kernel has none or a target place holds an artifact that stays there."""
    have = {key for key, _ in artifacts}
    kernels = {key.kernel for key in have}
    for old, new in mapping.items():
        if old not in kernels:
            raise UserError(f"--rename {old}={new}: the registry has no artifact of {old}")
    moved = [
        rename_artifact(a, specs[mapping[key.kernel]])
        for key, a in artifacts
        if key.kernel in mapping
    ]
    for r in moved:
        if r.after in have and r.after.kernel not in mapping:
            raise UserError(
                f"--rename {r.before.kernel}={r.after.kernel}: {r.after} already holds an "
                f"artifact of {r.after.kernel}; rename that kernel in the same call or remove it"
            )
    return moved


__all__ = ["NewSpec", "Renamed", "parse_renames", "plan_renames", "rename_artifact"]
