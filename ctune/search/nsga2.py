"""NSGA-II (Deb et al. 2002) for 2-3 objectives, with DEAP doing the sorting.

DEAP is confined to this module and ``ga.py``, and used without its global
``creator`` registry (``creator.create`` is global state that leaks across
tests and runs): the Fitness class is made per strategy instance. Only
DEAP's deterministic parts are used (``sortNondominated``,
``assignCrowdingDist``, ``selNSGA2``); everything random goes through the
strategy's own seeded RNG.

Constraint-domination (Deb 2000): feasible trials are ranked by NSGA-II
among themselves; infeasible and failed ones come after all of them,
ordered by total violation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from deap import base, tools
from deap.tools import emo

from ctune.records import Trial
from ctune.search.evolution import NSGA2_OPTIONS, EvolutionStrategy
from ctune.search.individual import Individual
from ctune.search.strategy import (
    OptionTable,
    StrategyContext,
    infeasible_order,
    min_form,
    total_violation,
)


class Nsga2Strategy(EvolutionStrategy):
    """Multi-objective search: NSGA-II survivors, binary tournaments on (rank, crowding)."""

    name: ClassVar[str] = "nsga2"
    OPTIONS: ClassVar[OptionTable] = NSGA2_OPTIONS
    MIN_POPULATION: ClassVar[int] = 4

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(context, options)
        weights = (-1.0,) * len(context.directions)
        self._fitness_cls = type("Nsga2Fitness", (base.Fitness,), {"weights": weights})
        self._rank: dict[str, tuple[int, float, float]] = {}

    def _individual(self, trial: Trial) -> Individual:
        values = min_form(trial, self.context.directions)
        assert values is not None
        codes = list(self.space.encode(trial.candidate.as_dict()))
        return Individual(codes, self._fitness_cls(values), trial)

    def select(self, pool: list[Trial], k: int) -> list[Trial]:
        feasible = [t for t in pool if min_form(t, self.context.directions) is not None]
        rest = infeasible_order(t for t in pool if min_form(t, self.context.directions) is None)
        if len(feasible) > k:
            chosen = [
                ind.trial for ind in tools.selNSGA2([self._individual(t) for t in feasible], k)
            ]
        else:
            chosen = feasible + rest[: k - len(feasible)]
        self._rank_population(chosen)
        return chosen

    def _rank_population(self, population: list[Trial]) -> None:
        """(infeasible?, rank or violation, -crowding) per key, for tournaments."""
        self._rank = {}
        feasible = [
            self._individual(t)
            for t in population
            if min_form(t, self.context.directions) is not None
        ]
        if feasible:
            for rank, front in enumerate(tools.sortNondominated(feasible, len(feasible))):
                emo.assignCrowdingDist(front)
                for ind in front:
                    self._rank[ind.trial.candidate.key()] = (0, rank, -ind.fitness.crowding_dist)
        for t in population:
            self._rank.setdefault(t.candidate.key(), (1, total_violation(t), 0.0))

    def pick_parent(self) -> Trial:
        a, b = self.rng.choice(self.population), self.rng.choice(self.population)
        ra, rb = self._rank[a.candidate.key()], self._rank[b.candidate.key()]
        return a if ra <= rb else b


__all__ = ["Nsga2Strategy"]
