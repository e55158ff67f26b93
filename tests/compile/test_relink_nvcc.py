"""Building ptxas-option candidates from a kept front end, with the real nvcc, for both kinds
of build (a launcher's library, a kernel's cubin): the same SASS as the whole nvcc run, a
library that loads, a front end made once and reused, the whole run when the front end is
broken, and failures classified as the whole run classifies them. A tiny kernel (not
CUTLASS) keeps it fast."""

from __future__ import annotations

import ctypes
import json
import shutil
from pathlib import Path

import pytest

from ctune.compile import NvccCompiler
from ctune.compile.relink import (
    PTX,
    RECORD,
    Runner,
    frontend_argv,
    make_frontend,
    ptxas_only_items,
)
from ctune.compile.sass import sass_digest
from ctune.compile.toolchain import Toolchain, probe_toolchain
from ctune.config import Settings
from ctune.controls.store import ControlsStore
from ctune.records import Build, Outcome
from ctune.spec import KernelSpec, load_spec
from ctune.testing.toolchains import new_ptxas, real_controls_files

pytestmark = pytest.mark.nvcc

SOURCE = r"""
__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + __sinf(x[i]) * __cosf(a * x[i]);
}
extern "C" int ctune_launch(float *x, float a, int n) {
    scale<<<(n + 255) / 256, 256>>>(x, a, n);
    return (int)cudaGetLastError();
}
"""
SPEC = """\
name: scale
source: scale.cu
ENTRY
arch: sm_90a
flags: FLAGS
ACF
genes:
  UNROLL: {values: [1, 2], default: 1, family: template}
problems:
  - {name: small, dims: {N: 1024}}
args:
  - {name: x, role: inout, dtype: float32, shape: [N]}
  - {name: a, role: scalar, dtype: float32, value: 1.5}
  - {name: n, role: scalar, dtype: int32, value: N}
reference:
  python: scale_ref.py:scale
"""
#: each kind of build: its entry, and a launch rule where the kernel is launched directly
ENTRIES = {
    "launcher": "entry: {symbol: ctune_launch, kind: launcher}",
    "cubin": "entry: scale\nlaunch: {grid: [4, 1, 1], block: [256, 1, 1]}",
}
NEW_PTXAS, NO_NEW_PTXAS = new_ptxas()
STANDIN = b"\x17 not a real controls file \x00" * 40


@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    return probe_toolchain("nvcc")


@pytest.fixture(params=sorted(ENTRIES))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _spec(
    tmp_path: Path,
    toolchain: Toolchain,
    acf: bool = False,
    flags: str = "[ptxas_opt, dlcm]",
    kind: str = "launcher",
) -> KernelSpec:
    folder = tmp_path / "src"
    folder.mkdir(exist_ok=True)
    (folder / "scale.cu").write_text(SOURCE)
    text = SPEC.replace("ACF", "acf: [ptxas]" if acf else "").replace("FLAGS", flags)
    text = text.replace("ENTRY", ENTRIES[kind])
    (folder / "scale.yaml").write_text(text)
    (folder / "scale_ref.py").write_text("def scale(x, a, n):\n    return x\n")
    return load_spec(folder / "scale.yaml", toolchain.help_text)


def _build(compiler: NvccCompiler, spec: KernelSpec, **genes: object) -> Build:
    values = {**spec.default_candidate().as_dict(), **genes}
    return compiler.build(spec.candidate(values), spec.problem())


def _frontends(tmp_path: Path, cache: str = "cache") -> list[Path]:
    folder = tmp_path / cache / "frontends"
    return (
        sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else []
    )


def test_the_front_end_argv_leaves_out_ptxas_options_but_v() -> None:
    argv = ["nvcc", "-Xptxas", "-v", "-DA=1", "-Xptxas", "-O1", "-Xptxas", "-dlcm=cg", "k.cu"]
    assert frontend_argv(argv) == ["nvcc", "-Xptxas", "-v", "-DA=1", "k.cu"]
    assert ptxas_only_items(argv) == ["-Xptxas", "-O1", "-Xptxas", "-dlcm=cg"]


