"""`ctune compile` / `ctune space` end to end with the real nvcc: output and bad-input exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.nvcc

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data" / "kernels"


def ctune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctune", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_compile_prints_argv_resources_and_sass(tmp_path):
    done = ctune("compile", str(DATA / "saxpy.cu"), "--set", "BLOCK=128", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    build = report["build"]
    assert build["outcome"] == "ok" and "-DBLOCK=128" in build["argv"]
    assert build["resources"]["regs"] > 0 and len(build["sass_sha256"]) == 64
    human = ctune("compile", str(DATA / "saxpy.cu"), "--set", "BLOCK=128", cwd=tmp_path)
    assert "(cached)" in human.stdout and "sass sha256" in human.stdout


def test_space_shows_genes_and_size(tmp_path):
    done = ctune("space", str(DATA / "saxpy.cu"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["valid"] == 6624 and report["exact"]
    assert len(report["samples"]) == 5


MATMUL = """\
entry: mm
genes:
  BX: {values: [8, 16, 32, 64], default: 16, family: launch}
  BY: {values: [1, 2, 4, 8, 16, 32], default: 16, family: launch}
launch:
  grid: ["ceil_div(N, BX)", "ceil_div(N, BY)"]
  block: [BX, BY]
problems: [{name: n512, dims: {N: 512}}]
args:
  - {name: A, role: input, dtype: float32, shape: [N, N]}
  - {name: C, role: output, dtype: float32, shape: [N, N]}
  - {name: n, role: scalar, dtype: int32, value: N}
reference: {python: saxpy_ref.py:saxpy}
"""
MATMUL_CU = """\
extern "C" __global__ void mm(const float* A, float* C, int n) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n && c < n) C[r * n + c] = 2.f * A[r * n + c];
}
"""


def test_space_counts_what_the_device_rules_out(tmp_path):
    (tmp_path / "mm.yaml").write_text(MATMUL)
    (tmp_path / "mm.cu").write_text(MATMUL_CU)
    (tmp_path / "saxpy_ref.py").write_text((DATA / "saxpy_ref.py").read_text())
    done = ctune("space", "mm.cu", "--json", "--samples", "30", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["product"] == 24 and report["valid"] == 23  # 64 x 32 = 2048 threads
    assert report["device"]["ruled_out"] == 1
    assert report["device"]["restrictions"] == ["BY <= 1024", "BX * BY <= 1024"]
    limits = report["device"]["limits"]  # a GPU of the spec's arch, where there is one
    assert limits == "sm_90 table" or limits.endswith("(device)")
    assert all(s["BX"] * s["BY"] <= 1024 for s in report["samples"])
    human = ctune("space", "mm.cu", "--arch", "sm_80", cwd=tmp_path)
    assert "device limits (sm_80 table): rule out 1" in human.stdout
    built = ctune("compile", "mm.cu", "--set", "BX=64", "--set", "BY=32", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "cannot launch: 2048 threads per block > 1024" in built.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["compile", "nope.cu"], 2, "nope.cu: no such file"),
        (["compile", "{d}/saxpy.cu", "--set", "WARPS=4"], 2, "--set WARPS: unknown gene"),
        (["compile", "{d}/saxpy.cu", "--set", "BLOCK=100"], 2, "not a value of BLOCK"),
        (["compile", "{d}/saxpy.cu", "--set", "BLOCK"], 2, "expected NAME=VALUE"),
        (["compile", "{d}/saxpy.cu", "--problem", "huge"], 2, "no problem 'huge'"),
        (["compile", "{d}/broken.cu"], 2, "did not build: compile_error"),
        (["compile", "{d}/nosymbol.cu"], 2, "compile_error: entry 'nosymbol' is not a kernel"),
        (["space", "{d}/saxpy.cu", "--problem", "x y"], 2, "no problem 'x y'"),
        (["compile", "{d}/saxpy.cu", "--arch", "foo"], 2, "--arch=foo: expected an architecture"),
        (["search", "{d}/saxpy.cu", "-O", "regs", "--arch", "sm90"], 2, "--arch=sm90: expected"),
        (["space", "{d}/saxpy.cu", "--arch", "foo"], 2, "--arch=foo: expected an architecture"),
        (["space", "{d}/saxpy.cu", "--arch", "sm_12"], 2, "'sm_12' is not an architecture"),
        (["compile", "{d}/saxpy.cu", "--arch", "sm_12"], 2, "this nvcc compiles for"),
    ],
)
def test_bad_input_is_one_line_and_exit_code(tmp_path, args, code, message):
    done = ctune(*(a.format(d=DATA) for a in args), cwd=tmp_path)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert message in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    error_lines = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert len(error_lines) == 1


def test_an_arch_from_the_environment_or_the_spec_names_where_it_came_from(tmp_path):
    """CTUNE_ARCH=foo crashed with IndexError (exit 70); a spec's sm_12 failed every build."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTUNE_")}
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "compile", str(DATA / "saxpy.cu")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**env, "CTUNE_ARCH": "foo"},
        timeout=600,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "error: CTUNE_ARCH=foo: expected an architecture like sm_90 or sm_90a, "
        "or empty for the spec's\n"
    )
    for name in ("saxpy.cu", "saxpy_ref.py"):
        (tmp_path / name).write_text((DATA / name).read_text())
    (tmp_path / "saxpy.yaml").write_text("arch: sm_12\n" + (DATA / "saxpy.yaml").read_text())
    done = ctune("compile", "saxpy.cu", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"error: {tmp_path / 'saxpy.yaml'}: arch: 'sm_12' is not an architecture this nvcc "
        "compiles for (nvcc --list-gpu-arch: "
    )
    assert len(done.stderr.splitlines()) == 1


