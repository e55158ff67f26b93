"""What a search returns: the confirmed front, the baseline, the evidence, the costs.

Values are raw, in objective order (directions live in the objective
spec). ``to_json`` is what ``ctune search --json`` prints; the registry
artifact (``registry.assemble.build_artifact``) is built from the same result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctune.evidence.compare import Comparison
from ctune.records import Build, Candidate, GeneValue, Measurement, Trial
from ctune.search.confirm import ConfirmationCost
from ctune.search.feasibility import Feasibility

#: the device of a search whose objectives are all build properties (nothing ran on a GPU)
COMPILE_ONLY = "none (compile-only objectives)"


@dataclass(frozen=True)
class ResultRecord:
    """What a finished search hands to the registry besides its front: where the numbers
    come from (fingerprint), how the search ran (provenance), what a number means
    (protocol) and the sources built (inputs)."""

    fingerprint: Mapping[str, str]
    provenance: Mapping[str, Any]
    protocol: Mapping[str, Any]
    inputs: Mapping[str, Any]
    strategy_options: Mapping[str, Any]  # resolved: the given ones and the defaults


@dataclass(frozen=True)
class Gain:
    """How much better than the baseline on one objective, with a 95% CI.

    ``ratio`` > 1 is better: baseline/member for objectives to minimise,
    member/baseline for objectives to maximise.
    """

    objective: str
    ratio: float
    low: float
    high: float
    method: str  # "hierarchical bootstrap (processes, then samples)" or "bootstrap over processes"
    confidence: float = 0.95

    def to_json(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "ratio": self.ratio,
            "ci": [self.low, self.high],
            "confidence": self.confidence,
            "method": self.method,
        }


@dataclass(frozen=True)
class MemberResult:
    """One front member (or the baseline) as reported."""

    candidate: Candidate
    key: str
    changed: dict[str, GeneValue]  # genes that differ from the default build
    values: tuple[float, ...]  # confirmed values when confirmed, else the search's
    search_values: tuple[float, ...] | None
    confirmed: bool
    build: Build | None
    trial: Trial | None
    pooled: Measurement | None = None  # all confirmation samples together
    per_process: tuple[Measurement, ...] = ()
    significance: Comparison | None = None  # vs the baseline, by the one comparison rule
    gain: Gain | None = None

    @property
    def measurement(self) -> Measurement | None:
        """The best evidence: the pooled confirmation, else the search measurement."""
        if self.pooled is not None:
            return self.pooled
        return self.trial.measurement if self.trial is not None else None

    def resources(self) -> dict[str, int | None]:
        if self.build is None:
            return {}
        r = self.build.resources
        return {
            "regs": r.regs,
            "spills_bytes": r.spills_bytes,
            "smem_bytes": r.smem_bytes,
            "stack_bytes": r.stack_bytes,
        }


@dataclass(frozen=True)
class Timing:
    """Where the wall time went. compile_wait_s is time the driver was blocked on
    builds (compiles overlapping a measurement cost nothing); compile_cpu_s sums
    every build's own compile time."""

    wall_s: float
    compile_wait_s: float
    measure_s: float
    confirm_s: float
    compile_cpu_s: float

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.wall_s - self.compile_wait_s - self.measure_s - self.confirm_s)

    @property
    def gpu_busy_fraction(self) -> float:
        return (self.measure_s + self.confirm_s) / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class ControlsVerdict:
    """The best member with a controls file against the best without one, confirmed in the
    same fresh processes by the gate's rule: whether the file earned its place."""

    member: str  # candidate key of the member with the file
    reference: str  # candidate key of the best build without one
    gain: float  # reference's first objective over the member's (> 1: the file helps)
    difference: str  # lower (the file is faster), same, higher or unresolved
    reason: str
    pinned: bool  # the file's member kept its place on the front

    def to_json(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "reference": self.reference,
            "gain": self.gain,
            "difference": self.difference,
            "reason": self.reason,
            "pinned": self.pinned,
        }


@dataclass(frozen=True)
class VendorVerdict:
    """The pinned member against the spec's vendor call (cuBLAS, SDPA), both re-measured in
    the same confirmation rounds (fresh processes), on the first objective, by the gate's
    rule. ``error`` says why there is no comparison (the vendor call failed, or the
    objective does not apply to it)."""

    name: str  # the spec's vendor name
    member: str  # candidate key of the pinned member
    processes: int  # fresh processes the vendor call was measured in
    vendor_value: float | None = None
    member_value: float | None = None
    gain: Gain | None = None  # the vendor's value over the member's (> 1: the member is better)
    difference: str = ""  # lower (the member is faster), same, higher or unresolved
    reason: str = ""
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "member": self.member,
            "processes": self.processes,
            "vendor_value": self.vendor_value,
            "member_value": self.member_value,
            "gain": self.gain.to_json() if self.gain else None,
            "difference": self.difference,
            "reason": self.reason,
            "error": self.error,
        }


