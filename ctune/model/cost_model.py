"""What a candidate will cost and be worth, predicted before it is built.

Four scikit-learn random forests over the same feature rows (``features.py``): the
measured value (on the scale the policy compares: log of the value over the baseline's,
smaller better), compile seconds, whether the build fails, and spill bytes. Random
forests because they need no tuning on a few dozen trials, take mixed gene types, and
give an uncertainty from their own trees: the value's interval is conformal, from each
training trial's out-of-bag error scaled by the spread of the trees that did not see it
(jackknife+-after-bootstrap, normalised), so the share of new points under the lower
bound is about ``alpha`` without a held-out set, and the bound is -inf (nothing can be
ruled out) while too few trials are out of bag. Training is deterministic: a fixed
``random_state``, one thread, the examples in the order given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: the lower bound's miss rate over the space; the candidates that beat a good leader are a
#: few percent of it, so it must be smaller than that (bench/results/cost_model.json)
DEFAULT_ALPHA = 0.02
#: trees of the value model (the others have half as many: they only inform the journal)
DEFAULT_TREES = 100


def unavailable() -> str | None:
    """Why the model cannot run here (scikit-learn missing), or None when it can."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return "scikit-learn is not installed (pip install 'ctune[model]')"
    return None


@dataclass(frozen=True)
class Example:
    """One trial as the model learns from it: its feature row and what was observed
    (None where the trial did not say: not built, not measured, a cache hit's seconds)."""

    row: tuple[float, ...]
    target: float | None = None
    compile_s: float | None = None
    failed: bool | None = None
    spills_bytes: float | None = None


@dataclass(frozen=True)
class Prediction:
    """One candidate's predicted target (``low`` <= ``mid`` <= ``high`` at coverage
    1 - alpha each side; +-inf where the data cannot bound it), compile seconds, build
    failure probability and spill bytes (None: nothing to learn from yet)."""

    low: float
    mid: float
    high: float
    compile_s: float | None = None
    p_fail: float | None = None
    spills_bytes: float | None = None

    def to_json(self) -> dict[str, Any]:
        def num(v: float | None) -> float | str | None:
            if v is None or math.isfinite(v):
                return None if v is None else round(v, 6)
            return "inf" if v > 0 else "-inf"

        return {
            "low": num(self.low),
            "mid": num(self.mid),
            "high": num(self.high),
            "compile_s": num(self.compile_s),
            "p_fail": num(self.p_fail),
            "spills_bytes": num(self.spills_bytes),
        }


def trials_for_a_bound(alpha: float) -> int:
    """The fewest scored trials whose ``alpha`` quantile is finite, floor(alpha (n + 1)) >= 1:
    below it the lower bound is -inf and nothing can be ruled out."""
    return math.ceil(1 / alpha) - 1


def _order_statistic(scores: np.ndarray, rank: int) -> float:
    """The ``rank``-th smallest score (1-based); -inf below 1, +inf past the end."""
    if rank < 1:
        return -math.inf
    if rank > len(scores):
        return math.inf
    import numpy as np

    return float(np.sort(scores, kind="stable")[rank - 1])


