"""The staged strategy's controls phase: files proposed by an engine on the leading build,
scored by measured trials, its engine's checkpoint journaled so that --resume is exact.

Stand-ins throughout (named so): the stand-in controls engine, compiler and measurer;
CompileIQ's engine itself passes the engine contract in tests/unit/controls."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctune.controls.setup import ControlsSetup
from ctune.controls.store import ControlsStore
from ctune.errors import UserError
from ctune.model import unavailable
from ctune.records import Candidate, Outcome, Trial
from ctune.search.controls_phase import ControlsPhase
from ctune.search.journal import read
from ctune.search.result import SearchResult
from ctune.spec import KernelSpec
from ctune.testing.standin_controls import decisions
from ctune.testing.standins import StandInMeasurer

GENE = "acf_ptxas"


@pytest.fixture
def acf_spec(spec: KernelSpec) -> KernelSpec:
    return spec.with_acf(("ptxas",))


@pytest.fixture
def setup(tmp_path: Path) -> ControlsSetup:
    space = tmp_path / "standin-space.bin"
    space.write_bytes(b"a stand-in search space")
    return ControlsSetup(tmp_path / "cache" / "controls", {GENE: space}, engine="standin")


def _steady_measurer() -> StandInMeasurer:
    """The stand-in measurer with neither faults nor wrong results: every file measured."""
    return StandInMeasurer(samples=30, fault_corner=None, wrong_every=None)


def _trials(journal: Path) -> list[Trial]:
    return list(read(journal)[0].trials)


def _with_controls(trials: list[Trial]) -> list[Trial]:
    return [t for t in trials if t.candidate.as_dict().get(GENE, "none") != "none"]


def test_start_controls_tunes_files_on_the_best_build(
    tmp_path: Path, spec: KernelSpec, settings, setup: ControlsSetup
) -> None:
    from ctune.objective import parse_objective_spec
    from ctune.search.driver import SearchOptions, run_search
    from ctune.testing.standins import StandInCompiler

    acf = spec.with_acf(("ptxas",))
    measurer = _steady_measurer()
    result = run_search(
        settings,
        acf,
        parse_objective_spec(["p50"], [], acf.metrics),
        SearchOptions(
            budget=12,
            seed=4,
            strategy="staged",
            strategy_options={"start": "controls", "controls_pool": 4},
            confirm_processes=0,
            controls=setup,
        ),
        compiler=StandInCompiler(acf),
        measurer=measurer,
    )
    trials = _trials(result.journal)
    tuned = _with_controls(trials)
    assert len(tuned) == len(trials) - 1  # all but the baseline
    base = {k: v for k, v in trials[0].candidate.as_dict().items() if k != GENE}
    store = ControlsStore(setup.store_root)
    for trial in tuned:
        genes = trial.candidate.as_dict()
        assert {k: v for k, v in genes.items() if k != GENE} == base
        decisions(store.read(str(genes[GENE])))  # a file the engine proposed, stored
    states = read(result.journal)[0].states
    saved = states[-1][1]["controls"]
    assert saved["engines"][GENE]["checkpoint"] and saved["base"][GENE] == "none"


def _search(settings, spec, setup, measurer, **options):
    from ctune.objective import parse_objective_spec
    from ctune.search.driver import SearchOptions, run_search
    from ctune.testing.standins import StandInCompiler

    return run_search(
        settings,
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(
            strategy="staged",
            confirm_processes=0,
            controls=setup,
            **options,
        ),
        compiler=StandInCompiler(spec, fail_every=None),  # failures by order would differ
        measurer=measurer,
    )


def _decisions(setup: ControlsSetup, trials: list[Trial]) -> list[tuple[int, ...]]:
    store = ControlsStore(setup.store_root)
    return [decisions(store.read(str(t.candidate.as_dict()[GENE]))) for t in trials]


def test_the_controls_phase_follows_the_settled_structure(
    spec: KernelSpec, settings, setup: ControlsSetup
) -> None:
    acf = spec.with_acf(("ptxas",))
    measurer = _steady_measurer()
    result = _search(
        settings,
        acf,
        setup,
        measurer,
        budget=60,
        seed=2,
        strategy_options={"patience": 2, "controls_pool": 4},
    )
    trials = _trials(result.journal)
    first = next(i for i, t in enumerate(trials) if t in _with_controls(trials))
    assert first > 1  # the structure was searched first
    structural = [t for t in trials[:first] if t.values is not None]
    best = min(structural, key=lambda t: t.values[0])  # type: ignore[index]
    tuned = _with_controls(trials)
    assert tuned, "the controls phase never started"
    for trial in tuned:  # every file is tried on the best build of the structure phase
        genes = dict(trial.candidate.as_dict(), **{GENE: "none"})
        assert genes == best.candidate.as_dict()


def test_resume_proposes_what_the_uninterrupted_search_would_have(
    tmp_path: Path, spec: KernelSpec, setup: ControlsSetup
) -> None:
    from ctune.config import Settings

    acf = spec.with_acf(("ptxas",))
    options = {
        "budget": 20,
        "seed": 7,
        "strategy_options": {"start": "controls", "controls_pool": 4},
    }
    whole = _search(
        Settings(cache_dir=tmp_path / "whole"),
        acf,
        setup,
        StandInMeasurer(samples=30, noise=0.0, fault_corner=None, wrong_every=None),
        **options,
    )
    crash_at = 11  # noise-free measurements: a resumed search sees the values the first saw
    cut = Settings(cache_dir=tmp_path / "cut")
    crashed = _search(
        cut,
        acf,
        setup,
        StandInMeasurer(
            samples=30, noise=0.0, fault_corner=None, wrong_every=None, interrupt_at=crash_at
        ),
        **options,
    )
    assert crashed.interrupted
    resumed = _search(
        cut,
        acf,
        setup,
        StandInMeasurer(samples=30, noise=0.0, fault_corner=None, wrong_every=None),
        resume=crashed.journal,
        **options,
    )
    expected = _decisions(setup, _with_controls(_trials(whole.journal)))
    got = _decisions(setup, _with_controls(_trials(resumed.journal)))
    assert got == expected


def test_resume_without_the_acf_genes_is_refused(
    tmp_path: Path, spec: KernelSpec, settings, setup: ControlsSetup
) -> None:
    acf = spec.with_acf(("ptxas",))
    measurer = _steady_measurer()
    options = {"budget": 30, "seed": 1, "strategy_options": {"patience": 1}}
    done = _search(settings, acf, setup, measurer, **options)
    assert _with_controls(_trials(done.journal))
    with pytest.raises(UserError) as err:
        _search(settings, acf, None, measurer, resume=done.journal, **options)
    assert "resume it with the same --acf" in str(err.value)


def test_start_controls_needs_acf_genes(spec: KernelSpec, settings) -> None:
    with pytest.raises(UserError) as err:
        _search(
            settings,
            spec,
            None,
            StandInMeasurer(samples=30),
            budget=4,
            strategy_options={"start": "controls"},
        )
    assert "no acf genes" in str(err.value)


def test_a_failed_trial_is_told_to_the_engine_as_a_failure(
    spec: KernelSpec, setup: ControlsSetup
) -> None:
    from ctune.records import Outcome
    from ctune.search.controls_phase import ControlsPhase

    acf = spec.with_acf(("ptxas",))
    told: list[dict[str, float | None]] = []
    phase = ControlsPhase(
        setup, acf.name, seed=3, score=lambda t: t.values[0] if t.values else None
    )
    phase.start(acf.space.default_values())
    engine = phase.engines[GENE]
    original = engine.tell
    engine.tell = lambda scores: (told.append(dict(scores)), original(scores))[1]  # type: ignore[method-assign]
    first, second = phase.ask(2, {})
    ok = Trial(1, 1, first, Outcome.OK, values=(1.5,))
    broken = Trial(2, 1, second, Outcome.COMPILE_ERROR)
    phase.tell([ok, broken])
    assert sorted(told[0].values(), key=lambda v: v is None) == [1.5, None]


class _FixedControls(StandInMeasurer):
    """NOT A GPU: the stand-in measurer with every controls file worth one fixed factor."""

    def __init__(self, factor: float, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.factor = factor

    def controls_factor(self, spec, values) -> float:  # type: ignore[no-untyped-def]
        return self.factor if any(v != "none" for k, v in values.items() if k == GENE) else 1.0


@pytest.mark.parametrize(
    ("factor", "pinned_with_controls"), [(0.90, True), (1.0, False), (1.10, False)]
)
def test_a_controls_file_is_pinned_only_when_it_beats_its_build_in_the_same_processes(
    tmp_path: Path, spec: KernelSpec, setup: ControlsSetup, factor: float, pinned_with_controls
) -> None:
    import random

    from ctune.config import Settings
    from ctune.objective import parse_objective_spec
    from ctune.registry.assemble import ResultPublisher
    from ctune.search.driver import SearchOptions, run_search
    from ctune.testing.standins import StandInCompiler

    acf = spec.with_acf(("ptxas",))
    measurer = _FixedControls(factor, samples=60, noise=0.01, fault_corner=None, wrong_every=None)
    problem = acf.problem(None)
    rng = random.Random(0)
    valid = acf.space.sample(rng, 400, problem.dims)
    # a warm start far better than the default build, so that the default cannot be pinned
    good = min(valid, key=lambda v: measurer.latency_ms(acf, v, problem))
    assert measurer.latency_ms(acf, good, problem) < 0.95 * measurer.latency_ms(
        acf, acf.space.default_values(), problem
    )
    out = tmp_path / "out" / "result.json"
    result = run_search(
        Settings(cache_dir=tmp_path / "cache"),  # the setup's store is <cache_dir>/controls
        acf,
        parse_objective_spec(["p50"], [], acf.metrics),
        SearchOptions(
            strategy="staged",
            strategy_options={"start": "controls", "controls_pool": 4},
            budget=10,
            seed=3,
            confirm_processes=5,
            journal_fsync=False,
            controls=setup,
            warm_start=(good,),
        ),
        compiler=StandInCompiler(acf, fail_every=None),
        measurer=measurer,
        publish=ResultPublisher(tmp_path / "registry", tmp_path / "cache", out),
    )
    pinned = next(m for m in result.front if m.key == result.pinned)
    genes = pinned.candidate.as_dict()
    assert (genes[GENE] != "none") is pinned_with_controls
    # the result file travels with the files its members apply, beside it in controls/
    beside = out.parent / "controls"
    assert (beside / f"{genes[GENE]}.acf").is_file() is pinned_with_controls
    if pinned_with_controls:
        assert (beside / "NOTICE").is_file()
        assert not [n for n in result.notes if "controls files not written" in n]
    verdict = result.controls
    assert verdict is not None and verdict.pinned is pinned_with_controls
    assert (verdict.difference == "lower") is pinned_with_controls
    assert result.to_json()["controls"]["reference"] == verdict.reference
    if pinned_with_controls:
        assert verdict.gain > 1.05
    if factor > 1:  # every file slower: judged all the same, and said so
        assert verdict.difference == "higher" and verdict.gain < 0.95
    assert dict(genes, **{GENE: "none"}) == {**good, GENE: "none"}  # the warm start's build


@pytest.mark.skipif(
    unavailable() is not None, reason="the cost model needs the model extra (ctune[model])"
)
def test_the_cost_model_builds_every_controls_file(
    acf_spec: KernelSpec, settings, setup: ControlsSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controls file's bytes are encrypted: no feature of the model tells one file from
    another, so however sure the model is, it skips none of them (it used to skip them all
    once trained, and the stage ran out of its compile cap one file at a time)."""
    import math

    from ctune.model import CostModel, Prediction

    def hopeless(self: CostModel, rows: list[list[float]]) -> list[Prediction]:
        return [Prediction(math.inf, math.inf, math.inf) for _ in rows]

    monkeypatch.setattr(CostModel, "predict", hopeless)
    options = {"start": "controls", "controls_pool": 4}
    # 24: past the model's MIN_TRAINED measured trials
    result = _search(
        settings,
        acf_spec,
        setup,
        _steady_measurer(),
        budget=24,
        seed=4,
        strategy_options=options,
        cost_model=True,
    )
    trials = _trials(result.journal)
    assert result.skipped == 0 and len(_with_controls(trials)) == len(trials) - 1 >= 23
    (note,) = [n for n in result.notes if n.startswith("cost model:")]
    assert f"{len(trials) - 1} with a controls file built unscreened" in note


