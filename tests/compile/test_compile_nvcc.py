"""The compile path with the real nvcc (no GPU): kernels, failures, cache, SASS digest."""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

import pytest

from ctune.compile import NvccCompiler, probe_toolchain
from ctune.compile import nvcc as nvcc_module
from ctune.compile.deps import uses_cutlass
from ctune.compile.sass import defined_symbols, sass_digest
from ctune.records import Outcome
from ctune.spec import load_spec
from ctune.spec.space import CATALOGUE

pytestmark = pytest.mark.nvcc

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data" / "kernels"
SHIPPED = sorted((ROOT / "kernels").glob("*.yaml"))


@pytest.fixture(scope="module")
def toolchain():
    return probe_toolchain()


def _compiler(spec, toolchain, tmp_path, **kw) -> NvccCompiler:
    return NvccCompiler(spec, toolchain, tmp_path / "cache", **kw)


def _heavy(spec) -> bool:
    """A CUTLASS kernel (or a launcher): 40-60 s a compile on 16 cores."""
    return spec.entry_kind == "launcher" or uses_cutlass(spec.include_dirs)


def _limit(spec) -> dict[str, float]:
    """These tests are about what does not compile, not what compiles slowly: a CUTLASS
    compile took over the 120 s default on the 2-core CI machine, alone (the default
    attention build) and two at once (a GPU host has 16 cores)."""
    return {"timeout_s": 270.0} if _heavy(spec) else {}


@pytest.mark.parametrize(
    "yaml_path", [*SHIPPED, DATA / "saxpy.yaml", DATA / "rt_saxpy.yaml"], ids=lambda p: p.stem
)
def test_default_build_of_every_kernel(yaml_path, toolchain, tmp_path):
    spec = load_spec(yaml_path, toolchain.help_text)
    compiler = _compiler(spec, toolchain, tmp_path, **_limit(spec))
    build = compiler.build(spec.default_candidate(), spec.problem())
    assert build.outcome is Outcome.OK, build.log_tail
    assert build.resources.regs and build.resources.regs > 0
    assert build.sass_sha256 and len(build.sass_sha256) == 64
    assert Path(build.binary_path).is_file()


@pytest.mark.parametrize("yaml_path", SHIPPED, ids=lambda p: p.stem)
def test_sampled_candidates_are_accepted_by_nvcc(yaml_path, toolchain, tmp_path):
    """Restrictions must exclude what does not compile: sampled valid points all build."""
    spec = load_spec(yaml_path, toolchain.help_text)
    problem = spec.problem()
    samples = spec.space.sample(random.Random(1), 2 if _heavy(spec) else 4, problem.dims)
    with _compiler(spec, toolchain, tmp_path, **_limit(spec)) as compiler:
        futures = [compiler.submit(spec.candidate(v), problem) for v in samples]
        builds = [f.result() for f in futures]
    for values, build in zip(samples, builds, strict=True):
        assert build.outcome in (Outcome.OK, Outcome.RESOURCE_LIMIT), (values, build.log_tail)


