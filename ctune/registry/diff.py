"""What differs between two artifacts: fingerprint, front membership, values, pin, and
the pinned members' genes (a controls file is a gene: ``acf_ptxas`` names its digest).

Pure; ``ctune registry diff A B`` renders it. Every fingerprint field either
side records is compared, so the diff also explains a STALE verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctune.evidence import identity as fingerprint
from ctune.records import FieldChange
from ctune.registry.schema import Artifact
from ctune.spec.space.nvcc import ACF_GENES


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
class GeneChange:
    """A gene whose value differs between the two pinned members ("(none)": not set)."""

    name: str
    old: str
    new: str

    @property
    def controls(self) -> bool:
        """A controls file changed (its value is a digest, or ``none``)."""
        return self.name in ACF_GENES


@dataclass(frozen=True, slots=True)
class ArtifactDiff:
    fingerprint: tuple[FieldChange, ...]
    added: tuple[str, ...]  # member keys only in B
    removed: tuple[str, ...]  # member keys only in A
    values: tuple[ValueChange, ...]  # members in both whose objective values differ
    pinned: tuple[str | None, str | None]
    digests: tuple[str, str]
    genes: tuple[GeneChange, ...] = ()  # pinned member's genes, when the pinned members differ

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
        genes=tuple(gene_changes(a, b)),
    )


def gene_changes(a: Artifact, b: Artifact) -> list[GeneChange]:
    """The genes the pinned members set differently (none when either has no pinned member
    or they are the same member)."""
    old, new = a.pinned_member(), b.pinned_member()
    if old is None or new is None or old.key == new.key:
        return []
    va, vb = old.candidate.as_dict(), new.candidate.as_dict()
    return [
        GeneChange(name, str(va.get(name, "(none)")), str(vb.get(name, "(none)")))
        for name in sorted(set(va) | set(vb))
        if va.get(name) != vb.get(name)
    ]
