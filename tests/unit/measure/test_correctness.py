"""Correctness checks on numpy: tolerance edges, NaN/Inf, poison, C2 and C3."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ctune.errors import SpecError
from ctune.measure import correctness as C
from ctune.measure.arrays import Buffers
from ctune.records import Outcome
from ctune.spec import Tolerance, load_spec

DATA = Path(__file__).parents[2] / "data" / "kernels"
TOL = Tolerance(rel_l2=1e-2, max_abs=0.5)


def test_exact_output_passes():
    ref = np.arange(1, 101, dtype=np.float32)
    err = C.compare(np, "y", ref.copy(), ref, TOL)
    assert err.ok and err.rel_l2 == 0.0 and err.max_abs == 0.0


def test_tolerance_edges():
    ref = np.full(100, 8.0, dtype=np.float32)
    off = ref + np.float32(0.125)  # every element off by 1/8: rel_l2 = 1/64 exactly
    at_edge = C.compare(np, "y", off, ref, Tolerance(1 / 64, 0.125))
    assert at_edge.ok and at_edge.rel_l2 == 1 / 64 and at_edge.max_abs == 0.125
    assert not C.compare(np, "y", off, ref, Tolerance(1 / 64 * 0.999, 0.125)).ok
    assert not C.compare(np, "y", off, ref, Tolerance(1 / 64, 0.124)).ok
    # one large outlier: rel_l2 small, max_abs over
    spike = ref.copy()
    spike[3] += 0.75
    err = C.compare(np, "y", spike, ref, Tolerance(1.0, 0.5))
    assert not err.ok and err.max_abs == pytest.approx(0.75)
    assert C.compare(np, "y", spike, ref, Tolerance(1.0, 0.75)).ok


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_fail(bad):
    ref = np.ones(10, dtype=np.float32)
    out = ref.copy()
    out[4] = bad
    err = C.compare(np, "y", out, ref, Tolerance(1e9, 1e9))
    assert not err.ok and err.non_finite == 1 and math.isinf(err.rel_l2)
    assert "NaN/Inf" in err.describe(TOL)


def test_size_mismatch_and_bad_reference_are_spec_errors():
    with pytest.raises(SpecError, match="elements"):
        C.compare(np, "y", np.ones(3), np.ones(4), TOL)
    with pytest.raises(SpecError, match="NaN or Inf"):
        C.compare(np, "y", np.ones(3), np.array([1.0, np.nan, 1.0]), TOL)


def test_zero_reference():
    zeros = np.zeros(4, dtype=np.float32)
    assert C.compare(np, "y", zeros, zeros, TOL).ok
    assert math.isinf(C.compare(np, "y", zeros + 1, zeros, TOL).rel_l2)


def test_differing_elements_compares_bits():
    a = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    b = a.copy()
    assert C.differing_elements(np, a, b) == 0
    b[2] = 3.0000002
    assert C.differing_elements(np, a, b) == 1


# --- the whole check, with numpy "kernels" -------------------------------------


@pytest.fixture(scope="module")
def saxpy():
    return load_spec(DATA / "saxpy.yaml")


@pytest.fixture(scope="module")
def faults():
    return load_spec(DATA / "faults.yaml")


def reference_for(spec, problem):
    func = spec.reference()
    calls = []

    def reference(seed, buffers):
        calls.append(seed)
        return C.reference_outputs(np, spec, func, problem, buffers)

    reference.calls = calls  # type: ignore[attr-defined]
    return reference


def run_checks(spec, problem, kernel):
    return C.run_checks(np, spec, problem, kernel, reference_for(spec, problem), (5, 6))


def saxpy_kernel(b: Buffers) -> None:
    b.arrays["y"][:] = b.scalars["a"] * b.arrays["x"] + b.arrays["y"]


def test_correct_kernel_passes_twice(saxpy):
    problem = saxpy.problem("ragged")
    reference = reference_for(saxpy, problem)
    report = C.run_checks(np, saxpy, problem, saxpy_kernel, reference, (5, 6))
    assert report.outcome is Outcome.OK and report.checks == 2
    assert report.rel_l2 is not None and report.rel_l2 < 1e-6
    assert reference.calls == [5, 6]  # fresh inputs per check


def test_wrong_kernel_is_wrong_result(saxpy):
    def wrong(b):
        b.arrays["y"][:] = 2.0 * b.arrays["x"] + b.arrays["y"]

    report = run_checks(saxpy, saxpy.problem("ragged"), wrong)
    assert report.outcome is Outcome.WRONG_RESULT
    assert report.rel_l2 is not None and report.rel_l2 > 1e-2
    assert "check 1" in report.error and "rel_l2" in report.error


def test_unwritten_output_keeps_the_poison(faults):
    def partial(b):
        b.arrays["y"][:-1] = 2.0 * b.arrays["x"][:-1]  # misses the last element

    report = run_checks(faults, faults.problem("n64k"), partial)
    assert report.outcome is Outcome.WRONG_RESULT
    assert "1 NaN/Inf" in report.error


def test_kernel_modifying_an_input_is_caught(faults):
    def clobber(b):
        b.arrays["y"][:] = 2.0 * b.arrays["x"]
        b.arrays["x"][0] += 1.0

    report = run_checks(faults, faults.problem("n64k"), clobber)
    assert report.outcome is Outcome.WRONG_RESULT
    assert "modified input x" in report.error


def test_nondeterministic_kernel(faults):
    state = {"n": 0}

    def racy(b):
        state["n"] += 1
        b.arrays["y"][:] = 2.0 * b.arrays["x"]
        b.arrays["y"][0] += np.float32(1e-7) * state["n"]  # within tolerance, not bitwise equal

    report = run_checks(faults, faults.problem("n64k"), racy)
    assert report.outcome is Outcome.NONDETERMINISTIC
    assert "differ between two runs" in report.error


def test_nondeterminism_not_checked_when_spec_says_so(faults):
    import dataclasses

    relaxed = dataclasses.replace(faults, deterministic=False)
    state = {"n": 0}

    def racy(b):
        state["n"] += 1
        b.arrays["y"][:] = 2.0 * b.arrays["x"]
        b.arrays["y"][0] += np.float32(1e-7) * state["n"]

    assert run_checks(relaxed, relaxed.problem("n64k"), racy).outcome is Outcome.OK


def test_deterministic_rerun_sees_fresh_poison_and_pristine_inout(saxpy):
    seen = []

    def kernel(b):
        seen.append(b.arrays["y"].copy())
        saxpy_kernel(b)

    report = run_checks(saxpy, saxpy.problem("ragged"), kernel)
    assert report.outcome is Outcome.OK
    assert np.array_equal(seen[0], seen[1])  # the rerun started from the same inout values


def test_reference_errors_are_spec_errors(faults):
    problem = faults.problem("n64k")
    from ctune.measure.arrays import make_buffers

    buffers = make_buffers(np, faults, problem, 1)

    def broken(xp, inputs, dims):
        raise KeyError("nope")

    with pytest.raises(SpecError, match="raised KeyError"):
        C.reference_outputs(np, faults, broken, problem, buffers)
    with pytest.raises(SpecError, match="must return a dict"):
        C.reference_outputs(np, faults, lambda xp, i, d: 3, problem, buffers)
    with pytest.raises(SpecError, match="returned no 'y'"):
        C.check_outputs(np, faults, problem, buffers, {"z": np.ones(1)})


def saxpy_with_a_problem_tolerance(tmp_path: Path, problem: int, tolerance: dict) -> Path:
    """saxpy.yaml copied with one problem's own tolerance."""
    import shutil

    import yaml

    raw = yaml.safe_load((DATA / "saxpy.yaml").read_text())
    raw["problems"][problem]["tolerance"] = tolerance
    for name in ("saxpy_ref.py", "saxpy.cu"):
        shutil.copy(DATA / name, tmp_path / name)
    (tmp_path / "saxpy.yaml").write_text(yaml.safe_dump(raw))
    return tmp_path / "saxpy.yaml"


