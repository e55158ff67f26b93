"""ctune.tune with the real nvcc (a Kernel Tuner-style kernel given as a string), the GPU
replaced by the stand-in measurer: the written spec builds and its args fit the kernel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ctune
from ctune.errors import SpecError
from ctune.testing.standins import StandInMeasurer

pytestmark = pytest.mark.nvcc

KERNEL = (Path(__file__).parents[1] / "data" / "kernels" / "api_scale.cu").read_text()


def scale(xp, inputs, dims):
    return {"y": 2.0 * inputs["x"]}


def test_tune_compiles_a_template_kernel_given_as_text(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    n = 4096
    x = np.ones(n, dtype=np.float32)
    out = ctune.tune(
        "scale<float>",
        KERNEL,
        n,
        [np.zeros_like(x), x, np.float32(2.0), np.int32(n)],
        {"block_size_x": [64, 128, 256, 512]},
        reference=scale,
        flags=["ptxas_opt"],
        budget=4,
        confirm_processes=0,
        workdir=tmp_path / "w",
        measurer=StandInMeasurer(samples=20, wrong_every=None, fault_corner=None),
    )
    assert len(out.results) == 4 and all(r["outcome"] == "ok" for r in out.results)
    builds = list((tmp_path / ".ctune" / "builds").glob("*/params.json"))
    assert builds and '"symbol": "_Z5scaleIfEvPT_PKS0_S0_i"' in builds[0].read_text()


def test_arguments_that_do_not_fit_the_kernel_are_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    x = np.ones(64, dtype=np.float32)
    with pytest.raises(SpecError, match=r"args\.alpha: float64 is 8 B, but parameter 3"):
        ctune.tune(
            "scale<float>",
            KERNEL,
            64,
            [np.zeros_like(x), x, np.float64(2.0), np.int32(64)],
            {"block_size_x": [64]},
            reference=scale,
            budget=2,
            confirm_processes=0,
            workdir=tmp_path / "w",
            measurer=StandInMeasurer(samples=20),
        )
