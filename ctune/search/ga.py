"""A single-objective genetic algorithm, with DEAP ranking the survivors.

Same breeding as NSGA-II (``evolution.py``); survivors are the best by a
lexicographic fitness ``(total violation, value to minimise)``, which is
constraint-domination for one objective: any feasible trial beats any
infeasible one, infeasible ones compare by violation. DEAP's ``selBest``
does the (deterministic) sort; parents come from tournaments drawn with the
strategy's own RNG, never the global ``random`` module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from deap import base, tools

from ctune.errors import UserError
from ctune.records import Trial
from ctune.search.evolution import GA_OPTIONS, EvolutionStrategy
from ctune.search.individual import Individual
from ctune.search.strategy import (
    OptionTable,
    StrategyContext,
    check_one_objective,
    min_form,
    total_violation,
)


class GaStrategy(EvolutionStrategy):
    """Elitist (mu + lambda) GA for one objective (a term or a weighted sum)."""

    name: ClassVar[str] = "ga"
    OPTIONS: ClassVar[OptionTable] = GA_OPTIONS

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        check_one_objective(
            "ga", context.directions, "use --strategy nsga2 or combine them into a weighted sum"
        )
        super().__init__(context, options)
        if int(self.options["tournament_size"]) < 1:
            raise UserError("option tournament_size for ga: must be an integer >= 1")
        self._fitness_cls = type("GaFitness", (base.Fitness,), {"weights": (-1.0, -1.0)})

    def fitness_key(self, trial: Trial) -> tuple[float, float]:
        """Smaller is better: (violation, value) with 0 violation for feasible trials."""
        values = min_form(trial, self.context.directions)
        if values is None:
            return (total_violation(trial), 0.0)
        return (0.0, values[0])

    def select(self, pool: list[Trial], k: int) -> list[Trial]:
        inds = [
            Individual(
                list(self.space.encode(t.candidate.as_dict())),
                self._fitness_cls(self.fitness_key(t)),
                t,
            )
            for t in pool
        ]
        return [ind.trial for ind in tools.selBest(inds, k)]

    def pick_parent(self) -> Trial:
        size = int(self.options["tournament_size"])
        entrants = [self.rng.choice(self.population) for _ in range(size)]
        return min(entrants, key=self.fitness_key)


__all__ = ["GaStrategy"]
