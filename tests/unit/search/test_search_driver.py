"""The driver's outcomes: failures are data, the baseline and broken kernels are errors."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.errors import ToolchainError, UserError
from ctune.objective import parse_objective_spec
from ctune.records import Outcome
from ctune.registry.store import read_result
from ctune.search import events as ev
from ctune.search.driver import SearchOptions, run_search
from ctune.search.evolution import NSGA2_OPTIONS
from ctune.search.journal import read
from ctune.spec import KernelSpec
from ctune.testing.standins import StandInCompiler, StandInMeasurer


def test_failures_are_recorded_and_the_search_goes_on(search, spec: KernelSpec) -> None:
    result, measurer, _compiler, _ = search(
        measurer=StandInMeasurer(samples=40, wrong_every=5), budget=40, seed=2, journal_fsync=False
    )
    assert result.evaluations == 40 and result.stop_reason == "budget"
    assert result.failures["compile_error"] >= 4  # every 7th distinct candidate
    assert result.failures.get("wrong_result", 0) > 0
    replay, _ = read(result.journal)
    outcomes = {t.outcome for t in replay.trials}
    assert Outcome.COMPILE_ERROR in outcomes and Outcome.OK in outcomes
    failed = [t for t in replay.trials if t.outcome is Outcome.COMPILE_ERROR]
    assert all(t.build is not None and "error" in t.build.log_tail for t in failed)
    assert all(t.measurement is None for t in failed)  # a failed build is never measured
    assert len(measurer.calls) == 40 - len(failed)


def test_resource_limit_is_an_outcome(search, spec: KernelSpec) -> None:
    result, *_ = search(
        compiler=StandInCompiler(spec, regs_limit=120, fail_every=None),
        budget=30,
        journal_fsync=False,
    )
    assert result.failures.get("resource_limit", 0) > 0


def test_baseline_that_does_not_compile_writes_nothing(
    search, spec: KernelSpec, settings: Settings
) -> None:
    with pytest.raises(UserError) as err:
        search(compiler=StandInCompiler(spec, fail_baseline=True))
    text = str(err.value)
    assert "default build (baseline) does not compile" in text
    assert 'identifier "CTUNE_MISSING" is undefined' in text and "\n" not in text
    assert not Path(settings.cache_dir).exists()  # no journal, no result (rule I1)


def test_baseline_that_fails_its_check_writes_nothing(
    spec: KernelSpec, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    measurer = StandInMeasurer(samples=20)
    monkeypatch.setattr(measurer, "outcome_for", lambda spec, values: Outcome.WRONG_RESULT)
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    with pytest.raises(UserError, match="fails on small \\(wrong_result\\)"):
        run_search(
            settings,
            spec,
            objective,
            SearchOptions(budget=5),
            compiler=StandInCompiler(spec),
            measurer=measurer,
        )
    assert not Path(settings.cache_dir).exists()


def test_every_one_of_the_first_n_failing_is_a_user_error(search, spec: KernelSpec) -> None:
    with pytest.raises(UserError) as err:
        search(
            compiler=StandInCompiler(spec, fail_all=True),
            budget=30,
            first_failures=8,
            journal_fsync=False,
        )
    text = str(err.value)
    assert text.startswith("the first 8 candidates all failed to compile (compile_error)")
    assert "first error: standin.cu(12): error: scripted stand-in compile error" in text


def test_a_missing_capability_fails_before_anything_is_compiled(
    spec: KernelSpec, settings: Settings
) -> None:
    compiler, measurer = StandInCompiler(spec), StandInMeasurer()
    objective = parse_objective_spec(["p99", "energy"], ["power<=300W"], spec.metrics)
    with pytest.raises(ToolchainError) as err:
        run_search(
            settings,
            spec,
            objective,
            SearchOptions(budget=5),
            compiler=compiler,
            measurer=measurer,
            capabilities={"gpu"},
        )
    assert "energy, power need NVML energy readings" in str(err.value)
    assert compiler.calls == 0 and measurer.calls == []
    with pytest.raises(ToolchainError, match="p99 needs a CUDA GPU"):
        run_search(
            settings,
            spec,
            parse_objective_spec(["p99"], [], spec.metrics),
            SearchOptions(budget=5),
            compiler=compiler,
            measurer=measurer,
            capabilities=set(),
        )
    assert compiler.calls == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strategy": "gaa"}, "unknown strategy 'gaa' (allowed: auto"),
        ({"strategy_options": {"foo": "1"}}, "unknown option 'foo' for staged"),
        ({"strategy": "ga", "strategy_options": {"population_size": "1"}}, "must be an integer"),
        ({"problem": "nope"}, "no problem 'nope'"),
        ({"time_s": float("nan")}, "--time must be positive and finite, got nan s"),
        ({"time_s": float("inf")}, "--time must be positive and finite, got inf s"),
        ({"time_s": -1.0}, "--time must be positive and finite, got -1 s"),
        ({"time_s": "10"}, "--time must be a number of seconds, got '10'"),
        ({"budget": 6.5}, "--budget must be a whole number, got 6.5"),
        ({"budget": "10"}, "--budget must be a whole number, got '10'"),
        ({"budget": True}, "--budget must be a whole number, got True"),
        ({"budget": 0}, "--budget must be at least 1, got 0"),
        ({"seed": "x"}, "--seed must be a whole number, got 'x'"),
        ({"confirm_processes": "5"}, "--confirm-processes must be a whole number, 0 or more"),
        ({"strategy": 3}, "--strategy must be a strategy's name, got 3"),
        ({"strategy_options": [1]}, "strategy_options (--option) must be a dict {name: value}"),
    ],
)
def test_a_typo_is_found_on_a_machine_without_a_gpu(
    spec: KernelSpec, settings: Settings, options: dict, message: str
) -> None:
    """The request is checked before the GPU is asked for: a laptop finds the typo (exit 2),
    not the GPU machine later."""
    compiler = StandInCompiler(spec)
    with pytest.raises(UserError) as err:
        run_search(
            settings,
            spec,
            parse_objective_spec(["p99"], [], spec.metrics),
            SearchOptions(**{"budget": 5, **options}),
            compiler=compiler,
            capabilities=set(),
        )
    assert message in str(err.value) and "\n" not in str(err.value)
    assert compiler.calls == 0 and not Path(settings.cache_dir).exists()


def test_a_journal_that_cannot_resume_is_refused_without_a_gpu(search, spec, settings) -> None:
    first, *_ = search(budget=6, journal_fsync=False, confirm_processes=0)

    def resume(objective: str, **options: Any) -> None:
        run_search(
            settings,
            spec,
            parse_objective_spec([objective], [], spec.metrics),
            SearchOptions(resume=first.journal, **options),
            compiler=StandInCompiler(spec),
            capabilities=set(),
        )

    with pytest.raises(UserError, match="cannot resume: the journal's objectives differs"):
        resume("p99")
    with pytest.raises(UserError, match="cannot resume with --seed 4: the journal's search ran"):
        resume("p50", seed=4)
    with pytest.raises(ToolchainError, match="p50 needs a CUDA GPU"):
        resume("p50")  # the journal fits: only then is the missing GPU the answer


def test_compile_only_objectives_never_touch_the_gpu(search, spec: KernelSpec) -> None:
    result, measurer, _, _ = search(("regs",), ("spills==0",), budget=20, journal_fsync=False)
    assert measurer.calls == [] and measurer.remeasured == []
    assert result.front and result.confirm_processes == 0
    assert all(m.values[0] <= result.baseline.values[0] for m in result.front)


def test_unknown_problem_and_option_fail_before_compiling(search, spec: KernelSpec) -> None:
    with pytest.raises(UserError, match="no problem 'huge'"):
        search(problem="huge")
    with pytest.raises(UserError, match="unknown option 'popsize' for staged"):
        search(strategy_options={"popsize": "3"})


def test_time_budget_and_patience_stop_the_search(spec: KernelSpec, settings: Settings) -> None:
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    ticks = iter(range(10_000))
    result = run_search(
        settings,
        spec,
        objective,
        SearchOptions(time_s=25.0, seed=1, journal_fsync=False, confirm_processes=0),
        compiler=StandInCompiler(spec),
        measurer=StandInMeasurer(samples=20),
        clock=lambda: float(next(ticks)),
    )
    assert result.stop_reason == "time" and result.budget is None
    stalled = run_search(
        Settings(cache_dir=settings.cache_dir / "p"),
        spec,
        objective,
        SearchOptions(
            budget=500,
            patience=2,
            seed=1,
            journal_fsync=False,
            confirm_processes=0,
            strategy="random",
            strategy_options={"batch_size": "4"},
        ),
        compiler=StandInCompiler(spec),
        measurer=StandInMeasurer(samples=20),
    )
    assert stalled.stop_reason == "stagnation" and stalled.evaluations < 500


def test_exhaustive_stops_when_the_space_is_done(search, spec: KernelSpec) -> None:
    result, _measurer, _, _ = search(
        strategy="exhaustive",
        budget=None,
        journal_fsync=False,
        confirm_processes=0,
        write_result=False,
    )
    count, _ = spec.space.count_valid(spec.problem().dims)
    assert result.stop_reason == "exhausted" and result.evaluations == count


def test_events_tell_the_story(search) -> None:
    result, _, _, events = search(budget=20, journal_fsync=False)
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "SearchStarted" and kinds[1] == "BaselineMeasured"
    assert kinds[-1] == "SearchFinished" and "Confirming" in kinds
    started = events[0]
    assert isinstance(started, ev.SearchStarted) and started.journal == result.journal
    trials = [e for e in events if isinstance(e, ev.TrialFinished)]
    assert len(trials) == 19  # the baseline is reported on its own
    last = trials[-1].progress
    assert last.evaluations == 20 and last.budget == 20 and last.best is not None


def test_result_file_is_a_registry_artifact(search, settings: Settings) -> None:
    from ctune.registry.store import read_result

    result, *_ = search(("p99", "energy"), ("regs<=160",), budget=30, journal_fsync=False)
    assert result.artifact_path == Path(settings.cache_dir) / "results" / "standin-small.json"
    artifact = read_result(result.artifact_path)  # what `ctune registry import` reads
    assert [o.name for o in artifact.objectives] == ["p99", "energy"]
    resolved = artifact.extensions["search"]["strategy_options"]  # defaults included
    assert resolved["population_size"] == NSGA2_OPTIONS["population_size"][1]  # nsga2: 2 objectives
    assert "mutation_prob" in resolved
    assert artifact.pinned == result.pinned and artifact.baseline.samples_ms
    pinned = artifact.member(result.pinned)
    assert pinned.samples_ms and len(pinned.process_medians_ms) >= 3
    assert set(pinned.summary) >= {
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "mean_ms",
        "p50_ci_ms",
        "n",
        "device",
        "gain",
        "gain_ci",
    }
    assert pinned.launch["block"] == (128, 1, 1) and pinned.sass_sha256
    assert any(f.startswith("-DTILE_M=") for f in pinned.nvcc_flags)
    assert artifact.provenance["evaluations"] == 30
    for m in artifact.front:
        if m.key != result.pinned:
            assert m.samples_ms == ()
    data = json.loads(result.artifact_path.read_text())
    assert data["extensions"]["objective_spec"]["constraints"] == ["regs<=160"]


def test_confirmation_reports_significance_and_gain(search) -> None:
    result, measurer, _, _ = search(("p50",), budget=40, journal_fsync=False)
    cost = result.confirmation
    assert cost is not None and 3 <= result.confirm_processes == cost.processes <= 5
    assert len(measurer.remeasured) == cost.measurements
    pinned = result.member(result.pinned)
    assert pinned is not None and pinned.confirmed and len(pinned.per_process) >= 3
    assert pinned.significance is not None and pinned.gain is not None
    assert pinned.gain.low <= pinned.gain.ratio <= pinned.gain.high
    assert result.baseline is not None and result.baseline.confirmed
    assert set(measurer.remeasured) >= {result.pinned, result.baseline.key}


def test_duplicates_are_answered_from_the_cache(search, spec: KernelSpec) -> None:
    # a tiny population on a tiny budget breeds repeats; none is measured twice
    result, measurer, _, _ = search(
        budget=60,
        strategy_options={"population_size": "2"},
        journal_fsync=False,
        confirm_processes=0,
    )
    assert len(measurer.calls) == len(set(measurer.calls))
    assert result.evaluations <= 60


def test_commit_hands_the_front_to_the_registry(
    search, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = Path(settings.registry).parent
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", "t"],
        ["config", "user.email", "t@example.com"],
        ["commit", "-q", "--allow-empty", "-m", "initial"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    result, *_ = search(budget=15, commit=True, journal_fsync=False)
    assert result.commit and len(result.commit) == 40
    log = subprocess.run(
        ["git", "log", "--oneline", "-1"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout
    assert "standin small" in log
    # the journal goes with it: beside the result file, and beside the artifact in the commit
    from ctune.search.journal_copy import copy_path

    assert result.artifact_path is not None
    beside = copy_path(result.artifact_path)
    assert gzip.decompress(beside.read_bytes()) == result.journal.read_bytes()
    committed = subprocess.run(
        ["git", "show", "--name-only", "--format=", "HEAD"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert sorted(Path(p).name.split(".", 1)[1] for p in committed) == ["json", "jsonl.gz"]


class _GraphTimedStandIn(StandInMeasurer):
    """A stand-in that says its samples were graph replays, and keeps the plans it got."""

    def __init__(self) -> None:
        super().__init__(samples=40)
        self.timings: list[str] = []

    def measure(self, spec, candidate, build, problem, plan):  # type: ignore[no-untyped-def]
        self.timings.append(plan.timing)
        m = super().measure(spec, candidate, build, problem, plan)
        return dataclasses.replace(m, timing_method="graph", launches_per_sample=50)


def test_auto_timing_is_settled_once_from_the_baseline(search) -> None:
    stand_in = _GraphTimedStandIn()
    result, _, _, _ = search(measurer=stand_in, budget=6, confirm_processes=0)
    assert stand_in.timings[0] == "auto" and set(stand_in.timings[1:]) == {"graph"}
    artifact = read_result(result.artifact_path)
    assert artifact.protocol["timing"] == artifact.protocol["plan"]["timing"] == "graph"
