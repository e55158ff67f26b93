"""--objective / --constraint parsing: table-driven, good inputs and the exact errors."""

from __future__ import annotations

import pytest

from ctune.errors import UserError
from ctune.expr import parse
from ctune.measure import SamplingPlan
from ctune.objective import parse_objective_spec
from ctune.objective.spec import parse_constraint, parse_objective
from ctune.records import Build, Measurement, Outcome, Resources
from ctune.testing.standins import STANDIN_DEVICE, summarize_samples

METRICS = {"flops": parse("2 * N"), "bytes": parse("12 * N")}


@pytest.mark.parametrize(
    ("text", "terms", "direction", "unit", "name"),
    [
        ("p99", [(1.0, "p99")], "min", "ms", "p99"),
        ("energy", [(1.0, "energy")], "min", "J", "energy"),
        ("tflops", [(1.0, "tflops")], "max", "TFLOP/s", "tflops"),
        ("median", [(1.0, "p50")], "min", "ms", "p50"),
        ("0.7*p50 + 0.3*p99", [(0.7, "p50"), (0.3, "p99")], "min", "ms", "wsum_0p7_p50_0p3_p99"),
        ("p50*2 + p99", [(2.0, "p50"), (1.0, "p99")], "min", "ms", "wsum_2_p50_1_p99"),
        (
            "p99 + 0.1 * energy",
            [(1.0, "p99"), (0.1, "energy")],
            "min",
            "mixed",
            "wsum_1_p99_0p1_energy",
        ),
    ],
)
def test_objectives_parse(
    text: str, terms: list[tuple[float, str]], direction: str, unit: str, name: str
) -> None:
    o = parse_objective(text)
    assert [(w, t.name) for w, t in o.parts] == terms
    assert (o.direction, o.unit, o.name) == (direction, unit, name)


@pytest.mark.parametrize(
    ("objectives", "message"),
    [
        (["p98"], "--objective 'p98': unknown term 'p98' (allowed: p50, p95, p99, mean, tflops,"),
        (["0.7*p50 - 0.3*p99"], "only positive weights and '+' are allowed"),
        (["-1*p50"], "weights must be positive and finite, got -1"),
        (["1e999*p50"], "weights must be positive and finite, got 1e999"),
        (["p50 + tflops"], "cannot add terms to minimise (p50) and to maximise (tflops)"),
        (["p50 + p50"], "term 'p50' appears twice"),
        (["p50", "p50"], "--objective 'p50' is given twice"),
        (["p50", "p99", "energy", "power"], "4 objectives given; at most 3"),
        (["p50 *"], "cannot read 'p50 *'"),
        ([], "give at least one --objective"),
    ],
)
def test_bad_objectives(objectives: list[str], message: str) -> None:
    with pytest.raises(UserError) as err:
        parse_objective_spec(objectives, [], METRICS)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "term", "op", "bound"),
    [
        ("power<=400W", "power", "<=", 400.0),
        ("power <= 400 W", "power", "<=", 400.0),
        ("power<=400000mW", "power", "<=", 400.0),
        ("power<=0.4kW", "power", "<=", 400.0),
        ("power<=400w", "power", "<=", 400.0),  # unambiguous case fold
        ("spills==0", "spills", "==", 0.0),
        ("spills=0", "spills", "==", 0.0),
        ("regs<=128", "regs", "<=", 128.0),
        ("p99<2ms", "p99", "<", 2.0),
        ("p99<=1500us", "p99", "<=", 1.5),
        ("p50<=0.002s", "p50", "<=", 2.0),
        ("energy<=5mJ", "energy", "<=", 0.005),
        ("energy<2J", "energy", "<", 2.0),
        ("tflops>=100TFLOP/s", "tflops", ">=", 100.0),
        ("tflops>500GFLOP/s", "tflops", ">", 0.5),
        ("gbps>=2TB/s", "gbps", ">=", 2000.0),
        ("compile_time<=500ms", "compile_time", "<=", 0.5),
        ("smem<=48KiB", "smem", "<=", 49152.0),
        ("p99<=1e-3s", "p99", "<=", 1.0),
        ("edp<=2e-4J*s", "edp", "<=", 2e-4),
        ("edp<=0.2mJ*s", "edp", "<=", 2e-4),
        ("edp<=200uJ*s", "edp", "<=", 2e-4),
        ("edp < 200 mJ*ms", "edp", "<", 2e-4),
        ("perf_per_watt>=500GFLOP/s/W", "perf_per_watt", ">=", 500.0),
        ("perf_per_watt>=0.5TFLOP/s/W", "perf_per_watt", ">=", 500.0),
        ("perf_per_watt>=500", "perf_per_watt", ">=", 500.0),
        ("calls_per_joule>=2calls/mJ", "calls_per_joule", ">=", 2000.0),
    ],
)
def test_constraints_parse(text: str, term: str, op: str, bound: float) -> None:
    c = parse_constraint(text)
    assert (c.term.name, c.op) == (term, op)
    assert c.bound == pytest.approx(bound)


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        (
            ["power<=400V"],
            "unit 'V' does not fit power (allowed: W, mW, kW; a bare number means W)",
        ),
        (["p99<=2J"], "unit 'J' does not fit p99 (allowed: ms, us, µs, ns, s"),
        (["volts<=1"], "unknown term 'volts' (allowed: p50,"),
        (["power"], "expected TERM OP NUMBER[UNIT]"),
        (["power<=abc"], "expected TERM OP NUMBER[UNIT]"),
        (["power<=1e999W"], "--constraint 'power<=1e999W': the bound 1e999 is not a finite"),
        (
            ["p99>=2ms", "p99<=1ms"],
            "--constraint 'p99>=2ms' and --constraint 'p99<=1ms' contradict each other",
        ),
        (["regs==64", "regs==128"], "contradict each other"),
        (["p99>1ms", "p99<1ms"], "contradict each other"),
        (["p99>=1ms", "p99<1000us"], "contradict each other"),
        (["spills<0"], "--constraint 'spills<0' can never hold: spills is never negative"),
        (["edp<=1J"], "unit 'J' does not fit edp (allowed: J*s, mJ*s, J*ms"),
        (["perf_per_watt>=1W"], "unit 'W' does not fit perf_per_watt (allowed: GFLOP/s/W"),
    ],
)
def test_bad_constraints(constraints: list[str], message: str) -> None:
    with pytest.raises(UserError) as err:
        parse_objective_spec(["p50"], constraints, METRICS)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_touching_bounds_are_consistent() -> None:
    spec = parse_objective_spec(["p50"], ["p99>=1ms", "p99<=1ms", "regs<=128", "regs>=32"])
    assert len(spec.constraints) == 4


