"""Without a GPU: one-line ToolchainError from the real worker and from ``ctune bench``;
and the measurement modules import nothing heavy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
DATA = ROOT / "tests" / "data" / "kernels"

has_gpu = Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()
no_gpu_only = pytest.mark.skipif(has_gpu, reason="this machine has a GPU: the no-GPU path is moot")


def test_measure_modules_import_light():
    modules = [
        "ctune.measure",
        "ctune.measure.plan",
        "ctune.evidence.stats",
        "ctune.measure.arrays",
        "ctune.measure.correctness",
        "ctune.measure.device",
        "ctune.measure.launch",
        "ctune.measure.cupy_events",
        "ctune.measure.nvml_energy",
        "ctune.measure.worker",
        "ctune.measure.session",
        "ctune.cli.bench",
        "ctune.cli.render_bench",
    ]
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "heavy = [m for m in ('cupy', 'pynvml') if m in sys.modules]\n"
        + "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@no_gpu_only
def test_real_worker_without_gpu_raises_toolchain_error():
    from ctune.errors import ToolchainError
    from ctune.measure.session import WorkerMeasurer

    with (
        WorkerMeasurer() as measurer,
        pytest.raises(ToolchainError, match="cannot measure on GPU 0"),
    ):
        measurer.device_info()


@no_gpu_only
@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to build the candidate")
def test_bench_without_gpu_is_one_line_exit_3(tmp_path):
    env = {**os.environ, "CTUNE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("CTUNE_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ctune", "bench", str(DATA / "saxpy.cu")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:")
    # the same words as `ctune search` and `ctune gate`, not the CUDA driver's
    assert "ctune bench needs a CUDA GPU" in lines[0] and "nothing was compiled" in lines[0]
    assert not (tmp_path / "cache" / "builds").exists()