# --- islands: one engine's files compile while another's generation waits -----------------


def _phase(setup: ControlsSetup, spec: KernelSpec, islands: int) -> ControlsPhase:
    phase = ControlsPhase(
        setup, spec.name, seed=3, score=lambda t: t.values[0] if t.values else None, islands=islands
    )
    phase.start(spec.space.default_values())
    return phase


def _file_of(phase: ControlsPhase, cand: Candidate) -> tuple[int, ...]:
    return decisions(phase.store.read(str(cand.as_dict()[GENE])))


def _scored(phase: ControlsPhase, batch: list[Candidate], number: int) -> list[Trial]:
    """Trials of ``batch``, each valued by its file's decisions (a lower sum is better)."""
    return [
        Trial(number + i, 1, c, Outcome.OK, values=(float(sum(_file_of(phase, c))),))
        for i, c in enumerate(batch)
    ]


def test_the_next_island_is_asked_while_a_generation_is_out(
    spec: KernelSpec, setup: ControlsSetup
) -> None:
    acf = spec.with_acf(("ptxas",))
    small = dataclasses.replace(setup, options={"pool_size": 4})
    one, two = _phase(small, acf, islands=1), _phase(small, acf, islands=2)
    first = two.ask(4, {})
    ahead = two.upcoming(4)
    assert len(ahead) == 4 and not {c.key() for c in ahead} & {c.key() for c in first}
    assert two.upcoming(4) == ahead  # looking again asks nothing more
    assert two.ask(4, {}) == ahead  # the next generation is the island's files
    assert two.upcoming(4) == []  # both islands have files out: nothing more to ask
    out = one.ask(4, {})
    assert one.upcoming(4) == []  # one engine: its next generation waits for these scores
    one.tell(_scored(one, out, 0))
    assert len(one.upcoming(4)) == 4


