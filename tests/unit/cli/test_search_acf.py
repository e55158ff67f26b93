"""`ctune search --acf`: offered where the toolchain takes controls files, else one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ctune.cli.search as search_cli
import ctune.controls.setup as controls_setup_module
from ctune.compile.toolchain import Toolchain
from ctune.spec import load_spec
from ctune.testing.cli_app import ctune_main
from ctune.testing.standins import StandInCompiler, StandInMeasurer, write_standin_kernel

CUDA_13_0 = Toolchain("/bin/nvcc", "13.0.88", "13.0.88", "release 13.0, V13.0.88", "")
CUDA_13_3 = Toolchain("/bin/nvcc", "13.3.73", "13.3.73", "release 13.3, V13.3.73", "")


@pytest.fixture
def compilers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[StandInCompiler]:
    monkeypatch.chdir(tmp_path)
    for name in ("CTUNE_CACHE_DIR", "CTUNE_JOBS", "CTUNE_DEBUG", "CTUNE_REGISTRY", "CTUNE_ARCH"):
        monkeypatch.delenv(name, raising=False)
    write_standin_kernel(tmp_path / "k")
    made: list[StandInCompiler] = []

    def compiler(spec: Any, toolchain: Any, cfg: Any) -> StandInCompiler:
        made.append(StandInCompiler(spec))
        return made[-1]

    monkeypatch.setattr(search_cli, "make_compiler", compiler)
    monkeypatch.setattr(search_cli, "make_measurer", lambda cfg: StandInMeasurer(samples=20))
    # a search space file by name (the stand-in engine reads no space) and the stand-in engine
    spaces = tmp_path / "spaces"
    spaces.mkdir()
    (spaces / "ptxas13.3.bin").write_bytes(b"stand-in space")
    monkeypatch.setenv("CTUNE_ACF_SPACES", str(spaces))
    real_setup = controls_setup_module.controls_setup
    monkeypatch.setattr(
        controls_setup_module,
        "controls_setup",
        lambda *a, **k: real_setup(*a, **{**k, "engine": "standin"}),
    )
    return made


def _search(monkeypatch: pytest.MonkeyPatch, toolchain: Toolchain, *args: str) -> Any:
    monkeypatch.setattr(
        search_cli, "load_kernel", lambda kernel, cfg: (load_spec(kernel), toolchain)
    )
    return CliRunner().invoke(
        ctune_main,
        ["search", "k/standin.cu", "--objective", "p50", "--budget", "6", "--json",
         "--confirm-processes", "0", *args],
        env={"COLUMNS": "200"},
    )  # fmt: skip


def test_acf_on_the_command_line_that_the_toolchain_refuses_is_exit_2(
    compilers: list[StandInCompiler], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _search(monkeypatch, CUDA_13_0, "--acf", "ptxas")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--acf: ptxas 13.0.88 takes no controls files" in lines[0]
    assert not compilers  # refused before anything was built


def test_acf_the_toolchain_takes_adds_the_gene_at_none(
    compilers: list[StandInCompiler], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _search(monkeypatch, CUDA_13_3, "--acf", "ptxas", "--arch", "sm_90a")
    assert result.exit_code == 0, result.output
    (compiler,) = compilers
    assert compiler.spec.space.gene("acf_ptxas").open
    assert "acf_nvcc" not in compiler.spec.space


def test_the_spec_s_acf_the_target_refuses_is_a_warning(
    tmp_path: Path, compilers: list[StandInCompiler], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_file = tmp_path / "k" / "standin.yaml"
    spec_file.write_text(spec_file.read_text() + "acf: [ptxas, nvcc]\n")
    result = _search(monkeypatch, CUDA_13_3, "--arch", "sm_90a")
    assert result.exit_code == 0, result.output
    warnings = [ln for ln in result.stderr.splitlines() if "not offered" in ln]
    assert warnings == [
        "warning: standin.yaml: acf nvcc not offered: nvcc 13.3.73 takes no controls file "
        "of its own for sm_90a (sm_100+)"
    ]
    (compiler,) = compilers
    assert "acf_ptxas" in compiler.spec.space and "acf_nvcc" not in compiler.spec.space
