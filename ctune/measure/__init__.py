"""Turn a compiled candidate into a trustworthy measurement on the GPU.

The boundary is the :class:`Measurer` base class (its docstring is the contract). The real
implementation, ``session.WorkerMeasurer``, runs candidates in a worker subprocess
(``worker``) so that a sticky CUDA fault or a hang never takes the tuner down; stand-ins
live in ``ctune.testing.standins``. Pure modules (``plan``, ``stats``) sit beside the
worker-side ones (``launch``, ``cupy_events``, ``nvml_energy``); importing any of them
imports neither CuPy nor pynvml.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

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


class Measurer(abc.ABC):
    """Measures one build on one problem; never raises for a candidate's failure.

    The contract (``ctune.testing.contract_measurer`` checks it on every implementation):

    - ``measure`` returns one :class:`Measurement` keyed by the candidate's key; a build
      that failed is not run (its outcome is the build's); a candidate that faults, hangs
      or computes wrong results is a measurement with that outcome, never an exception.
      It raises only for what is not the candidate's: a bad plan or spec (UserError), no
      usable GPU or NVML (ToolchainError), a device that stays unhealthy, a ctune bug.
    - ``remeasure`` measures each item once in each of ``processes`` fresh processes,
      interleaved (the order shuffled per process from ``seed``; None: the measurer's
      own), and returns every item's key with one measurement per process.
    - ``close`` releases what the measurer holds; closing twice is harmless. A measurer
      is a context manager that closes on exit.

    Optional hooks have working defaults here; a caller calls them directly:

    - ``device_name``: the GPU's display name when known without probing, else None.
    - ``capabilities``: what it can measure ("gpu", "nvml"); None: probe this machine.
    - ``slots``: measurements it runs at once; above 1 the driver starts that many
      (``start``) and drops the ones it no longer needs (``forget``).
    - ``prestart`` / ``set_up_ahead``: start fresh processes and set a problem up ahead
      of need (no-ops where there are no processes to start).
    - ``baseline_s`` / ``set_baseline``: the typical wall time of one measurement, which
      scales a hang limit (None / no-op where nothing hangs).
    - ``fingerprint_fields``: the fingerprint fields a measurer that is not the real GPU
      gives instead of the probed ones (a stand-in's, a replay's); None: probe the GPU.
    """

    device_name: str | None = None
    capabilities: frozenset[str] | None = None
    slots: int = 1

    @abc.abstractmethod
    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement: ...

    @abc.abstractmethod
    def remeasure(
        self,
        spec: KernelSpec,
        items: Sequence[tuple[Candidate, Build]],
        problem: Problem,
        plan: SamplingPlan,
        processes: int,
        *,
        seed: int | None = None,
    ) -> dict[str, list[Measurement]]:
        """Each item once in each of ``processes`` fresh processes, interleaved (the order
        shuffled per process from ``seed``), keyed by candidate key."""

    def start(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Future[Measurement]:
        """Start a measurement; ``measure`` of the same candidate then answers with it.
        Default: measure now and return the finished future."""
        done: Future[Measurement] = Future()
        done.set_result(self.measure(spec, candidate, build, problem, plan))
        return done

    def forget(self) -> None:
        """Drop started measurements nobody will ask for (a batch cut short)."""
        return None  # nothing to do by default

    def prestart(self, count: int, wait: bool = True) -> None:
        """Start ``count`` fresh measuring processes ahead of need; ``wait``: until up."""
        return None  # nothing to do by default

    def set_up_ahead(
        self, spec: KernelSpec, candidate: Candidate, problem: Problem, plan: SamplingPlan
    ) -> None:
        """Ask the processes started ahead to set ``problem`` up as soon as each is up."""
        return None  # nothing to do by default

    @property
    def baseline_s(self) -> float | None:
        """Wall time of a typical OK measurement so far; None: not known (or not used)."""
        return None

    def set_baseline(self, seconds: float | None) -> None:
        """Seed the typical wall time (a hang limit scales with it) from another measurer."""
        return None  # nothing to do by default

    def fingerprint_fields(self) -> dict[str, str] | None:
        """The GPU fingerprint fields this measurer gives itself; None: the real GPU's are
        probed."""
        return None

    def close(self) -> None:
        """Release processes and devices; harmless to call twice."""
        return None  # nothing to do by default

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Measurer", "SamplingPlan"]
