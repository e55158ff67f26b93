"""The cost model: it learns a known function, its bound misses at about its rate, it is
deterministic, and a candidate's features are what its spec says."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ctune.model import MISSING, CostModel, Example, FeatureMap, sm_number, unavailable
from ctune.testing.standins import standin_spec

needs_sklearn = pytest.mark.skipif(
    unavailable() is not None, reason="the cost model needs the model extra (ctune[model])"
)


def _landscape(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A known function of 4 inputs (one irrelevant), with a little noise."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 4))
    y = np.sin(x[:, 0]) + 0.5 * x[:, 1] ** 2 - 0.3 * x[:, 2] + rng.normal(0, 0.05, n)
    return x, y


def _examples(x: np.ndarray, y: np.ndarray) -> list[Example]:
    return [Example(tuple(r), float(t)) for r, t in zip(x, y, strict=True)]


@needs_sklearn
def test_it_learns_a_known_function() -> None:
    x, y = _landscape(400, 0)
    model = CostModel(seed=0).fit(_examples(x[:300], y[:300]))
    mid = np.array([p.mid for p in model.predict(x[300:].tolist())])
    error = np.sqrt(np.mean((mid - y[300:]) ** 2))
    assert error < 0.35 * np.std(y[300:])  # far better than the mean
    assert model.trained_on == 300


@needs_sklearn
@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_the_bounds_cover_held_out_points_at_about_their_rate(alpha: float) -> None:
    below, above = [], []
    for seed in range(3):
        x, y = _landscape(700, seed)
        model = CostModel(seed=seed, alpha=alpha).fit(_examples(x[:300], y[:300]))
        got = model.predict(x[300:].tolist())
        below.append(np.mean(y[300:] < np.array([p.low for p in got])))
        above.append(np.mean(y[300:] > np.array([p.high for p in got])))
    assert alpha / 3 <= np.mean(below) <= 2 * alpha
    assert alpha / 3 <= np.mean(above) <= 2 * alpha


@needs_sklearn
def test_too_few_examples_bound_nothing() -> None:
    x, y = _landscape(12, 1)
    model = CostModel(seed=0, alpha=0.02).fit(_examples(x, y))
    (got,) = model.predict([x[0].tolist()])
    assert got.low == -math.inf and got.high == math.inf and math.isfinite(got.mid)
    empty = CostModel().fit([])
    (none,) = empty.predict([[0.0, 0.0, 0.0, 0.0]])
    assert none.low == -math.inf and none.compile_s is None and none.p_fail is None


@needs_sklearn
def test_the_same_examples_and_seed_give_the_same_model() -> None:
    x, y = _landscape(120, 2)
    examples = _examples(x, y)
    first = CostModel(seed=7).fit(examples).predict(x[:20].tolist())
    again = CostModel(seed=7).fit(examples).predict(x[:20].tolist())
    other = CostModel(seed=8).fit(examples).predict(x[:20].tolist())
    assert first == again
    assert first != other


@needs_sklearn
def test_compile_seconds_failures_and_spills_are_learned() -> None:
    x, _ = _landscape(200, 3)
    examples = [
        Example(
            tuple(r),
            None,
            compile_s=1.0 + 10.0 * (r[0] > 0),
            failed=bool(r[1] > 1.0),
            spills_bytes=64.0 if r[2] > 0 else 0.0,
        )
        for r in x
    ]
    model = CostModel(seed=0).fit(examples)
    slow, fast = model.predict([[1.5, 0.0, -1.5, 0.0], [-1.5, 1.8, 1.5, 0.0]])
    assert slow.compile_s is not None and fast.compile_s is not None
    assert slow.compile_s > 5 > fast.compile_s
    assert slow.p_fail is not None and fast.p_fail is not None
    assert slow.p_fail < 0.3 < 0.7 < fast.p_fail
    assert slow.spills_bytes is not None and fast.spills_bytes is not None
    assert slow.spills_bytes < 16 < 48 < fast.spills_bytes
    assert slow.low == -math.inf  # no measured value: nothing is bounded


def test_a_bad_alpha_is_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        CostModel(alpha=0.6)


@needs_sklearn
def test_available_with_scikit_learn() -> None:
    assert unavailable() is None


def test_features_follow_the_spec(tmp_path: Path) -> None:
    spec = standin_spec(tmp_path)
    features = FeatureMap(spec)
    values = spec.space.default_values()
    row = features.row(values, spec.problem().dims, 90.0)
    assert len(row) == len(features.names)
    genes = spec.space.genes
    for gene, got in zip(genes, row, strict=False):
        value = values[gene.name]
        if isinstance(value, str):
            assert got == gene.values.index(value)
        else:
            assert got == float(value)
    assert row[-1] == 90.0
    missing = features.row({}, {}, MISSING)
    assert missing[: len(genes)] == [MISSING] * len(genes)


def test_sm_numbers() -> None:
    assert sm_number("NVIDIA H200 (sm_90)") == 90.0
    assert sm_number("sm_100a") == 100.0
    assert sm_number("compile-only") == MISSING
    assert sm_number(None) == MISSING