def test_a_relinked_variant_is_the_whole_builds_sass_and_loads(
    tmp_path: Path, toolchain: Toolchain, kind: str
) -> None:
    spec = _spec(tmp_path, toolchain, kind=kind)
    whole = NvccCompiler(spec, toolchain, tmp_path / "whole", relink="off")
    relinked = NvccCompiler(spec, toolchain, tmp_path / "cache", relink="on")
    assert relinked.relink == "on" and whole.relink == "off"
    first = _build(relinked, spec, ptxas_opt=0)
    second = _build(relinked, spec, ptxas_opt=3, dlcm="cg")
    third = _build(relinked, spec, ptxas_opt=1)
    for build in (first, second, third):
        assert build.outcome is Outcome.OK, build.log_tail
    assert "relinked from front end" in first.log_tail and "(made in" in first.log_tail
    # the later variants did not run the front end again (no cicc): the same one, reused
    (front,) = _frontends(tmp_path)
    for build in (second, third):
        assert f"relinked from front end {front.name} (reused)" in build.log_tail
    references = [
        _build(whole, spec, ptxas_opt=0),
        _build(whole, spec, ptxas_opt=3, dlcm="cg"),
        _build(whole, spec, ptxas_opt=1),
    ]
    assert references[0].sass_sha256 != references[1].sass_sha256  # else this proves nothing
    for ours, theirs in zip((first, second, third), references, strict=True):
        assert ours.sass_sha256 == theirs.sass_sha256
        assert ours.build_key == theirs.build_key  # the same build, however it was made
        assert ours.argv == tuple(
            a.replace(str(tmp_path / "whole"), str(tmp_path / "cache")) for a in theirs.argv
        )
        assert ours.resources == theirs.resources  # ptxas's -v report reached the log
        assert ours.resources.regs
        if kind == "launcher":
            library = ctypes.CDLL(ours.binary_path)
            assert library.ctune_launch is not None
        else:  # the cubin holds the kernel under its own name
            assert ours.entry_symbol == theirs.entry_symbol and "scale" in ours.entry_symbol
    # the digest of the library on disk is the recorded one
    assert sass_digest(Path(first.binary_path).read_bytes()) == first.sass_sha256


def test_a_broken_front_end_falls_back_to_the_whole_build(
    tmp_path: Path, toolchain: Toolchain, kind: str
) -> None:
    spec = _spec(tmp_path, toolchain, kind=kind)
    compiler = NvccCompiler(spec, toolchain, tmp_path / "cache", relink="on")
    assert _build(compiler, spec, ptxas_opt=0).outcome is Outcome.OK
    (front,) = _frontends(tmp_path)
    (front / PTX).unlink()
    build = _build(compiler, spec, ptxas_opt=2)
    assert build.outcome is Outcome.OK, build.log_tail
    assert f"built by the whole nvcc run, not from front end {front.name}" in build.log_tail
    assert "lost its kernel.ptx" in build.log_tail
    whole = _build(NvccCompiler(spec, toolchain, tmp_path / "whole"), spec, ptxas_opt=2)
    assert build.sass_sha256 == whole.sass_sha256
    # the damaged front end was put aside: the next variant makes it again
    again = _build(compiler, spec, ptxas_opt=1)
    assert f"relinked from front end {front.name} (made in" in again.log_tail


def test_variants_built_at_once_wait_for_one_front_end(
    tmp_path: Path, toolchain: Toolchain, kind: str
) -> None:
    spec = _spec(tmp_path, toolchain, kind=kind)
    problem = spec.problem()
    with NvccCompiler(spec, toolchain, tmp_path / "cache", relink="on", jobs=3) as compiler:
        futures = [
            compiler.submit(spec.candidate({**spec.default_candidate().as_dict(), **g}), problem)
            for g in ({"ptxas_opt": 0}, {"ptxas_opt": 1}, {"dlcm": "cg"})
        ]
        builds = [f.result() for f in futures]
    assert all(b.outcome is Outcome.OK for b in builds), [b.log_tail for b in builds]
    (front,) = _frontends(tmp_path)
    made = [b for b in builds if f"front end {front.name} (made in" in b.log_tail]
    reused = [b for b in builds if f"front end {front.name} (reused)" in b.log_tail]
    assert (len(made), len(reused)) == (1, 2)


