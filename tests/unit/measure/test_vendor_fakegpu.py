"""The spec's vendor call in the real worker process, against the numpy stand-in for CuPy:
checked against the reference and timed as a build is, and a failure of its code recorded
as the vendor measurement's failure with the worker still up. Nothing here is about GPU
timing (tests/gpu/test_vendor_gpu.py measures cuBLAS and SDPA on the device)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctune.measure import SamplingPlan
from ctune.measure.session import WorkerMeasurer
from ctune.measure.vendor import is_vendor, vendor_build, vendor_candidate
from ctune.records import Build, Outcome
from ctune.spec import load_spec
from ctune.testing.spec_copies import copy_spec, with_key

HERE = Path(__file__).parent
DATA = HERE.parents[1] / "data" / "kernels"
SAXPY = ("saxpy.yaml", "saxpy_ref.py", "saxpy.cu")
PLAN = SamplingPlan(warmup_ms=1, rep_ms=2, min_samples=30, max_samples=300, quantile=0.5)

VENDOR_CALLS = """
def writes(xp, arrays, dims, dtypes):
    x, y = arrays["x"], arrays["y"]

    def call():
        y[...] = 1.5 * x + y

    return call


def writes_and_returns_it(xp, arrays, dims, dtypes):
    x, y = arrays["x"], arrays["y"]

    def call():
        y[...] = 1.5 * x + y
        return y  # as matmul(..., out=y) does: not a mapping, so not taken as outputs

    return call


def returns(xp, arrays, dims, dtypes):
    x, y = arrays["x"], arrays["y"]
    return lambda: {"y": 1.5 * x + y}


def wrong(xp, arrays, dims, dtypes):
    x, y = arrays["x"], arrays["y"]

    def call():
        y[...] = 2.5 * x + y

    return call


def raises(xp, arrays, dims, dtypes):
    return lambda: 1 / 0


def not_callable(xp, arrays, dims, dtypes):
    return 42


def returns_a_stranger(xp, arrays, dims, dtypes):
    return lambda: {"z": arrays["x"]}
"""


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(HERE / "fakegpu"))
    monkeypatch.delenv("FAKE_NVML_REASONS", raising=False)


def _spec_with_vendor(tmp_path: Path, function: str):
    folder = tmp_path / function
    path = copy_spec(DATA, SAXPY, folder, {"calls.py": VENDOR_CALLS})
    vendor = {"python": f"calls.py:{function}", "name": f"saxpy {function}"}
    return load_spec(with_key(path, "vendor", vendor))


def _measure_vendor(spec):
    problem = spec.problem("ragged")
    with WorkerMeasurer() as measurer:
        return measurer.measure(
            spec, vendor_candidate(spec), vendor_build(spec), problem, PLAN
        ), measurer


@pytest.mark.parametrize("function", ["writes", "writes_and_returns_it", "returns"])
def test_a_vendor_call_is_checked_and_timed(tmp_path, fake_gpu, function) -> None:
    spec = _spec_with_vendor(tmp_path, function)
    m, _ = _measure_vendor(spec)
    assert m.outcome is Outcome.OK, m.error
    assert m.candidate_key == vendor_candidate(spec).key()
    assert m.rel_l2_error is not None and m.rel_l2_error < 1e-6
    assert m.summary is not None and len(m.samples_ms) == m.summary.n >= 30


def test_a_wrong_vendor_call_is_a_wrong_result(tmp_path, fake_gpu) -> None:
    m, _ = _measure_vendor(_spec_with_vendor(tmp_path, "wrong"))
    assert m.outcome is Outcome.WRONG_RESULT, m.error
    assert not m.samples_ms


@pytest.mark.parametrize(
    ("function", "words"),
    [
        ("raises", "raised ZeroDivisionError launching"),
        ("not_callable", "must return a callable of no arguments, got int"),
        ("returns_a_stranger", "returned 'z', not an output"),
    ],
)
def test_a_failing_vendor_call_is_its_own_failure(tmp_path, fake_gpu, function, words) -> None:
    """Recorded as a launch error naming what the vendor's code did; the worker stays up
    and measures a build next."""
    spec = _spec_with_vendor(tmp_path, function)
    problem = spec.problem("ragged")
    candidate = spec.candidate(spec.space.default_values())
    cubin = tmp_path / "saxpy.cubin"
    cubin.write_text(json.dumps({"kernel": "saxpy"}))
    build = Build(candidate.key(), ("nvcc",), "fake", Outcome.OK, binary_path=str(cubin))
    with WorkerMeasurer() as measurer:
        vendor = measurer.measure(spec, vendor_candidate(spec), vendor_build(spec), problem, PLAN)
        pid = measurer.worker_pid
        after = measurer.measure(spec, candidate, build, problem, PLAN)
        assert measurer.worker_pid == pid
    assert vendor.outcome is Outcome.LAUNCH_ERROR and words in vendor.error, vendor.error
    assert after.outcome is Outcome.OK, after.error


def test_the_vendor_candidate_is_keyed_apart_from_every_build(tmp_path) -> None:
    spec = _spec_with_vendor(tmp_path, "writes")
    vendor = vendor_candidate(spec)
    assert is_vendor(vendor) and not is_vendor(spec.default_candidate())
    assert vendor.key() != spec.default_candidate().key()
    assert vendor.as_dict() == spec.space.default_values()  # runtime scalars as the default's
    build = vendor_build(spec)
    assert build.candidate_key == vendor.key() and build.toolchain == "vendor: saxpy writes"
