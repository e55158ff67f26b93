"""Build-aware filling and shared builds, on a simulated clock (ctune.testing.slow_builds).

A build takes 60 simulated seconds on one of 4 slots and a measurement 1 s,
so without filling the stand-in GPU idles most of the time, as on the
CUTLASS GEMM (issue 4).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.objective import parse_objective_spec
from ctune.records import Build, Outcome, Trial
from ctune.search import events as ev
from ctune.search import make_strategy
from ctune.search.driver import SearchOptions, run_search
from ctune.search.filling import Filler, runtime_genes
from ctune.search.journal import read
from ctune.search.result import SearchResult
from ctune.search.strategy import StrategyContext
from ctune.spec import KernelSpec
from ctune.testing.slow_builds import (
    FakeClock,
    SlowStandInCompiler,
    TimedStandInMeasurer,
    runtime_standin_spec,
)


@pytest.fixture
def rt_spec(tmp_path: Path) -> KernelSpec:
    return runtime_standin_spec(tmp_path / "kernel")


def _search(
    spec: KernelSpec,
    folder: Path,
    *,
    clock: FakeClock | None = None,
    compiler: SlowStandInCompiler | None = None,
    measurer: TimedStandInMeasurer | None = None,
    events: list[ev.SearchEvent] | None = None,
    **options: Any,
) -> tuple[SearchResult, SlowStandInCompiler, TimedStandInMeasurer]:
    clock = clock or FakeClock()
    compiler = compiler or SlowStandInCompiler(spec, clock, compile_s=60.0, jobs=4)
    measurer = measurer or TimedStandInMeasurer(clock, samples=30)
    options = {
        "seed": 1,
        "journal_fsync": False,
        "confirm_processes": 0,
        **options,
    }
    result = run_search(
        Settings(cache_dir=folder),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(**options),
        compiler=compiler,
        measurer=measurer,
        clock=clock,
        on_event=(events.append if events is not None else None),
    )
    return result, compiler, measurer


def _filler_trials(result: SearchResult) -> list[Trial]:
    replay, _ = read(result.journal)
    return [t for t in replay.trials if t.candidate.key() in replay.fillers]


def _group(spec: KernelSpec, trial: Trial) -> tuple[Any, ...]:
    return tuple((k, v) for k, v in trial.candidate.genes if k not in spec.runtime_names)


# --- the policy, as a pure function -------------------------------------------------------


def _trial(
    spec: KernelSpec, number: int, values: Mapping[str, Any], value: float, objectives: int = 1
) -> Trial:
    cand = spec.candidate(values)
    build = Build(cand.key(), (), "stand-in", Outcome.OK)
    return Trial(number, 0, cand, Outcome.OK, build, None, (value,) * objectives)


def test_variants_are_nearest_first_valid_and_never_repeated(rt_spec: KernelSpec) -> None:
    dims = rt_spec.problem().dims
    filler = Filler(rt_spec.name, rt_spec.space, dims, ("min",))
    assert [g.name for g in runtime_genes(rt_spec.space)] == ["SPLIT_K", "RASTER"]
    parent = {**rt_spec.space.default_values(), "TILE_M": 128, "SPLIT_K": 2, "RASTER": 1}
    best = _trial(rt_spec, 0, parent, 1.0)
    filler.observe(best)
    seen: set[str] = {best.candidate.key()}
    picked = []
    while (cand := filler.pick([best], seen, set())) is not None:
        seen.add(cand.key())
        picked.append(cand.as_dict())
    # only runtime genes change, and SPLIT_K * TILE_M <= 512 rules out SPLIT_K=8 here
    compiled = [n for n in parent if n not in ("SPLIT_K", "RASTER")]
    assert all(p[n] == parent[n] for p in picked for n in compiled)
    assert all(rt_spec.space.is_valid(p, dims) for p in picked)
    assert len(picked) == 3 * 3 - 1  # SPLIT_K in (1, 2, 4) x RASTER (3), less the parent
    changes = [sum(p[n] != parent[n] for n in ("SPLIT_K", "RASTER")) for p in picked]
    assert changes == sorted(changes)  # one gene changed before two
    assert [(p["SPLIT_K"], p["RASTER"]) for p in picked[:4]] == [(1, 1), (4, 1), (2, 0), (2, 2)]


def test_the_best_parent_is_filled_first_and_pending_keys_are_left(rt_spec: KernelSpec) -> None:
    dims = rt_spec.problem().dims
    filler = Filler(rt_spec.name, rt_spec.space, dims, ("min",))
    default = rt_spec.space.default_values()
    worse = _trial(rt_spec, 0, default, 2.0)
    better = _trial(rt_spec, 1, {**default, "TILE_N": 32}, 1.0)
    for trial in (worse, better):
        filler.observe(trial)
    cand = filler.pick([better], set(), set())
    assert cand is not None and cand.as_dict()["TILE_N"] == 32
    # every variant of the better one pending in the batch: the worse one's come next, and
    # the better one is not given up on (its pending variants may never be measured)
    pending = {
        rt_spec.candidate({**default, "TILE_N": 32, "SPLIT_K": s, "RASTER": r}).key()
        for s in (1, 2, 4, 8)
        for r in (0, 1, 2)
    }
    cand = filler.pick([better], set(), pending)
    assert cand is not None and cand.as_dict()["TILE_N"] == 64
    cand = filler.pick([better], set(), set())
    assert cand is not None and cand.as_dict()["TILE_N"] == 32


def test_a_space_without_runtime_genes_has_no_fillers(spec: KernelSpec) -> None:
    filler = Filler(spec.name, spec.space, spec.problem().dims, ("min",))
    best = _trial(spec, 0, spec.space.default_values(), 1.0)
    filler.observe(best)
    assert not filler.active and filler.pick([best], set(), set()) is None
    assert filler.group(best.candidate) == best.candidate.genes


@pytest.mark.parametrize(("name", "directions"), [("ga", ("min",)), ("nsga2", ("min", "min"))])
def test_a_good_filler_joins_the_population(
    rt_spec: KernelSpec, name: str, directions: tuple[str, ...]
) -> None:
    dims = dict(rt_spec.problem().dims)
    context = StrategyContext(rt_spec.name, rt_spec.space, dims, directions, seed=2)
    strategy = make_strategy(name, context, {"population_size": "4"})
    asked = strategy.ask(4)
    told = [_trial(rt_spec, i, c.as_dict(), 2.0 + i, len(directions)) for i, c in enumerate(asked)]
    asked_keys = {c.key() for c in asked}
    unasked = next(
        v for v in rt_spec.space.iter_valid(dims) if rt_spec.candidate(v).key() not in asked_keys
    )
    filler = _trial(rt_spec, 4, unasked, 1.0, len(directions))
    strategy.tell([*told, filler])
    assert filler.candidate in [t.candidate for t in strategy.population]  # type: ignore[attr-defined]


# --- the driver ---------------------------------------------------------------------------


def test_fillers_keep_the_gpu_busy_while_builds_compile(
    rt_spec: KernelSpec, tmp_path: Path
) -> None:
    events: list[ev.SearchEvent] = []
    on, compiler, measurer = _search(rt_spec, tmp_path / "on", time_s=1200.0, events=events)
    off, _, _ = _search(rt_spec, tmp_path / "off", time_s=1200.0, fill=False)
    assert off.fillers == 0 and not _filler_trials(off)
    assert on.fillers > 0
    busy_on, busy_off = on.timing.gpu_busy_fraction, off.timing.gpu_busy_fraction
    assert busy_off < 0.2 and busy_on > 2.5 * busy_off, (busy_on, busy_off)
    # journaled, flagged, counted, and reported apart
    fillers = _filler_trials(on)
    assert len(fillers) == on.fillers == on.to_json()["fillers"]
    flagged = [
        e.trial.candidate.key() for e in events if isinstance(e, ev.TrialFinished) and e.filler
    ]
    assert flagged == [t.candidate.key() for t in fillers]
    assert on.evaluations == len(read(on.journal)[0].trials)
    # never measured twice, always valid, each a runtime variant of a build measured before
    assert len(measurer.calls) == len(set(measurer.calls)) == on.evaluations
    dims = rt_spec.problem().dims
    replay, _ = read(on.journal)
    built: set[tuple[Any, ...]] = set()
    for trial in replay.trials:
        if trial.candidate.key() in replay.fillers:
            assert rt_spec.space.is_valid(trial.candidate.as_dict(), dims)
            assert _group(rt_spec, trial) in built
            assert trial.build is not None and trial.build.cache_hit
        if trial.outcome.is_ok:
            built.add(_group(rt_spec, trial))
    # a filler compiles nothing: every nvcc run is a distinct build
    assert len(compiler.nvcc_runs) == len(set(compiler.nvcc_runs))


def test_fillers_use_idle_gpu_time_and_leave_the_whole_budget_to_the_strategy(
    rt_spec: KernelSpec, tmp_path: Path
) -> None:
    on, _, measurer = _search(rt_spec, tmp_path / "on", budget=60)
    off, _, _ = _search(rt_spec, tmp_path / "off", budget=60, fill=False)
    assert on.stop_reason == off.stop_reason == "budget"
    assert on.fillers > 0 and off.fillers == 0
    assert on.evaluations - on.fillers == off.evaluations == 60  # fillers are extra
    assert len(measurer.calls) == len(set(measurer.calls)) == on.evaluations
    assert on.timing.gpu_busy_fraction > 1.5 * off.timing.gpu_busy_fraction
    print(
        f"wall {on.timing.wall_s:.0f} s vs {off.timing.wall_s:.0f} s, busy "
        f"{on.timing.gpu_busy_fraction:.2f} vs {off.timing.gpu_busy_fraction:.2f}"
    )


def test_without_runtime_genes_nothing_changes(spec: KernelSpec, tmp_path: Path) -> None:
    on, _, on_measurer = _search(spec, tmp_path / "on", budget=40)
    off, _, off_measurer = _search(spec, tmp_path / "off", budget=40, fill=False)
    assert on.fillers == 0 and not _filler_trials(on)
    assert on_measurer.calls == off_measurer.calls
    assert on.timing == off.timing


def test_candidates_sharing_a_build_share_one_compile(rt_spec: KernelSpec, tmp_path: Path) -> None:
    # exhaustive order varies the runtime genes fastest: a batch is a build or two
    result, compiler, measurer = _search(
        rt_spec,
        tmp_path,
        strategy="exhaustive",
        budget=49,
        fill=False,
    )
    replay, _ = read(result.journal)
    groups = [_group(rt_spec, t) for t in replay.trials]
    assert len(set(groups)) < len(groups) / 3
    assert compiler.nvcc_runs == list(dict.fromkeys(compiler.nvcc_runs))  # one compile each
    assert set(compiler.nvcc_runs) == set(groups)
    assert compiler.slot_waits == 0  # no second request held a compile slot to wait
    shared = [t for t in replay.trials[1:] if t.build is not None and t.build.cache_hit]
    assert shared
    assert all(t.build is not None and t.build.candidate_key == t.candidate.key() for t in shared)
    assert len(measurer.calls) == len(set(measurer.calls)) == 49


def test_resume_after_a_kill_with_fillers_measures_nothing_again(
    rt_spec: KernelSpec, tmp_path: Path
) -> None:
    clock = FakeClock()
    first = TimedStandInMeasurer(clock, samples=30, interrupt_at=40)  # Ctrl-C at the 40th
    crashed, _, _ = _search(rt_spec, tmp_path, clock=clock, measurer=first, budget=90)
    assert crashed.interrupted and crashed.fillers > 0
    replay, _ = read(crashed.journal)
    before = {t.candidate.key() for t in replay.trials}
    assert replay.fillers and replay.fillers <= before
    lines = [json.loads(line) for line in crashed.journal.read_text().splitlines()]
    assert sum(1 for r in lines if r.get("filler") is True) == len(replay.fillers)

    clock = FakeClock()
    second = TimedStandInMeasurer(clock, samples=30)
    resumed, _, _ = _search(
        rt_spec, tmp_path, clock=clock, measurer=second, budget=90, resume=crashed.journal
    )
    assert resumed.stop_reason == "budget" and resumed.evaluations - resumed.fillers == 90
    assert not set(second.calls) & before  # nothing journaled is measured again
    assert len(second.calls) == len(set(second.calls)) == resumed.evaluations - len(before)
    after, _ = read(resumed.journal)
    assert len(after.fillers) == resumed.fillers >= len(replay.fillers)
    assert len({t.candidate.key() for t in after.trials}) == len(after.trials)
    assert len(after.trials) == resumed.evaluations


def test_fill_is_validated(rt_spec: KernelSpec, tmp_path: Path) -> None:
    from ctune.errors import UserError

    with pytest.raises(UserError, match="fill must be true or false"):
        _search(rt_spec, tmp_path, budget=5, fill="yes")


def test_reports_keep_fillers_apart_from_the_budget(rt_spec: KernelSpec, tmp_path: Path) -> None:
    from ctune.cli import render
    from ctune.cli.render_search import final_report, status_block

    events: list[ev.SearchEvent] = []
    result, _, _ = _search(rt_spec, tmp_path, budget=40, events=events)
    assert result.fillers > 0
    with render.console.capture() as captured:
        final_report(result, "table")
        last = [e for e in events if isinstance(e, ev.TrialFinished)][-1]
        render.console.print(status_block(last.progress, ["p50"]))
    text = " ".join(captured.get().split())
    assert f"evaluations 40/40 + {result.fillers} fillers" in text
    assert f"+ {last.progress.fillers} fillers" in text


def test_exhaustive_next_generation_compiles_while_this_one_is_measured(
    spec: KernelSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measuring-bound (a build takes 2 s on 4 slots, a measurement 1 s): without looking
    ahead every generation starts with a compile wave the GPU waits for."""
    from ctune.search.baselines import ExhaustiveStrategy

    def search(folder: Path) -> tuple[SearchResult, SlowStandInCompiler]:
        clock = FakeClock()
        result, compiler, _ = _search(
            spec,
            folder,
            clock=clock,
            compiler=SlowStandInCompiler(spec, clock, compile_s=2.0, jobs=4),
            strategy="exhaustive",
            strategy_options={"batch_size": 4},
            budget=24,
        )
        return result, compiler

    ahead, ahead_compiler = search(tmp_path / "ahead")
    monkeypatch.setattr(ExhaustiveStrategy, "upcoming", lambda self, n: [])  # cannot say
    plain, plain_compiler = search(tmp_path / "plain")
    order = [t.candidate.key() for t in read(ahead.journal)[0].trials]
    assert order == [t.candidate.key() for t in read(plain.journal)[0].trials]
    assert ahead.evaluations == plain.evaluations == 24
    # the same builds, each compiled once, none beyond the budget, no slot held to wait
    assert sorted(ahead_compiler.nvcc_runs) == sorted(plain_compiler.nvcc_runs)
    assert ahead_compiler.slot_waits == 0
    # a generation's builds are ready when it starts: far less waiting on the compiler
    assert ahead.timing.compile_wait_s < 0.5 * plain.timing.compile_wait_s
    assert ahead.timing.wall_s < plain.timing.wall_s