def _saxpy_with_all_flags(tmp_path: Path) -> Path:
    for name in ("saxpy.cu", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    text = (DATA / "saxpy.yaml").read_text()
    (tmp_path / "saxpy.yaml").write_text(
        text.replace("flags: [ptxas_opt, maxrregcount, fast_math, dlcm]", "flags: all")
    )
    return tmp_path / "saxpy.yaml"


def test_every_catalogue_flag_value_is_accepted(toolchain, tmp_path):
    spec = load_spec(_saxpy_with_all_flags(tmp_path), toolchain.help_text)
    problem = spec.problem()
    base = spec.space.default_values()
    jobs = []
    with _compiler(spec, toolchain, tmp_path) as compiler:
        for name, flag in CATALOGUE.items():
            if name not in spec.space:  # needs an option this nvcc lacks
                assert flag.requires_option and flag.requires_option not in toolchain.help_text
                continue
            for value in flag.gene.values:
                values = {**base, name: value}
                jobs.append((name, value, compiler.submit(spec.candidate(values), problem)))
        for name, value, future in jobs:
            build = future.result()
            assert build.outcome is Outcome.OK, (name, value, build.log_tail)
            rendered = CATALOGUE[name].render(value)
            assert all(item in build.argv for item in rendered), (name, value)


def test_resource_limit_and_candidate_compile_error_are_outcomes(toolchain, tmp_path):
    spec = load_spec(DATA / "smem_hog.yaml", toolchain.help_text)
    compiler = _compiler(spec, toolchain, tmp_path)
    problem = spec.problem()
    assert compiler.build(spec.default_candidate(), problem).outcome is Outcome.OK
    hog = compiler.build(spec.candidate({"SMEM_FLOATS": 65536, "BROKEN": 0}), problem)
    assert hog.outcome is Outcome.RESOURCE_LIMIT
    assert "too much shared data" in hog.log_tail
    broken = compiler.build(spec.candidate({"SMEM_FLOATS": 1024, "BROKEN": 1}), problem)
    assert broken.outcome is Outcome.COMPILE_ERROR
    assert "BROKEN candidates do not compile" in broken.log_tail


def test_missing_entry_symbol_is_reported(toolchain, tmp_path):
    spec = load_spec(DATA / "nosymbol.yaml", toolchain.help_text)
    build = _compiler(spec, toolchain, tmp_path).build(spec.default_candidate(), spec.problem())
    assert build.outcome is Outcome.COMPILE_ERROR
    assert "[ctune] error: entry 'nosymbol' is not a kernel of the cubin" in build.log_tail


def test_nvcc_runs_at_a_lower_cpu_priority_than_ctune(toolchain, tmp_path, monkeypatch):
    """Compiles run beside the measuring processes: each nvcc gets COMPILE_NICENESS more
    niceness than ctune's (cicc and ptxas, started later by nvcc, inherit it)."""
    import os

    from ctune.compile import process

    seen: list[int] = []
    lower = process._lower_priority

    def observed(pid: int, niceness: int) -> None:
        lower(pid, niceness)
        seen.append(os.getpriority(os.PRIO_PROCESS, pid))

    monkeypatch.setattr(process, "_lower_priority", observed)
    spec = load_spec(DATA / "saxpy.yaml", toolchain.help_text)
    build = _compiler(spec, toolchain, tmp_path).build(spec.default_candidate(), spec.problem())
    assert build.outcome is Outcome.OK, build.log_tail
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen[-1:] == [min(19, ours + nvcc_module.COMPILE_NICENESS)]


def test_timeout_kills_the_compile(toolchain, tmp_path):
    spec = load_spec(DATA / "saxpy.yaml", toolchain.help_text)
    build = _compiler(spec, toolchain, tmp_path, timeout_s=0.01).build(
        spec.default_candidate(), spec.problem()
    )
    assert build.outcome is Outcome.BUILD_TIMEOUT
    # not cached: a timeout depends on load, so the next try compiles again
    assert (
        _compiler(spec, toolchain, tmp_path).build(spec.default_candidate(), spec.problem()).outcome
        is Outcome.OK
    )


def test_invalid_candidate_is_never_compiled(toolchain, tmp_path):
    spec = load_spec(DATA / "saxpy.yaml", toolchain.help_text)
    values = {**spec.space.default_values(), "BLOCK": 1024, "UNROLL": 8}
    build = _compiler(spec, toolchain, tmp_path).build(spec.candidate(values), spec.problem())
    assert build.outcome is Outcome.INVALID and "BLOCK * UNROLL <= 4096" in build.log_tail
    assert not (tmp_path / "cache" / "builds").exists()


def test_candidates_differing_only_in_runtime_genes_share_one_build(toolchain, tmp_path):
    spec = load_spec(DATA / "rt_saxpy.yaml", toolchain.help_text)
    problem = spec.problem()
    first = spec.candidate({"BLOCK": 128, "ITEMS": 1, "UNROLL": 1})
    second = spec.candidate({"BLOCK": 256, "ITEMS": 4, "UNROLL": 1})
    compiled = _compiler(spec, toolchain, tmp_path).build(first, problem)
    shared = _compiler(spec, toolchain, tmp_path).build(second, problem)
    assert compiled.outcome is Outcome.OK and not compiled.cache_hit
    assert shared.cache_hit and shared.candidate_key == second.key() != compiled.candidate_key
    assert shared.binary_path == compiled.binary_path and shared.build_key == compiled.build_key
    assert shared.argv == compiled.argv and not any("ITEMS" in a for a in shared.argv)
    assert shared.compile_s == compiled.compile_s and shared.sass_sha256 == compiled.sass_sha256
    unrolled = _compiler(spec, toolchain, tmp_path).build(
        spec.candidate({"BLOCK": 256, "ITEMS": 4, "UNROLL": 2}), problem
    )
    assert not unrolled.cache_hit and unrolled.sass_sha256 != compiled.sass_sha256
    assert len(list((tmp_path / "cache" / "builds").iterdir())) == 2


def test_runtime_variants_compiled_ahead_together_run_nvcc_once(toolchain, tmp_path, monkeypatch):
    """The driver submits ahead: sharers arriving while the build runs wait for it."""
    spec = load_spec(DATA / "rt_saxpy.yaml", toolchain.help_text)
    problem = spec.problem()
    started = []
    from ctune.compile import process

    popen = process.subprocess.Popen

    def counting_popen(argv, *args, **kwargs):
        started.append(argv)
        return popen(argv, *args, **kwargs)

    monkeypatch.setattr(process.subprocess, "Popen", counting_popen)
    variants = [
        spec.candidate({"BLOCK": b, "ITEMS": i, "UNROLL": 1})
        for b, i in ((64, 1), (128, 2), (256, 4))
    ]
    with _compiler(spec, toolchain, tmp_path, jobs=3) as compiler:
        builds = [f.result() for f in [compiler.submit(c, problem) for c in variants]]
    # one cubin build and no other nvcc run: the args check reads the cubin's own table
    assert len([argv for argv in started if "-cubin" in argv]) == 1
    assert len([argv for argv in started if "-M" not in argv]) == 1
    assert [b.candidate_key for b in builds] == [c.key() for c in variants]
    assert sum(not b.cache_hit for b in builds) == 1
    assert len({b.binary_path for b in builds}) == 1 and Path(builds[0].binary_path).is_file()


def test_cache_hit_miss_and_failures_cached(toolchain, tmp_path):
    spec = load_spec(DATA / "smem_hog.yaml", toolchain.help_text)
    problem = spec.problem()
    first = _compiler(spec, toolchain, tmp_path).build(spec.default_candidate(), problem)
    again = _compiler(spec, toolchain, tmp_path).build(spec.default_candidate(), problem)
    assert not first.cache_hit and again.cache_hit and again.sass_sha256 == first.sass_sha256
    other_tc = dataclasses.replace(toolchain, nvcc_version="13.0.99")
    assert (
        not _compiler(spec, other_tc, tmp_path).build(spec.default_candidate(), problem).cache_hit
    )
    bad = spec.candidate({"SMEM_FLOATS": 1024, "BROKEN": 1})
    _compiler(spec, toolchain, tmp_path).build(bad, problem)
    cached_failure = _compiler(spec, toolchain, tmp_path).build(bad, problem)
    assert cached_failure.cache_hit and cached_failure.outcome is Outcome.COMPILE_ERROR


def test_edited_source_misses_the_cache(toolchain, tmp_path):
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    spec = load_spec(tmp_path / "saxpy.yaml", toolchain.help_text)
    first = _compiler(spec, toolchain, tmp_path).build(spec.default_candidate(), spec.problem())
    source = tmp_path / "saxpy.cu"
    source.write_text(source.read_text().replace("a * x[i] + y[i]", "a * x[i] - y[i]"))
    spec = load_spec(tmp_path / "saxpy.yaml", toolchain.help_text)
    second = _compiler(spec, toolchain, tmp_path).build(spec.default_candidate(), spec.problem())
    assert not second.cache_hit and second.sass_sha256 != first.sass_sha256


def test_sass_digest_is_stable_across_folders_and_lineinfo(toolchain, tmp_path):
    """Identical code gives an identical digest; -lineinfo embeds paths but not new SASS."""
    spec = load_spec(DATA / "saxpy.yaml", toolchain.help_text)
    problem = spec.problem()
    plain = _compiler(spec, toolchain, tmp_path / "a").build(spec.default_candidate(), problem)
    again = _compiler(spec, toolchain, tmp_path / "b").build(spec.default_candidate(), problem)
    assert plain.sass_sha256 == again.sass_sha256
    blob = Path(plain.binary_path).read_bytes()
    assert sass_digest(blob) == plain.sass_sha256 and "saxpy" in defined_symbols(blob)
    spec_all = load_spec(_saxpy_with_all_flags(tmp_path), toolchain.help_text)
    base = spec_all.space.default_values()
    compiler = _compiler(spec_all, toolchain, tmp_path / "c")
    without = compiler.build(spec_all.candidate(base), problem)
    with_lineinfo = compiler.build(spec_all.candidate({**base, "lineinfo": True}), problem)
    assert with_lineinfo.outcome is Outcome.OK and "-lineinfo" in with_lineinfo.argv
    assert with_lineinfo.sass_sha256 == without.sass_sha256
    # positive control (rule I7): flags must reach the compiler and change the code
    o0 = {**spec.space.default_values(), "ptxas_opt": 0}
    control = _compiler(spec, toolchain, tmp_path / "a").build(spec.candidate(o0), problem)
    assert control.outcome is Outcome.OK and control.sass_sha256 != plain.sass_sha256


def test_include_closure_covers_headers_whatever_the_working_directory(tmp_path, monkeypatch):
    """Headers near the working directory are part of the kernel's digest (a bare "nvcc"
    once resolved against the cwd and dropped them, so CI saw a different digest)."""
    from ctune.compile.deps import include_closure

    (tmp_path / "inc").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "inc" / "tile.h").write_text("#define TILE 4\n")
    source = tmp_path / "kernels" / "k.cu"
    source.write_text(
        '#include "tile.h"\nextern "C" __global__ void k(float* y) { y[0] = TILE; }\n'
    )
    monkeypatch.chdir(tmp_path / "kernels")
    files = include_closure("nvcc", source, [tmp_path / "inc"], {}, "c++17", "sm_90")
    assert (tmp_path / "inc" / "tile.h").resolve() in files


