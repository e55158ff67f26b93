"""The evolutionary loop shared by the GA and NSGA-II, without DEAP.

(mu + lambda), elitist: each ``tell`` merges the told trials (fillers included) into the
parents and keeps the best ``population_size``, "best" being the subclass's (NSGA-II rank
and crowding, or one fitness). ``ask`` seeds, then breeds with tournament, uniform
crossover, type-aware mutation and ``Space.repair``, so no budget is spent on an invalid
candidate. The population is rebuilt from told trials only, so replaying a journal
restores it (resume).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ctune.records import Candidate, GeneValue, Trial
from ctune.search.operators import crossover_uniform, force_change, mutate
from ctune.search.strategy import (
    BaseStrategy,
    OptionTable,
    StrategyContext,
    check_at_least,
    check_probability,
    seed_values,
)

NOVELTY_TRIES = 12


#: options of every evolutionary strategy (tables live here, DEAP-free, so that
#: ``--option`` is checked without importing DEAP)
EVOLUTION_OPTIONS: OptionTable = {
    "population_size": ("parents kept, and offspring bred, per generation", 16),
    "crossover_prob": ("probability that two parents are recombined (uniform crossover)", 0.9),
    "mutation_prob": ("per-gene mutation probability; 0 means 1 / number of genes", 0.0),
    "step_prob": ("share of numeric-gene mutations that are a +-1 step (else uniform)", 0.7),
}
NSGA2_OPTIONS: OptionTable = {
    **EVOLUTION_OPTIONS,
    "population_size": ("parents kept, and offspring bred, per generation", 24),
}
GA_OPTIONS: OptionTable = {
    **EVOLUTION_OPTIONS,
    "tournament_size": ("parents are the best of this many random members", 3),
}


class EvolutionStrategy(BaseStrategy):
    """Population bookkeeping and breeding; subclasses choose survivors and parents."""

    OPTIONS: ClassVar[OptionTable] = EVOLUTION_OPTIONS
    MIN_POPULATION: ClassVar[int] = 2

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(context, options)
        check_at_least(self.name, self.options, "population_size", self.MIN_POPULATION)
        check_probability(self.name, self.options, "crossover_prob", "mutation_prob", "step_prob")
        self.population_size: int = self.options["population_size"]
        genes = max(1, len(self.space.genes))
        self.gene_prob: float = self.options["mutation_prob"] or 1.0 / genes
        self.population: list[Trial] = []
        self._seeds: list[dict[str, GeneValue]] | None = None

    # --- subclass hooks ---------------------------------------------------------
    def select(self, pool: list[Trial], k: int) -> list[Trial]:
        """The k survivors of ``pool`` (deterministic for a given pool order)."""
        raise NotImplementedError

    def pick_parent(self) -> Trial:
        """One parent from ``self.population`` (uses ``self.rng``)."""
        raise NotImplementedError

    # --- protocol -------------------------------------------------------------------
    def ask(self, n: int) -> list[Candidate]:
        if n <= 0:
            return []
        batch: list[Candidate] = []
        missing = self.population_size - len(self.told)
        if missing > 0:
            batch = self._initial(min(n, missing))
        if not batch and self.population:
            batch = self._offspring(min(n, self.population_size))
        self.asked.update(c.key() for c in batch)
        return batch

    def first_asks_ignore_values(self) -> bool:
        """Its first population (seeds, then uniform samples) outlasts the baseline."""
        return self.population_size >= 2

    def tell(self, trials: Sequence[Trial]) -> None:
        super().tell(trials)
        pool = {t.candidate.key(): t for t in self.population}
        for trial in trials:
            pool.setdefault(trial.candidate.key(), trial)
        self.population = self.select(list(pool.values()), self.population_size)

    def state(self) -> dict[str, Any]:
        out = super().state()
        out["population"] = [t.candidate.key() for t in self.population]
        return out

    # --- breeding --------------------------------------------------------------------
    def _initial(self, m: int) -> list[Candidate]:
        dims = self.context.dims
        if self._seeds is None:
            self._seeds = seed_values(self.space, dims, self.rng)
        keys: set[str] = set()
        out = self.unseen(self._seeds, m, keys)
        if len(out) < m:
            drafts = self.space.sample(self.rng, 3 * (m - len(out)) + 8, dims)
            out += self.unseen(drafts, m - len(out), keys)
        return out

    def _offspring(self, m: int) -> list[Candidate]:
        out: list[Candidate] = []
        keys: set[str] = set()
        step = float(self.options["step_prob"])
        attempts = 0
        while len(out) < m and attempts < 20 * m:
            attempts += 1
            a = self.space.encode(self.pick_parent().candidate.as_dict())
            b = self.space.encode(self.pick_parent().candidate.as_dict())
            if self.rng.random() < self.options["crossover_prob"]:
                a, b = crossover_uniform(a, b, self.rng)  # type: ignore[assignment]
            for codes in (a, b):
                if len(out) >= m:
                    break
                cand = self._child(
                    mutate(codes, self.space, self.rng, self.gene_prob, step), keys, step
                )
                if cand is not None and cand.key() not in keys:
                    out.append(cand)
                    keys.add(cand.key())
        return out

    def _child(self, codes: list[int], batch: set[str], step: float) -> Candidate | None:
        dims = self.context.dims
        cand: Candidate | None = None
        for _ in range(NOVELTY_TRIES):
            values = self.space.repair(self.space.decode(codes), dims, self.rng)
            if values is None:
                return cand
            cand = self.candidate(values)
            key = cand.key()
            if not self.seen(key) and key not in batch:
                return cand
            codes = force_change(self.space.encode(values), self.space, self.rng, step)
        return cand  # still a duplicate: the driver answers it from its cache


__all__ = ["EVOLUTION_OPTIONS", "GA_OPTIONS", "NSGA2_OPTIONS", "EvolutionStrategy"]