def test_looking_ahead_changes_no_proposal(spec: KernelSpec, setup: ControlsSetup) -> None:
    """The same files in the same order whether or not the search looked ahead: an engine
    is asked only when it has nothing out, so when it is asked does not matter."""
    acf = spec.with_acf(("ptxas",))
    small = dataclasses.replace(setup, options={"pool_size": 4})
    seen: list[list[tuple[int, ...]]] = []
    for looks in (False, True):
        phase = _phase(small, acf, islands=2)
        files: list[tuple[int, ...]] = []
        for generation in range(8):
            batch = phase.ask(4, {})
            if looks:
                phase.upcoming(4)
            files += [_file_of(phase, c) for c in batch]
            phase.tell(_scored(phase, batch, 4 * generation))
        seen.append(files)
    assert seen[0] == seen[1] and len(set(seen[0])) > 16


def _slow_first_of_each_batch(store: ControlsStore) -> Callable[[Candidate], float]:
    """Build seconds: 30 for the first file of each engine batch of 4, else 1."""

    def seconds(cand: Candidate) -> float:
        digest = cand.as_dict().get(GENE, "none")
        if digest == "none":
            return 1.0
        serial = json.loads(store.read(str(digest)).split(b"\n", 1)[1])["serial"]
        return 30.0 if serial % 4 == 1 else 1.0

    return seconds


