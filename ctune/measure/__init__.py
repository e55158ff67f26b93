"""Turn a compiled candidate into a trustworthy measurement on the GPU.

The boundary is the :class:`Measurer` protocol. The real implementation,
``ctune.measure.session.WorkerMeasurer``, runs candidates in a worker
subprocess (``ctune.measure.worker``) so that a sticky CUDA fault or a hang
never takes the tuner down; stand-ins for unit tests live in
``ctune.testing.standins`` and say so in their names.

Modules: ``plan`` and ``stats`` (pure arithmetic), ``arrays`` and
``correctness`` (numpy or cupy), ``device`` (CUDA error classes, NVML
telemetry), ``launch``, ``cupy_events`` and ``nvml_energy`` (worker side),
``worker`` (the subprocess and its protocol), ``session`` (the parent side).
Importing any of them imports neither CuPy nor pynvml.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ctune.records import Build, Candidate, Measurement
    from ctune.spec import KernelSpec, Problem


@dataclass(frozen=True, slots=True)
class SamplingPlan:
    """What to measure and how much; converted to counts by ``ctune.measure.plan``."""

    warmup_ms: float = 25.0  # at least this much warm-up, until batch means agree
    rep_ms: float = 100.0  # timing budget per measurement (raised to reach min_samples)
    min_samples: int = 100  # raised for tail quantiles (p99 needs ~1000 on µs kernels)
    max_samples: int = 5000
    quantile: float = 0.5  # the tail the objective cares about (0.99 for p99)
    l2_policy: str = "cold"  # "cold": flush before every sample; "hot": no flush (ctune.l2policy)
    check: bool = True  # correctness check before timing
    energy: bool = False  # NVML energy window after timing
    energy_window_s: float = 1.0
    timeout_s: float = 0.0  # hang limit per measurement; 0 = derive from the baseline
    # what a sample is: "events" (one launch between two events), "graph" (one replay of
    # a captured graph of many launches, divided by their count) or "auto" (graph under
    # 10 µs; a search decides once, from its baseline, and records what it used)
    timing: str = "auto"
    # stop after a first short chunk when its median is above this (ms): a search sets it
    # from its leader (ctune.search.pruning), so a clearly slower candidate costs a few
    # samples, not the full budget; None: never (gate, confirmation, benchmarks)
    prune_above_ms: float | None = None


@runtime_checkable
class Measurer(Protocol):
    """Measures one build on one problem; never raises for candidate failures."""

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement: ...

    def remeasure(
        self,
        spec: KernelSpec,
        items: Sequence[tuple[Candidate, Build]],
        problem: Problem,
        plan: SamplingPlan,
        processes: int,
    ) -> dict[str, list[Measurement]]:
        """Measure each item once in each of ``processes`` fresh worker processes,
        interleaved (item order shuffled per process), keyed by candidate key."""
        ...

    def close(self) -> None: ...


__all__ = ["Measurer", "SamplingPlan"]
