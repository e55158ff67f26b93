"""What differs between two artifacts: fingerprint, front membership, values, pin.

Pure; ``ctune registry diff A B`` renders it. Every fingerprint field either
side records is compared, so the diff also explains a STALE verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctune.evidence import identity as fingerprint
from ctune.records import FieldChange
from ctune.registry.schema import Artifact


@dataclass(frozen=True, slots=True)
class ValueChange:
    member: str
    objective: str
    old: float
    new: float

    @property
    def relative(self) -> float:
        return self.new / self.old - 1.0 if self.old else float("inf")


@dataclass(frozen=True, slots=True)
class ArtifactDiff:
    fingerprint: tuple[FieldChange, ...]
    added: tuple[str, ...]  # member keys only in B
    removed: tuple[str, ...]  # member keys only in A
    values: tuple[ValueChange, ...]  # members in both whose objective values differ
    pinned: tuple[str | None, str | None]
    digests: tuple[str, str]

    @property
    def same(self) -> bool:
        return self.digests[0] == self.digests[1]


def diff_artifacts(a: Artifact, b: Artifact) -> ArtifactDiff:
    fields = set(a.fingerprint) | set(b.fingerprint)
    old_keys = {m.key: m for m in a.front}
    new_keys = {m.key: m for m in b.front}
    names_a = [o.name for o in a.objectives]
    names_b = [o.name for o in b.objectives]
    values = []
    for key in sorted(old_keys.keys() & new_keys.keys()):
        va = dict(zip(names_a, old_keys[key].values, strict=True))
        vb = dict(zip(names_b, new_keys[key].values, strict=True))
        values += [ValueChange(key, n, va[n], vb[n]) for n in names_a if n in vb and va[n] != vb[n]]
    missing = {n: "(not recorded)" for n in fields}
    return ArtifactDiff(
        fingerprint=tuple(
            fingerprint.diff({**missing, **a.fingerprint}, {**missing, **b.fingerprint}, fields)
        ),
        added=tuple(sorted(new_keys.keys() - old_keys.keys())),
        removed=tuple(sorted(old_keys.keys() - new_keys.keys())),
        values=tuple(values),
        pinned=(a.pinned, b.pinned),
        digests=(a.digest(), b.digest()),
    )
