"""The staleness check and exports against the real nvcc (no GPU)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctune import identity_probe
from ctune.evidence import identity as fingerprint
from ctune.registry import export
from ctune.registry.service import publish_artifact
from ctune.spec import load_spec

pytestmark = pytest.mark.nvcc

ROOT = Path(__file__).parents[2]
KERNELS = ROOT / "tests" / "data" / "kernels"


def _support():
    path = ROOT / "tests" / "unit" / "registry" / "registry_support.py"
    if "registry_support" not in sys.modules:
        spec = importlib.util.spec_from_file_location("registry_support", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules["registry_support"] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules["registry_support"]


@pytest.fixture
def kernels(tmp_path: Path) -> Path:
    folder = tmp_path / "kernels"
    folder.mkdir()
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(KERNELS / name, folder / name)
    return folder


def test_toolchain_probe_is_repeatable() -> None:
    first, second = identity_probe.probe_toolchain(), identity_probe.probe_toolchain()
    assert first == second
    assert "release" in first["nvcc_version"] and first["ptxas_version"]
    assert all(isinstance(v, str) for v in first.values())


def test_fingerprint_repeats_and_names_a_source_edit(kernels: Path) -> None:
    spec = load_spec(kernels / "saxpy.yaml")
    first = identity_probe.current_fingerprint(spec, False, problem="n1m")
    for _ in range(3):
        again = identity_probe.current_fingerprint(load_spec(kernels / "saxpy.yaml"), False)
        assert fingerprint.diff(first, again, set(again)) == []
    with (kernels / "saxpy.cu").open("a") as fh:
        fh.write("\n// edited\n")
    edited = identity_probe.current_fingerprint(load_spec(kernels / "saxpy.yaml"), False)
    changes = fingerprint.diff(first, edited, set(edited))
    assert [(c.name, c.severity) for c in changes] == [("kernel_source_sha256", "build")]


def test_ctune_check_end_to_end(kernels: Path, tmp_path: Path, monkeypatch) -> None:
    support = _support()
    for name, value in support.GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CTUNE_CACHE_DIR", str(tmp_path / "cache"))
    repo = support.init_repo(tmp_path / "project")
    publish_artifact(repo / "registry", support.built_saxpy_artifact(kernels, tmp_path / "cache"))

    def ctune(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "ctune", *args, "--kernels", str(kernels)]
        argv += ["--registry", str(repo / "registry")]
        return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, check=False)

    done = ctune("check", "--no-gpu", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fresh saxpy/n1m/" in done.stdout and "not checked: no GPU" in done.stdout
    # a comment: the closure changed, the rebuilt SASS did not -> still valid, file named
    source = kernels / "saxpy.cu"
    original = source.read_text()
    source.write_text(original + "\n// edited\n")
    done = ctune("check", "--no-gpu", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARN saxpy/n1m/" in done.stdout and "saxpy.cu (changed)" in done.stdout
    assert "rebuilt 2 member(s): SASS identical" in done.stdout
    quiet = ctune("check", "--no-gpu").stdout  # the same drift, folded
    assert "build: kernel_source_sha256 changed for 1 artifact" in quiet
    assert "saxpy/n1m/" not in quiet and "0 stale, 1 with soft drift, 0 fresh" in quiet
    assert ctune("check", "--no-gpu", "--strict").returncode == 1
    # refresh records the new inputs: fresh again, no rebuild needed
    done = ctune("registry", "refresh")
    assert done.returncode == 0 and "recorded kernel_source_sha256, closure" in done.stdout
    done = ctune("check", "--no-gpu", "--strict", "-v")
    assert done.returncode == 0 and "fresh saxpy/n1m/" in done.stdout, done.stdout
    # a code edit: other SASS -> stale, naming the file and the members
    source.write_text(original.replace("a * x[i] + y[i]", "a * x[i] - y[i]"))
    done = ctune("check", "--no-gpu")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "STALE saxpy/n1m/" in done.stdout and "saxpy.cu (changed)" in done.stdout
    assert done.stdout.count("rebuilt: member ") == 2
    assert done.stderr.strip().startswith("error: 1 of 1 artifact(s) stale")
    # a refresh refuses what is stale
    assert ctune("registry", "refresh").returncode == 1
    # a spec that is not there is bad input, not a stale artifact
    (kernels / "saxpy.yaml").unlink()
    done = ctune("check", "--no-gpu")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"error: kernel spec {kernels / 'saxpy.yaml'} not found for 1 artifact of saxpy; "
        "set [tool.ctune] kernels or pass --kernels\n"
    )


def _check_here(kernels: Path, registry: Path, cache: Path):  # type: ignore[no-untyped-def]
    """``ctune check`` in this process (so a test can change ctune's flag catalogue)."""
    from ctune.ci.check import FingerprintProbe, check_registry, nvcc_verifier
    from ctune.config import Settings

    probe = FingerprintProbe(kernels, gpu=False)
    report = check_registry(registry, probe, verify=nvcc_verifier(Settings(cache_dir=cache)))
    (result,) = report.results
    return result


def test_a_changed_render_rule_is_rebuilt_and_judged_by_its_sass(
    kernels: Path, tmp_path: Path, monkeypatch
) -> None:
    """How a flag gene renders into argv is part of the build: a rule that passes the
    default explicitly keeps the SASS (valid), an inverted one changes it (stale)."""
    from ctune.spec.space import nvcc

    support = _support()
    for name, value in support.GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    repo = support.init_repo(tmp_path / "project")
    cache = tmp_path / "cache"
    publish_artifact(repo / "registry", support.built_saxpy_artifact(kernels, cache))
    registry = repo / "registry"
    assert _check_here(kernels, registry, cache).verdict(strict=True) == "fresh"

    original = nvcc.CATALOGUE["ptxas_opt"]
    explicit = dataclasses.replace(
        nvcc.CATALOGUE["ptxas_opt"], render=lambda v: ["-Xptxas", f"-O{v}"]
    )
    monkeypatch.setitem(nvcc.CATALOGUE, "ptxas_opt", explicit)
    result = _check_here(kernels, registry, cache)
    assert [(c.old, c.new, c.severity) for c in result.changes] == [
        ("(none)", "-Xptxas -O3", "build")
    ] * 2
    assert result.binaries is not None and result.binaries.identical
    assert result.verdict() == "warn"
    monkeypatch.setitem(nvcc.CATALOGUE, "ptxas_opt", original)
    inverted = dataclasses.replace(
        nvcc.CATALOGUE["fast_math"], render=lambda v: [] if v else ["--use_fast_math"]
    )
    monkeypatch.setitem(nvcc.CATALOGUE, "fast_math", inverted)
    result = _check_here(kernels, registry, cache)
    assert {c.new for c in result.changes} == {"--use_fast_math"}
    assert result.verdict() == "stale" and result.binaries is not None
    assert len(result.binaries.differences) == 2
    assert all("SASS" in d for d in result.binaries.differences)


def test_gate_build_only_fills_the_cache_without_a_gpu(
    kernels: Path, tmp_path: Path, monkeypatch
) -> None:
    """A CPU runner builds what the gate would measure; the GPU runner then finds it cached."""
    support = _support()
    for name, value in support.GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    repo = support.init_repo(tmp_path / "project")
    publish_artifact(repo / "registry", support.built_saxpy_artifact(kernels, tmp_path / "tuned"))
    cache = tmp_path / "carried"

    def ctune(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "ctune", *args, "--kernels", str(kernels)]
        argv += ["--registry", str(repo / "registry")]
        env = {**os.environ, "CTUNE_CACHE_DIR": str(cache)}
        return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env)

    done = ctune("gate", "--build-only")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("build [1/1] ok saxpy/n1m/"), done.stdout
    assert "2 build(s) in the cache, SASS as recorded" in done.stdout
    builds = sorted(p.name for p in (cache / "builds").iterdir() if not p.name.startswith("."))
    assert len(builds) == 2
    # a kernel edit that changes the code: the builds no longer match what was measured
    source = kernels / "saxpy.cu"
    source.write_text(source.read_text().replace("a * x[i] + y[i]", "a * x[i] - y[i]"))
    done = ctune("gate", "--build-only")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "build [1/1] FAILED saxpy/n1m/" in done.stdout
    assert done.stdout.count("SASS differs from the recorded build") == 2
    assert done.stderr.strip().startswith("error: gate --build-only: 1 of 1 artifact(s)")


