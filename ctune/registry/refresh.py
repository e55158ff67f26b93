"""``ctune registry refresh``: record an artifact's current inputs without re-measuring.

An artifact whose build inputs changed but whose members rebuild to the
same SASS is still valid (``ctune check`` says so); refresh writes the new
build-input digests and the source closure into it (soft fields, which
describe how the numbers were taken, stay as recorded), so the next check
has nothing to rebuild. It also adopts the per-part spec digests of a
schema-2 artifact when the spec still has the whole digest that artifact
recorded (nothing in the spec changed).
Refresh never touches a STALE artifact: that one needs a re-tune.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ctune.evidence import identity as fingerprint
from ctune.registry.check import STALE, Current, Verifier, check_artifact
from ctune.registry.layout import ArtifactKey
from ctune.registry.schema import Artifact

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


def refresh_artifact(
    key: ArtifactKey, artifact: Artifact, current: Current, verify: Verifier | None
) -> RefreshOutcome:
    """The artifact with today's input digests, if its check (binaries verified) is not STALE."""
    adopted = adopt_legacy_spec(artifact, current)
    result = check_artifact(key, adopted, current, verify)
    if result.verdict() == STALE:
        return RefreshOutcome(key, None, "stale: a re-tune is needed, not a refresh")
    # only what the rebuilt binaries vouch for: soft fields (host compiler, driver, the
    # measuring code) describe how the numbers were taken and stay as they were
    recorded = {c.name: c.new for c in result.build_changes}
    closure = dict(current.closure or {})
    new_inputs = {**adopted.inputs, "closure": closure} if closure else dict(adopted.inputs)
    updated = dataclasses.replace(
        adopted, fingerprint={**adopted.fingerprint, **recorded}, inputs=new_inputs
    )
    if updated == artifact:
        return RefreshOutcome(key, None, "up to date")
    what = sorted(recorded) + (["spec parts (adopted)"] if adopted is not artifact else [])
    if new_inputs.get("closure") != artifact.inputs.get("closure"):
        what.append("closure")
    return RefreshOutcome(key, updated, "recorded " + ", ".join(what))


__all__ = ["RefreshOutcome", "adopt_legacy_spec", "refresh_artifact"]
