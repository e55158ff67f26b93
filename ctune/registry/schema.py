"""The artifact: one registry file per (kernel, problem, device class).

An artifact holds the Pareto front a search kept, the default build as the
baseline, the objectives, the pinned candidate's samples, provenance and the
full fingerprint. It is the unit that is committed, diffed, pinned, exported
and gated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctune.records import Candidate

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class ObjectiveInfo:
    name: str  # e.g. "p99"
    direction: str  # "min" or "max"
    unit: str  # e.g. "ms", "J", "TFLOP/s"


@dataclass(frozen=True, slots=True)
class FrontMember:
    """One tuned candidate, with what a build needs to reproduce it."""

    candidate: Candidate
    key: str  # Candidate.key()
    values: tuple[float, ...]  # in `objectives` order
    summary: dict[str, Any]  # p50_ms, p95_ms, p99_ms, mean_ms, ci's, n, device ...
    samples_ms: tuple[float, ...] = ()  # kept for the pinned member and the baseline
    sass_sha256: str = ""
    nvcc_flags: tuple[str, ...] = ()  # flag genes rendered as nvcc argv items
    defines: dict[str, Any] = field(default_factory=dict)  # -D NAME=VALUE
    launch: dict[str, Any] = field(default_factory=dict)  # grid, block, dynamic_smem_bytes
    resources: dict[str, Any] = field(default_factory=dict)  # regs, spills, smem


@dataclass(frozen=True, slots=True)
class Artifact:
    kernel: str
    problem: str
    device_class: str  # e.g. "sm90-nvidia-h100-80gb-hbm3"
    fingerprint: dict[str, str]  # field name -> value (strings only: 12.10 is not 12.1)
    objectives: tuple[ObjectiveInfo, ...]
    front: tuple[FrontMember, ...]
    baseline: FrontMember
    pinned: str | None = None  # key of the pinned front member
    provenance: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