def _arch_kernel(folder: Path) -> Path:
    """An sm_90 spec whose source reads ``ampere.h`` only when compiled for an arch below
    sm_90 (the host pass defines no ``__CUDA_ARCH__``, so only the arch decides)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ampere.h").write_text("#define TILE 4\n")
    (folder / "k.cu").write_text(
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900\n"
        '#include "ampere.h"\n#else\n#define TILE 8\n#endif\n'
        'extern "C" __global__ void k(float* y) { y[0] = TILE; }\n'
    )
    (folder / "k_ref.py").write_text("def k(xp, inputs, dims):\n    return {}\n")
    (folder / "k.yaml").write_text(
        "name: k\nsource: k.cu\nentry: k\narch: sm_90\nflags: [ptxas_opt]\n"
        "launch: {grid: [1], block: [1]}\n"
        "args:\n  - {name: y, role: output, dtype: float32, shape: [1]}\n"
        "problems:\n  - {name: one, dims: {N: 1}}\nreference: {python: k_ref.py:k}\n"
    )
    return folder / "k.yaml"


def test_the_source_closure_is_the_one_of_the_arch_built_for(toolchain, tmp_path):
    """With --arch sm_80 on an sm_90 spec, every closure (build key, fingerprint, the
    recorded inputs, ctune check) is the sm_80 build's: taken for the spec's arch, it missed
    ampere.h, so an edit there kept serving the old sm_80 build from the cache."""

    from ctune import identity_probe
    from ctune.ci.check import FingerprintProbe
    from ctune.compile import deps
    from ctune.config import Settings

    spec = load_spec(_arch_kernel(tmp_path / "kernels"), toolchain.help_text)
    sm80 = deps.source_closure(spec, arch="sm_80")
    assert "ampere.h" in sm80 and "ampere.h" not in deps.source_closure(spec)
    assert identity_probe.spec_fields(spec, arch="sm_80")["kernel_source_sha256"] == (
        deps.closure_sha256(sm80)
    )
    probe = FingerprintProbe(tmp_path / "kernels", gpu=False, arch="sm_80")
    assert probe.current("k", "one").closure == sm80
    compiler = _compiler(spec, toolchain, tmp_path, arch="sm_80")
    assert compiler.source_inputs(spec, Settings(arch="sm_80")) == {"closure": sm80}

    cand, problem = spec.default_candidate(), spec.problem()
    first = compiler.build(cand, problem)
    assert first.outcome is Outcome.OK, first.log_tail
    (tmp_path / "kernels" / "ampere.h").write_text("#define TILE 5\n")
    deps.forget_closures()  # as a new process would find it
    again = _compiler(spec, toolchain, tmp_path, arch="sm_80").build(cand, problem)
    assert again.outcome is Outcome.OK and not again.cache_hit
    assert again.sass_sha256 != first.sass_sha256


def test_an_ifdef_switch_that_is_off_is_not_defined(toolchain, tmp_path):
    """``#ifdef TRAP`` with ``-DTRAP=0`` is on: the off build failed on the #error, and the
    closure held a header only the on build reads."""
    from ctune.compile import deps

    (tmp_path / "extra.h").write_text("#define EXTRA 1\n")
    (tmp_path / "k.cu").write_text(
        '#ifdef TRAP\n#error "TRAP is on"\n#endif\n'
        '#ifdef USE_EXTRA\n#include "extra.h"\n#endif\n'
        'extern "C" __global__ void k(float* y) { y[0] = 1.f; }\n'
    )
    (tmp_path / "k_ref.py").write_text("def k(xp, inputs, dims):\n    return {}\n")
    (tmp_path / "k.yaml").write_text(
        "name: k\nsource: k.cu\nentry: k\n"
        "genes:\n  TRAP: {values: [0, 1], default: 0, ifdef: true}\n"
        "  USE_EXTRA: {values: [0, 1], default: 0, ifdef: true}\n"
        "launch: {grid: [1], block: [1]}\n"
        "args:\n  - {name: y, role: output, dtype: float32, shape: [1]}\n"
        "problems:\n  - {name: one, dims: {N: 1}}\nreference: {python: k_ref.py:k}\n"
    )
    spec = load_spec(tmp_path / "k.yaml", toolchain.help_text)
    compiler, problem = _compiler(spec, toolchain, tmp_path), spec.problem()
    off = compiler.build(spec.default_candidate(), problem)
    assert off.outcome is Outcome.OK, off.log_tail
    on = compiler.build(spec.candidate({**spec.space.default_values(), "TRAP": 1}), problem)
    assert on.outcome is Outcome.COMPILE_ERROR and "TRAP is on" in on.log_tail
    assert "extra.h" not in deps.source_closure(spec)
    assert "extra.h" in deps.source_closure(spec, defines={"USE_EXTRA": 1})


def test_a_cache_folder_carried_to_another_cache_directory_is_a_hit(toolchain, tmp_path):
    """Builds made on a CPU machine under one cache directory and unpacked under another (the
    GPU machine's) are hits: the recorded binary path names the first directory."""
    spec = load_spec(DATA / "saxpy.yaml", toolchain.help_text)
    first = NvccCompiler(spec, toolchain, tmp_path / "cpu").build(
        spec.default_candidate(), spec.problem()
    )
    shutil.copytree(tmp_path / "cpu" / "builds", tmp_path / "gpu" / "builds")
    shutil.rmtree(tmp_path / "cpu")
    carried = NvccCompiler(spec, toolchain, tmp_path / "gpu").build(
        spec.default_candidate(), spec.problem()
    )
    assert carried.cache_hit and carried.sass_sha256 == first.sass_sha256
    assert Path(carried.binary_path).is_file()
    assert Path(carried.binary_path).is_relative_to(tmp_path / "gpu")


def test_a_broken_cache_entry_is_rebuilt_not_reused(toolchain, tmp_path):
    spec = load_spec(DATA / "saxpy.yaml", toolchain.help_text)
    first = _compiler(spec, toolchain, tmp_path).build(spec.default_candidate(), spec.problem())
    Path(first.binary_path).unlink()  # a lost binary under an intact build.json
    again = _compiler(spec, toolchain, tmp_path).build(spec.default_candidate(), spec.problem())
    assert again.outcome is Outcome.OK and not again.cache_hit
    assert Path(again.binary_path).is_file()
    assert (
        _compiler(spec, toolchain, tmp_path)
        .build(spec.default_candidate(), spec.problem())
        .cache_hit
    )


def _damage(binary: Path, how: str) -> None:
    data = binary.read_bytes()
    damaged = {
        "emptied": b"",
        "truncated": data[: len(data) // 2],
        "one byte changed": data[:-1] + bytes([data[-1] ^ 0xFF]),  # same size
    }[how]
    binary.write_bytes(damaged)


@pytest.mark.parametrize("how", ["emptied", "truncated", "one byte changed"])
def test_a_damaged_cached_binary_is_rebuilt_not_reused(toolchain, tmp_path, how):
    """The entry records its binary's size and sha256: a binary that does not match them is
    a miss that rebuilds (and says so), never a hit with the SASS digest it once had."""
    spec = load_spec(DATA / "saxpy.yaml", toolchain.help_text)
    candidate, problem = spec.default_candidate(), spec.problem()
    first = _compiler(spec, toolchain, tmp_path).build(candidate, problem)
    good = Path(first.binary_path).read_bytes()
    _damage(Path(first.binary_path), how)
    assert _compiler(spec, toolchain, tmp_path).lookup(candidate, problem) is None
    again = _compiler(spec, toolchain, tmp_path).build(candidate, problem)
    assert again.outcome is Outcome.OK and not again.cache_hit
    assert "[ctune] rebuilt:" in again.log_tail and "not the binary it was built as" in (
        again.log_tail
    )
    assert Path(again.binary_path).read_bytes() == good
    assert sass_digest(good) == again.sass_sha256 == first.sass_sha256
    assert _compiler(spec, toolchain, tmp_path).build(candidate, problem).cache_hit


def test_an_entry_without_its_binarys_record_is_rebuilt_once(toolchain, tmp_path):
    """An entry written before binary.json (or one that lost it) has nothing to check its
    binary against: rebuilt, and the rebuilt entry is a hit from then on."""
    spec = load_spec(DATA / "saxpy.yaml", toolchain.help_text)
    candidate, problem = spec.default_candidate(), spec.problem()
    first = _compiler(spec, toolchain, tmp_path).build(candidate, problem)
    record = Path(first.binary_path).parent / nvcc_module.BINARY_RECORD
    record.unlink()
    again = _compiler(spec, toolchain, tmp_path).build(candidate, problem)
    assert not again.cache_hit and "no binary.json" in again.log_tail
    assert record.is_file()
    assert _compiler(spec, toolchain, tmp_path).build(candidate, problem).cache_hit


def test_controls_files_are_keyed_by_content_not_by_location(toolchain, tmp_path):
    """An acf gene's value is its file's digest: the spec's own file, in another checkout and
    stored under another cache, is the same candidate and the same build."""

    def checkout(where: Path) -> Path:
        where.mkdir()
        for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
            shutil.copy(DATA / name, where / name)
        with (where / "saxpy.yaml").open("a") as spec_file:
            spec_file.write("acf: [ptxas]\nacf_files: {ptxas: [tuned.acf]}\n")
        (where / "tuned.acf").write_text("controls v1\n")
        return where / "saxpy.yaml"

    keys = []
    for folder in ("a", "b"):
        spec = load_spec(checkout(tmp_path / folder))
        (digest,) = spec.space.gene("acf_ptxas").suggest
        candidate = spec.candidate({**spec.space.default_values(), "acf_ptxas": digest})
        compiler = _compiler(spec, toolchain, tmp_path / folder)
        argv = compiler.argv(candidate, spec.problem(), tmp_path / "k.cubin")
        assert f"--apply-controls={tmp_path / folder / 'cache' / 'controls' / digest}.acf" in argv
        keys.append((candidate.key(), compiler.build_key(argv, spec.problem())))
    assert keys[0] == keys[1]  # same content, other checkout and store: same candidate, build


def test_a_controls_file_this_ptxas_refuses_is_a_compile_error_and_the_rest_builds(
    toolchain, tmp_path
):
    """ptxas before 13.3 refuses every controls file: a typed outcome, cached like any
    failed build, so a search goes on past it."""
    if tuple(int(n) for n in toolchain.ptxas_version.split(".")[:2]) >= (13, 3):
        pytest.skip(f"ptxas {toolchain.ptxas_version} takes controls files")
    spec = load_spec(DATA / "saxpy.yaml").with_acf(("ptxas",))
    compiler = _compiler(spec, toolchain, tmp_path)
    digest = compiler.controls.first.put(b"\x8f not really controls \x00" * 64)
    candidate = spec.candidate({**spec.space.default_values(), "acf_ptxas": digest})
    build = compiler.build(candidate, spec.problem())
    assert build.outcome is Outcome.COMPILE_ERROR
    assert "not in expected format" in build.log_tail
    assert f"<controls>/{digest}.acf" not in " ".join(build.argv)  # the real path ran
    assert compiler.build(spec.default_candidate(), spec.problem()).outcome.is_ok
    assert compiler.build(candidate, spec.problem()).cache_hit


def test_build_key_is_the_same_wherever_the_cutlass_wheel_is_installed(
    toolchain, tmp_path, monkeypatch
):
    """A pool compiled on a CPU machine (CUTLASS under python3.11's site-packages) must be a
    cache hit on the GPU machine (python3.12's): the key names the -I folder by its token,
    the closure digest covers the headers' contents."""
    from ctune.compile import deps

    source = tmp_path / "k.cu"
    source.write_text(
        '#include "tile.h"\nextern "C" __global__ void k(float* y) { y[0] = TILE; }\n'
    )
    (tmp_path / "k_ref.py").write_text("def k(xp, inputs, dims):\n    return {}\n")
    (tmp_path / "k.yaml").write_text(
        "name: k\nsource: k.cu\nentry: k\ninclude_dirs: ['@cutlass']\n"
        "launch: {grid: [1], block: [1]}\n"
        "args:\n  - {name: y, role: output, dtype: float32, shape: [1]}\n"
        "problems:\n  - {name: one, dims: {N: 1}}\nreference: {python: k_ref.py:k}\n"
    )
    keys = []
    for machine, tile in (("cpu-farm/python3.11", 4), ("gpu-host/python3.12", 4), ("edited", 8)):
        wheel = tmp_path / machine / "cutlass_library" / "source" / "include"
        wheel.mkdir(parents=True)
        (wheel / "tile.h").write_text(f"#define TILE {tile}\n")
        monkeypatch.setitem(deps.INCLUDE_TOKENS, "@cutlass", lambda w=wheel: w)
        spec = load_spec(tmp_path / "k.yaml", toolchain.help_text)
        assert "@cutlass/tile.h" in deps.source_closure(spec)
        compiler = _compiler(spec, toolchain, tmp_path / machine)
        cand, problem = spec.default_candidate(), spec.problem()
        argv = compiler.argv(cand, problem, tmp_path / "out.cubin")
        assert f"-I{wheel}" in argv
        keys.append(compiler.build_key(argv, problem))
    assert keys[0] == keys[1]  # the same headers in another place: the same build
    assert keys[2] != keys[1]  # other header contents: another build
