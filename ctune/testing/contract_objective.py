"""ObjectiveTermContract: the tests every objective term must pass.

Subclass it and override the ``term`` fixture (parametrise it to cover a
table of terms)::

    class TestBuiltinTerms(ObjectiveTermContract):
        @pytest.fixture(params=sorted(TERMS))
        def term(self, request):
            return TERMS[request.param]

A term declares a name (an identifier: registry objective names are),
a direction, a unit the constraint parser understands, what it ``needs``
from the machine; it returns a finite number for a good build and
measurement, and None (never a made-up number) when it cannot know.
"""

from __future__ import annotations

import math
import re

import pytest

from ctune.objective.spec import parse_constraint, parse_objective
from ctune.objective.terms import CAPABILITIES, UNIT_TABLES, ObjectiveTerm, TermContext
from ctune.records import Build, Measurement, Outcome, Resources
from ctune.testing.standins import STANDIN_DEVICE, summarize_samples

_SAMPLES = tuple(1.0 + 0.01 * ((i * 37) % 100) for i in range(400))


class ObjectiveTermContract:
    """Override ``term``."""

    @pytest.fixture
    def term(self) -> ObjectiveTerm:
        raise NotImplementedError("override the term fixture")

    @pytest.fixture
    def context(self) -> TermContext:
        return TermContext({"N": 1 << 20}, {"flops": 2.0e9, "bytes": 1.2e7})

    @pytest.fixture
    def build(self) -> Build:
        return Build(
            "0123456789abcdef",
            ("nvcc",),
            "stand-in",
            Outcome.OK,
            compile_s=0.4,
            resources=Resources(
                regs=64, spills_store_bytes=8, spills_load_bytes=8, smem_bytes=4096
            ),
        )

    @pytest.fixture
    def measurement(self) -> Measurement:
        return Measurement(
            "0123456789abcdef",
            "p",
            Outcome.OK,
            STANDIN_DEVICE,
            samples_ms=_SAMPLES,
            summary=summarize_samples(_SAMPLES),
            energy_j=0.25,
            avg_power_w=240.0,
        )

    def test_declaration(self, term: ObjectiveTerm) -> None:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", term.name)
        assert term.direction in ("min", "max")
        assert isinstance(term.unit, str) and term.unit
        assert set(term.needs) <= set(CAPABILITIES)
        assert term.quantile is None or 0.0 < term.quantile < 1.0
        assert term.description

    def test_value_is_a_finite_number(
        self, term: ObjectiveTerm, build: Build, measurement: Measurement, context: TermContext
    ) -> None:
        value = term.value(build, measurement, context)
        assert value is not None and math.isfinite(value)
        assert value >= 0

    def test_nothing_from_a_failed_build(
        self, term: ObjectiveTerm, build: Build, context: TermContext
    ) -> None:
        failed = Build(build.candidate_key, build.argv, build.toolchain, Outcome.COMPILE_ERROR)
        assert term.value(failed, None, context) is None

    def test_nothing_from_a_failed_measurement(
        self, term: ObjectiveTerm, build: Build, context: TermContext
    ) -> None:
        if "gpu" not in term.needs:
            pytest.skip("a build property does not depend on the measurement")
        failed = Measurement(
            build.candidate_key, "p", Outcome.WRONG_RESULT, STANDIN_DEVICE, error="mismatch"
        )
        assert term.value(build, failed, context) is None

    def test_usable_as_objective_and_constraint(self, term: ObjectiveTerm) -> None:
        assert parse_objective(term.name).parts[0][1].name == term.name
        unit = next(iter(UNIT_TABLES.get(term.unit, {term.unit: 1.0})))
        constraint = parse_constraint(f"{term.name}<=10{unit}")
        assert constraint.term.name == term.name and constraint.bound == pytest.approx(10.0)
        assert constraint.violation(5.0) == 0.0 and constraint.violation(20.0) > 0

    def test_samples_agree_with_summary(
        self, term: ObjectiveTerm, build: Build, measurement: Measurement, context: TermContext
    ) -> None:
        from_samples = term.from_samples(measurement.samples_ms, context)
        if from_samples is None:
            pytest.skip("not a statistic of the latency samples")
        assert from_samples == pytest.approx(term.value(build, measurement, context), rel=1e-9)


__all__ = ["ObjectiveTermContract"]