def _slow_stage(
    folder: Path, spec: KernelSpec, islands: int, **options: Any
) -> tuple[SearchResult, float, ControlsSetup]:
    """A controls stage on the simulated clock: 4 compile slots, pool 4, the slow builds of
    :func:`_slow_first_of_each_batch`; the result, its simulated wall and its setup."""
    from ctune.config import Settings
    from ctune.objective import parse_objective_spec
    from ctune.search.driver import SearchOptions, run_search
    from ctune.testing.slow_builds import FakeClock, SlowStandInCompiler, TimedStandInMeasurer

    folder.mkdir(parents=True, exist_ok=True)
    space = folder.parent / "space.bin"
    space.write_bytes(b"a stand-in search space")
    setup = ControlsSetup(folder / "controls", {GENE: space}, "standin")
    clock = FakeClock()
    interrupt_at = options.pop("interrupt_at", None)
    result = run_search(
        Settings(cache_dir=folder),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(
            strategy="staged",
            strategy_options={"start": "controls", "controls_pool": 4, "controls_islands": islands},
            budget=33,
            seed=5,
            confirm_processes=0,
            fill=False,
            journal_fsync=False,
            controls=setup,
            **options,
        ),
        compiler=SlowStandInCompiler(
            spec,
            clock,
            jobs=4,
            compile_s_of=_slow_first_of_each_batch(ControlsStore(setup.store_root)),
        ),
        measurer=TimedStandInMeasurer(
            clock,
            measure_s=0.1,
            samples=30,
            noise=0.0,
            fault_corner=None,
            wrong_every=None,
            interrupt_at=interrupt_at,
        ),
        clock=clock,
    )
    return result, clock(), setup


