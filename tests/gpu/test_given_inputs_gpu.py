"""Issue 46 on the GPU: a kernel that reads __constant__ taps, a float2 input and a struct
input given by a Python function is measured correct as written (with zeros for taps, as
an unfilled __constant__ holds, the check would fail: the reference uses the given taps),
and a constant the module lacks is one line naming it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from ctune.errors import CtuneError
from ctune.measure import SamplingPlan
from ctune.measure.session import WorkerMeasurer
from ctune.records import Outcome

pytestmark = pytest.mark.gpu

GIVEN = Path(__file__).parents[1] / "data" / "kernels" / "given"
PLAN = SamplingPlan(warmup_ms=1, rep_ms=1, min_samples=10, max_samples=50, quantile=0.5)


@pytest.fixture
def fir(tmp_path: Path) -> Path:
    for item in GIVEN.iterdir():
        shutil.copy(item, tmp_path / item.name)
    return tmp_path / "fir_points.yaml"


def _measure(path: Path, load, builder, **genes):
    spec = load(path)
    problem = spec.problem()
    with WorkerMeasurer() as measurer:
        return measurer.measure(spec, *builder(spec, problem, **genes), problem, PLAN)


def test_constants_vectors_and_structs_measure_correct(fir: Path, load, builder) -> None:
    for block in (64, 256):
        m = _measure(fir, load, builder, BLOCK=block)
        assert m.outcome is Outcome.OK, m.error
        assert m.summary is not None and m.rel_l2_error is not None


def test_a_constant_the_module_lacks_is_one_line(fir: Path, load, builder) -> None:
    data = yaml.safe_load(fir.read_text())
    data["args"][-1]["name"] = "taps"
    fir.write_text(yaml.safe_dump(data, sort_keys=False))
    np.save(fir.parent / "taps.npy", np.ones(16, dtype=np.float32))
    with pytest.raises(CtuneError) as caught:
        _measure(fir, load, builder)
    assert "no __constant__ symbol 'taps'" in str(caught.value)
    assert "\n" not in str(caught.value)
