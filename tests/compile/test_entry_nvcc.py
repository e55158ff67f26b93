"""Kernels named as written, and args checked against them, with the real nvcc (no GPU)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctune.compile import NvccCompiler, probe_toolchain
from ctune.compile.logs import first_error_line
from ctune.compile.sass import entry_functions, kernel_param_sizes
from ctune.compile.signature import ptx_param_sizes
from ctune.errors import SpecError
from ctune.records import Outcome
from ctune.spec import load_spec

pytestmark = pytest.mark.nvcc

DATA = Path(__file__).parents[2] / "tests" / "data" / "kernels"

ARGS = """\
args:
  - {name: y, role: inout, dtype: float32, shape: [N]}
  - {name: x, role: input, dtype: float32, shape: [N]}
  - {name: n, role: scalar, dtype: int32, value: N}
"""


@pytest.fixture(scope="module")
def toolchain():
    return probe_toolchain()


def _spec(folder: Path, entry: str, args: str = ARGS, genes: str = "") -> Path:
    """A spec for one kernel of cxx_kernels.cu, as a user would write it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("cxx_kernels.cu", "saxpy_ref.py"):
        shutil.copy(DATA / name, folder / name)
    path = folder / "cxx_kernels.yaml"
    path.write_text(
        f"entry: {entry!r}\n{genes}"
        "launch: {grid: ['ceil_div(N, 128)'], block: [128]}\n"
        "problems: [{name: small, dims: {N: 4096}}]\n"
        f"{args}"
        "reference: {python: saxpy_ref.py:saxpy}\n"
    )
    return path


def _build(path: Path, toolchain, tmp_path: Path, **genes):
    spec = load_spec(path, toolchain.help_text)
    values = {**spec.space.default_values(), **genes}
    with NvccCompiler(spec, toolchain, tmp_path / "cache") as compiler:
        return compiler.build(spec.candidate(values), spec.problem())


def test_a_plain_cxx_kernel_is_found_and_its_resources_are_its_own(toolchain, tmp_path):
    args = ARGS.replace(
        "  - {name: x, role: input, dtype: float32, shape: [N]}\n",
        "  - {name: a, role: scalar, dtype: float32, value: 2.0}\n",
    )
    build = _build(_spec(tmp_path / "k", "scale", args), toolchain, tmp_path)
    assert build.outcome is Outcome.OK, build.log_tail
    assert build.entry_symbol == "_Z5scalePffi"
    assert build.resources.regs and build.resources.regs > 0


@pytest.mark.parametrize(
    ("entry", "symbol"),
    [
        ("add(float*, const float*, int)", "_Z3addPfPKfi"),
        ("blas::axpy", "_ZN4blas4axpyEPfPKffi"),
        ("axpy", "_ZN4blas4axpyEPfPKffi"),
    ],
)
def test_one_kernel_out_of_several(toolchain, tmp_path, entry, symbol):
    args = ARGS
    if "axpy" in entry:
        scalar_a = "  - {name: a, role: scalar, dtype: float32, value: 2.0}\n"
        args = ARGS.replace("  - {name: n,", scalar_a + "  - {name: n,")
    build = _build(_spec(tmp_path / "k", entry, args), toolchain, tmp_path)
    assert build.outcome is Outcome.OK, build.log_tail
    assert build.entry_symbol == symbol


def test_genes_feed_a_template_the_file_never_instantiates(toolchain, tmp_path):
    genes = "genes:\n  TILE: {values: [64, 256], default: 64, family: template}\n"
    path = _spec(tmp_path / "k", "tiled_copy<TILE, float>", ARGS, genes)
    builds = {tile: _build(path, toolchain, tmp_path, TILE=tile) for tile in (64, 256)}
    for tile, build in builds.items():
        assert build.outcome is Outcome.OK, build.log_tail
        assert build.entry_symbol == f"_Z10tiled_copyILi{tile}EfEvPT0_PKS0_i"
        assert build.resources.smem_bytes == 4 * tile  # the instantiation's own static smem
        assert f"-DTILE={tile}" in build.argv  # the gene still reaches nvcc, as a -D
    assert builds[64].build_key != builds[256].build_key


def test_a_typo_in_the_template_arguments_is_refused_when_the_spec_loads(toolchain, tmp_path):
    """tiled_copy<TILES, float> with the gene TILE loaded, and nvcc's first error was
    -DTILE=64 turning the file's template <int TILE, typename T> into template <int 64, ...>."""
    genes = "genes:\n  TILE: {values: [64, 256], default: 64, family: template}\n"
    path = _spec(tmp_path / "k", "tiled_copy<TILES, float>", ARGS, genes)
    with pytest.raises(SpecError) as err:
        load_spec(path, toolchain.help_text)
    assert str(err.value) == (
        f"{path}: entry: 'TILES' in tiled_copy<TILES, float> is neither a gene (TILE), a problem "
        "define nor a literal, and cxx_kernels.cu does not declare it; fix the name, or qualify "
        "a type another folder declares (::TILES)"
    )


def test_names_the_files_declare_still_instantiate(toolchain, tmp_path):
    """A constant and a type from the kernel's own header, a qualified type from elsewhere."""
    path = _spec(tmp_path / "k", "tiled_copy<kTile, Acc>")
    (tmp_path / "far.cuh").write_text("struct Far { float v; };\n")
    (path.parent / "cfg.cuh").write_text(
        '#include "../far.cuh"\nconstexpr int kTile = 32;\nusing Acc = float;\n'
    )
    source = path.with_suffix(".cu")
    source.write_text('#include "cfg.cuh"\n' + source.read_text().replace("T(0)", "T()"))
    build = _build(path, toolchain, tmp_path)
    assert build.outcome is Outcome.OK, build.log_tail
    assert build.entry_symbol == "_Z10tiled_copyILi32EfEvPT0_PKS0_i"
    path.write_text(path.read_text().replace("Acc>", "::Far>"))
    build = _build(path, toolchain, tmp_path)
    assert build.outcome is Outcome.OK, build.log_tail
    assert build.entry_symbol == "_Z10tiled_copyILi32E3FarEvPT0_PKS1_i"


