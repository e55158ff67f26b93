"""Ground truths over distinct binaries (``ctune-ground-truth/2``), and a synthetic one.

A ground truth measured per candidate (format 1) lets measurement noise pick its
"optimum": identical binaries measured under different flag settings differ by
several percent. Format 2 holds every candidate of a space with the binary it
compiled to (``dedup.binary_identity``), and every distinct binary once, with its
value: the median of its per-process medians over several fresh processes, and
their spread. ``bench/ground_truth.py`` records them on the GPU; the replay
benchmark (``bench/search_quality.py``) serves them to searches through the
format-1 replay stand-ins (:meth:`BinaryTruth.to_replay`), so a search's own
dedup sees the recorded binaries.

:func:`synthetic_binary_truth` builds one from an analytic model instead, flagged
``synthetic``: it develops and tests the benchmark, it says nothing about kernels.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.records import GeneValue, canonical_json, sha256_hex
from ctune.testing.json_files import load_json, save_json

if TYPE_CHECKING:
    from ctune.spec import KernelSpec, Problem
    from ctune.testing.standins import GroundTruth

FORMAT = "ctune-ground-truth/2"


@dataclass
class BinaryTruth:
    """Candidates -> binary id, binary id -> value (median of process medians) + spread."""

    kernel: str
    problem: str
    objective: str
    synthetic: bool
    subspace: dict[str, list[GeneValue]]  # the values recorded per gene (the space replayed)
    candidates: dict[str, dict[str, Any]] = field(default_factory=dict)
    binaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    fingerprint: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    # --- files ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BinaryTruth:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} ground truth (format {data.get('format')!r})")
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})

    @classmethod
    def load(cls, path: Path) -> BinaryTruth:
        return cls.from_json(load_json(path))

    def save(self, path: Path) -> Path:
        return save_json(self.to_json(), path)

    # --- values ---------------------------------------------------------------------------
    def value(self, key: str) -> float | None:
        """The candidate's binary's value (None: failed to build or to run)."""
        binary = self.candidates[key].get("binary")
        if binary is None:
            return None
        got = self.binaries[binary].get("value_ms")
        return None if got is None else float(got)

    def optimum(self, keys: Sequence[str] | None = None) -> float:
        values = [self.value(k) for k in (keys if keys is not None else self.candidates)]
        return min(v for v in values if v is not None)

    def structural_keys(self, spec: KernelSpec) -> list[str]:
        """Candidates with every compiler flag at its no-op default (the params-only space)."""
        flags = {g.name: g.default for g in spec.flag_genes}
        return [
            k
            for k, c in self.candidates.items()
            if all(c["genes"].get(n, d) == d for n, d in flags.items())
        ]

    def distinct_binaries(self) -> int:
        return len(self.binaries)

    def restrict(self, spec: KernelSpec, *, flags: bool = True) -> KernelSpec:
        """``spec`` reduced to the recorded values (flag genes to their defaults if not
        ``flags``), so a replayed search never asks for a candidate that was not recorded."""

        def cut(gene: Any) -> Any:
            values = self.subspace.get(gene.name, [gene.default])
            if gene.flag and not flags:
                values = [gene.default]
            kept = tuple(v for v in gene.values if v in values)
            default = gene.default if gene.default in kept else kept[0]
            return dataclasses.replace(gene, values=kept, default=default, suggest=())

        return spec.with_genes(cut)

    def to_replay(self) -> GroundTruth:
        """The format-1 view the replay stand-ins serve (binary id as the SASS digest)."""
        from ctune.testing.standins import GroundTruth

        entries: dict[str, dict[str, Any]] = {}
        for key, cand in self.candidates.items():
            binary = cand.get("binary")
            record = self.binaries.get(binary, {}) if binary is not None else {}
            outcome = record.get("outcome", cand.get("build_outcome", "compile_error"))
            entry: dict[str, Any] = {
                "genes": cand["genes"],
                "build_outcome": cand.get("build_outcome", "ok"),
                "outcome": outcome,
                "compile_s": cand.get("compile_s", 0.0),
                "regs": record.get("regs"),
                "spills_bytes": record.get("spills_bytes"),
                "smem_bytes": record.get("smem_bytes"),
                "sass_sha256": binary,
            }
            value = record.get("value_ms")
            if outcome == "ok" and value is not None:
                entry.update({"p50_ms": value, "p95_ms": value, "p99_ms": value, "n": 1})
            entries[key] = entry
        return GroundTruth(
            self.kernel,
            self.problem,
            self.objective,
            self.synthetic,
            dict(self.fingerprint),
            entries,
            {**self.meta, "format": FORMAT},
        )


# --- a synthetic one -------------------------------------------------------------------------


def _unit(*parts: object) -> float:
    digest = sha256_hex(":".join(str(p) for p in parts))
    return int(digest[:16], 16) / 2**64


def _structure_ms(names: Sequence[str], positions: Sequence[float], seed: int) -> float:
    """A smooth, coupled bowl over the structure genes' value positions in [0, 1]."""
    t = 1.0
    for name, x in zip(names, positions, strict=True):
        c, w = 0.15 + 0.7 * _unit(seed, name, "c"), 0.3 + 1.2 * _unit(seed, name, "w")
        t *= 1.0 + w * (x - c) ** 2
    for i in range(len(positions) - 1):
        t *= 1.0 + 0.6 * _unit(seed, i, "couple") * (positions[i] - positions[i + 1]) ** 2
    return t


