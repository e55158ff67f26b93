"""Both controls engines pass the engine contract (ctune.testing.contract_controls).

CompileIQ's runs where it is installed and a ptxas search space is found through
``CTUNE_ACF_SPACES``; its files are encrypted with fresh randomness each time, so the
decisions are compared through what ptxas makes of them when ``CTUNE_TEST_PTXAS`` names a
ptxas 13.3 or later (and nvcc is here to make the PTX), else through the state it shows.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from ctune.controls.engine import ControlsEngine, Proposal
from ctune.controls.store import ControlsError
from ctune.testing.contract_controls import ControlsEngineContract, EngineFactory
from ctune.testing.standin_controls import StandInControlsEngine

KERNEL = Path(__file__).parents[2] / "data" / "kernels" / "saxpy.cu"


class TestStandIn(ControlsEngineContract):
    @pytest.fixture
    def engine_factory(self, tmp_path: Path) -> EngineFactory:
        return lambda seed: StandInControlsEngine(
            tmp_path / "space", seed=seed, options={"pool_size": self.pool_size}
        )


def _ptxas_space() -> Path | None:
    """The ptxas 13.3 space through acf_spaces (CTUNE_ACF_SPACES), or None."""
    from ctune.controls.spaces import space_file

    folder = os.environ.get("CTUNE_ACF_SPACES")
    try:
        return space_file("ptxas", "13.3", Path(folder) if folder else None)
    except ControlsError:
        return None


def _why_no_compileiq() -> str | None:
    if importlib.util.find_spec("compileiq") is None:
        return "compileiq is not installed (pip install compileiq==1.1.0)"
    if _ptxas_space() is None:
        return "no ptxas 13.3 search space: set CTUNE_ACF_SPACES to a folder holding it"
    return None


@cache
def _ptx(folder: Path) -> Path | None:
    """saxpy's PTX from the system nvcc (any ptxas 13.3+ reads an older PTX version)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    out = folder / "saxpy.ptx"
    done = subprocess.run(
        [nvcc, "-ptx", "-arch=compute_90", "-o", str(out), str(KERNEL)],
        capture_output=True,
        check=False,
        timeout=300,
    )
    return out if done.returncode == 0 else None


def _test_ptxas() -> str | None:
    """CTUNE_TEST_PTXAS when it names a ptxas of release 13.3 or later."""
    ptxas = os.environ.get("CTUNE_TEST_PTXAS", "")
    if not ptxas or not Path(ptxas).is_file():
        return None
    text = subprocess.run([ptxas, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"V(\d+)\.(\d+)", text)
    return ptxas if match and (int(match[1]), int(match[2])) >= (13, 3) else None


@pytest.mark.skipif(_why_no_compileiq() is not None, reason=str(_why_no_compileiq()))
class TestCompileIq(ControlsEngineContract):
    @pytest.fixture
    def engine_factory(self) -> EngineFactory:
        from ctune.controls.compileiq import CompileIqEngine

        space = _ptxas_space()
        assert space is not None
        return lambda seed: CompileIqEngine(space, seed=seed, options={"pool_size": self.pool_size})

    @pytest.fixture(autouse=True)
    def _compiler(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        folder = tmp_path_factory.mktemp("ptx")
        ptxas = _test_ptxas()
        self.ptxas = ptxas
        self.ptx = _ptx(folder) if ptxas else None
        self.folder = folder

    def observe(self, engine: ControlsEngine, proposals: list[Proposal]) -> list[Any]:
        """The SASS each file gives saxpy through ptxas 13.3+; else the engine's counters."""
        if self.ptxas is None or self.ptx is None:
            return [engine.generation, len(engine.pending), len(proposals)]
        from ctune.compile.sass import sass_digest

        out = []
        for i, p in enumerate(proposals):
            acf = self.folder / f"{p.id}.acf"
            acf.write_bytes(p.data)
            cubin = self.folder / f"{i}.cubin"
            subprocess.run(
                [self.ptxas, "-arch=sm_90", f"--apply-controls={acf}", str(self.ptx),
                 "-o", str(cubin)],
                check=True, capture_output=True, timeout=300,
            )  # fmt: skip
            out.append(sass_digest(cubin.read_bytes()))
        return out