@dataclass(frozen=True)
class SearchResult:
    kernel: str
    problem: str
    objectives: tuple[dict[str, str], ...]  # name, direction, unit (+ text)
    constraints: tuple[str, ...]
    strategy: str
    seed: int
    journal: Path
    evaluations: int
    budget: int | None
    generations: int
    stop_reason: str  # budget, time, stagnation, exhausted, converged, interrupted
    baseline: MemberResult | None
    front: tuple[MemberResult, ...]
    pinned: str | None
    timing: Timing
    device: str
    failures: dict[str, int] = field(default_factory=dict)
    infeasible: int = 0
    cached: int = 0
    fillers: int = 0  # evaluations the driver added while builds compiled (filling.py)
    dropped: tuple[tuple[str, str], ...] = ()  # (key, why) removed at confirmation
    notes: tuple[str, ...] = ()
    artifact_path: Path | None = None
    commit: str | None = None
    #: ``commit`` was made before this resume (same journal): not committed again
    committed_before: bool = False
    confirm_processes: int = 0  # fresh processes the confirmation used
    plan: dict[str, Any] = field(default_factory=dict)  # what shaped the trials (plan.py)
    feasibility: Feasibility | None = None
    confirmation: ConfirmationCost | None = None  # its cost and why it stopped (confirm.py)
    binaries: int = 0  # distinct binaries measured (dedup.py); evaluations - reused - failures
    reused: int = 0  # asked candidates answered by a binary this search measured already
    pruned: int = 0  # measured trials stopped after their first chunk (pruning.py)
    skipped: int = 0  # candidates the cost model ruled out, never built (cost_policy.py)
    record: ResultRecord | None = None  # set for a finished search with a baseline
    confirmation_rounds: int = 0  # rounds of the confirmation the journal holds
    controls: ControlsVerdict | None = None  # a controls file against its build without one
    vendor: VendorVerdict | None = None  # the pinned member against the spec's vendor call

    @property
    def interrupted(self) -> bool:
        return self.stop_reason == "interrupted"

    @property
    def compile_only(self) -> bool:
        return self.device == COMPILE_ONLY

    @property
    def inconclusive(self) -> bool:
        """A finished search with nothing worth pinning (``Feasibility.inconclusive``)."""
        return (
            not self.interrupted and self.feasibility is not None and self.feasibility.inconclusive
        )

    def member(self, key: str) -> MemberResult | None:
        for m in self.front:
            if m.key == key:
                return m
        return None

    def to_json(self) -> dict[str, Any]:
        return clean_json(
            {
                "kernel": self.kernel,
                "problem": self.problem,
                "objectives": list(self.objectives),
                "constraints": list(self.constraints),
                "strategy": self.strategy,
                "seed": self.seed,
                "plan": dict(self.plan),
                "journal": str(self.journal),
                "evaluations": self.evaluations,
                "budget": self.budget,
                "generations": self.generations,
                "stop_reason": self.stop_reason,
                "device": self.device,
                "baseline": member_json(self.baseline) if self.baseline else None,
                "front": [member_json(m) for m in self.front],
                "pinned": self.pinned,
                "failures": dict(self.failures),
                "infeasible": self.infeasible,
                "cached": self.cached,
                "fillers": self.fillers,
                "dropped": [{"key": k, "why": why} for k, why in self.dropped],
                "notes": list(self.notes),
                "timing": {
                    "wall_s": self.timing.wall_s,
                    "compile_wait_s": self.timing.compile_wait_s,
                    "measure_s": self.timing.measure_s,
                    "confirm_s": self.timing.confirm_s,
                    "overhead_s": self.timing.overhead_s,
                    "compile_cpu_s": self.timing.compile_cpu_s,
                    "gpu_busy_fraction": self.timing.gpu_busy_fraction,
                },
                "confirm_processes": self.confirm_processes,
                "confirmation": self.confirmation.to_json() if self.confirmation else None,
                "binaries": self.binaries,
                "reused": self.reused,
                "pruned": self.pruned,
                "skipped": self.skipped,
                "feasibility": self.feasibility.to_json() if self.feasibility else None,
                "verdict": "inconclusive" if self.inconclusive else "ok",
                "artifact": str(self.artifact_path) if self.artifact_path else None,
                "commit": self.commit,
                "controls": self.controls.to_json() if self.controls else None,
                "vendor": self.vendor.to_json() if self.vendor else None,
            }
        )


def member_json(m: MemberResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key": m.key,
        "candidate": m.candidate.to_json(),
        "changed": dict(m.changed),
        "values": list(m.values),
        "search_values": list(m.search_values) if m.search_values is not None else None,
        "confirmed": m.confirmed,
        "resources": m.resources(),
    }
    if m.significance is not None:
        s = m.significance
        out["significance"] = {
            "p_value": s.p_value,
            "effect": s.change,
            "threshold": s.threshold,
            "between_process_cv": s.noise_cv,
            "significant": s.significant,
            "verdict": s.difference.value,
            "reason": s.reason,
        }
    if m.gain is not None:
        out["gain"] = m.gain.to_json()
    return out


def clean_json(value: Any) -> Any:
    """JSON-safe: non-finite floats become None (strict JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


__all__ = [
    "COMPILE_ONLY",
    "Gain",
    "MemberResult",
    "ResultRecord",
    "SearchResult",
    "Timing",
    "VendorVerdict",
    "member_json",
]
