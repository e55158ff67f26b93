"""What differs between two artifacts: fingerprint, front membership, values, pin, and
the pinned members' genes (a controls file is a gene: ``acf_ptxas`` names its digest);
or between two members (``KEY@member`` on either side): their genes, objective values,
build flags, SASS, launch, resources, runtime and device genes.

Pure; ``ctune registry diff A B`` renders it. Every fingerprint field either
side records is compared, so the diff also explains a STALE verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctune.evidence import identity as fingerprint
from ctune.records import FieldChange
from ctune.registry.export import build_flags
from ctune.registry.schema import Artifact, FrontMember, ObjectiveInfo
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
    return member_gene_changes(old, new)


def member_gene_changes(old: FrontMember, new: FrontMember) -> list[GeneChange]:
    """The genes two members set differently."""
    va, vb = old.candidate.as_dict(), new.candidate.as_dict()
    return [
        GeneChange(name, str(va.get(name, "(none)")), str(vb.get(name, "(none)")))
        for name in sorted(set(va) | set(vb))
        if va.get(name) != vb.get(name)
    ]


@dataclass(frozen=True, slots=True)
class RecordChange:
    """A recorded part of a member that differs: ``build flags`` (only the flags one side
    has), ``sass``, or one entry of ``launch``, ``resources``, ``runtime`` or ``device``
    (``resources.regs``); "(none)": not recorded."""

    name: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class MemberDiff:
    """What differs between two members, wherever each comes from (``registry diff
    KEY@a KEY@b``, or members of two artifacts or revisions)."""

    members: tuple[str, str]  # candidate keys
    genes: tuple[GeneChange, ...]
    values: tuple[ValueChange, ...]  # objectives both record; ``member`` is B's key
    records: tuple[RecordChange, ...]

    @property
    def same(self) -> bool:
        return not (self.genes or self.values or self.records)


#: a member's records compared entry by entry
_RECORD_MAPS = ("launch", "resources", "runtime", "device")


def diff_members(
    a: FrontMember,
    b: FrontMember,
    objectives: tuple[tuple[ObjectiveInfo, ...], tuple[ObjectiveInfo, ...]],
) -> MemberDiff:
    """Compare member ``a`` with member ``b``; ``objectives`` are their artifacts' (the
    order of each one's ``values``)."""
    va = dict(zip((o.name for o in objectives[0]), a.values, strict=True))
    vb = dict(zip((o.name for o in objectives[1]), b.values, strict=True))
    values = [ValueChange(b.key, n, va[n], vb[n]) for n in va if n in vb and va[n] != vb[n]]
    return MemberDiff(
        members=(a.key, b.key),
        genes=tuple(member_gene_changes(a, b)),
        values=tuple(values),
        records=tuple(_record_changes(a, b)),
    )


def _record_changes(a: FrontMember, b: FrontMember) -> list[RecordChange]:
    """The build flags, SASS and per-entry launch, resources, runtime and device records
    that differ (the defines follow the genes, so they are not repeated)."""
    out = []
    fa, fb = build_flags(a), build_flags(b)
    if fa != fb:
        old = " ".join(f for f in fa if f not in fb) or "(none)"
        new = " ".join(f for f in fb if f not in fa) or "(none)"
        out.append(RecordChange("build flags", old, new))
    if a.sass_sha256 != b.sass_sha256:
        sass = (a.sass_sha256[:12] or "(none)", b.sass_sha256[:12] or "(none)")
        out.append(RecordChange("sass", *sass))
    for name in _RECORD_MAPS:
        ra, rb = getattr(a, name), getattr(b, name)
        out += [
            RecordChange(f"{name}.{k}", str(ra.get(k, "(none)")), str(rb.get(k, "(none)")))
            for k in sorted(set(ra) | set(rb))
            if ra.get(k) != rb.get(k)
        ]
    return out
