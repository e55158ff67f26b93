"""The default strategy's first generation compiles beside the baseline (``guess_first_asks``),
on the simulated clock (``ctune.testing.slow_builds``): the same search, one build sooner."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.model import unavailable
from ctune.objective import parse_objective_spec
from ctune.records import Candidate, Outcome
from ctune.search.driver import SearchOptions, run_search
from ctune.search.journal import read
from ctune.search.result import SearchResult
from ctune.search.staged import StagedStrategy
from ctune.spec import KernelSpec
from ctune.testing.slow_builds import FakeClock, SlowStandInCompiler, TimedStandInMeasurer
from ctune.testing.standins import standin_spec

COMPILE_S = 50.0
needs_sklearn = pytest.mark.skipif(
    unavailable() is not None, reason="the cost model needs the model extra (ctune[model])"
)


@pytest.fixture
def spec(tmp_path: Path) -> KernelSpec:
    return standin_spec(tmp_path / "kernel")


def _search(
    spec: KernelSpec, folder: Path, **options: Any
) -> tuple[SearchResult, SlowStandInCompiler]:
    clock = FakeClock()
    compiler = SlowStandInCompiler(spec, clock, compile_s=COMPILE_S, jobs=16)
    result = run_search(
        Settings(cache_dir=folder),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(
            **{"seed": 3, "budget": 16, "journal_fsync": False, "fill": False, **options}
        ),
        compiler=compiler,
        measurer=TimedStandInMeasurer(clock, measure_s=0.5, samples=30),
        clock=clock,
    )
    return result, compiler


def _generations(result: SearchResult) -> dict[int, list[tuple[str, float]]]:
    """Each generation's trials: (candidate key, when journaled)."""
    out: dict[int, list[tuple[str, float]]] = {}
    for line in result.journal.read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "trial":
            trial = record["trial"]
            key = json.dumps(trial["candidate"]["genes"], sort_keys=True)
            out.setdefault(trial["generation"], []).append((key, record["elapsed_s"]))
    return out


def test_the_first_generation_compiles_while_the_baseline_does(
    spec: KernelSpec, tmp_path: Path
) -> None:
    """Its builds were the compiler's first requests, so they are ready when the baseline
    has been measured: the first generation ends within a build's time of the start, not
    two builds' time. Its trials record those builds as this search's own compiles."""
    result, compiler = _search(spec, tmp_path / "s")
    first = _generations(result)[1]
    assert len(first) >= 2
    groups = {compiler.group(Candidate.of(spec.name, json.loads(key))) for key, _ in first}
    assert set(compiler.submits[: len(first)]) == groups
    assert max(when for _, when in first) < 1.5 * COMPILE_S
    trials = [t for t in read(result.journal)[0].trials if t.generation == 1]
    assert trials and all(t.build is not None and not t.build.cache_hit for t in trials)
    assert all(t.build is not None and t.build.compile_s == COMPILE_S for t in trials)


def test_the_guess_changes_when_builds_start_not_the_search(
    spec: KernelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against the same search whose strategy guesses nothing: the same candidates in the
    same order, the same builds (counted as compiler CPU alike), and about one build's
    time less wall."""
    guessed, guessed_compiler = _search(spec, tmp_path / "a")
    monkeypatch.setattr(StagedStrategy, "first_asks_ignore_values", lambda self: False)
    plain, plain_compiler = _search(spec, tmp_path / "b")

    def trials(result: SearchResult) -> list[str]:
        by_generation = _generations(result)
        return [key for g in sorted(by_generation) for key, _ in by_generation[g]]

    assert trials(guessed) == trials(plain)
    assert sorted(guessed_compiler.nvcc_runs) == sorted(plain_compiler.nvcc_runs)  # no build wasted
    # every build is compiler CPU once, whoever asked for it first
    built_s = len(plain_compiler.nvcc_runs) * COMPILE_S
    assert guessed.timing.compile_cpu_s == plain.timing.compile_cpu_s == built_s
    saved = plain.timing.wall_s - guessed.timing.wall_s
    assert 0.8 * COMPILE_S <= saved <= 1.2 * COMPILE_S, (plain.timing, guessed.timing)


def _every_third_hopeless(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model (NOT a trained one) that rules out every third candidate from the first
    screen on: bounds as if earlier journals had taught it, decisions that are easy to see.
    It reads the genes' columns, not the SM (the last): the stand-in GPU's (sm_00) is not
    the arch the decision before its measurement takes (sm_90)."""
    from ctune.model import CostModel, Prediction
    from ctune.search import cost_policy

    def every_third(self: CostModel, rows: list[list[float]]) -> list[Prediction]:
        hopeless, open_ = Prediction(math.inf, math.inf, math.inf), Prediction(-math.inf, 0, 0)
        return [hopeless if hash(tuple(row[:-1])) % 3 == 0 else open_ for row in rows]

    monkeypatch.setattr(CostModel, "predict", every_third)
    monkeypatch.setattr(cost_policy, "MIN_TRAINED", 0)


@needs_sklearn
def test_with_the_cost_model_on_the_first_generation_still_compiles_early(
    spec: KernelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model with nothing to rule out yet (no earlier journal: it keeps every candidate)
    no longer costs the search its early first generation: one build's time sooner than
    the same search without the guess, as without the model."""
    guessed, _ = _search(spec, tmp_path / "a", cost_model=True)
    assert read(guessed.journal)[0].header["search"]["cost_model"] is True
    monkeypatch.setattr(StagedStrategy, "first_asks_ignore_values", lambda self: False)
    plain, _ = _search(spec, tmp_path / "b", cost_model=True)
    saved = plain.timing.wall_s - guessed.timing.wall_s
    assert 0.8 * COMPILE_S <= saved <= 1.2 * COMPILE_S, (plain.timing, guessed.timing)


@needs_sklearn
def test_what_the_first_screen_skips_never_compiles_early(
    spec: KernelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first screen's decision needs no measurement (the baseline is 0 on the model's
    scale), so the builds it keeps, and those of the refills it asks for in place of the
    skipped ones, are the compiler's first requests, and those it skips are never compiled.
    Against the same search without the guess: the same trials, skips included, and one
    build's time less wall (the whole first generation compiles beside the baseline)."""
    _every_third_hopeless(monkeypatch)
    guessed, compiler = _search(spec, tmp_path / "a", cost_model=True)
    trials = read(guessed.journal)[0].trials
    first = [t for t in trials if t.generation == 1]
    kept = {compiler.group(t.candidate) for t in first if t.build}
    skipped = {compiler.group(t.candidate) for t in trials if t.outcome is Outcome.SKIPPED}
    assert kept and skipped and not kept & skipped
    # refills: more candidates decided than the first ask's 8 (parzen's batch)
    assert len(first) > 8
    assert set(compiler.submits[: len(kept)]) == kept  # the first requests: kept builds only
    assert not skipped & set(compiler.nvcc_runs)  # a skip is never built, early or late

    monkeypatch.setattr(StagedStrategy, "first_asks_ignore_values", lambda self: False)
    plain, plain_compiler = _search(spec, tmp_path / "b", cost_model=True)
    decisions = [(t.candidate.key(), t.outcome) for t in trials]
    assert decisions == [(t.candidate.key(), t.outcome) for t in read(plain.journal)[0].trials]
    assert sorted(compiler.nvcc_runs) == sorted(plain_compiler.nvcc_runs)
    saved = plain.timing.wall_s - guessed.timing.wall_s
    assert 0.8 * COMPILE_S <= saved <= 1.2 * COMPILE_S, (plain.timing, guessed.timing)
