"""StrategyContract: the tests every search strategy must pass (Optuna's pattern).

Subclass it in a test module and override the ``strategy_name`` fixture
(and ``objective_texts`` for a multi-objective strategy)::

    class TestNsga2(StrategyContract):
        @pytest.fixture
        def strategy_name(self) -> str:
            return "nsga2"

        @pytest.fixture
        def objective_texts(self) -> list[str]:
            return ["p99", "energy"]

It runs the strategy through the real driver on the stand-in compiler and
measurer (``ctune.testing.standins``): the budget is respected, no
candidate is measured twice, failures do not stop the search, the same
seed gives the same search, ``ask`` never proposes an invalid candidate,
trials it never asked for (the driver's fillers) are taken and never
proposed, ``state()`` is JSON, unknown options are one-line errors. Register the
module for assertion rewriting in conftest:
``pytest.register_assert_rewrite("ctune.testing")``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctune.errors import UserError
from ctune.measure import SamplingPlan
from ctune.objective import ObjectiveSpec, parse_objective_spec
from ctune.records import Candidate, Trial
from ctune.search import make_strategy, resolve_name
from ctune.search.journal import read as read_journal
from ctune.search.result import SearchResult
from ctune.search.strategy import StrategyContext
from ctune.spec import KernelSpec
from ctune.testing.searches import quiet_search
from ctune.testing.standins import StandInCompiler, StandInMeasurer, standin_spec


class StrategyContract:
    """Override ``strategy_name``; the rest has working defaults."""

    budget = 30

    @pytest.fixture
    def strategy_name(self) -> str:
        raise NotImplementedError("override the strategy_name fixture")

    @pytest.fixture
    def strategy_options(self) -> dict[str, Any]:
        return {}

    @pytest.fixture
    def objective_texts(self) -> list[str]:
        return ["p50"]

    @pytest.fixture
    def spec(self, tmp_path: Path) -> KernelSpec:
        return standin_spec(tmp_path / "kernel")

    @pytest.fixture
    def objective(self, spec: KernelSpec, objective_texts: list[str]) -> ObjectiveSpec:
        return parse_objective_spec(objective_texts, [], spec.metrics)

    # --- helpers ---------------------------------------------------------------
    @staticmethod
    def search(
        spec: KernelSpec,
        objective: ObjectiveSpec,
        folder: Path,
        name: str,
        options: dict[str, Any],
        *,
        seed: int = 0,
        budget: int = 40,
        measurer: StandInMeasurer | None = None,
        compiler: StandInCompiler | None = None,
    ) -> tuple[SearchResult, StandInMeasurer, StandInCompiler]:
        measurer = measurer or StandInMeasurer(seed, samples=60)
        compiler = compiler or StandInCompiler(spec)
        result = quiet_search(
            spec,
            objective,
            folder,
            strategy=name,
            strategy_options=options,
            budget=budget,
            seed=seed,
            compiler=compiler,
            measurer=measurer,
        )
        return result, measurer, compiler

    @staticmethod
    def trial(
        spec: KernelSpec,
        objective: ObjectiveSpec,
        cand: Candidate,
        number: int,
        compiler: StandInCompiler,
        measurer: StandInMeasurer,
    ) -> Trial:
        """Compile, measure and score one candidate on the stand-ins, as the driver would."""
        problem = spec.problem()
        plan = objective.sampling_plan(SamplingPlan())
        build = compiler.build(cand, problem)
        m = measurer.measure(spec, cand, build, problem, plan) if build.outcome.is_ok else None
        outcome = build.outcome if m is None else m.outcome
        values, violations = (
            objective.evaluate(build, m, problem.dims) if outcome.is_ok else (None, ())
        )
        return Trial(number, 1, cand, outcome, build, m, values, violations)

    @staticmethod
    def journal_keys(result: SearchResult) -> list[str]:
        replay, _ = read_journal(result.journal)
        return [t.candidate.key() for t in replay.trials]

    # --- the contract ------------------------------------------------------------
    @staticmethod
    def context(spec: KernelSpec, objective: ObjectiveSpec, seed: int = 0) -> StrategyContext:
        """What a strategy is made with for the spec's first problem."""
        dims = dict(spec.problem().dims)
        return StrategyContext(spec.name, spec.space, dims, objective.directions, seed=seed)

    def test_budget_is_respected(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        tmp_path: Path,
        strategy_name: str,
        strategy_options: dict[str, Any],
    ) -> None:
        result, measurer, compiler = self.search(
            spec, objective, tmp_path, strategy_name, strategy_options, budget=self.budget
        )
        assert result.evaluations <= self.budget
        assert len(self.journal_keys(result)) <= self.budget
        assert len(compiler.order) <= self.budget  # distinct candidates ever compiled
        assert len(measurer.calls) <= self.budget

    def test_no_candidate_is_measured_twice(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        tmp_path: Path,
        strategy_name: str,
        strategy_options: dict[str, Any],
    ) -> None:
        result, measurer, _ = self.search(
            spec, objective, tmp_path, strategy_name, strategy_options, budget=self.budget
        )
        assert len(measurer.calls) == len(set(measurer.calls))
        keys = self.journal_keys(result)
        assert len(keys) == len(set(keys))

    def test_failures_do_not_stop_it(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        tmp_path: Path,
        strategy_name: str,
        strategy_options: dict[str, Any],
    ) -> None:
        compiler = StandInCompiler(spec, fail_every=3)
        measurer = StandInMeasurer(samples=60, wrong_every=4)
        result, _, _ = self.search(
            spec,
            objective,
            tmp_path,
            strategy_name,
            strategy_options,
            budget=self.budget,
            measurer=measurer,
            compiler=compiler,
        )
        assert result.stop_reason in ("budget", "exhausted", "converged")
        assert result.failures.get("compile_error", 0) > 0
        assert result.evaluations == self.budget or result.stop_reason != "budget"
        assert result.front, "feasible candidates exist, so a front must be reported"

    def test_same_seed_same_search(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        tmp_path: Path,
        strategy_name: str,
        strategy_options: dict[str, Any],
    ) -> None:
        first, _, _ = self.search(
            spec,
            objective,
            tmp_path / "a",
            strategy_name,
            strategy_options,
            seed=11,
            budget=self.budget,
        )
        second, _, _ = self.search(
            spec,
            objective,
            tmp_path / "b",
            strategy_name,
            strategy_options,
            seed=11,
            budget=self.budget,
        )
        assert self.journal_keys(first) == self.journal_keys(second)

    def test_ask_never_returns_invalid_candidates(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        strategy_name: str,
        strategy_options: dict[str, Any],
    ) -> None:
        context = self.context(spec, objective, seed=5)
        strategy = make_strategy(strategy_name, context, strategy_options)
        measurer, compiler = StandInMeasurer(samples=30), StandInCompiler(spec)
        number = 0
        for _ in range(6):
            batch = strategy.ask(16)
            if not batch:
                break
            assert len({c.key() for c in batch}) == len(batch), "a batch repeats a candidate"
            trials = []
            for cand in batch:
                assert spec.space.is_valid(cand.as_dict(), spec.problem().dims), cand
                assert set(cand.as_dict()) == set(spec.space.names)
                trials.append(self.trial(spec, objective, cand, number, compiler, measurer))
                number += 1
            strategy.tell(trials)
            json.dumps(strategy.state())

    def test_upcoming_names_what_ask_will_return(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        strategy_name: str,
        strategy_options: dict[str, Any],
    ) -> None:
        """``upcoming(n)`` (the driver compiles those ahead): empty where proposals depend
        on results; otherwise the next ``ask`` returns the first of them, in that order (as
        many as its generation holds), and looking ahead changes nothing else."""
        context = self.context(spec, objective, seed=5)
        strategy = make_strategy(strategy_name, context, strategy_options)
        upcoming = strategy.upcoming
        if not upcoming(4):
            pytest.skip(f"{strategy_name} does not look ahead")
        plain = make_strategy(strategy_name, context, strategy_options)
        measurer, compiler = StandInMeasurer(samples=30), StandInCompiler(spec)
        number = 0
        for size in (4, 7, 16):
            ahead = [c.key() for c in upcoming(size)]
            assert ahead == [c.key() for c in upcoming(size)]  # looking is free
            batch = strategy.ask(size)
            assert batch and [c.key() for c in batch] == ahead[: len(batch)]
            assert [c.key() for c in plain.ask(size)] == [c.key() for c in batch]
            trials = []
            for cand in batch:
                trials.append(self.trial(spec, objective, cand, number, compiler, measurer))
                number += 1
            strategy.tell(trials)
            plain.tell(trials)

    def test_guess_first_asks_names_the_first_asks(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        strategy_name: str,
        strategy_options: dict[str, Any],
    ) -> None:
        """``guess_first_asks`` (the driver compiles its answers beside the baseline): None
        where the first asks depend on the baseline's value; otherwise its calls return
        what the asks return, in turn, once the measured baseline is told (the first
        generation, then a refill of it; the guess never saw that value), and guessing
        changes nothing else."""
        context = self.context(spec, objective, seed=5)
        strategy = make_strategy(strategy_name, context, strategy_options)
        baseline = spec.default_candidate()

        def guessed() -> list[list[str]] | None:
            asks = strategy.guess_first_asks(baseline)
            return None if asks is None else [[c.key() for c in asks(n)] for n in (8, 3)]

        guess = guessed()
        if guess is None:
            pytest.skip(f"{strategy_name} does not guess its first generation")
        assert guess[0]
        assert guess == guessed()  # guessing is free
        plain = make_strategy(strategy_name, context, strategy_options)
        told = self.trial(
            spec, objective, baseline, 0, StandInCompiler(spec), StandInMeasurer(samples=30)
        )
        assert told.values is not None and any(v != 0.0 for v in told.values)
        strategy.tell([told])
        plain.tell([told])
        asked = [[c.key() for c in strategy.ask(n)] for n in (8, 3)]
        assert asked == guess
        assert [[c.key() for c in plain.ask(n)] for n in (8, 3)] == asked

    def test_tell_takes_trials_it_never_asked_for(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        strategy_name: str,
        strategy_options: dict[str, Any],
    ) -> None:
        """The driver's fillers arrive with a generation's trials, unasked (filling.py).

        A twin with the same seed says what the strategy would propose next; told
        those as fillers, the strategy must propose none of them.
        """
        context = self.context(spec, objective, seed=3)
        strategy = make_strategy(strategy_name, context, strategy_options)
        twin = make_strategy(strategy_name, context, strategy_options)
        measurer, compiler = StandInMeasurer(samples=30), StandInCompiler(spec)
        number = 0

        def run(batch: list[Candidate]) -> list[Trial]:
            nonlocal number
            trials = [
                self.trial(spec, objective, c, number + i, compiler, measurer)
                for i, c in enumerate(batch)
            ]
            number += len(batch)
            return trials

        asked = strategy.ask(16)
        assert twin.ask(16) == asked
        trials = run(asked)
        twin.tell(trials)
        fillers = run(twin.ask(16))  # what the strategy would ask for next
        strategy.tell([*trials, *fillers])
        json.dumps(strategy.state())
        told = {t.candidate.key() for t in fillers}
        again = told & {c.key() for c in strategy.ask(16)}
        assert not again, "it proposed a candidate it was told about"

    def test_state_and_load_state_resume_the_same_proposals(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        strategy_name: str,
        strategy_options: dict[str, Any],
    ) -> None:
        """What ``--resume`` does: a fresh strategy told the same trials, then given the
        saved ``state()`` (through JSON), proposes what the original proposes next."""
        context = self.context(spec, objective, seed=5)
        original = make_strategy(strategy_name, context, strategy_options)
        measurer, compiler = StandInMeasurer(samples=30), StandInCompiler(spec)
        told: list[list[Trial]] = []
        number = 0
        for _ in range(3):
            batch = original.ask(8)
            trials = [
                self.trial(spec, objective, c, number + i, compiler, measurer)
                for i, c in enumerate(batch)
            ]
            number += len(batch)
            original.tell(trials)
            told.append(trials)
        saved = json.loads(json.dumps(original.state()))
        resumed = make_strategy(strategy_name, context, strategy_options)
        for trials in told:
            resumed.tell(trials)
        resumed.load_state(saved)
        assert resumed.ask(8) == original.ask(8)
        assert dict(resumed.options) == dict(original.options)

    def test_unknown_option_is_a_one_line_user_error(
        self,
        spec: KernelSpec,
        objective: ObjectiveSpec,
        strategy_name: str,
    ) -> None:
        context = StrategyContext(
            spec.name, spec.space, dict(spec.problem().dims), objective.directions
        )
        with pytest.raises(UserError) as err:
            make_strategy(strategy_name, context, {"no_such_option": "1"})
        text = str(err.value)
        assert "no_such_option" in text and "allowed:" in text and "\n" not in text
        assert resolve_name(strategy_name, len(objective.directions)) in text


__all__ = ["StrategyContract"]
