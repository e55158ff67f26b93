"""`ctune compile --set` that breaks a restriction: one error line, exit 2, no report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
KERNELS = ROOT / "bench" / "own_kernels"
SETS = ("--set", "TILE_DIM=8", "--set", "BLOCK_ROWS=16")  # 8 % 16 != 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_broken_restriction_is_one_line_and_nothing_is_compiled(tmp_path: Path) -> None:
    for name in ("transpose.cu", "transpose_coalesced.yaml", "transpose_ref.py"):
        shutil.copy(KERNELS / name, tmp_path / name)
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "compile", "transpose_coalesced.yaml", *SETS],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "breaks restriction TILE_DIM % BLOCK_ROWS == 0" in lines[0]
    assert not (tmp_path / ".ctune").exists() or not any((tmp_path / ".ctune").rglob("*.cubin"))


def test_a_gene_set_twice_is_refused_wherever_set_is_taken(tmp_path: Path) -> None:
    """`--set BLOCK=32 --set BLOCK=64` used 64 without a word (compile, bench): refused in
    one line, as a repeated --objective is."""
    from ctune.cli.common import parse_sets
    from ctune.errors import UserError
    from ctune.testing.standins import standin_spec

    space = standin_spec(tmp_path / "k").space
    base = space.default_values()
    assert parse_sets(space, ["TILE_M=32", "STAGES=3"], base)["TILE_M"] == 32
    with pytest.raises(UserError, match=r"^--set TILE_M is given twice \('TILE_M=32' and "):
        parse_sets(space, ["TILE_M=32", "STAGES=3", " TILE_M =64"], base)
