"""One binary, one measurement: candidates that compile to the same code share a trial.

Many flag combinations compile to the same machine code, and a runtime or launch gene can
leave both the code and the launch unchanged; measuring such a candidate again measures
only noise. So a later candidate with the same :func:`binary_identity` gets the first
one's measurement, is journaled as "same binary as KEY" and is told to the strategy like
any other trial, with no GPU time spent and no budget counted; at most
``COMPILE_CAP_FACTOR`` x budget candidates are compiled (docs/search.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.expr import ExprError
from ctune.records import Build, Candidate, Outcome, Trial, canonical_json, sha256_hex

if TYPE_CHECKING:
    from ctune.spec import KernelSpec, Problem

#: a budgeted search compiles at most this many candidates per unit of budget
COMPILE_CAP_FACTOR = 4
#: measurement outcomes that say nothing lasting about the binary: measure it again
_TRANSIENT = frozenset({Outcome.INCONCLUSIVE, Outcome.RUN_TIMEOUT})


def runtime_arguments(spec: KernelSpec, candidate: Candidate, problem: Problem) -> dict[str, Any]:
    """The scalar arguments the kernel receives (over the problem's dims and runtime genes)."""
    env: dict[str, Any] = {**problem.dims, **candidate.as_dict()}
    return {a.name: a.value.evaluate(env) for a in spec.args if a.value is not None}


def binary_identity(
    spec: KernelSpec, candidate: Candidate, build: Build, problem: Problem
) -> str | None:
    """What decides what runs on the GPU: the SASS digest, the launch geometry, the
    runtime argument values and the device genes (clock, power limit), if any (16 hex).
    Two candidates with the same identity run the same instructions on the same grid
    with the same arguments on the same device setting, so they measure alike.

    A launcher (a host library that launches itself) may read the compiled macros in its
    host code, so there the compiled genes other than compiler flags are part of it.
    None when the build failed or carries no SASS digest: such a build is never shared.
    """
    if not build.outcome.is_ok or not build.sass_sha256:
        return None
    try:
        body: dict[str, Any] = {
            "sass": build.sass_sha256,
            "entry": build.entry_symbol,
            "launch": spec.launch_geometry(candidate, problem),
            "args": runtime_arguments(spec, candidate, problem),
        }
    except (UserError, ExprError, TypeError, ValueError):
        return None
    device = {k: v for k, v in candidate.genes if spec.space.gene(k).device}
    if device:  # the same binary at another clock or power limit measures differently
        body["device"] = device
    if spec.entry_kind != "kernel":
        body["host"] = {
            name: value
            for name, value in candidate.genes
            if spec.space.gene(name).compiled and not spec.space.gene(name).flag
        }
    return sha256_hex(canonical_json(body))[:16]


def reusable(trial: Trial) -> bool:
    """May another candidate with this trial's binary take its measurement?"""
    if trial.build is None or not trial.build.outcome.is_ok:
        return False
    m = trial.measurement
    return m is None or m.outcome not in _TRANSIENT


def shared_trial(
    source: Trial, candidate: Candidate, build: Build, number: int, generation: int
) -> Trial:
    """``candidate``'s trial from the measurement of ``source`` (the same binary).

    The measurement keeps the measured candidate's key (the evidence says whose run it
    was) and drops its raw samples (the journal holds them once, on the source).
    """
    m = source.measurement
    if m is not None:
        m = dataclasses.replace(m, samples_ms=())
    return Trial(
        number,
        generation,
        candidate,
        source.outcome,
        build,
        m,
        source.values,
        source.violations,
    )


class BinaryTable:
    """Binary identity -> the trial that measured it, for one search."""

    def __init__(self, spec: KernelSpec, problem: Problem) -> None:
        self.spec = spec
        self.problem = problem
        self.measured: dict[str, Trial] = {}
        self.same_as: dict[str, str] = {}  # candidate key -> key of the trial it reused
        self.seen: set[str] = set()  # identities of the binaries measured

    def identity(self, candidate: Candidate, build: Build | None) -> str | None:
        return None if build is None else binary_identity(self.spec, candidate, build, self.problem)

    def source(self, identity: str | None) -> Trial | None:
        return None if identity is None else self.measured.get(identity)

    def add(self, trial: Trial, identity: str | None, same_as: str | None = None) -> None:
        """Account a finished trial: a new measured binary, or a reuse of one."""
        if same_as is not None:
            self.same_as[trial.candidate.key()] = same_as
            return
        if identity is not None:
            self.seen.add(identity)
            if identity not in self.measured and reusable(trial):
                self.measured[identity] = trial

    def group_of(self, trials: Mapping[str, Trial], key: str) -> list[Trial]:
        """Every trial of ``trials`` (by key) that ran the binary of trial ``key``."""
        root = self.same_as.get(key, key)
        return [t for k, t in trials.items() if k == root or self.same_as.get(k) == root]

    @property
    def binaries(self) -> int:
        """Distinct binaries measured (or, compile-only, evaluated) in this search."""
        return len(self.seen)


__all__ = [
    "COMPILE_CAP_FACTOR",
    "BinaryTable",
    "binary_identity",
    "reusable",
    "runtime_arguments",
    "shared_trial",
]
