"""A Parzen-estimator model of the good candidates: ctune's built-in model-based strategy.

The good builds of a kernel's space are a few needles, which a GA's uniform first
generation rarely hits; a model of which gene values the best trials share finds their
neighbourhood in a few dozen measurements. This is the univariate tree-structured Parzen
estimator (Bergstra et al.; Optuna's default sampler) over every gene as a categorical
choice, built in so that the default strategy needs no optional package. It is a pure
function of the told trials, so replaying a journal restores it; only the RNG state is
saved. Its parameters and replayed quality: docs/search.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ctune.errors import UserError
from ctune.records import Candidate, GeneValue, Trial
from ctune.search.baselines import unseen_uniform
from ctune.search.strategy import (
    BaseStrategy,
    OptionTable,
    StrategyContext,
    check_at_least,
    check_one_objective,
    min_form,
    seed_values,
)
from ctune.spec.space.params import Space

PARZEN_OPTIONS: OptionTable = {
    "startup_trials": ("seeds and uniform samples measured before the model proposes", 8),
    "batch": ("proposals per generation (fewer: the model learns more often)", 8),
    "gamma": ("share of the measured trials the model calls good", 0.15),
    "candidates": ("draws from the good density per proposal; the best by l/g is asked", 24),
}
#: weight of the uniform prior in each gene's density (Optuna's ``prior_weight``)
PRIOR_WEIGHT = 1.0

#: gene name -> probability of each of its values (in ``Gene.values`` order)
Density = dict[str, list[float]]


def density(space: Space, trials: Sequence[Trial]) -> Density:
    """Per gene, how often the trials chose each value, over a uniform prior of weight 1."""
    chosen = [trial.candidate.as_dict() for trial in trials]
    out: Density = {}
    for gene in space.genes:
        k = len(gene.values)
        weights = [PRIOR_WEIGHT / k] * k
        for values in chosen:
            weights[gene.index(values[gene.name])] += 1.0
        total = sum(weights)
        out[gene.name] = [w / total for w in weights]
    return out


def split_good_bad(
    trials: Sequence[Trial], directions: Sequence[str], gamma: float
) -> tuple[list[Trial], list[Trial]]:
    """The best ``gamma`` share of the feasible trials (at least one), and all the others."""
    feasible: list[tuple[float, int, Trial]] = []
    bad: list[Trial] = []
    for trial in trials:
        point = min_form(trial, directions)
        if point is None:
            bad.append(trial)
        else:
            feasible.append((point[0], trial.number, trial))
    feasible.sort(key=lambda item: (item[0], item[1]))
    n_good = max(1, math.ceil(gamma * len(feasible))) if feasible else 0
    good = [t for _, _, t in feasible[:n_good]]
    return good, bad + [t for _, _, t in feasible[n_good:]]


def log_ratio(space: Space, good: Density, bad: Density, values: Mapping[str, GeneValue]) -> float:
    """sum over genes of log(l / g): how much likelier the good trials make ``values``."""
    total = 0.0
    for gene in space.genes:
        i = gene.index(values[gene.name])
        total += math.log(good[gene.name][i]) - math.log(bad[gene.name][i])
    return total


class ParzenStrategy(BaseStrategy):
    """Seeds and uniform samples, then proposals from a model of the good trials."""

    name: ClassVar[str] = "parzen"
    OPTIONS: ClassVar[OptionTable] = PARZEN_OPTIONS

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        check_one_objective(self.name, context.directions)
        super().__init__(context, options)
        check_at_least(self.name, self.options, "startup_trials", 1)
        check_at_least(self.name, self.options, "batch", 1)
        check_at_least(self.name, self.options, "candidates", 1)
        gamma = self.options["gamma"]
        if not isinstance(gamma, (int, float)) or not 0.0 < float(gamma) < 1.0:
            raise UserError(f"option gamma={gamma} for parzen: must be within (0, 1)")
        self._seeds: list[dict[str, GeneValue]] | None = None

    def ask(self, n: int) -> list[Candidate]:
        m = min(n, int(self.options["batch"]))
        if m <= 0:
            return []
        startup = int(self.options["startup_trials"]) - len(self.told)
        batch = self._startup(min(m, startup)) if startup > 0 else self._modelled(m)
        self.asked.update(c.key() for c in batch)
        return batch

    def first_asks_ignore_values(self) -> bool:
        """Its startup (seeds, then uniform samples) outlasts the baseline."""
        return int(self.options["startup_trials"]) >= 2

    def _startup(self, m: int) -> list[Candidate]:
        """The default build and the spec's suggestions first, then uniform samples."""
        if self._seeds is None:
            self._seeds = seed_values(self.space, self.context.dims, self.rng)
        keys: set[str] = set()
        out = self.unseen(self._seeds, m, keys)
        return out + unseen_uniform(self, m - len(out), keys)

    def _modelled(self, m: int) -> list[Candidate]:
        """``m`` proposals, each the best by l/g of ``candidates`` draws from the good density
        that repairs to a candidate not seen yet."""
        good_trials, bad_trials = split_good_bad(
            list(self.told.values()), self.context.directions, float(self.options["gamma"])
        )
        good, bad = density(self.space, good_trials), density(self.space, bad_trials)
        dims = self.context.dims
        out: list[Candidate] = []
        keys: set[str] = set()
        for _ in range(m):
            drafts = [
                {
                    g.name: self.rng.choices(g.values, weights=good[g.name])[0]
                    for g in self.space.genes
                }
                for _ in range(int(self.options["candidates"]))
            ]
            # best draft first; only the ones tried are repaired (every repair try evaluates
            # the restrictions: on the hand GEMM's space, most of the time a proposal takes)
            drafts.sort(key=lambda d: -log_ratio(self.space, good, bad, d))
            for draft in drafts:
                values = self.space.repair(draft, dims, self.rng)
                if values is None:
                    continue
                cand = self.candidate(values)
                if not self.seen(cand.key()) and cand.key() not in keys:
                    out.append(cand)
                    keys.add(cand.key())
                    break
            else:
                break  # the model's region is exhausted: uniform samples fill the rest
        return out + unseen_uniform(self, m - len(out), keys)


__all__ = ["PARZEN_OPTIONS", "ParzenStrategy", "density", "log_ratio", "split_good_bad"]
