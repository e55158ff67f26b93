"""Energy-delay product and performance per watt: the arithmetic and the None cases."""

from __future__ import annotations

import pytest

from ctune.objective import parse_objective_spec
from ctune.objective.terms import TermContext, get_term
from ctune.records import Measurement, Outcome
from ctune.testing.standins import STANDIN_DEVICE, summarize_samples

_SAMPLES = tuple(1.0 + 0.1 * i for i in range(21))  # p50 = 2.0 ms, mean = 2.0 ms
_CTX = TermContext({"N": 1}, {"flops": 4.0e9})


def _measurement(energy_j: float | None, summary: bool = True) -> Measurement:
    return Measurement(
        "k",
        "p",
        Outcome.OK,
        STANDIN_DEVICE,
        samples_ms=_SAMPLES,
        summary=summarize_samples(_SAMPLES) if summary else None,
        energy_j=energy_j,
        avg_power_w=None if energy_j is None else energy_j / 2e-3,
    )


@pytest.mark.parametrize("summary", [True, False])
def test_edp_is_energy_times_median_seconds(summary: bool) -> None:
    edp = get_term("edp")
    assert edp is not None and (edp.unit, edp.direction) == ("J*s", "min")
    value = edp.value(None, _measurement(0.5, summary), _CTX)
    assert value == pytest.approx(0.5 * 2.0e-3)


def test_perf_per_watt_is_flops_per_joule_in_gflops_per_watt() -> None:
    term = get_term("perf_per_watt")
    assert term is not None and (term.unit, term.direction) == ("GFLOP/s/W", "max")
    # 4 GFLOP in 2 ms at 250 W = 2 TFLOP/s / 250 W = 8 GFLOP/s/W = 4 GFLOP / 0.5 J
    assert term.value(None, _measurement(0.5), _CTX) == pytest.approx(8.0)
    assert term.value(None, _measurement(0.5), TermContext({"N": 1}, {})) is None


def test_calls_per_joule_needs_no_metric() -> None:
    term = get_term("calls_per_joule")
    assert term is not None and term.requires_metric is None
    assert term.value(None, _measurement(0.5), TermContext()) == pytest.approx(2.0)


@pytest.mark.parametrize("name", ["edp", "perf_per_watt", "calls_per_joule"])
@pytest.mark.parametrize("energy_j", [None, 0.0])
def test_no_number_without_an_energy_reading(name: str, energy_j: float | None) -> None:
    # 0 J per call means the NVML counter did not tick in the window: not a measurement
    term = get_term(name)
    assert term is not None
    assert term.value(None, _measurement(energy_j), _CTX) is None


def test_lower_clock_trade_shows_in_edp_not_in_energy() -> None:
    """A build that halves energy but takes 3x as long loses on EDP: that is why it exists."""
    spec = parse_objective_spec(["energy", "edp"], [], {})
    fast = _measurement(0.5)
    slow_samples = tuple(3 * s for s in _SAMPLES)
    slow = Measurement(
        "k2",
        "p",
        Outcome.OK,
        STANDIN_DEVICE,
        samples_ms=slow_samples,
        summary=summarize_samples(slow_samples),
        energy_j=0.25,
    )
    (e_fast, edp_fast), _ = spec.evaluate(None, fast, {})
    (e_slow, edp_slow), _ = spec.evaluate(None, slow, {})
    assert e_slow < e_fast and edp_slow > edp_fast


def test_aliases() -> None:
    assert get_term("energy_delay") is get_term("edp")
    assert get_term("gflops_per_watt") is get_term("perf_per_watt")