def test_islands_shorten_a_controls_stage_of_slow_builds(tmp_path: Path, spec: KernelSpec) -> None:
    """A slow ptxas run in every engine batch: one engine waits for it each generation;
    with two islands one's files compile while the other's generation waits."""
    acf = spec.with_acf(("ptxas",))
    walls: dict[int, float] = {}
    for islands in (1, 2):
        result, walls[islands], _ = _slow_stage(tmp_path / f"i{islands}" / "cache", acf, islands)
        assert len(_with_controls(_trials(result.journal))) == 32
    # one engine: 8 generations of about 30 s each; two: each overlaps the other's
    assert walls[1] > 8 * 30
    assert walls[2] < 0.7 * walls[1], walls


def test_resume_with_islands_proposes_what_the_uninterrupted_search_would_have(
    tmp_path: Path, spec: KernelSpec
) -> None:
    """Interrupted while an island's files compile ahead, resumed: the same files in the
    same order as the search that was not interrupted."""
    acf = spec.with_acf(("ptxas",))
    whole, _, setup = _slow_stage(tmp_path / "whole" / "cache", acf, 2)
    crashed, _, cut_setup = _slow_stage(tmp_path / "cut" / "cache", acf, 2, interrupt_at=14)
    assert crashed.interrupted
    resumed, _, _ = _slow_stage(tmp_path / "cut" / "cache", acf, 2, resume=crashed.journal)
    expected = _decisions(setup, _with_controls(_trials(whole.journal)))
    assert _decisions(cut_setup, _with_controls(_trials(resumed.journal))) == expected


def test_auto_islands_keep_two_engines_in_turn(tmp_path: Path, setup: ControlsSetup) -> None:
    from ctune.search.staged import controls_islands

    assert controls_islands("auto", setup) == 2  # one gene: two islands of it
    nvcc = tmp_path / "nvcc-space.bin"
    nvcc.write_bytes(b"another stand-in space")
    both = dataclasses.replace(setup, spaces={GENE: setup.spaces[GENE], "acf_nvcc": nvcc})
    assert controls_islands("auto", both) == 1  # two genes take turns already
    assert controls_islands("3", both) == 3
    for bad in ("0", "two", "-1"):
        with pytest.raises(UserError, match="controls_islands"):
            controls_islands(bad, setup)
