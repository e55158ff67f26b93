"""ctune init on kernels as projects write them: types, kernels and sizes in the files the
kernel file includes, include folders, functions the code calls, defaults within the
restrictions the draft proposes. The drafts must load as they are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ctune.compile.toolchain import probe_toolchain
from ctune.spec import load_spec
from ctune.spec.draft.guess import default_for
from ctune.spec.draft.includes import read_with_includes
from ctune.spec.draft.sidecar import check_loads, draft_sidecar
from ctune.spec.draft.source import read_source
from ctune.spec.draft.undefined import Probe, find_undefined

POLYBENCH_STYLE = """\
#include "sizes.cuh"
__global__ void axpy(int n, DATA_TYPE alpha, DATA_TYPE *x, real *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}
"""
SIZES = """\
#ifndef DATA_TYPE
# define DATA_TYPE float
#endif
typedef DATA_TYPE real;
#ifdef SMALL
# define N 1024
#else
# define N 4096
#endif
#define RADIUS 8
#define LENGTH (2 * RADIUS + 1)
"""


def _draft(folder: Path, name: str, entry: str | None = None, **extra: object) -> str:
    included = read_with_includes(folder / name)
    source = read_source(included.text, included.headers)
    draft = draft_sidecar(source, stem=Path(name).stem, source_name=name, entry=entry, **extra)
    check_loads(draft, folder / name)
    return draft.yaml


def test_a_type_macro_and_a_typedef_from_an_included_header_are_float(tmp_path: Path) -> None:
    (tmp_path / "sizes.cuh").write_text(SIZES)
    (tmp_path / "axpy.cu").write_text(POLYBENCH_STYLE)
    draft = _draft(tmp_path, "axpy.cu")
    assert "{name: alpha, role: scalar, dtype: float32, value: 1.0}" in draft
    assert "{name: x, role: input, dtype: float32," in draft
    assert "{name: y, role: inout, dtype: float32," in draft
    assert "DATA_TYPE" not in draft.split("args:")[0]  # the header's guard is not a gene


def test_a_macro_several_ifdef_branches_define_is_not_read(tmp_path: Path) -> None:
    source = read_source('#include "s.h"\n', [SIZES])
    assert source.header_defines["LENGTH"] == "(2 * RADIUS + 1)"
    assert "N" not in source.header_defines  # 1024 or 4096: the build decides


def test_a_kernel_in_a_file_the_given_file_includes_is_found(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text(
        "__global__ void Kernel(int* cost, int n) {\n"
        "  int tid = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (tid < n) cost[tid] += 1;\n}\n"
    )
    (tmp_path / "host.cu").write_text(
        '#include <stdio.h>\n#include "kernel.cu"\nint main() { return 0; }\n'
    )
    draft = _draft(tmp_path, "host.cu")
    assert "entry: Kernel" in draft
    assert "{name: cost, role: inout, dtype: int32, shape: [N]}" in draft


def test_an_angle_include_is_read_only_from_the_given_folders(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "types.h").write_text("#define DATA_TYPE double\n")
    (tmp_path / "k.cu").write_text(
        "#include <types.h>\n__global__ void k(DATA_TYPE* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = 0;\n}\n"
    )
    assert read_with_includes(tmp_path / "k.cu").headers == []  # not a system folder
    included = read_with_includes(tmp_path / "k.cu", [tmp_path / "inc"])
    assert included.headers == ["#define DATA_TYPE double\n"]
    source = read_source(included.text, included.headers)
    draft = draft_sidecar(source, stem="k", source_name="k.cu", include_dirs=["inc"])
    assert "include_dirs: [inc]\n" in draft.yaml
    assert "dtype: float64" in draft.yaml
    check_loads(draft, tmp_path / "k.cu")  # the folder resolves from the scratch copy too
    spec = tmp_path / "k.yaml"
    spec.write_text(draft.yaml)
    (tmp_path / draft.reference_file).write_text(draft.reference)
    assert load_spec(tmp_path / "k.cu").include_dirs == ((tmp_path / "inc").resolve(),)


def test_a_constant_array_sized_by_a_header_macro_is_an_arg(tmp_path: Path) -> None:
    (tmp_path / "sizes.cuh").write_text(SIZES)
    (tmp_path / "conv.cu").write_text(
        '#include "sizes.cuh"\n__constant__ float taps[LENGTH];\n'
        "__global__ void conv(float* out, const float* in, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) out[i] = taps[0] * in[i];\n}\n"
    )
    draft = _draft(tmp_path, "conv.cu")
    assert "{name: taps, role: constant, dtype: float32, shape: [17]}" in draft


def test_a_default_that_breaks_a_proposed_restriction_is_lowered(tmp_path: Path) -> None:
    (tmp_path / "stage.cu").write_text(
        "template <int BLOCK_SIZE> __global__ void stage(float* c, const float* a, int n) {\n"
        "  __shared__ float buf[BLOCK_SIZE * 64];\n"
        "  int i = blockIdx.x * BLOCK_SIZE + threadIdx.x;\n"
        "  buf[threadIdx.x] = a[i]; __syncthreads();\n"
        "  if (i < n) c[i] = buf[threadIdx.x];\n}\n"
    )
    draft = _draft(tmp_path, "stage.cu")  # 256 * 64 floats would be 64 KiB
    assert '  - "4 * (BLOCK_SIZE * 64) <= 49152"  # check:' in draft
    gene = next(line for line in draft.splitlines() if line.startswith("  BLOCK_SIZE:"))
    assert "default: 128," in gene  # the largest of its values within 48 KiB


def test_a_gene_sizing_a_square_shared_tile_is_the_block_on_x_and_y(tmp_path: Path) -> None:
    (tmp_path / "mm.cu").write_text(
        "template <int BLOCK_SIZE> __global__ void mm(float* c, const float* a, int n) {\n"
        "  __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];\n"
        "  int i = blockIdx.x * BLOCK_SIZE + threadIdx.x;\n"
        "  As[threadIdx.y][threadIdx.x] = a[i]; __syncthreads();\n"
        "  if (i < n) c[i] = As[0][threadIdx.x];\n}\n"
    )
    draft = _draft(tmp_path, "mm.cu")
    assert "  BLOCK_SIZE: {values: [8, 16, 32], default: 32, family: template}" in draft
    assert "  block: [BLOCK_SIZE, BLOCK_SIZE]" in draft


def test_a_loop_over_blocks_makes_the_grid_a_gene(tmp_path: Path) -> None:
    (tmp_path / "dot.cu").write_text(
        "__global__ void dot(float* c, const float* a, int vectors, int n) {\n"
        "  for (int v = blockIdx.x; v < vectors; v += gridDim.x) {\n"
        "    float s = 0;\n    for (int i = threadIdx.x; i < n; i += blockDim.x) s += a[i];\n"
        "    if (threadIdx.x == 0) c[v] = s;\n  }\n}\n"
    )
    draft = _draft(tmp_path, "dot.cu")
    assert "  grid: [GRID_X]  # check: a loop steps over blocks by gridDim.x" in draft
    assert "GRID_X: {values: [32, 64, 128, 256, 512, 1024], default: 128, family: runtime}" in draft


def test_a_size_the_kernel_divides_is_marked(tmp_path: Path) -> None:
    (tmp_path / "pairs.cu").write_text(
        "__global__ void pairs(float2* out, int optN) {\n"
        "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < optN / 2;"
        " i += blockDim.x * gridDim.x) out[i] = make_float2(0, 0);\n}\n"
    )
    draft = _draft(tmp_path, "pairs.cu")
    assert "value: OPTN}  # check: the kernel reads optN / 2" in draft


HOST_CALLS = """\
#include <cstdio>
__global__ void scale(float* y, int n) {
  int i = blockIdx.x * block_size_x + threadIdx.x;
  if (i < n) y[i] *= 2.0f;
}
void run(float* y, int n) {
  scale<<<(n + 255) / 256, 256>>>(y, n);
  cudaThreadSynchronize();
  legacyReport(n);
}
"""


@pytest.mark.nvcc
def test_a_called_name_is_a_function_not_a_gene(tmp_path: Path) -> None:
    kernel = tmp_path / "scale.cu"
    kernel.write_text(HOST_CALLS)
    source = read_source(HOST_CALLS)
    probe = find_undefined(
        probe_toolchain("nvcc").nvcc,
        kernel,
        arch="sm_90",
        std="c++17",
        defines={},
        guess=default_for,
        called=source.called,
    )
    assert set(probe.undefined) == {"block_size_x"}
    assert probe.functions == {
        "cudaThreadSynchronize": "cudaDeviceSynchronize",
        "legacyReport": None,
    }
    draft = draft_sidecar(source, stem="scale", source_name="scale.cu", probe=probe)
    assert "  block_size_x: {" in draft.yaml and "cudaThreadSynchronize:" not in draft.yaml
    flags = next(line for line in draft.yaml.splitlines() if line.startswith("extra_flags:"))
    assert flags.startswith('extra_flags: ["-DcudaThreadSynchronize=cudaDeviceSynchronize"]')
    assert "# check:" in flags and "legacyReport" in flags


def test_the_draft_of_a_probe_with_only_removed_apis_maps_them() -> None:
    source = read_source(HOST_CALLS.replace("  legacyReport(n);\n", ""))
    probe = Probe({"block_size_x": 256}, True, functions={"cudaThreadExit": "cudaDeviceReset"})
    draft = draft_sidecar(source, stem="scale", source_name="scale.cu", probe=probe)
    assert 'extra_flags: ["-DcudaThreadExit=cudaDeviceReset"]  # check:' in draft.yaml


@pytest.mark.nvcc
def test_init_takes_include_folders_and_records_them(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "helper.h").write_text(
        "#pragma once\n#define DATA_TYPE float\ninline int helper_ok() { return 1; }\n"
    )
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "k.cu").write_text(
        "#include <helper.h>\n__global__ void k(DATA_TYPE* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = 1;\n}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "init", "k.cu", "-I", "../common"],
        cwd=tmp_path / "app", capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    draft = (tmp_path / "app" / "k.yaml").read_text()
    assert "include_dirs: [../common]\n" in draft
    assert "does not compile alone" not in done.stdout  # the probe found helper.h
    missing = subprocess.run(
        [sys.executable, "-m", "ctune", "init", "k.cu", "-I", "nowhere", "--force"],
        cwd=tmp_path / "app", capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "nowhere" in missing.stderr


def test_a_block_stepped_by_a_plain_define_is_that_many_threads(tmp_path: Path) -> None:
    (tmp_path / "walk.cu").write_text(
        "#define MAX_THREADS_PER_BLOCK 512\n"
        "__global__ void walk(int* cost, int n) {\n"
        "  int tid = blockIdx.x * MAX_THREADS_PER_BLOCK + threadIdx.x;\n"
        "  if (tid < n) cost[tid] += 1;\n}\n"
    )
    draft = _draft(tmp_path, "walk.cu")
    assert '  grid: ["ceil_div(N, 512)"]' in draft and "  block: [512]" in draft


def test_an_include_init_cannot_read_is_left_to_the_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "big.h").write_text("#define DATA_TYPE float\n")
    (tmp_path / "k.cu").write_text('#include "big.h"\n')
    monkeypatch.setattr("ctune.spec.draft.includes.MAX_SOURCE_BYTES", 20)  # big.h is over it
    included = read_with_includes(tmp_path / "k.cu")
    assert included.text == '#include "big.h"\n' and included.headers == []
