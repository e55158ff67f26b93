"""Every kernel spec's default build matches its reference on random (never zero) inputs, on
each problem of its ``correctness`` problem set (else its default problem)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ctune.measure import SamplingPlan
from ctune.measure.session import WorkerMeasurer
from ctune.records import Outcome

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data" / "kernels"

pytestmark = pytest.mark.gpu

# the shipped kernels, plus the test kernels that are meant to be right (others in
# tests/data/kernels fail to build on purpose)
SPECS = [
    *sorted((ROOT / "kernels").glob("*.yaml")),
    DATA / "saxpy.yaml",
    DATA / "faults.yaml",
    DATA / "rt_saxpy.yaml",
    DATA / "rt_items.yaml",
]
PLAN = SamplingPlan(warmup_ms=1, rep_ms=1, min_samples=10, max_samples=50, quantile=0.5)


@pytest.mark.parametrize(
    "path", SPECS, ids=[str(p.relative_to(ROOT).with_suffix("")) for p in SPECS]
)
def test_default_build_is_correct(path: Path, load, builder):
    spec = load(path)
    names = spec.problem_sets.get("correctness") or (spec.default_problem,)
    builder.ahead(spec, [spec.problem(n) for n in names])
    failures = []
    with WorkerMeasurer() as measurer:
        for name in names:
            problem = spec.problem(name)
            m = measurer.measure(spec, *builder(spec, problem), problem, PLAN)
            print(
                f"{spec.name}/{name}: {m.outcome.value} rel_l2={m.rel_l2_error} "
                f"max_abs={m.max_abs_error} wall={m.wall_s:.2f} s"
            )
            if m.outcome is not Outcome.OK:
                failures.append(f"{name}: {m.outcome.value}: {m.error}")
    assert not failures, "\n".join(failures)


def test_runtime_variants_share_a_build_and_are_each_correct(load, builder):
    """Candidates that differ only in runtime genes share one cubin and each launch with
    their own geometry: a launch that covered too few elements would leave them unwritten."""
    spec = load(DATA / "rt_saxpy.yaml")
    problem = spec.problem()
    failures, binaries = [], set()
    with WorkerMeasurer() as measurer:
        for block, items in ((128, 1), (64, 4), (256, 2)):
            candidate, build = builder(spec, problem, BLOCK=block, ITEMS=items)
            binaries.add(build.binary_path)
            m = measurer.measure(spec, candidate, build, problem, PLAN)
            if m.outcome is not Outcome.OK:
                failures.append(f"BLOCK={block} ITEMS={items}: {m.outcome.value}: {m.error}")
    assert len(binaries) == 1
    assert not failures, "\n".join(failures)


def test_runtime_gene_as_scalar_argument_shares_a_build(load, builder):
    """ITEMS reaches rt_items as a scalar argument: one cubin, every value correct (a value
    the kernel did not receive would leave elements unwritten, which the check catches)."""
    spec = load(DATA / "rt_items.yaml")
    problem = spec.problem()
    failures, binaries = [], set()
    with WorkerMeasurer() as measurer:
        for items in (1, 2, 8):
            candidate, build = builder(spec, problem, ITEMS=items)
            binaries.add(build.binary_path)
            m = measurer.measure(spec, candidate, build, problem, PLAN)
            if m.outcome is not Outcome.OK:
                failures.append(f"ITEMS={items}: {m.outcome.value}: {m.error}")
    assert len(binaries) == 1
    assert not failures, "\n".join(failures)


GEMV_PROBLEMS = ["llm8b-qkv-t1", "llm8b-down-t16"]  # decode shapes of the correctness set
GEMV_SHAPES = [(128, 16), (64, 4), (512, 32)]  # the default, the narrowest, the widest
# Beside the decode shapes it serves: 5 tokens (batches) of 328 outputs (a partial last block
# of rows for most block shapes; N fills whole warps, as the spec requires) over a K of 128,
# below one row pass of 32 threads (the element-wise tail), in bf16. Not a problem of the
# shipped spec: the test's own copy adds it.
GEMV_TAIL = {
    "name": "gemv-tail-m5-n328-k128-bf16",
    "dims": {"M": 5, "N": 328, "K": 128},
    "defines": {"CTUNE_BF16": 1},
    "dtypes": {"A": "bfloat16", "B": "bfloat16", "C": "bfloat16"},
}


def write_gemv_spec(folder: Path) -> Path:
    """kernels/gemm.yaml with GEMV_TAIL added, beside copies of its source, reference and
    vendor calls (the spec names them: a file the spec names lives in its folder)."""
    for name in ("gemm.cu", "gemm_ref.py", "vendor_calls.py"):
        shutil.copy(ROOT / "kernels" / name, folder / name)
    data = yaml.safe_load((ROOT / "kernels" / "gemm.yaml").read_text())
    data["problems"].append(GEMV_TAIL)
    (folder / "gemm.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder / "gemm.yaml"


@pytest.fixture(scope="module")
def gemv_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gemv_spec(tmp_path_factory.mktemp("gemv"))


@pytest.mark.parametrize(
    "threads,row_threads", GEMV_SHAPES, ids=[f"{t}x{r}" for t, r in GEMV_SHAPES]
)
def test_cutlass_gemm_gemv_path_is_correct(
    gemv_spec: Path, load, builder, threads: int, row_threads: int
):
    """GEMV=1 (CUTLASS's SIMT GEMV, offered for M <= 16) on one token, 16 tokens, and
    GEMV_TAIL."""
    spec = load(gemv_spec)
    genes = {"GEMV": 1, "GEMV_THREADS": threads, "GEMV_ROW_THREADS": row_threads}
    names = [*GEMV_PROBLEMS, GEMV_TAIL["name"]]
    builder.ahead(spec, [spec.problem(n) for n in names], **genes)
    failures = []
    with WorkerMeasurer() as measurer:
        for name in names:
            problem = spec.problem(name)
            m = measurer.measure(spec, *builder(spec, problem, **genes), problem, PLAN)
            print(f"GEMV {threads}x{row_threads} {name}: {m.outcome.value} rel_l2={m.rel_l2_error}")
            if m.outcome is not Outcome.OK:
                failures.append(f"{name}: {m.outcome.value}: {m.error}")
    assert not failures, "\n".join(failures)
