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


def test_exported_header_compiles(tmp_path: Path) -> None:
    header = tmp_path / "tuned.h"
    header.write_text(export.render(_support().make_artifact(), None, "header"))
    source = tmp_path / "use.cu"
    source.write_text(
        '#include "tuned.h"\n'
        "__global__ void k(int* y) { y[threadIdx.x] = BLOCK_M * STAGES + CTUNE_GEMM_GRID_X; }\n"
        'static_assert(CTUNE_GEMM_BLOCK_X == 256, "launch config");\n'
    )
    done = subprocess.run(
        ["nvcc", "-c", "-arch=sm_90", str(source), "-o", str(tmp_path / "u.o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
