"""`ctune init` end to end with the real nvcc: a draft that `ctune space` and `ctune compile`
take as it is, bare macros found by compiling, and one-line refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.nvcc

KT_STYLE = """\
// Kernel Tuner style: block_size_x and the tile are macros the tuner defines.
__global__ void scale2d(float* out, const float* in, int width, int height) {
  int x = blockIdx.x * block_size_x + threadIdx.x;
  int y = blockIdx.y * block_size_y + threadIdx.y;
  if (x < width && y < height) out[y * width + x] = 2.0f * in[y * width + x];
}
"""


def ctune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctune", *args], cwd=cwd, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def test_a_draft_runs_through_space_and_compile_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "scale2d.cu").write_text(KT_STYLE)
    done = ctune("init", "scale2d.cu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "gene    block_size_x" in done.stdout and "used, defined nowhere" in done.stdout
    assert "next    ctune space scale2d.cu" in done.stdout
    draft = (tmp_path / "scale2d.yaml").read_text()
    assert "block: [block_size_x, block_size_y]" in draft
    assert 'grid: ["ceil_div(WIDTH, block_size_x)", "ceil_div(HEIGHT, block_size_y)"]' in draft
    space = ctune("space", "scale2d.cu", "--json", cwd=tmp_path)
    assert space.returncode == 0, space.stderr
    report = json.loads(space.stdout)
    assert report["device"]["ruled_out"] > 0  # 1024 x 32 blocks exist in the draft's genes
    built = ctune("compile", "scale2d.cu", "--json", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    build = json.loads(built.stdout)["build"]
    assert build["entry_symbol"] == "_Z7scale2dPfPKfii"
    assert "-Dblock_size_x=256" in build["argv"]


def test_init_refuses_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "two.cu").write_text(
        "__global__ void a(float* x) {}\n__global__ void b(float* x) {}\n"
    )
    (tmp_path / "none.cu").write_text("int f() { return 1; }\n")
    cases = [
        (("init", "two.cu"), "two.cu: 2 kernels (a, b); pick one with --entry NAME"),
        (("init", "none.cu"), "no __global__ function found"),
        (("init", "missing.cu"), "missing.cu: no such file"),
    ]
    for args, message in cases:
        done = ctune(*args, cwd=tmp_path)
        errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
        assert done.returncode == 2 and len(errors) == 1 and message in errors[0], done.stderr
    assert ctune("init", "two.cu", "--entry", "b", cwd=tmp_path).returncode == 0
    again = ctune("init", "two.cu", "--entry", "b", cwd=tmp_path)
    assert again.returncode == 2 and "two.yaml: already exists; pass --force" in again.stderr
    assert ctune("init", "two.cu", "--entry", "a", "--force", cwd=tmp_path).returncode == 0
    assert "entry: a\n" in (tmp_path / "two.yaml").read_text()


def test_an_if_switch_drafts_a_spec_that_loads(tmp_path: Path) -> None:
    # #if USE_VEC read as work per thread gave grid ceil_div(N, BLOCK_X * USE_VEC) with
    # USE_VEC's default 0: the draft was written, then failed to load
    (tmp_path / "dyn.cu").write_text(
        "#ifndef BLOCK_X\n#define BLOCK_X 256\n#endif\n"
        "#if USE_VEC\n#define W 4\n#else\n#define W 1\n#endif\n"
        'extern "C" __global__ void dyn(float* y, const float* x, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i * W < n) { for (int k = 0; k < W; ++k) y[i*W+k] = 2.f * x[i*W+k]; }\n}\n"
    )
    done = ctune("init", "dyn.cu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "gene    USE_VEC [0, 1] default 0" in done.stdout
    assert 'grid: ["ceil_div(N, BLOCK_X)"]' in (tmp_path / "dyn.yaml").read_text()
    assert ctune("space", "dyn.cu", cwd=tmp_path).returncode == 0


def test_a_header_kernel_drafts_its_source(tmp_path: Path) -> None:
    # a spec's source defaults to STEM.cu: a .cuh kernel's draft named no source, did not
    # load, and init refused it
    (tmp_path / "k.cuh").write_text("__global__ void k(float* y) { y[threadIdx.x] = 1.f; }\n")
    done = ctune("init", "k.cuh", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert 'source: "k.cuh"' in (tmp_path / "k.yaml").read_text()
    assert ctune("space", "k.cuh", cwd=tmp_path).returncode == 0


def test_an_overload_is_picked_by_its_parameter_list(tmp_path: Path) -> None:
    # overloads were one kernel: init drafted entry: add with float64 args, which compile
    # found ambiguous, and --entry took no parameter list
    (tmp_path / "ov.cu").write_text(
        "__global__ void add(float* a, const float* b, int n) { a[threadIdx.x] += b[0]; }\n"
        "__global__ void add(double* a, const double* b, int n) { a[threadIdx.x] += b[0]; }\n"
    )
    done = ctune("init", "ov.cu", cwd=tmp_path)
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr
    assert (
        "ov.cu: 2 kernels (add(float*, const float*, int), add(double*, const double*, int)); "
        "pick one with --entry NAME" in errors[0]
    )
    assert not (tmp_path / "ov.yaml").exists()
    done = ctune("init", "ov.cu", "--entry", "add(float*, const float*, int)", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert 'entry: "add(float*, const float*, int)"' in (tmp_path / "ov.yaml").read_text()
    built = ctune("compile", "ov.cu", "--json", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["build"]["entry_symbol"] == "_Z3addPfPKfi"


SM90A_ONLY = """\
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error needs sm_90a
#endif
__global__ void twice(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""


def test_init_arch_is_the_drafts_and_one_nvcc_compiles_for(tmp_path: Path) -> None:
    """--arch sm_90a is written into the draft, so `ctune compile` builds for it as the draft
    was probed; an arch this nvcc refuses is refused before a draft is written."""
    (tmp_path / "k.cu").write_text(SM90A_ONLY)
    done = ctune("init", "k.cu", "--arch", "sm_90a", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\narch: sm_90a\n" in (tmp_path / "k.yaml").read_text()
    built = ctune("compile", "k.cu", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (tmp_path / "k.yaml").unlink()
    (tmp_path / "k_ref.py").unlink()
    refused = ctune("init", "k.cu", "--arch", "sm_999", cwd=tmp_path)
    errors = [ln for ln in refused.stderr.splitlines() if ln.startswith("error:")]
    assert refused.returncode == 2 and len(errors) == 1, refused.stderr
    assert "'sm_999' is not an architecture this nvcc compiles for" in errors[0]
    assert not (tmp_path / "k.yaml").exists() and not (tmp_path / "k_ref.py").exists()


def test_init_writes_both_files_or_neither(tmp_path: Path) -> None:
    """A folder where the reference goes: refused before anything runs, even with --force,
    and the sidecar there is left as it was (it was overwritten, then the reference
    failed)."""
    (tmp_path / "scale2d.cu").write_text(KT_STYLE)
    (tmp_path / "scale2d.yaml").write_text("old\n")
    (tmp_path / "scale2d_ref.py").mkdir()
    done = ctune("init", "scale2d.cu", "--force", cwd=tmp_path)
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr
    assert "scale2d_ref.py: a folder where the draft's file goes" in errors[0]
    assert (tmp_path / "scale2d.yaml").read_text() == "old\n"
