"""The split toolchain with the real nvcc: PTX from the system nvcc, cubins (and launcher
libraries) from another ptxas.

With the system's own ptxas as the "other" one (always there) the split folder must build
exactly what the plain toolchain builds. With a ptxas 13.3 or later (the nvidia-cuda-nvcc
13.3 wheel in this venv, or ``CTUNE_TEST_PTXAS``) the cubins must come from it, and an
advanced-controls file (``CTUNE_TEST_ACF``: a file or a folder of ``.acf`` files made for
ptxas 13.3; else the one the registry ships) must change the GEMM's SASS; those tests skip,
saying why, where there is none.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ctune import identity_probe
from ctune.compile import NvccCompiler
from ctune.compile.sass import defined_symbols, embedded_cubins, sass_digest
from ctune.compile.select_toolchain import toolchain_for
from ctune.compile.toolchain import Toolchain, controls_release, probe_toolchain
from ctune.config import Settings
from ctune.records import Outcome
from ctune.spec import load_spec
from ctune.testing.toolchains import new_ptxas, real_controls_files

pytestmark = pytest.mark.nvcc

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data" / "kernels"
#: where the reconnaissance left controls files made for the tuned GEMM (git-ignored)

LAUNCHER = r"""
extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" int launch(float* x) { twice<<<1, 32>>>(x); return 0; }
"""


def _controls_files() -> list[Path]:
    return real_controls_files()


NEW_PTXAS, NO_NEW_PTXAS = new_ptxas()
needs_new_ptxas = pytest.mark.skipif(NEW_PTXAS is None, reason=NO_NEW_PTXAS)


def _split(ptxas: str | Path, tmp_path: Path) -> Toolchain:
    return toolchain_for(Settings(ptxas=str(ptxas), cache_dir=tmp_path / "cache"))


def _default_build(toolchain: Toolchain, tmp_path: Path, yaml: Path = DATA / "saxpy.yaml"):
    spec = load_spec(yaml, toolchain.help_text)
    cache = tmp_path / toolchain.describe().replace(" ", "_").replace("/", "")
    with NvccCompiler(spec, toolchain, cache) as compiler:
        return compiler.build(spec.default_candidate(), spec.problem())


def _launcher(toolchain: Toolchain, tmp_path: Path) -> bytes:
    """A launcher library (-shared, the launcher builds' path) made by ``toolchain``."""
    source = tmp_path / "launcher.cu"
    source.write_text(LAUNCHER)
    output = tmp_path / f"launcher-{int(toolchain.split)}.so"
    argv = [toolchain.nvcc, "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC", "-o", str(output)]
    done = subprocess.run([*argv, str(source)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return output.read_bytes()


def test_a_split_with_the_systems_own_ptxas_builds_what_the_plain_toolchain_builds(
    tmp_path: Path,
) -> None:
    plain = probe_toolchain("nvcc")
    split = _split(plain.ptxas, tmp_path)
    assert split.split and not plain.split
    assert Path(split.nvcc).parent.parent.parent == tmp_path / "cache" / "toolchains"
    assert (split.ptxas, split.ptxas_version) == (plain.ptxas, plain.ptxas_version)
    assert split.describe() == f"{plain.describe()} (split)"  # its own build key
    ours, theirs = _default_build(split, tmp_path), _default_build(plain, tmp_path)
    assert ours.outcome is Outcome.OK and theirs.outcome is Outcome.OK, ours.log_tail
    assert ours.sass_sha256 == theirs.sass_sha256
    assert ours.toolchain.endswith("(split)")
    assert sass_digest(_launcher(split, tmp_path)) == sass_digest(_launcher(plain, tmp_path))


@needs_new_ptxas
def test_the_cubins_come_from_the_given_ptxas(tmp_path: Path) -> None:
    assert NEW_PTXAS is not None
    split = _split(NEW_PTXAS, tmp_path)
    release = ".".join(split.ptxas_version.split(".")[:2])
    assert controls_release(split.ptxas_version) and split.nvcc_version.startswith("13.0")
    assert split.takes_controls("ptxas", "sm_90a")[0]
    assert not split.takes_controls("nvcc", "sm_100")[0]  # nvcc is still 13.0
    fields = identity_probe.probe_toolchain(split.nvcc)
    assert fields["ptxas_version"] == f"{split.ptxas_version} (split: PTX from nvcc 13.0.88)"
    build = _default_build(split, tmp_path)
    assert build.outcome is Outcome.OK, build.log_tail
    assert f"ptxas {split.ptxas_version} (split)" in build.toolchain
    # ptxas writes its own version into every cubin it makes (.note.nv.tkinfo)
    stamp = f"release {release}, V{split.ptxas_version}".encode()
    assert stamp in Path(build.binary_path).read_bytes()
    cubins = embedded_cubins(_launcher(split, tmp_path))
    (kernel,) = [c for c in cubins if "twice" in defined_symbols(c)]  # the rest is nvlink's
    assert stamp in kernel


@needs_new_ptxas
@pytest.mark.skipif(not _controls_files(), reason="no controls file: set CTUNE_TEST_ACF")
def test_a_controls_file_changes_the_gemms_sass_through_the_split_toolchain(
    tmp_path: Path,
) -> None:
    split = _split(NEW_PTXAS or "", tmp_path)
    spec = load_spec(ROOT / "kernels" / "hand_gemm.yaml", split.help_text)
    candidate, problem = spec.default_candidate(), spec.problem()
    with NvccCompiler(spec, split, tmp_path / "builds") as compiler:
        argv = compiler.argv(candidate, problem, tmp_path / "plain.cubin")
    controls = ["-Xptxas", f"--apply-controls={_controls_files()[0]}"]
    tuned = [*argv[:-3], *controls, "-o", str(tmp_path / "tuned.cubin"), argv[-1]]
    for command in (argv, tuned):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    plain_sass = sass_digest((tmp_path / "plain.cubin").read_bytes())
    assert sass_digest((tmp_path / "tuned.cubin").read_bytes()) != plain_sass
