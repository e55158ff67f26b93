"""``ctune registry refresh``: record an artifact's current inputs without re-measuring.

An artifact whose build inputs changed but whose members rebuild to the
same SASS is still valid (``ctune check`` says so); refresh writes the new
build-input digests, the source closure and each member's nvcc flags as
today's code renders them into it (soft fields, which describe how the
numbers were taken, stay as recorded), so the next check has nothing to
rebuild. It also adopts the per-part spec digests of a schema-2 artifact
when the spec still has the whole digest that artifact recorded (nothing in
the spec changed), and today's form of a digest recorded in an older form
of the same inputs (:func:`ctune.evidence.identity.adopt_older_forms`).
Refresh never touches a STALE artifact: that one needs a re-tune.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ctune.ci.check import (
    STALE,
    Current,
    FingerprintProbe,
    Verifier,
    check_artifact,
    flags_member,
)
from ctune.evidence import identity as fingerprint
from ctune.registry.layout import ArtifactKey
from ctune.registry.schema import Artifact, FrontMember
from ctune.registry.service import commit_artifacts

if TYPE_CHECKING:
    from ctune.controls.store import StoreChain
    from ctune.registry.git import CommitResult

_SPEC_PARTS = tuple(name for name in fingerprint.FIELDS if name.startswith("spec_"))


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    key: ArtifactKey
    artifact: Artifact | None  # the refreshed artifact; None when nothing to write or stale
    why: str  # what was recorded, or why nothing was


def adopt_legacy_spec(artifact: Artifact, current: Current) -> Artifact:
    """A schema-2 artifact's spec digests, split per part, when the whole spec is unchanged."""
    legacy = artifact.inputs.get("legacy_spec_sha256")
    if not legacy or current.spec is None or current.spec.spec_sha256 != legacy:
        return artifact
    parts = {k: current.fields[k] for k in _SPEC_PARTS if k in current.fields}
    inputs = {k: v for k, v in artifact.inputs.items() if k != "legacy_spec_sha256"}
    return dataclasses.replace(
        artifact, fingerprint={**artifact.fingerprint, **parts}, inputs=inputs
    )


def adopt_older_forms(artifact: Artifact, current: Current) -> Artifact:
    """The artifact with today's form of each digest it recorded in an older form of the
    same inputs."""
    recorded = fingerprint.adopt_older_forms(artifact.fingerprint, current.fields, current.older)
    if recorded == artifact.fingerprint:
        return artifact
    return dataclasses.replace(artifact, fingerprint=recorded)


def _rendered_flags(artifact: Artifact, current: Current, keys: set[str]) -> Artifact:
    """Members ``keys`` with the nvcc flags today's code renders (their rebuilt SASS is the
    recorded one: the check verified it)."""
    if not keys or current.flags_of is None:
        return artifact
    flags_of = current.flags_of

    def update(m: FrontMember) -> FrontMember:
        return dataclasses.replace(m, nvcc_flags=flags_of(artifact, m)) if m.key in keys else m

    return dataclasses.replace(
        artifact,
        front=tuple(update(m) for m in artifact.front),
        baseline=update(artifact.baseline),
    )


def refresh_artifact(
    key: ArtifactKey, artifact: Artifact, current: Current, verify: Verifier | None
) -> RefreshOutcome:
    """The artifact with today's input digests, if its check (binaries verified) is not STALE."""
    legacy = adopt_legacy_spec(artifact, current)
    adopted = adopt_older_forms(legacy, current)
    result = check_artifact(key, adopted, current, verify)
    if result.verdict() == STALE:
        return RefreshOutcome(key, None, "stale: a re-tune is needed, not a refresh")
    # only what the rebuilt binaries vouch for: soft fields (host compiler, driver, the
    # measuring code) describe how the numbers were taken and stay as they were
    builds = result.build_changes
    recorded = {c.name: c.new for c in builds if c.name in fingerprint.FIELDS}
    members = {key for key in map(flags_member, builds) if key is not None}
    closure = dict(current.closure or {})
    new_inputs = {**adopted.inputs, "closure": closure} if closure else dict(adopted.inputs)
    updated = dataclasses.replace(
        _rendered_flags(adopted, current, members),
        fingerprint={**adopted.fingerprint, **recorded},
        inputs=new_inputs,
    )
    if updated == artifact:
        return RefreshOutcome(key, None, "up to date")
    what = sorted(recorded) + (["spec parts (adopted)"] if legacy is not artifact else [])
    what += sorted(
        f"{name} (today's form)"
        for name in current.older
        if legacy.fingerprint.get(name) != adopted.fingerprint.get(name)
    )
    if members:
        what.append(f"nvcc flags of {len(members)} member(s)")
    if new_inputs.get("closure") != artifact.inputs.get("closure"):
        what.append("closure")
    return RefreshOutcome(key, updated, "recorded " + ", ".join(what))


def refresh_registry(
    root: Path,
    probe: FingerprintProbe,
    verify: Verifier | None,
    chosen: Sequence[tuple[ArtifactKey, Artifact]],
    *,
    ref: str | None = None,
    dry_run: bool = False,
    controls: StoreChain | None = None,
) -> tuple[list[RefreshOutcome], CommitResult | None]:
    """Refresh the ``chosen`` artifacts (as read: ``ArtifactStore.select`` or ``list``) in
    one commit; stale ones are left alone."""
    outcomes = [refresh_artifact(k, a, probe.for_artifact(a), verify) for k, a in chosen]
    changed = [o.artifact for o in outcomes if o.artifact is not None]
    if dry_run or not changed:
        return outcomes, None
    message = f"ctune: refresh the recorded inputs of {len(changed)} artifact(s)"
    result = commit_artifacts(root, changed, message, ref=ref, controls=controls)
    return outcomes, result


__all__ = [
    "RefreshOutcome",
    "adopt_legacy_spec",
    "adopt_older_forms",
    "refresh_artifact",
    "refresh_registry",
]