def test_metric_needed_by_throughput() -> None:
    with pytest.raises(UserError) as err:
        parse_objective_spec(["tflops"], [], {"bytes": parse("12 * N")})
    assert "term 'tflops' needs a 'flops' metric in the kernel spec" in str(err.value)
    assert "this spec has: bytes" in str(err.value)


def test_perf_per_watt_without_flops_points_to_calls_per_joule() -> None:
    with pytest.raises(UserError) as err:
        parse_objective_spec(["p50"], ["perf_per_watt>=100"], {"bytes": parse("12 * N")})
    assert "term 'perf_per_watt' needs a 'flops' metric" in str(err.value)
    assert "or use 'calls_per_joule', which needs none" in str(err.value)
    spec = parse_objective_spec(["p50"], ["calls_per_joule>=100"], {})
    assert spec.needs == {"gpu", "nvml"}


@pytest.mark.parametrize(
    ("op", "bound", "value", "expected"),
    [
        ("<=", 400.0, 300.0, 0.0),
        ("<=", 400.0, 500.0, 0.25),
        (">=", 100.0, 50.0, 0.5),
        ("==", 0.0, 0.0, 0.0),
        ("==", 0.0, 16.0, 16.0),
        ("<", 2.0, 2.0, 1e-9),
        (">", 2.0, 3.0, 0.0),
    ],
)
def test_violation_is_relative_and_zero_when_met(
    op: str, bound: float, value: float, expected: float
) -> None:
    c = parse_constraint(f"power{op}{bound}")
    assert c.violation(value) == pytest.approx(expected)
    assert c.violation(None) > 0  # unknown: cannot vouch for it


@pytest.mark.parametrize(
    ("objectives", "constraints", "quantile", "energy", "needs"),
    [
        (["p50"], [], 0.5, False, {"gpu"}),
        (["p99"], [], 0.99, False, {"gpu"}),
        (["p50"], ["p95<=2ms"], 0.95, False, {"gpu"}),
        (["p50", "energy"], [], 0.5, True, {"gpu", "nvml"}),
        (["tflops"], ["power<=300W"], 0.5, True, {"gpu", "nvml"}),
        (["p99", "edp"], [], 0.99, True, {"gpu", "nvml"}),
        (["perf_per_watt"], ["edp<=1J*s"], 0.5, True, {"gpu", "nvml"}),
        (["regs"], ["spills==0"], None, False, set()),
        (["0.5*p50 + 0.5*p99"], [], 0.99, False, {"gpu"}),
    ],
)
def test_plan_and_needs_follow_the_objectives(
    objectives: list[str],
    constraints: list[str],
    quantile: float | None,
    energy: bool,
    needs: set[str],
) -> None:
    spec = parse_objective_spec(objectives, constraints, METRICS)
    assert spec.quantile == quantile
    assert spec.needs == needs
    plan = spec.sampling_plan(SamplingPlan())
    assert plan.quantile == (quantile or 0.5)
    assert plan.energy is energy


def test_evaluate_values_and_violations() -> None:
    samples = tuple(float(i) for i in range(1, 101))
    m = Measurement(
        "k",
        "p",
        Outcome.OK,
        STANDIN_DEVICE,
        samples_ms=samples,
        summary=summarize_samples(samples),
        energy_j=2.0,
        avg_power_w=450.0,
    )
    b = Build(
        "k",
        ("nvcc",),
        "t",
        Outcome.OK,
        compile_s=1.0,
        resources=Resources(regs=96, spills_store_bytes=4, spills_load_bytes=0),
    )
    spec = parse_objective_spec(
        ["p50", "energy", "tflops"], ["power<=400W", "spills==0", "regs<=128"], METRICS
    )
    values, violations = spec.evaluate(b, m, {"N": 1_000_000})
    assert values == pytest.approx((50.5, 2.0, 2e6 / 50.5e-3 / 1e12))
    assert violations == pytest.approx((0.125, 4.0, 0.0))
    failed = Measurement("k", "p", Outcome.WRONG_RESULT, STANDIN_DEVICE)
    assert spec.evaluate(b, failed, {"N": 1})[0] is None
    assert spec.identity() == {
        "objectives": ["p50", "energy", "tflops"],
        "constraints": ["power<=400W", "spills==0", "regs<=128"],
    }
