"""MeasurerContract: the tests every measurer passes (Optuna's pattern, as for strategies).

Subclass it in a test module and override the ``case`` fixture: a :class:`MeasurerCase`
naming a way to make the measurer, a spec, a problem, builds that measure OK and a plan::

    class TestStandIn(MeasurerContract):
        @pytest.fixture
        def case(self, tmp_path):
            spec = standin_spec(tmp_path)
            return MeasurerCase(lambda: StandInMeasurer(wrong_every=None), spec, ...)

The suite checks what the search, confirmation and problem sets rely on
(:class:`ctune.measure.Measurer` is the contract): ``measure`` keys its measurement by
candidate and problem and runs no failed build; ``remeasure`` gives every item one
measurement per process, with or without a seed; every optional hook can be called
whatever the measurer (its default does nothing, or what the hook says); ``start`` is
``measure`` as a future; closing twice is harmless, and the measurer closes as a context.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pytest

from ctune.measure import Measurer, SamplingPlan
from ctune.records import Build, Candidate, Measurement, Outcome
from ctune.spec import KernelSpec, Problem

#: what a measurer may say it can measure
CAPABILITIES = frozenset({"gpu", "nvml"})


@dataclass
class MeasurerCase:
    """How to make the measurer under test, and what it can measure OK."""

    make: Callable[[], Measurer]
    spec: KernelSpec
    problem: Problem
    items: Sequence[tuple[Candidate, Build]]  # at least two, each measures OK
    plan: SamplingPlan = dataclasses.field(default_factory=SamplingPlan)


class MeasurerContract:
    """Override ``case``."""

    @pytest.fixture
    def case(self) -> MeasurerCase:
        raise NotImplementedError("override the case fixture")

    @pytest.fixture
    def measurer(self, case: MeasurerCase) -> Iterator[Measurer]:
        made = case.make()
        yield made
        made.close()

    # --- the contract -----------------------------------------------------------------------
    def test_is_a_measurer(self, measurer: Measurer) -> None:
        assert isinstance(measurer, Measurer)

    def test_measure_keys_the_measurement(self, measurer: Measurer, case: MeasurerCase) -> None:
        for cand, build in case.items[:2]:
            m = measurer.measure(case.spec, cand, build, case.problem, case.plan)
            assert isinstance(m, Measurement)
            assert m.outcome is Outcome.OK, m.error
            assert (m.candidate_key, m.problem) == (cand.key(), case.problem.name)
            assert m.summary is not None and m.summary.p50_ms > 0

    def test_a_failed_build_is_not_run(self, measurer: Measurer, case: MeasurerCase) -> None:
        cand, build = case.items[0]
        failed = dataclasses.replace(
            build, outcome=Outcome.COMPILE_ERROR, binary_path=None, log_tail="error: scripted"
        )
        m = measurer.measure(case.spec, cand, failed, case.problem, case.plan)
        assert m.outcome is Outcome.COMPILE_ERROR
        assert m.candidate_key == cand.key() and m.summary is None and not m.samples_ms

    @pytest.mark.parametrize("seed", [None, 3])
    def test_remeasure_gives_each_item_one_measurement_per_process(
        self, measurer: Measurer, case: MeasurerCase, seed: int | None
    ) -> None:
        items = list(case.items[:2])
        runs = measurer.remeasure(case.spec, items, case.problem, case.plan, 2, seed=seed)
        assert set(runs) == {c.key() for c, _ in items}
        for key, measured in runs.items():
            assert len(measured) == 2
            assert all(m.candidate_key == key and m.outcome is Outcome.OK for m in measured)

    def test_start_is_measure_as_a_future(self, measurer: Measurer, case: MeasurerCase) -> None:
        cand, build = case.items[0]
        started = measurer.start(case.spec, cand, build, case.problem, case.plan)
        m = started.result(timeout=120)
        assert m.candidate_key == cand.key() and m.outcome is Outcome.OK
        measurer.forget()  # nothing is left started: harmless

    def test_the_optional_hooks_can_be_called(self, measurer: Measurer, case: MeasurerCase) -> None:
        cand, build = case.items[0]
        measurer.prestart(1, wait=True)
        measurer.set_up_ahead(case.spec, cand, case.problem, case.plan)
        if measurer.baseline_s is None:
            measurer.set_baseline(None)
        measurer.forget()
        m = measurer.measure(case.spec, cand, build, case.problem, case.plan)
        assert m.outcome is Outcome.OK, m.error

    def test_the_declared_attributes_have_their_types(self, measurer: Measurer) -> None:
        assert measurer.device_name is None or isinstance(measurer.device_name, str)
        caps = measurer.capabilities
        assert caps is None or (isinstance(caps, frozenset) and caps <= CAPABILITIES)
        assert isinstance(measurer.slots, int) and measurer.slots >= 1
        fields = measurer.fingerprint_fields()
        assert fields is None or all(
            isinstance(k, str) and isinstance(v, str) for k, v in fields.items()
        )

    def test_closing_twice_is_harmless(self, case: MeasurerCase) -> None:
        with case.make() as measurer:
            cand, build = case.items[0]
            measurer.measure(case.spec, cand, build, case.problem, case.plan)
        measurer.close()


__all__ = ["CAPABILITIES", "MeasurerCase", "MeasurerContract"]