def _nvcc_object(tmp_path: Path, name: str, code: str) -> subprocess.CompletedProcess[str]:
    """Compile ``code`` with every warning an error (a redefined macro is a warning)."""
    source = tmp_path / f"{name}.cu"
    source.write_text(code)
    return subprocess.run(
        [
            "nvcc",
            "-c",
            "-arch=sm_90",
            "--Werror",
            "all-warnings",
            "-Xcompiler",
            "-Werror",
            str(source),
            "-o",
            str(tmp_path / f"{name}.o"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def test_exported_headers_of_two_kernels_compile_together(tmp_path: Path) -> None:
    make = _support().make_artifact
    # both kernels tune BLOCK_M and STAGES, to different values: bare names would clash
    (tmp_path / "gemm_tuned.h").write_text(export.render(make("gemm"), None, "header"))
    (tmp_path / "attention_tuned.h").write_text(
        export.render(make("attention"), "baseline", "header")
    )
    host = _nvcc_object(
        tmp_path,
        "host",
        '#include "gemm_tuned.h"\n#include "attention_tuned.h"\n'
        'static_assert(CTUNE_GEMM_BLOCK_M == 128 && CTUNE_ATTENTION_BLOCK_M == 256, "own");\n'
        'static_assert(CTUNE_GEMM_BLOCK_X == 256, "launch config");\n'
        "#ifdef BLOCK_M\n#error the bare names are defined only on request\n#endif\n",
    )
    assert host.returncode == 0, host.stderr
    # where gemm's source is compiled it reads the bare names, on request
    kernel = _nvcc_object(
        tmp_path,
        "kernel",
        '#define CTUNE_GEMM_BARE_NAMES\n#include "gemm_tuned.h"\n#include "attention_tuned.h"\n'
        "__global__ void k(int* y) { y[threadIdx.x] = BLOCK_M * STAGES + CTUNE_GEMM_GRID_X; }\n"
        'static_assert(BLOCK_M == 128 && CTUNE_ATTENTION_BLOCK_M == 256, "gemm\'s names");\n',
    )
    assert kernel.returncode == 0, kernel.stderr


def test_bare_exports_are_what_the_kernel_reads_and_clash_together(tmp_path: Path) -> None:
    make = _support().make_artifact
    (tmp_path / "gemm_tuned.h").write_text(export.render(make("gemm"), None, "header", True))
    alone = _nvcc_object(
        tmp_path, "alone", '#include "gemm_tuned.h"\nstatic_assert(BLOCK_M == 128, "bare");\n'
    )
    assert alone.returncode == 0, alone.stderr
    (tmp_path / "attention_tuned.h").write_text(
        export.render(make("attention"), "baseline", "header", True)
    )
    both = _nvcc_object(tmp_path, "both", '#include "gemm_tuned.h"\n#include "attention_tuned.h"\n')
    assert both.returncode != 0 and "BLOCK_M" in both.stderr  # why the default is prefixed
