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