class _ConformalForest:
    """A regression forest whose interval is calibrated on its out-of-bag errors."""

    def __init__(self, seed: int, alpha: float, trees: int) -> None:
        self.seed, self.alpha, self.trees = seed, alpha, trees
        self.forest: Any = None
        self.low_q, self.high_q, self.floor = -math.inf, math.inf, 1e-9

    def fit(self, x: np.ndarray, y: np.ndarray) -> _ConformalForest:
        import numpy as np
        from sklearn.ensemble import RandomForestRegressor

        self.forest = RandomForestRegressor(
            n_estimators=self.trees,
            max_features=0.5,
            min_samples_leaf=1,
            random_state=self.seed,
            n_jobs=1,
        ).fit(x, y)
        per_tree = self._per_tree(x)
        out_of_bag = np.ones_like(per_tree, dtype=bool)
        for t, rows in enumerate(self.forest.estimators_samples_):
            out_of_bag[t, rows] = False
        counts = out_of_bag.sum(axis=0)
        scored = counts >= 2
        self.floor = 0.05 * float(np.std(y)) + 1e-9  # a spread of 0 must not mean certainty
        if not scored.any():
            return self
        held = np.where(out_of_bag, per_tree, 0.0)
        mean = held.sum(axis=0)[scored] / counts[scored]
        square = (held**2).sum(axis=0)[scored] / counts[scored]
        spread = np.sqrt(np.maximum(square - mean**2, 0.0)) + self.floor
        scores = (y[scored] - mean) / spread
        n = len(scores)
        self.low_q = _order_statistic(scores, math.floor(self.alpha * (n + 1)))
        self.high_q = _order_statistic(scores, math.ceil((1 - self.alpha) * (n + 1)))
        return self

    def _per_tree(self, x: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.stack([tree.predict(x) for tree in self.forest.estimators_])

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        import numpy as np

        per_tree = self._per_tree(x)
        mid = per_tree.mean(axis=0)
        spread = per_tree.std(axis=0) + self.floor
        with np.errstate(invalid="ignore", over="ignore"):  # an unbounded side is +-inf
            return mid + self.low_q * spread, mid, mid + self.high_q * spread


class CostModel:
    """The four predictions, fitted on examples in a given order with a given seed."""

    def __init__(
        self, seed: int = 0, alpha: float = DEFAULT_ALPHA, trees: int = DEFAULT_TREES
    ) -> None:
        if not 0 < alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
        self.seed, self.alpha, self.trees = seed, alpha, trees
        self.value: _ConformalForest | None = None
        self.compile: Any = None
        self.failure: Any = None  # a classifier, or the one rate every example had
        self.spills: Any = None
        self.trained_on = 0  # examples with a measured target

    def fit(self, examples: Sequence[Example]) -> CostModel:
        import numpy as np
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        def forest(rows: list[tuple[float, ...]], y: list[float]) -> Any:
            if len(rows) < 2:
                return None
            return RandomForestRegressor(
                n_estimators=max(1, self.trees // 2), random_state=self.seed, n_jobs=1
            ).fit(np.array(rows), np.array(y))

        measured = [e for e in examples if e.target is not None and math.isfinite(e.target)]
        self.trained_on = len(measured)
        self.value = None
        if len(measured) >= 2:
            x = np.array([e.row for e in measured], dtype=float)
            y = np.array([e.target for e in measured], dtype=float)
            self.value = _ConformalForest(self.seed, self.alpha, self.trees).fit(x, y)
        timed = [e for e in examples if e.compile_s is not None and e.compile_s > 0]
        self.compile = forest([e.row for e in timed], [math.log(e.compile_s or 1) for e in timed])
        spilled = [e for e in examples if e.spills_bytes is not None]
        self.spills = forest(
            [e.row for e in spilled], [math.log1p(max(0.0, e.spills_bytes or 0)) for e in spilled]
        )
        built = [e for e in examples if e.failed is not None]
        labels = [bool(e.failed) for e in built]
        if len(set(labels)) == 2:
            self.failure = RandomForestClassifier(
                n_estimators=max(1, self.trees // 2), random_state=self.seed, n_jobs=1
            ).fit(np.array([e.row for e in built]), np.array(labels))
        else:
            self.failure = float(labels[0]) if labels else None
        return self

    def predict(self, rows: Sequence[Sequence[float]]) -> list[Prediction]:
        """One prediction per row, in order."""
        import numpy as np

        if not rows:
            return []
        x = np.array(rows, dtype=float)
        n = len(rows)
        if self.value is not None:
            low, mid, high = self.value.predict(x)
        else:
            low, mid, high = (np.full(n, v) for v in (-math.inf, math.nan, math.inf))
        compile_s = np.exp(self.compile.predict(x)) if self.compile is not None else None
        spills = np.expm1(self.spills.predict(x)) if self.spills is not None else None
        if isinstance(self.failure, float):
            p_fail: Any = np.full(n, self.failure)
        elif self.failure is not None:
            p_fail = self.failure.predict_proba(x)[:, list(self.failure.classes_).index(True)]
        else:
            p_fail = None
        return [
            Prediction(
                float(low[i]),
                float(mid[i]),
                float(high[i]),
                None if compile_s is None else float(compile_s[i]),
                None if p_fail is None else float(p_fail[i]),
                None if spills is None else float(spills[i]),
            )
            for i in range(n)
        ]


__all__ = [
    "DEFAULT_ALPHA",
    "CostModel",
    "Example",
    "Prediction",
    "trials_for_a_bound",
    "unavailable",
]