def test_a_problems_own_tolerance_decides_for_that_problem_only(tmp_path):
    """A long reduction's outputs reach where a 16-bit type rounds coarser: that problem
    carries a wider tolerance of its own, and the spec's still holds for the others."""
    wider = {"y": {"rel_l2": 1e-2, "max_abs": 0.5}}
    spec = load_spec(saxpy_with_a_problem_tolerance(tmp_path, 1, wider))

    def off_by_a_quarter(b: Buffers) -> None:
        saxpy_kernel(b)
        b.arrays["y"][7] += 0.25

    own = spec.problem("ragged")
    assert spec.tolerance_for("y", own) == Tolerance(1e-2, 0.5)
    assert run_checks(spec, own, off_by_a_quarter).outcome is Outcome.OK
    plain = run_checks(spec, spec.problem("n1m"), off_by_a_quarter)
    assert plain.outcome is Outcome.WRONG_RESULT and "tolerance 1e-05" in plain.error


def test_a_problems_tolerance_names_an_output(tmp_path):
    path = saxpy_with_a_problem_tolerance(tmp_path, 0, {"x": {"rel_l2": 1e-2, "max_abs": 0.5}})
    with pytest.raises(SpecError, match=r"problems\.n1m\.tolerance\.x.*not an output"):
        load_spec(path)


def test_an_empty_problem_tolerance_changes_nothing(tmp_path):
    spec = load_spec(saxpy_with_a_problem_tolerance(tmp_path, 0, {}))
    assert spec.problem("n1m").tolerance == {}
    assert spec.tolerance_for("y", spec.problem("n1m")) == spec.tolerance["default"]
