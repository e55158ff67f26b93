"""Kernel Tuner's ``verify=`` on the real GPU: ctune.tune copies the function into the spec
folder (the spec key ``verify``), and the measuring worker lets it decide correctness in
place of the tolerance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ctune
from ctune.errors import UserError

pytestmark = pytest.mark.gpu

KERNEL = (Path(__file__).parents[1] / "data" / "kernels" / "api_scale.cu").read_text()
N = 1 << 16


def off_by_a_little(xp, inputs, dims):
    """2x plus 0.01: the kernel's 2x misses it by more than the tolerance the call gives."""
    return {"y": 2.0 * inputs["x"] + 0.01}


def within_a_tenth(expected, got, atol=None):
    return bool(np.allclose(expected["y"], got["y"], rtol=0.0, atol=0.1))


def never(expected, got, atol=None):
    return False


def _tune(tmp_path: Path, name: str, verify):
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    return ctune.tune(
        "scale<float>",
        KERNEL,
        N,
        [np.zeros_like(x), x, np.float32(2.0), np.int32(N)],
        {"block_size_x": [128, 256]},
        reference=off_by_a_little,
        verify=verify,
        tolerance=(1e-6, 1e-6),
        budget=2,
        confirm_processes=0,
        workdir=tmp_path / name,
    )


def test_verify_decides_in_place_of_the_tolerance(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = _tune(tmp_path, "loose", within_a_tenth)
    assert (out.spec.parent / "verify.py").is_file()
    assert out.results and all(r["outcome"] == "ok" for r in out.results), out.results


def test_verify_false_fails_the_baseline_naming_the_function(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as caught:
        _tune(tmp_path, "never", never)
    text = str(caught.value)
    assert "baseline" in text and "wrong_result" in text, text
    assert "verify verify.py:never returned False on check 1" in text, text
