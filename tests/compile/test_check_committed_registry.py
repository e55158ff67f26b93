"""`ctune check` of this repository's committed registry, as a fresh clone runs it: quiet
(the drift of fresh artifacts folded, a summary line) and the same from a subfolder, the
kernels and the registry both found through ``[tool.ctune]``. Real nvcc, ~10 s."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.nvcc

ROOT = Path(__file__).parents[2]


def _check(cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTUNE_")}
    env["CTUNE_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [sys.executable, "-m", "ctune", "check", "--no-gpu"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_check_of_the_committed_registry_is_quiet_and_the_same_from_a_subfolder(
    tmp_path: Path,
) -> None:
    artifacts = len(list((ROOT / "registry").glob("*/*/*.json")))
    assert artifacts > 15  # a listing of every artifact would not fit the line budget
    at_root = _check(ROOT, tmp_path / "cache")
    assert at_root.returncode == 0, at_root.stdout + at_root.stderr
    lines = at_root.stdout.splitlines()
    assert 1 <= len(lines) <= 15, at_root.stdout
    assert lines[-1].startswith(f"{artifacts} artifacts: 0 stale, "), lines[-1]
    assert "checked with nvcc " in lines[-1] and "no GPU: " in lines[-1]
    in_kernels = _check(ROOT / "kernels", tmp_path / "cache")
    assert in_kernels.returncode == 0, in_kernels.stdout + in_kernels.stderr
    assert in_kernels.stdout == at_root.stdout
