"""``ctune bench`` end to end with real nvcc and the numpy stand-in GPU: the report renders,
``--json`` parses, a wrong result exits 1. (Timing numbers here mean nothing.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
DATA = ROOT / "tests" / "data" / "kernels"

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to build the candidate"),
]


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{HERE / 'fakegpu'}{os.pathsep}{ROOT}",
        "CTUNE_CACHE_DIR": str(tmp_path / "cache"),
        "COLUMNS": "200",
    }
    env.pop("CTUNE_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "ctune", "bench", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


def test_bench_report(tmp_path):
    proc = bench(tmp_path, str(DATA / "saxpy.cu"), "--problem", "ragged", "--samples", "200")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    for text in ("outcome", "ok", "p50", "p99", "95% CI", "Fake H100", "rel_l2", "sampling"):
        assert text in proc.stdout, text


def test_bench_json_with_energy(tmp_path):
    proc = bench(
        tmp_path, str(DATA / "faults.cu"), "--set", "MODE=0", "--energy", "--json", "-n", "50"
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    data = json.loads(proc.stdout)
    m = data["measurement"]
    assert m["outcome"] == "ok" and len(m["samples_ms"]) == 50
    assert m["energy_j"] > 0 and m["energy_window_s"] >= 1.0
    assert data["plan"]["energy"] is True and data["build"]["outcome"] == "ok"


def test_bench_wrong_result_exits_1(tmp_path):
    proc = bench(tmp_path, str(DATA / "faults.cu"), "--set", "MODE=4", "-n", "20")
    assert proc.returncode == 1, proc.stderr + proc.stdout
    assert "wrong_result" in proc.stdout and "rel_l2" in proc.stdout


def _saxpy_with_vendor(tmp_path: Path) -> Path:
    from ctune.testing.spec_copies import copy_spec, with_key

    calls = (
        "def library(xp, arrays, dims, dtypes):\n"
        "    x, y = arrays['x'], arrays['y']\n"
        "    def call():\n"
        "        y[...] = 1.5 * x + y\n"
        "    return call\n"
    )
    names = ("saxpy.yaml", "saxpy_ref.py", "saxpy.cu")
    path = copy_spec(DATA, names, tmp_path / "spec", {"calls.py": calls})
    with_key(path, "vendor", {"python": "calls.py:library", "name": "the library"})
    return path.with_suffix(".cu")


def test_bench_times_the_vendor_call_beside_the_candidate(tmp_path):
    kernel = str(_saxpy_with_vendor(tmp_path))
    proc = bench(tmp_path, kernel, "--problem", "ragged", "-n", "100", "--vendor")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "vs the library" in proc.stdout and "x p50" in proc.stdout, proc.stdout
    proc = bench(tmp_path, kernel, "--problem", "ragged", "-n", "100", "--vendor", "--json")
    data = json.loads(proc.stdout)
    assert data["vendor"]["outcome"] == "ok" and len(data["vendor"]["samples_ms"]) == 100
    assert data["vendor"]["candidate_key"] != data["key"]


def test_bench_vendor_without_a_vendor_key_is_one_line(tmp_path):
    proc = bench(tmp_path, str(DATA / "saxpy.cu"), "--vendor")
    assert proc.returncode == 2, proc.stderr + proc.stdout
    err = proc.stderr.strip()
    assert "\n" not in err and "names no vendor call" in err and "Traceback" not in err