def test_a_front_end_record_with_a_shell_payload_runs_nothing(
    tmp_path: Path, toolchain: Toolchain
) -> None:
    """A kept link step is checked as nvcc's own argv is: the record is the cache's, and a
    cache is writable by whoever shares it. (A cubin's variant takes its ptxas step from its
    own nvcc --dryrun, nothing from the record.)"""
    spec = _spec(tmp_path, toolchain)
    compiler = NvccCompiler(spec, toolchain, tmp_path / "cache", relink="on")
    assert _build(compiler, spec, ptxas_opt=0).outcome is Outcome.OK
    (front,) = _frontends(tmp_path)
    record = json.loads((front / RECORD).read_text())
    record["link"].insert(1, f"-Wl,$(touch {tmp_path}/pwned)")
    (front / RECORD).write_text(json.dumps(record))
    build = _build(compiler, spec, ptxas_opt=1)
    assert build.outcome is Outcome.OK, build.log_tail
    assert "built by the whole nvcc run" in build.log_tail and "nothing was run" in build.log_tail
    assert not (tmp_path / "pwned").exists()


def test_a_variant_whose_ptxas_fails_is_the_whole_builds_outcome(
    tmp_path: Path, toolchain: Toolchain, kind: str
) -> None:
    """ptxas 13.0 refuses any controls file, and a 13.3 one refuses this stand-in."""
    spec = _spec(tmp_path, toolchain, acf=True, kind=kind)
    outcomes = {}
    for cache, relink in (("cache", True), ("whole", False)):
        digest = ControlsStore(tmp_path / cache / "controls").put(STANDIN)
        compiler = NvccCompiler(spec, toolchain, tmp_path / cache, relink=relink)
        assert _build(compiler, spec).outcome is Outcome.OK
        build = _build(compiler, spec, acf_ptxas=digest)
        outcomes[cache] = build
    ours, theirs = outcomes["cache"], outcomes["whole"]
    assert theirs.outcome in (Outcome.COMPILE_ERROR, Outcome.COMPILER_CRASH), theirs.log_tail
    assert ours.outcome is theirs.outcome, ours.log_tail
    assert "relinked from front end" in ours.log_tail and "(reused)" in ours.log_tail
    assert ours.binary_path is None


def test_a_variant_whose_ptxas_runs_out_of_time_is_a_build_timeout(
    tmp_path: Path, toolchain: Toolchain, kind: str
) -> None:
    """A ptxas that hangs on a variant's PTX (the front end's own runs the real one)."""
    from ctune.compile.select_toolchain import toolchain_for

    hang = tmp_path / "hang" / "ptxas"
    hang.parent.mkdir()
    hang.write_text(
        f'#!/bin/sh\ncase "$*" in *v/*.ptx*) sleep 60;; esac\nexec {toolchain.ptxas} "$@"\n'
    )
    hang.chmod(0o755)
    split = toolchain_for(Settings(cache_dir=tmp_path / "cache", ptxas=str(hang)))
    spec = _spec(tmp_path, split, kind=kind)
    compiler = NvccCompiler(spec, split, tmp_path / "cache", relink="on", timeout_s=120)
    output = tmp_path / ("k.so" if kind == "launcher" else "k.cubin")
    front_argv = frontend_argv(compiler.argv(spec.default_candidate(), spec.problem(), output))
    folder = compiler.frontends_dir / compiler.build_key(front_argv, spec.problem())
    runner = Runner("test", 120, tmp_path / "scratch")
    make_frontend(front_argv, folder, runner)
    hurried = NvccCompiler(spec, split, tmp_path / "cache", relink="on", timeout_s=4)
    build = _build(hurried, spec, ptxas_opt=1)
    assert build.outcome is Outcome.BUILD_TIMEOUT, build.log_tail
    assert f"relinked from front end {folder.name} (reused)" in build.log_tail
    assert "killed after 4 s" in build.log_tail
    assert build.compile_s < 30


def test_setting_off_builds_as_today(tmp_path: Path, toolchain: Toolchain, kind: str) -> None:
    spec = _spec(tmp_path, toolchain, kind=kind)
    off = Settings(cache_dir=tmp_path / "cache", relink="off")
    compiler = NvccCompiler.from_settings(spec, toolchain, off)
    assert compiler.relink == "off"
    build = _build(compiler, spec, ptxas_opt=1)
    assert build.outcome is Outcome.OK and "front end" not in build.log_tail
    assert not (tmp_path / "cache" / "frontends").exists()
    on = NvccCompiler.from_settings(
        spec, toolchain, Settings(cache_dir=tmp_path / "other", relink="on")
    )
    assert on.relink == "on"


