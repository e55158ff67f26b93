"""The staleness check and exports against the real nvcc (no GPU)."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctune import fingerprint
from ctune.kernelspec import load_spec
from ctune.registry import export
from ctune.registry.service import publish_artifact

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
    first, second = fingerprint.probe_toolchain(), fingerprint.probe_toolchain()
    assert first == second
    assert "release" in first["nvcc_version"] and first["ptxas_version"]
    assert all(isinstance(v, str) for v in first.values())


def test_fingerprint_repeats_and_names_a_source_edit(kernels: Path) -> None:
    spec = load_spec(kernels / "saxpy.yaml")
    first = fingerprint.current_fingerprint(spec, False)
    for _ in range(3):
        again = fingerprint.current_fingerprint(load_spec(kernels / "saxpy.yaml"), False)
        assert fingerprint.diff(first, again, set(again)) == []
    with (kernels / "saxpy.cu").open("a") as fh:
        fh.write("\n// edited\n")
    edited = fingerprint.current_fingerprint(load_spec(kernels / "saxpy.yaml"), False)
    assert [c.name for c in fingerprint.diff(first, edited, set(edited))] == [
        "kernel_source_sha256"
    ]


def test_ctune_check_end_to_end(kernels: Path, tmp_path: Path, monkeypatch) -> None:
    support = _support()
    for name, value in support.GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    repo = support.init_repo(tmp_path / "project")
    spec = load_spec(kernels / "saxpy.yaml")
    fp = {**support.FINGERPRINT, **fingerprint.current_fingerprint(spec, False)}
    artifact = dataclasses.replace(
        support.make_artifact(kernel="saxpy", problem="n1m"), fingerprint=fp
    )
    publish_artifact(repo / "registry", artifact)

    def check() -> subprocess.CompletedProcess[str]:
        argv = [
            sys.executable,
            "-m",
            "ctune",
            "check",
            "--no-gpu",
            "--kernels",
            str(kernels),
            "--registry",
            str(repo / "registry"),
        ]
        return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, check=False)

    done = check()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fresh saxpy/n1m/" in done.stdout and "not checked: no GPU" in done.stdout
    with (kernels / "saxpy.cu").open("a") as fh:
        fh.write("\n// edited\n")
    done = check()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "STALE saxpy/n1m/" in done.stdout and "kernel_source_sha256" in done.stdout
    assert done.stderr.strip().startswith("error: 1 of 1 artifact(s) stale")


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