def _flag_effect(structure: str, gene: str, value: GeneValue, seed: int) -> float | None:
    """None: this flag value leaves this structure's code unchanged (most do); else the
    factor it multiplies the time by: mostly a loss, sometimes a few percent of gain."""
    if gene == "lineinfo" or _unit(seed, structure, gene, value, "changes") > 0.35:
        return None
    u = _unit(seed, structure, gene, value, "effect")
    return 0.95 + 0.17 * u if u > 0.2 else 0.955 + 0.1 * u  # 0.955-0.975 or 0.98-1.12


def synthetic_binary_truth(
    spec: KernelSpec,
    problem: Problem,
    subspace: Mapping[str, Sequence[GeneValue]],
    *,
    seed: int = 0,
) -> BinaryTruth:
    """SYNTHETIC: every candidate of ``subspace`` mapped to a modelled binary and value.

    Structure genes (not compiler flags) set a smooth, coupled landscape; each flag
    value leaves a structure's code unchanged with probability 0.65 (always for
    ``lineinfo``), else multiplies its time by 0.955-1.12 (a gain in one case of five).
    Identical modelled code is one binary, as on a real compiler.
    """
    truth = BinaryTruth(
        spec.name,
        problem.name,
        "p50",
        True,
        {k: list(v) for k, v in subspace.items()},
        fingerprint={"gpu_name": "synthetic (no GPU)", "nvcc_version": "synthetic"},
        meta={"generator": "ctune.testing.binary_truth.synthetic_binary_truth", "seed": seed},
    )
    cut = truth.restrict(spec)
    flags = {g.name for g in cut.flag_genes}
    structure_genes = [g for g in cut.space.genes if g.name not in flags]
    for values in cut.space.iter_valid(problem.dims):
        structural = {g.name: values[g.name] for g in structure_genes}
        shape = canonical_json(structural)
        effects = {
            name: _flag_effect(shape, name, values[name], seed)
            for name in sorted(flags)
            if values[name] != cut.space.gene(name).default
        }
        code = {k: v for k, v in effects.items() if v is not None}
        binary = sha256_hex(canonical_json([shape, sorted(code)]) + str(seed))[:16]
        if binary not in truth.binaries:
            positions = [
                g.index(structural[g.name]) / max(1, len(g.values) - 1) for g in structure_genes
            ]
            base = _structure_ms([g.name for g in structure_genes], positions, seed)
            value = base * math.prod(code.values())
            truth.binaries[binary] = {"value_ms": value, "outcome": "ok", "spread": 0.0}
        cand = spec.candidate(values)
        truth.candidates[cand.key()] = {"genes": values, "binary": binary, "build_outcome": "ok"}
    return truth


__all__ = ["FORMAT", "BinaryTruth", "synthetic_binary_truth"]
