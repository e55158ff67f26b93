"""The shipped kernels' vendor calls on the GPU (kernels/vendor_calls.py): cuBLAS and
PyTorch's SDPA run on the kernel's own buffers in the measuring worker, pass the kernel's
correctness check and are timed; a vendor call computing something else fails the check."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.measure import SamplingPlan
from ctune.measure.session import WorkerMeasurer
from ctune.measure.vendor import vendor_build, vendor_candidate
from ctune.records import Outcome
from ctune.testing.spec_copies import copy_spec, with_key

pytestmark = pytest.mark.gpu

KERNELS = Path(__file__).parents[2] / "kernels"
PLAN = SamplingPlan(warmup_ms=1, rep_ms=2, min_samples=20, max_samples=100, quantile=0.5)

CASES = [
    ("gemm", "llm8b-qkv-t128"),
    ("gemm", "llm8b-qkv-t128-bf16"),
    ("gemm", "llm8b-qkv-t1"),
    ("attention", "prefill-s1024-d64-causal"),
    ("attention", "gqa-s1024-d128"),
    ("attention", "prefill-s4096-d128-causal-bf16"),
]


@pytest.fixture(scope="module")
def measurer():
    with WorkerMeasurer() as m:
        yield m


@pytest.mark.parametrize(("kernel", "problem"), CASES)
def test_the_vendor_call_passes_the_kernel_s_check(load, measurer, kernel, problem) -> None:
    spec = load(KERNELS / f"{kernel}.yaml")
    m = measurer.measure(
        spec, vendor_candidate(spec), vendor_build(spec), spec.problem(problem), PLAN
    )
    assert m.outcome is Outcome.OK, m.error
    assert (
        m.rel_l2_error is not None
        and m.rel_l2_error < spec.tolerance_for("C" if kernel == "gemm" else "O").rel_l2
    )
    assert m.summary is not None and m.summary.p50_ms > 0 and m.device is not None


def test_a_vendor_call_computing_something_else_fails_the_check(load, tmp_path: Path) -> None:
    """C = A @ B (B read untransposed, as a square problem allows) is a wrong result."""
    calls = (
        "def untransposed(xp, arrays, dims, dtypes):\n"
        "    a, b, c = arrays['A'], arrays['B'], arrays['C']\n"
        "    return lambda: xp.matmul(a, b, out=c)\n"
    )
    path = copy_spec(
        KERNELS, ("gemm.yaml", "gemm.cu", "gemm_ref.py"), tmp_path, {"calls.py": calls}
    )
    spec = load(with_key(path, "vendor", {"python": "calls.py:untransposed", "name": "wrong"}))
    with WorkerMeasurer() as measurer:
        m = measurer.measure(
            spec, vendor_candidate(spec), vendor_build(spec), spec.problem("sq4096"), PLAN
        )
    assert m.outcome is Outcome.WRONG_RESULT, m.error


def test_a_problem_set_s_vendor_column_is_measured_and_checked(load, tmp_path: Path) -> None:
    """``--dispatch-vendor``'s cell: cuBLAS in fresh processes of its own, checked, and a
    time the cover can rank (nothing compiled: the row has no build of ctune's)."""
    from ctune.config import Settings
    from ctune.objective import parse_objective_spec
    from ctune.sets.problem_set import cross_row
    from ctune.sets.set_layout import VENDOR_BUILD, SetOptions

    spec = load(KERNELS / "gemm.yaml")
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    settings = Settings(cache_dir=tmp_path / "cache", registry=tmp_path / "registry")
    opts = SetOptions("t128-fp16", tmp_path / "set", cross_processes=2, vendor=True)
    problem = spec.problem("llm8b-qkv-t128")
    with WorkerMeasurer() as measurer:
        rows = cross_row(spec, objective, problem, [], None, measurer, opts, settings, vendor=True)
    (row,) = rows
    assert row["build"] == VENDOR_BUILD and row["vendor"] == "cuBLAS", row
    assert row["outcome"] == "ok" and row["cost"] > 0 and row["cost"] == row["value"]
    assert row["device"] and row["device"] != "stand-in (not a GPU)"
