"""Optuna's TPE sampler as a strategy (``--strategy tpe``; ``pip install 'ctune[optuna]'``).

A model-based alternative to the GA for one objective: a tree-structured Parzen
estimator over every gene as a categorical choice. Optuna is imported only when
the strategy is made (``ctune.search`` checks it is installed first and says how
to install it). Proposals that break a restriction are repaired to the nearest
valid candidate, and Optuna is told the repaired candidate's value under the
parameters it proposed (its model sees the penalty of the invalid region only
through that). Trials it did not propose (the baseline, fillers, a resumed
journal) are added to its study as finished trials, so resuming rebuilds the
model from the journal; its sampler's RNG is re-seeded, not restored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ctune.records import Candidate, Trial
from ctune.search.strategy import (
    BaseStrategy,
    OptionTable,
    StrategyContext,
    check_at_least,
    check_one_objective,
    min_form,
)

TPE_OPTIONS: OptionTable = {
    "startup_trials": ("random proposals before the model is used", 10),
    "batch": ("proposals per generation", 8),
}
#: proposals that repeat a known candidate are answered at once; at most this many per slot
_RETRIES = 20


class TpeStrategy(BaseStrategy):
    name: ClassVar[str] = "tpe"
    OPTIONS: ClassVar[OptionTable] = TPE_OPTIONS

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        check_one_objective(self.name, context.directions)
        super().__init__(context, options)
        check_at_least(self.name, self.options, "startup_trials", 1)
        check_at_least(self.name, self.options, "batch", 1)
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        sampler = optuna.samplers.TPESampler(
            seed=context.seed, n_startup_trials=int(self.options["startup_trials"])
        )
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self.dists: dict[str, Any] = {
            g.name: optuna.distributions.CategoricalDistribution(list(g.values))
            for g in self.space.genes
        }
        self.pending: dict[str, list[Any]] = {}  # candidate key -> open Optuna trials

    def _value(self, trial: Trial) -> float | None:
        point = min_form(trial, self.context.directions)
        return None if point is None else point[0]

    def _finish(self, otrial: Any, trial: Trial) -> None:
        value = self._value(trial)
        state = self._optuna.trial.TrialState
        if value is None:
            self.study.tell(otrial, state=state.FAIL)
        else:
            self.study.tell(otrial, value)

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        keys: set[str] = set()
        want = min(n, int(self.options["batch"]))
        for _ in range(want * _RETRIES):
            if len(out) >= want:
                break
            otrial = self.study.ask(self.dists)
            values = self.space.repair(dict(otrial.params), self.context.dims, self.rng)
            if values is None:
                self.study.tell(otrial, state=self._optuna.trial.TrialState.FAIL)
                continue
            cand = self.candidate(values)
            key = cand.key()
            if key in self.told:
                self._finish(otrial, self.told[key])  # known: answer at once
                continue
            self.pending.setdefault(key, []).append(otrial)
            if key not in keys and key not in self.asked:
                keys.add(key)
                out.append(cand)
        self.asked.update(keys)
        return out

    def tell(self, trials: Sequence[Trial]) -> None:
        super().tell(trials)
        for trial in trials:
            key = trial.candidate.key()
            opened = self.pending.pop(key, [])
            for otrial in opened:
                self._finish(otrial, trial)
            if not opened:  # not proposed by the model: add it as a finished trial
                value = self._value(trial)
                done: dict[str, Any] = {"value": value} if value is not None else {}
                if value is None:
                    done["state"] = self._optuna.trial.TrialState.FAIL
                self.study.add_trial(
                    self._optuna.trial.create_trial(
                        params=self.space.declared(trial.candidate.as_dict()),
                        distributions=self.dists,
                        **done,
                    )
                )


__all__ = ["TPE_OPTIONS", "TpeStrategy"]
