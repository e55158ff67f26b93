"""Baseline strategies: uniform random search and exhaustive enumeration.

They exist to be beaten (the GA's sample efficiency is measured against
random search at the same budget, ``bench/ga_sample_efficiency.py``) and
for small spaces, where trying everything is the honest answer. Not named
``random.py``, which would read as the standard-library module.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from ctune.errors import UserError
from ctune.records import Candidate, GeneValue
from ctune.search.strategy import BaseStrategy, OptionTable, StrategyContext, check_at_least
from ctune.spec.space.params import BuildGroup

_SAMPLE_ROUNDS = 4
#: the largest space (product of its genes' values) a shuffled exhaustive order walks and
#: holds: ~16 us a candidate on one core, so under a second at the first ask, which comes
#: while the worker starts; a larger one keeps product order (nothing is walked or held)
SHUFFLE_CAP = 50_000
#: the exhaustive strategy's orders (its ``order`` option)
ORDERS = ("shuffled", "product")


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

    def first_asks_ignore_values(self) -> bool:
        return True  # uniform samples, whatever was measured

    def ask(self, n: int) -> list[Candidate]:
        out = unseen_uniform(self, min(n, int(self.options["batch_size"])), set())
        self.asked.update(c.key() for c in out)
        return out


class ExhaustiveStrategy(BaseStrategy):
    """Every valid candidate once: builds in a random order of the search's seed, each
    build's candidates together, in product order (``order=product``: ``Space.iter_valid``'s).

    A shuffled order finds a good leader early, so pruning (its threshold is the leader's
    value, fixed per generation, ``pruning.py``) stops more of the rest, and a search cut
    short by time or Ctrl-C is a uniform sample of the space, not its first corner. On the
    tiled matmul's recorded ground truth, 36 structures leave 10 candidates unpruned in
    product order, a median of 6 over seeds 0-19 shuffled (132 structures: 23, 9.5;
    ``tests/unit/search/test_exhaustive_order.py`` replays the 36). A space of more than
    ``SHUFFLE_CAP`` combinations keeps product order: it is not walked and held first
    (searching it exhaustively does not finish anyway).

    Generations of 4: nothing here waits on one, since the next candidates are compiled
    ahead (:meth:`upcoming`), and the threshold is refreshed more often (product order, 36
    structures: 16 at a time leave 18 unpruned, 4 at a time 10)."""

    name: ClassVar[str] = "exhaustive"
    OPTIONS: ClassVar[OptionTable] = {
        "batch_size": ("candidates proposed per generation", 4),
        "order": (
            "shuffled: builds in a random order of the search's seed; product: "
            "Space.iter_valid's order, Kernel Tuner's brute force order",
            "shuffled",
        ),
    }

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(context, options)
        check_at_least(self.name, self.options, "batch_size", 1)
        order = self.options["order"]
        if order not in ORDERS:
            raise UserError(
                f"option order={order!r} for {self.name}: expected one of {', '.join(ORDERS)}"
            )
        self._it: Iterator[dict[str, GeneValue]] | None = None
        self._ahead: list[dict[str, GeneValue]] = []  # read from the iterator, not asked yet

    def _order(self) -> Iterator[dict[str, GeneValue]]:
        """Every valid candidate once, in the order this search visits them."""
        space, dims = self.space, self.context.dims
        if self.options["order"] == "product" or space.cardinality() > SHUFFLE_CAP:
            return space.iter_valid(dims)
        builds: dict[BuildGroup, list[dict[str, GeneValue]]] = {}
        for values in space.iter_valid(dims):
            builds.setdefault(space.build_group(values.items()), []).append(values)
        order = list(builds.values())
        # not self.rng, which load_state restores: a resumed search draws the same order
        random.Random(self.context.seed).shuffle(order)
        return (values for build in order for values in build)

    def _next(self) -> dict[str, GeneValue] | None:
        if self._ahead:
            return self._ahead.pop(0)
        if self._it is None:
            self._it = self._order()
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

    def first_asks_ignore_values(self) -> bool:
        return True  # the same order whatever was measured

    def upcoming(self, n: int) -> list[Candidate]:
        """The next ``n`` candidates :meth:`ask` will propose, without asking them: what it
        proposes never depends on results, so the driver compiles them while this generation
        is measured (no compile wait at a generation's start)."""
        if self._it is None:
            self._it = self._order()
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


__all__ = ["ORDERS", "SHUFFLE_CAP", "ExhaustiveStrategy", "RandomStrategy", "unseen_uniform"]
