"""ctune.tune on the real GPU: a Kernel Tuner-style kernel given as text, with C++ linkage
and a template entry, searched and measured as written (no extern "C")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ctune

pytestmark = pytest.mark.gpu

KERNEL = (Path(__file__).parents[1] / "data" / "kernels" / "api_scale.cu").read_text()


def scale(xp, inputs, dims):
    return {"y": 2.0 * inputs["x"]}


def test_tune_measures_a_template_kernel_on_the_gpu(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    n = 1 << 20
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    out = ctune.tune(
        "scale<float>",
        KERNEL,
        n,
        [np.zeros_like(x), x, np.float32(2.0), np.int32(n)],
        {"block_size_x": [64, 128, 256, 512, 1024]},
        reference=scale,
        objective="p50",
        budget=5,
        confirm_processes=0,
        workdir=tmp_path / "w",
    )
    ok = [r for r in out.results if r["outcome"] == "ok"]
    assert len(ok) >= 3 and len(ok) == len(out.results), out.results
    assert all(r["p50"] > 0 for r in ok)
    assert out.best is not None and out.best["block_size_x"] in (64, 128, 256, 512, 1024)
    print({r["block_size_x"]: round(r["p50"] * 1e3, 2) for r in ok}, "us; best", out.best)