def test_overloads_and_missing_names_are_one_line(toolchain, tmp_path):
    ambiguous = _build(_spec(tmp_path / "a", "add"), toolchain, tmp_path)
    assert ambiguous.outcome is Outcome.COMPILE_ERROR
    line = first_error_line(ambiguous.log_tail)
    assert line.startswith("entry 'add' is ambiguous: 2 kernels match")
    assert "add(double*, double const*, int)" in line and "add(float*, float const*, int)" in line
    spec = load_spec(DATA / "nosymbol.yaml", toolchain.help_text)
    with NvccCompiler(spec, toolchain, tmp_path / "cache") as compiler:
        missing = compiler.build(spec.default_candidate(), spec.problem())
    assert missing.outcome is Outcome.COMPILE_ERROR
    assert first_error_line(missing.log_tail) == (
        "entry 'nosymbol' is not a kernel of the cubin; kernels found: another, "
        "other_kernel(float*); set entry: to one of them"
    )


def test_args_are_checked_against_the_kernels_parameters_once(toolchain, tmp_path):
    short = ARGS.replace("  - {name: n, role: scalar, dtype: int32, value: N}\n", "")
    path = _spec(tmp_path / "k", "add(float*, float const*, int)", short)
    with pytest.raises(SpecError) as err:
        _build(path, toolchain, tmp_path)
    text = str(err.value)
    assert "takes 3 parameter(s) (8 B, 8 B, 4 B), but args lists 2 (y, x)" in text
    wide = ARGS.replace("dtype: int32, value: N", "dtype: int64, value: N")
    with pytest.raises(SpecError, match=r"args\.n: int64 is 8 B, but parameter 3 of add"):
        _build(_spec(tmp_path / "w", "add(float*, float const*, int)", wide), toolchain, tmp_path)
    # the parameter sizes are kept next to the build: a second compiler reads them
    path = _spec(tmp_path / "ok", "add(float*, float const*, int)")
    build = _build(path, toolchain, tmp_path)
    params = Path(build.binary_path).parent / "params.json"
    assert params.is_file() and '"sizes": [8, 8, 4]' in params.read_text()


PARAM_KERNELS = """\
struct Wide { double a; int b; float c[3]; };
extern "C" __global__ void mixed(float* x, int n, Wide w, double d, char c, short h,
                                 const float* __restrict__ y) {
  if (n) x[0] = w.a + d + c + h + y[0] + w.c[2];
}
template <int T> __global__ void templated(float* x, long long n) { x[n] = T; }
template __global__ void templated<4>(float*, long long);
__global__ void empty() {}
"""


def test_the_cubins_parameter_table_agrees_with_the_ptx(toolchain, tmp_path):
    """Pointers, scalars of 1-8 bytes, a struct by value, a template, no parameters: the
    sizes read from the cubin are the PTX .entry's, so the check needs no second compile."""
    source = tmp_path / "params.cu"
    source.write_text(PARAM_KERNELS)
    for kind in ("cubin", "ptx"):
        subprocess.run(
            [toolchain.nvcc, "-arch=sm_90", f"-{kind}", "-o", f"params.{kind}", source.name],
            cwd=tmp_path,
            check=True,
        )
    cubin, ptx = (tmp_path / "params.cubin").read_bytes(), (tmp_path / "params.ptx").read_text()
    symbols = entry_functions(cubin)
    assert len(symbols) == 3
    for symbol in symbols:
        assert kernel_param_sizes(cubin, symbol) == ptx_param_sizes(ptx, symbol), symbol
    assert kernel_param_sizes(cubin, "mixed") == (8, 4, 24, 8, 1, 2, 8)
    assert kernel_param_sizes(cubin, "absent") is None
    assert kernel_param_sizes(b"not an elf", "mixed") is None


def test_the_args_check_compiles_no_ptx_unless_the_cubin_is_silent(
    toolchain, tmp_path, monkeypatch
):
    def no_ptx(*args, **kw):
        raise AssertionError("the PTX was compiled for a cubin that has its parameter table")

    monkeypatch.setattr(NvccCompiler, "_ptx_sizes", no_ptx)
    short = ARGS.replace("  - {name: n, role: scalar, dtype: int32, value: N}\n", "")
    with pytest.raises(SpecError, match=r"takes 3 parameter\(s\) \(8 B, 8 B, 4 B\)"):
        _build(_spec(tmp_path / "k", "add(float*, float const*, int)", short), toolchain, tmp_path)
    monkeypatch.undo()
    # a cubin without the table (another toolchain's layout): the PTX still tells
    monkeypatch.setattr("ctune.compile.nvcc.kernel_param_sizes", lambda blob, symbol: None)
    with pytest.raises(SpecError, match=r"takes 3 parameter\(s\) \(8 B, 8 B, 4 B\)"):
        _build(_spec(tmp_path / "p", "add(float*, float const*, int)", short), toolchain, tmp_path)


def test_the_cli_names_the_entry_problem_in_one_line(tmp_path):
    path = _spec(tmp_path / "k", "add")
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "compile", str(path.with_suffix(".cu"))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1
    assert "did not build: compile_error: entry 'add' is ambiguous" in errors[0]