def test_auto_relinks_the_builds_with_ptxas_options_of_their_own(
    tmp_path: Path, toolchain: Toolchain, kind: str
) -> None:
    """The default, in a search: a build without ptxas options (a structure at its default
    flags) is the whole nvcc run and keeps no front end; its flag variants are made from one
    front end, each with the SASS of its whole run. A one-off build (compile, bench, check,
    gate) is the whole run."""
    from ctune.search.session import compiler_for

    spec = _spec(tmp_path, toolchain, kind=kind)
    settings = Settings(cache_dir=tmp_path / "cache")
    assert NvccCompiler.from_settings(spec, toolchain, settings).relink == "off"
    compiler = compiler_for(spec, toolchain, settings)  # a search's
    assert isinstance(compiler, NvccCompiler) and compiler.relink == "auto"
    plain = _build(compiler, spec)
    assert plain.outcome is Outcome.OK and "front end" not in plain.log_tail
    assert not _frontends(tmp_path)
    first = _build(compiler, spec, ptxas_opt=1)
    second = _build(compiler, spec, ptxas_opt=0)
    (front,) = _frontends(tmp_path)
    assert f"relinked from front end {front.name} (made in" in first.log_tail
    assert f"relinked from front end {front.name} (reused)" in second.log_tail
    whole = NvccCompiler(spec, toolchain, tmp_path / "whole", relink="off")
    for build, genes in ((first, {"ptxas_opt": 1}), (second, {"ptxas_opt": 0})):
        assert build.sass_sha256 == _build(whole, spec, **genes).sass_sha256


def test_a_space_without_ptxas_options_never_keeps_a_front_end(
    tmp_path: Path, toolchain: Toolchain
) -> None:
    spec = _spec(tmp_path, toolchain, flags="[fast_math, maxrregcount]")
    compiler = NvccCompiler(spec, toolchain, tmp_path / "cache", relink="on")
    assert compiler.relink == "off"
    assert _build(compiler, spec, fast_math=True).outcome is Outcome.OK
    assert not (tmp_path / "cache" / "frontends").exists()


@pytest.mark.skipif(NEW_PTXAS is None, reason=NO_NEW_PTXAS)
def test_a_split_toolchain_relinks_with_its_own_ptxas(tmp_path: Path, kind: str) -> None:
    """The variant's ptxas is the one nvcc would run: the split toolchain's 13.3."""
    from ctune.compile.select_toolchain import toolchain_for

    split = toolchain_for(Settings(cache_dir=tmp_path / "cache", ptxas=str(NEW_PTXAS)))
    spec = _spec(tmp_path, split, kind=kind)
    relinked = _build(NvccCompiler(spec, split, tmp_path / "cache", relink="on"), spec, ptxas_opt=0)
    whole = _build(NvccCompiler(spec, split, tmp_path / "whole"), spec, ptxas_opt=0)
    assert relinked.outcome is Outcome.OK, relinked.log_tail
    assert "relinked from front end" in relinked.log_tail
    assert relinked.sass_sha256 == whole.sass_sha256
    assert shutil.which("nvcc")


def _real_controls() -> bytes | None:
    files = real_controls_files()
    return files[0].read_bytes() if files else None


@pytest.mark.skipif(
    NEW_PTXAS is None or _real_controls() is None,
    reason=NO_NEW_PTXAS or "no real controls file: set CTUNE_TEST_ACF (a CompileIQ output)",
)
def test_a_real_controls_file_relinks_to_the_whole_builds_sass(tmp_path: Path) -> None:
    from ctune.compile.select_toolchain import toolchain_for

    data = _real_controls()
    assert data is not None
    split = toolchain_for(Settings(cache_dir=tmp_path / "cache", ptxas=str(NEW_PTXAS)))
    spec = _spec(tmp_path, split, acf=True)
    builds = []
    for cache, relink in (("cache", True), ("whole", False)):
        digest = ControlsStore(tmp_path / cache / "controls").put(data)
        compiler = NvccCompiler(spec, split, tmp_path / cache, relink=relink)
        builds.append(_build(compiler, spec, acf_ptxas=digest))
    ours, theirs = builds
    assert ours.outcome is theirs.outcome, (ours.log_tail, theirs.log_tail)
    assert "relinked from front end" in ours.log_tail
    assert ours.sass_sha256 == theirs.sass_sha256