class _SlowFirstMeasurement(TimedStandInMeasurer):
    """NOT A GPU: the first measurement waits ``first_s`` (a worker starting), then
    ``measure_s`` each."""

    def __init__(self, clock: FakeClock, first_s: float, **options: Any) -> None:
        super().__init__(clock, **options)
        self.first_s = first_s

    def measure(self, *args: Any) -> Any:
        if self.first_s:
            self.clock.advance(self.first_s)
            self.first_s = 0.0
        return super().measure(*args)


def test_finished_builds_do_not_hold_the_compilers_slots(spec: KernelSpec, tmp_path: Path) -> None:
    """While the first measurement waits for its worker (8 s), the compiler goes on ahead
    (4 slots, 1 s a build) through a queue of 4 x jobs later builds, where it stopped at
    jobs + 1 requested builds, done or not, and queued none before the baseline was
    measured; and it compiles nothing past the budget."""
    clock = FakeClock()
    result, compiler, _ = _search(
        spec,
        tmp_path,
        clock=clock,
        compiler=SlowStandInCompiler(spec, clock, compile_s=1.0, jobs=4),
        measurer=_SlowFirstMeasurement(clock, 8.0, measure_s=0.05, samples=30),
        strategy="exhaustive",
        budget=36,
    )
    assert result.evaluations == 36
    assert len(compiler.nvcc_runs) == len(set(compiler.nvcc_runs)) <= 36
    assert compiler.slot_waits == 0
    # the baseline's build (1 s), then 16 builds done while its measurement waits: 4.4 s
    # of compile wait in all, 8.4 s when the compiler stopped at jobs + 1 builds
    assert result.timing.compile_wait_s < 5.0, result.timing
