"""The confirm stage's choice of what to pin: never a build slower than the default."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ctune.measure import SamplingPlan
from ctune.records import Build, Candidate, Measurement
from ctune.spec import KernelSpec, Problem
from ctune.testing.standins import StandInMeasurer, summarize_samples


class _DefaultWinsWhenReMeasured(StandInMeasurer):
    """A stand-in on which the search saw the default (the first build measured) 3x slower
    than it is, and whose fresh processes find every other build 30% slower than the search
    saw it: the search's leaders led by noise, and the default is not among them."""

    def __init__(self) -> None:
        super().__init__(samples=200, wrong_every=None, fault_corner=None)

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        got = super().measure(spec, candidate, build, problem, plan)
        return _slower(got, 3.0) if candidate.key() == self.calls[0] else got

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
        out = super().remeasure(spec, items, problem, plan, processes, seed=seed)
        default = self.calls[0]
        for key, runs in out.items():
            if key != default:
                out[key] = [_slower(m, 1.3) for m in runs]
        return out


def _slower(m: Measurement, factor: float) -> Measurement:
    samples = [s * factor for s in m.samples_ms]
    return dataclasses.replace(m, samples_ms=tuple(samples), summary=summarize_samples(samples))


def test_the_default_is_pinned_when_confirmation_finds_nothing_faster(search) -> None:
    measurer = _DefaultWinsWhenReMeasured()
    result, _, _, _ = search(measurer=measurer, budget=20, seed=2, journal_fsync=False)
    assert result.baseline is not None
    assert result.pinned == result.baseline.key  # not the search's (noisy) leader
    assert result.front[0].key == result.baseline.key
    assert all(m.values[0] >= result.front[0].values[0] for m in result.front)
    assert result.front[0].confirmed and len(result.front[0].per_process) >= 3


def test_a_member_that_stays_faster_is_pinned(search) -> None:
    result, _, _, _ = search(
        measurer=StandInMeasurer(samples=200, wrong_every=None, fault_corner=None),
        budget=20,
        seed=2,
        journal_fsync=False,
    )
    assert result.baseline is not None and result.pinned not in (None, result.baseline.key)
    assert all(m.key != result.baseline.key for m in result.front[:1])
