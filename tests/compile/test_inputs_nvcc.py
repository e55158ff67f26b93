"""Issue 46's kernels with the real nvcc (no GPU): vector and struct parameters checked
against the spec's dtypes, a header compiled as CUDA, the static shared memory estimate
against ptxas's own count, a launcher's resources, and `ctune init` on a header that
reads constant memory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ctune.compile import NvccCompiler, probe_toolchain
from ctune.compile.resources import parse_ptxas_report
from ctune.compile.sass import symbol_sizes
from ctune.errors import SpecError
from ctune.records import Outcome
from ctune.spec import load_spec

pytestmark = pytest.mark.nvcc

GIVEN = Path(__file__).parents[1] / "data" / "kernels" / "given"


@pytest.fixture(scope="module")
def toolchain():
    return probe_toolchain()


@pytest.fixture
def fir(tmp_path: Path) -> Path:
    for item in GIVEN.iterdir():
        shutil.copy(item, tmp_path / item.name)
    return tmp_path / "fir_points.yaml"


def _build(path: Path, toolchain, tmp_path: Path, **genes):
    spec = load_spec(path, toolchain.help_text)
    compiler = NvccCompiler(spec, toolchain, tmp_path / "cache")
    candidate = spec.candidate({**spec.space.default_values(), **genes})
    return spec, compiler.build(candidate, spec.problem())


def test_vector_struct_and_constant_args_fit_the_kernel(fir: Path, toolchain, tmp_path) -> None:
    for block in (64, 256):
        spec, build = _build(fir, toolchain, tmp_path, BLOCK=block)
        assert build.outcome is Outcome.OK, build.log_tail
        # the estimate the device limits screen with is what ptxas counts
        static = spec.launch.static_smem_bytes.evaluate({"BLOCK": block})
        assert static == build.resources.smem_bytes == 4 * block
        # the constant's size, which the launch checks the arg against, from the cubin
        assert symbol_sizes(Path(build.binary_path).read_bytes())["coeffs"] == 16 * 4


def test_a_float32_buffer_for_a_float2_parameter_is_refused(fir: Path, toolchain, tmp_path) -> None:
    data = yaml.safe_load(fir.read_text())
    data["args"][0]["dtype"] = "float32"
    fir.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SpecError) as caught:
        _build(fir, toolchain, tmp_path)
    text = str(caught.value)
    assert "\n" not in text and "args.in: dtype float32" in text and "float2 const*" in text


def test_a_header_source_compiles_as_cuda(fir: Path, toolchain, tmp_path) -> None:
    (fir.parent / "fir_points.cu").rename(fir.parent / "fir_points.cuh")
    data = yaml.safe_load(fir.read_text())
    data["source"] = "fir_points.cuh"
    fir.write_text(yaml.safe_dump(data, sort_keys=False))
    _, build = _build(fir, toolchain, tmp_path)
    assert build.outcome is Outcome.OK, build.log_tail
    assert build.argv[-3:-1] == ("-x", "cu")


LAUNCHER = """\
#include <cuda_runtime.h>
__global__ void heavy(double* out) {  // in the library, never launched
    double acc[64];
    for (int i = 0; i < 64; ++i) acc[i] = out[i * threadIdx.x];
    for (int i = 0; i < 64; ++i) out[i] += acc[(i * 7) % 64] * acc[i];
}
__global__ void light(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.0f;
}
extern "C" int ctune_launch(void* const* params, cudaStream_t stream) {
    float* out = *static_cast<float* const*>(params[0]);
    int n = *static_cast<const int*>(params[1]);
    light<<<(n + 255) / 256, 256, 0, stream>>>(out, n);
    return static_cast<int>(cudaGetLastError());
}
"""


def _launcher_build(source: str, tmp_path: Path, toolchain):
    """The build of a launcher ``fill.cu`` with ``source`` (one output, one size)."""
    (tmp_path / "fill.cu").write_text(source)
    (tmp_path / "ref.py").write_text("def ref(xp, inputs, dims):\n    return {}\n")
    (tmp_path / "fill.yaml").write_text(
        "entry: {symbol: ctune_launch, kind: launcher}\n"
        "problems: [{name: n, dims: {N: 1024}}]\n"
        "args:\n"
        "  - {name: out, role: output, dtype: float32, shape: [N]}\n"
        "  - {name: n, role: scalar, dtype: int32, value: N}\n"
        "reference: {python: ref.py:ref}\n"
    )
    _, build = _build(tmp_path / "fill.yaml", toolchain, tmp_path)
    assert build.outcome is Outcome.OK, build.log_tail
    return build


def test_a_launchers_resources_are_the_launched_kernels(tmp_path: Path, toolchain) -> None:
    build = _launcher_build(LAUNCHER, tmp_path, toolchain)
    report = parse_ptxas_report(build.log_tail)
    light = next(r for k, r in report.items() if "5light" in k)
    heavy = next(r for k, r in report.items() if "5heavy" in k)
    assert heavy.regs != light.regs  # else the test could not tell them apart
    assert build.resources.regs == light.regs


LIBRARY = """\
#pragma once
#include <cuda_runtime.h>
template <int N> __global__ void lib_fill(float* out, int n) {  // a library's kernel
    float acc[N];
#pragma unroll
    for (int j = 0; j < N; ++j) acc[j] = out[(threadIdx.x * N + j) % n];
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < N; ++j) s += acc[j] * acc[(j * 5) % N];
    out[threadIdx.x % n] = s;
}
inline void lib_run(float* out, int n, cudaStream_t s) { lib_fill<32><<<1, 32, 0, s>>>(out, n); }
"""


def test_a_launchers_resources_count_its_librarys_kernels(tmp_path: Path, toolchain) -> None:
    (tmp_path / "libfill.cuh").write_text(LIBRARY)
    source = LAUNCHER.replace(
        "#include <cuda_runtime.h>", '#include <cuda_runtime.h>\n#include "libfill.cuh"'
    ).replace("    return static_cast", "    lib_run(out, n, stream);\n    return static_cast")
    build = _launcher_build(source, tmp_path, toolchain)
    report = parse_ptxas_report(build.log_tail)
    light = next(r for k, r in report.items() if "5light" in k)
    library = next(r for k, r in report.items() if "8lib_fill" in k)
    heavy = next(r for k, r in report.items() if "5heavy" in k)
    assert light.regs is not None and library.regs is not None
    assert light.regs < library.regs != heavy.regs  # else the test could not tell them apart
    assert build.resources.regs == library.regs


HEADER = """\
#pragma once
#define NTAPS 8
__constant__ float taps[NTAPS * 2];
__constant__ Unknown skipped[4];
__global__ void smooth(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = taps[i % (NTAPS * 2)] * in[i];
}
"""


def test_init_on_a_header_drafts_its_constants(tmp_path: Path) -> None:
    (tmp_path / "smooth.cuh").write_text(HEADER.replace("__constant__ Unknown skipped[4];\n", ""))
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "init", "smooth.cuh"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "next    ctune space smooth.cuh" in done.stdout
    draft = (tmp_path / "smooth.yaml").read_text()
    assert "{name: taps, role: constant, dtype: float32, shape: [16]}  # check:" in draft
    space = subprocess.run(
        [sys.executable, "-m", "ctune", "space", "smooth.cuh"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert space.returncode == 0, space.stderr


POINTS = """\
struct Point { float x; float y; };
__global__ void norm(const Point* __restrict__ pts, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = pts[i].x * pts[i].x + pts[i].y * pts[i].y;
}
"""


def test_init_drafts_a_struct_buffer_that_compiles_and_fits(tmp_path: Path, toolchain) -> None:
    (tmp_path / "norm.cu").write_text(POINTS)
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "init", "norm.cu"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "dtype: {struct: [[x, float32], [y, float32]]}" in (tmp_path / "norm.yaml").read_text()
    _, build = _build(tmp_path / "norm.yaml", toolchain, tmp_path)  # the args check passes
    assert build.outcome is Outcome.OK, build.log_tail
    data = yaml.safe_load((tmp_path / "norm.yaml").read_text())
    data["args"][0]["dtype"] = {"struct": [["x", "float64"], ["y", "float64"]]}
    (tmp_path / "norm.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SpecError, match=r"args.pts: dtype struct\{x:float64,y:float64\}"):
        _build(tmp_path / "norm.yaml", toolchain, tmp_path / "other")