def test_missing_nvcc_is_a_toolchain_error(tmp_path):
    env_path = "/nonexistent"
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "compile", str(DATA / "saxpy.cu")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": env_path, "HOME": str(tmp_path)},
    )
    assert done.returncode == 3
    assert "nvcc not found" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t + "\n: bad: yaml: [\n", "saxpy.yaml: line"),
        (
            lambda t: t.replace(
                "genes:\n",
                "genes:\n  WARPS: {values: [4], default: 4}\n  WARPS: {values: [8], default: 8}\n",
            ),
            "duplicate key 'WARPS'",
        ),
        (
            lambda t: t.replace("flags: [ptxas_opt,", "flags: [O9, ptxas_opt,"),
            "flags.O9: unknown flag gene",
        ),
        (
            lambda t: t.replace('"BLOCK * UNROLL <= 4096"', '"BLOCK * WARPS <= 4096"'),
            "unknown name 'WARPS'",
        ),
    ],
    ids=["malformed yaml", "duplicate gene", "unknown flag", "restriction unknown name"],
)
def test_bad_spec_through_the_cli(tmp_path, edit, message):
    import shutil

    for name in ("saxpy.cu", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    (tmp_path / "saxpy.yaml").write_text(edit((DATA / "saxpy.yaml").read_text()))
    done = ctune("compile", str(tmp_path / "saxpy.cu"), cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("args", [["compile", "--bogus"], ["space", "a.cu", "b.cu"]])
def test_usage_errors_exit_2_without_traceback(tmp_path, args):
    done = ctune(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def _ptxas_takes_controls() -> bool:
    from ctune.compile.toolchain import probe_toolchain

    version = probe_toolchain().ptxas_version
    return tuple(int(n) for n in version.split(".")[:2]) >= (13, 3)


def test_controls_files_where_this_ptxas_refuses_them(tmp_path):
    """The system toolchain's ptxas takes none (before 13.3): asked for on the command line,
    one line and exit 2; asked for by the spec, a warning and the build without them."""
    if _ptxas_takes_controls():
        pytest.skip("this toolchain's ptxas takes controls files")
    (tmp_path / "mine.acf").write_bytes(b"\x8f controls")
    for args in (
        ["--acf", "ptxas"],
        ["--acf-file", "mine.acf"],
        ["--set", f"acf_ptxas={64 * 'a'}"],
    ):
        done = ctune("compile", str(DATA / "saxpy.cu"), *args, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{args[0]}: ptxas 13.0" in lines[0], done.stderr
        assert "pip install 'ctune[cuda13.3]'" in lines[0]
    for name in ("saxpy.cu", "saxpy_ref.py"):
        (tmp_path / name).write_bytes((DATA / name).read_bytes())
    (tmp_path / "saxpy.yaml").write_text((DATA / "saxpy.yaml").read_text() + "acf: [ptxas]\n")
    done = ctune("compile", "saxpy.cu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "warning: saxpy.yaml: acf ptxas not offered: ptxas 13.0" in done.stderr


def test_an_empty_acf_file_is_one_line_naming_it_and_the_option(tmp_path):
    """Through a ptxas that takes controls files (so the file itself is what is refused)."""
    from ctune.testing.toolchains import new_ptxas

    ptxas, why = new_ptxas()
    if ptxas is None:
        pytest.skip(why)
    (tmp_path / "empty.acf").write_bytes(b"")
    args = ("--ptxas", str(ptxas), "--acf-file", "empty.acf")
    done = ctune("compile", str(DATA / "saxpy.cu"), *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "error: --acf-file empty.acf: an empty file is not a controls file; give one "
        "CompileIQ wrote (a .acf file)"
    ]
