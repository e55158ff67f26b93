"""Baseline strategies: uniform random search and exhaustive enumeration.

They exist to be beaten (the GA's sample efficiency is measured against
random search at the same budget, ``bench/ga_sample_efficiency.py``) and
for small spaces, where trying everything is the honest answer. Not named
``random.py``, which would read as the standard-library module.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from ctune.records import Candidate, GeneValue
from ctune.search.strategy import BaseStrategy, OptionTable, StrategyContext, check_at_least

_SAMPLE_ROUNDS = 4


def unseen_uniform(strategy: BaseStrategy, m: int, taken: set[str]) -> list[Candidate]:
    """Up to ``m`` valid candidates drawn uniformly that ``strategy`` has not seen and that
    are not in ``taken`` (rejection sampling; a scan of what is left once that stalls).
    ``taken`` gains their keys; marking them asked is the caller's."""
    out: list[Candidate] = []
    dims = strategy.context.dims
    for _ in range(_SAMPLE_ROUNDS):
        if len(out) >= m:
            break
        drafts = strategy.space.sample(strategy.rng, 2 * m + 8, dims)
        out += strategy.unseen(drafts, m - len(out), taken)
    if len(out) < m:
        # nearly exhausted: rejection sampling stalls, so scan for what is left
        left = [
            v
            for v in strategy.space.iter_valid(dims)
            if not strategy.seen(strategy.candidate(v).key())
        ]
        strategy.rng.shuffle(left)
        out += strategy.unseen(left, m - len(out), taken)
    return out


class RandomStrategy(BaseStrategy):
    """Distinct valid candidates drawn uniformly (rejection sampling), never repeated."""

    name: ClassVar[str] = "random"
    OPTIONS: ClassVar[OptionTable] = {
        "batch_size": ("candidates proposed per generation", 16),
    }

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(context, options)
        check_at_least(self.name, self.options, "batch_size", 1)

    def ask(self, n: int) -> list[Candidate]:
        out = unseen_uniform(self, min(n, int(self.options["batch_size"])), set())
        self.asked.update(c.key() for c in out)
        return out


class ExhaustiveStrategy(BaseStrategy):
    """Every valid candidate once, in ``Space.iter_valid`` order (deterministic).

    Generations of 4: the pruning threshold is fixed per generation (``pruning.py``), and
    nothing here waits on one, since the next candidates are compiled ahead
    (:meth:`upcoming`). On the tiled matmul's recorded ground truth, 36 structures measured
    16 at a time leave 18 candidates unpruned, 4 at a time 10 (132 structures: 24, 23)."""

    name: ClassVar[str] = "exhaustive"
    OPTIONS: ClassVar[OptionTable] = {
        "batch_size": ("candidates proposed per generation", 4),
    }

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(context, options)
        check_at_least(self.name, self.options, "batch_size", 1)
        self._it: Iterator[dict[str, GeneValue]] | None = None
        self._ahead: list[dict[str, GeneValue]] = []  # read from the iterator, not asked yet

    def _next(self) -> dict[str, GeneValue] | None:
        if self._ahead:
            return self._ahead.pop(0)
        if self._it is None:
            self._it = self.space.iter_valid(self.context.dims)
        return next(self._it, None)

    def ask(self, n: int) -> list[Candidate]:
        m = min(n, int(self.options["batch_size"]))
        out: list[Candidate] = []
        while len(out) < m:
            values = self._next()
            if values is None:
                break
            cand = self.candidate(values)
            if not self.seen(cand.key()):
                out.append(cand)
                self.asked.add(cand.key())
        return out

    def upcoming(self, n: int) -> list[Candidate]:
        """The next ``n`` candidates :meth:`ask` will propose, without asking them: what it
        proposes never depends on results, so the driver compiles them while this generation
        is measured (no compile wait at a generation's start)."""
        if self._it is None:
            self._it = self.space.iter_valid(self.context.dims)
        out: list[Candidate] = []
        i = 0
        while len(out) < n:
            if i == len(self._ahead):
                values = next(self._it, None)
                if values is None:
                    break
                self._ahead.append(values)
            cand = self.candidate(self._ahead[i])
            i += 1
            if not self.seen(cand.key()):
                out.append(cand)
        return out


__all__ = ["ExhaustiveStrategy", "RandomStrategy", "unseen_uniform"]
