"""--cost-model on: what it skips is journaled with why, it never skips the default build or
a confirmation, off changes nothing, and a resumed search skips as the uninterrupted one."""

from __future__ import annotations

import copy
import json
import math
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctune.config import Settings
from ctune.errors import UserError
from ctune.model import Prediction, unavailable
from ctune.objective import parse_objective_spec
from ctune.records import Candidate, Outcome
from ctune.search import cost_policy
from ctune.search.driver import SearchOptions, run_search
from ctune.search.journal import read
from ctune.search.journal_copy import pack
from ctune.search.result import SearchResult
from ctune.spec import KernelSpec, load_spec
from ctune.testing.binary_truth import BinaryTruth, synthetic_binary_truth
from ctune.testing.standins import ReplayCompiler, ReplayMeasurer

KERNEL = Path(__file__).parents[3] / "kernels" / "tiled_matmul.cu"
SUBSPACE: dict[str, list[Any]] = {
    "BLOCK_X": [16, 32, 64],
    "BLOCK_Y": [2, 4, 8, 16],
    "WORK_X": [1, 2, 4],
    "WORK_Y": [1, 2, 4, 8],
    "TILE_K": [16, 32],
    "PAD": [0],
    "maxrregcount": [0, 32, 64, 128],
    "fast_math": [False, True],
}
needs_sklearn = pytest.mark.skipif(
    unavailable() is not None, reason="the cost model needs the model extra (ctune[model])"
)


@pytest.fixture(scope="module")
def landscape() -> tuple[BinaryTruth, KernelSpec]:
    spec = load_spec(KERNEL)
    truth = synthetic_binary_truth(spec, spec.problem(), SUBSPACE, seed=5)
    return truth, truth.restrict(spec)


def _search(
    landscape: tuple[BinaryTruth, KernelSpec],
    cache: Path,
    *,
    measurer: ReplayMeasurer | None = None,
    registry: Path | None = None,
    **options: Any,
) -> SearchResult:
    truth, spec = landscape
    replay = truth.to_replay()
    options.setdefault("budget", 60)
    options.setdefault("seed", 3)
    options.setdefault("confirm_processes", 0)
    return run_search(
        Settings(cache_dir=cache, registry=registry or cache / "registry"),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(strategy="auto", journal_fsync=False, **options),
        compiler=ReplayCompiler(replay),
        measurer=measurer or ReplayMeasurer(replay),
        fingerprint=replay.fingerprint,
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _decisions(path: Path) -> list[tuple[str, str]]:
    replay, _ = read(path)
    return [(t.candidate.key(), t.outcome.value) for t in replay.trials]


@needs_sklearn
def test_skips_are_journaled_with_the_prediction_and_the_leader(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    # seed 4: with seed 3 the staged search's flag round (taking turns over its leaders) left
    # the model nothing to skip within the 60 measurements; one compile slot: no refills
    result = _search(landscape, tmp_path / "cache", cost_model=True, seed=4, jobs=1)
    lines = _lines(result.journal)
    assert lines[0]["search"]["cost_model"] is True
    skipped = [r for r in lines if r.get("kind") == "trial" and "skipped" in r]
    assert skipped, "the model skipped nothing on a landscape it learns easily"
    for record in skipped:
        trial, why = record["trial"], record["skipped"]
        assert trial["outcome"] == "skipped" and trial["build"] is None
        assert trial["measurement"] is None
        assert why["bound"] > why["leader"] > 0  # p50 is minimised: the bound is worse
        assert why["trained_on"] >= cost_policy.MIN_TRAINED
    _, spec = landscape
    skipped_keys = {spec.candidate(r["trial"]["candidate"]["genes"]).key() for r in skipped}
    assert spec.default_candidate().key() not in skipped_keys
    # the budget counts measurements: the skipped candidates are on top of it
    assert result.skipped == len(skipped)
    counted = result.evaluations - result.skipped - result.fillers - result.reused
    assert counted == 60
    from ctune.cli.render_search import binaries_line

    assert f"{len(skipped)} never built: the cost model ruled them out" in binaries_line(result)
    assert result.failures.get("skipped") is None  # a skip is no failure
    (note,) = [n for n in result.notes if n.startswith("cost model: skipped")]
    assert f"skipped {len(skipped)} of" in note
    assert "its bound needs" not in note  # it was bounded: it skipped


@needs_sklearn
def test_a_search_too_short_for_a_bound_says_why_it_skipped_nothing(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    """At alpha 0.02 the lower bound is -inf below 49 measured trials: a search of 20
    skips nothing, and says so, with what would change that."""
    result = _search(landscape, tmp_path / "cache", cost_model=True, budget=20, jobs=1)
    assert result.skipped == 0
    (note,) = [n for n in result.notes if n.startswith("cost model: skipped 0 of")]
    had = int(note.split("had at most ")[1].split(":")[0])
    assert cost_policy.MIN_TRAINED <= had <= 20
    assert "its bound needs about 49 measured trials" in note


@needs_sklearn
def test_off_writes_the_journal_it_always_did(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    default = _search(landscape, tmp_path / "a")
    off = _search(landscape, tmp_path / "b", cost_model=False)
    assert "cost_model" not in _lines(default.journal)[0]["search"]
    assert _decisions(default.journal) == _decisions(off.journal)
    assert all(o != "skipped" for _, o in _decisions(off.journal))


@needs_sklearn
def test_a_resumed_search_skips_as_the_uninterrupted_one(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    """A journal cut after a generation in which the model skipped (a crash there) resumes
    into the uninterrupted search's journal: the same candidates, skipped the same way."""
    whole = _search(landscape, tmp_path / "whole", cost_model=True, budget=90)
    lines = whole.journal.read_text().splitlines(keepends=True)
    records = [json.loads(line) for line in lines]
    first_skip = next(i for i, r in enumerate(records) if "skipped" in r)
    cut = next(i for i, r in enumerate(records) if i > first_skip and r["kind"] == "generation")
    assert cut < len(records) - 10  # the search goes on well past the cut
    journal = tmp_path / "cut" / "journals" / "cut.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text("".join(lines[: cut + 1]))
    resumed = _search(landscape, tmp_path / "cut", resume=journal, budget=90)
    assert _decisions(resumed.journal) == _decisions(whole.journal)
    assert [r.get("skipped") for r in _lines(resumed.journal)] == [
        r.get("skipped") for r in records
    ]


class _CtrlC(ReplayMeasurer):
    """The replay's measurements, with a Ctrl-C (a real SIGINT) during the ``at``-th."""

    def __init__(self, replay: Any, at: int) -> None:
        super().__init__(replay)
        self.at, self.count = at, 0

    def measure(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        if self.count == self.at:
            os.kill(os.getpid(), signal.SIGINT)
        return super().measure(*args, **kwargs)


def _every_fourth(self: Any, rows: list[list[float]]) -> list[Prediction]:
    """A model that rules out about one candidate in four, the same ones every time."""
    hopeless, open_ = Prediction(math.inf, math.inf, math.inf), Prediction(-math.inf, 0, 0)
    return [hopeless if hash(tuple(row)) % 4 == 0 else open_ for row in rows]


@needs_sklearn
def test_a_generation_cut_short_resumes_as_the_uninterrupted_one(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generation cut in the middle (a crash among its skips, among its builds after the
    refills its skips asked for, or a Ctrl-C) resumes as it does without the model: asked
    again, its journaled trials answer (the skips too, without a second line), and the
    search journals the uninterrupted one's trials."""
    from ctune.model import CostModel

    monkeypatch.setattr(CostModel, "predict", _every_fourth)
    again = {"jobs": 8, "budget": 40}  # the compile slots decide the refills
    whole = _search(landscape, tmp_path / "whole", cost_model=True, **again)
    expected, records = _decisions(whole.journal), _lines(whole.journal)
    trials = [r for r in records if r["kind"] == "trial"]
    skips = [i for i, r in enumerate(trials) if "skipped" in r]
    refilled = [b + s > 8 for b, s in _builds_per_generation(whole.journal).values()]
    assert skips and any(refilled)  # skips, and asks in their place
    # among the first generation's skips, among the last one's, then among its builds
    for k in sorted({skips[0] + 1, skips[-1], skips[-1] + 2}):
        journal = tmp_path / f"crash-{k}" / "j.jsonl"
        journal.parent.mkdir()
        ends = [i for i, r in enumerate(records) if r["kind"] == "trial"][k]
        journal.write_text("".join(f"{json.dumps(r)}\n" for r in records[:ends]))
        assert records[ends - 1]["kind"] == "trial"  # inside a generation
        resumed = _search(landscape, tmp_path / f"crash-{k}", resume=journal, **again)
        assert _decisions(resumed.journal) == expected, f"a crash after {k} trial lines"
    truth, _ = landscape
    journal = tmp_path / "ctrl-c" / "j.jsonl"
    # during the second build of the last generation with skips
    at = sum(1 for t in trials[: skips[-1] + 2] if t["trial"].get("measurement"))
    measurer = _CtrlC(truth.to_replay(), at)
    stopped = _search(
        landscape, tmp_path / "ctrl-c", measurer=measurer, journal=journal, cost_model=True, **again
    )
    assert stopped.interrupted and _lines(journal)[-1]["kind"] == "trial"
    resumed = _search(landscape, tmp_path / "ctrl-c", resume=journal, **again)
    assert _decisions(resumed.journal) == expected


@needs_sklearn
def test_never_the_default_build_nor_the_confirmation(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that rules out everything still leaves the default build and the
    confirmation alone."""
    from ctune.model import CostModel

    def hopeless(self: CostModel, rows: list[list[float]]) -> list[Prediction]:
        return [Prediction(math.inf, math.inf, math.inf) for _ in rows]

    monkeypatch.setattr(CostModel, "predict", hopeless)
    _, spec = landscape
    default = spec.default_candidate()
    original = cost_policy.ModelPolicy.screen
    asked: list[bool] = []

    def screen(self: cost_policy.ModelPolicy, new: Any, generation: int, refill: Any) -> Any:
        kept = original(self, [default], generation)
        asked.append(kept.kept == [default] and not kept.skipped)
        return original(self, new, generation, refill)

    monkeypatch.setattr(cost_policy.ModelPolicy, "screen", screen)
    result = _search(landscape, tmp_path / "cache", cost_model=True, confirm_processes=3)
    assert asked and all(asked)
    assert result.confirmation is not None and result.confirmation.processes >= 1
    assert result.baseline is not None and result.front  # re-measured, not skipped
    outcomes = [o for _, o in _decisions(result.journal)]
    assert outcomes[0] == "ok" and "skipped" in outcomes


def _builds_per_generation(path: Path) -> dict[int, tuple[int, int]]:
    """Generation -> (candidates built, not fillers; candidates skipped)."""
    out: dict[int, tuple[int, int]] = {}
    for record in _lines(path):
        if record.get("kind") != "trial" or record.get("filler"):
            continue
        trial = record["trial"]
        built, skipped = out.get(trial["generation"], (0, 0))
        if trial["outcome"] == "skipped":
            out[trial["generation"]] = (built, skipped + 1)
        else:
            out[trial["generation"]] = (built + 1, skipped)
    return out


@needs_sklearn
def test_a_generation_fills_the_compile_slots_its_skips_freed(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With as many compile slots as the strategy's batch (8), a generation whose model
    skipped some asks for more until its 8 builds compile side by side; with one slot the
    skips stand, since each build then waits for the one before."""
    from ctune.model import CostModel

    def every_fourth(self: CostModel, rows: list[list[float]]) -> list[Prediction]:
        hopeless, open_ = Prediction(math.inf, math.inf, math.inf), Prediction(-math.inf, 0, 0)
        return [hopeless if hash(tuple(row)) % 4 == 0 else open_ for row in rows]

    monkeypatch.setattr(CostModel, "predict", every_fourth)
    one = _search(landscape, tmp_path / "one", cost_model=True, seed=3, jobs=1)
    eight = _search(landscape, tmp_path / "eight", cost_model=True, seed=3, jobs=8)
    assert not any("more asked for" in n for n in one.notes)
    (note,) = [n for n in eight.notes if n.startswith("cost model: skipped")]
    assert "more asked for to fill the compile slots skips freed" in note
    short = [g for g, (built, skipped) in _builds_per_generation(one.journal).items() if skipped]
    assert any(_builds_per_generation(one.journal)[g][0] < 8 for g in short)
    per_generation = _builds_per_generation(eight.journal)
    last = max(per_generation)
    filled = [built for g, (built, skipped) in per_generation.items() if skipped and g < last]
    assert filled and all(built == 8 for built in filled)
    assert eight.stop_reason == "budget"  # it ran its measurements, not into the compile cap
    assert len(per_generation) < len(_builds_per_generation(one.journal))


def test_refill_fills_the_waves_a_generation_runs_anyway() -> None:
    from ctune.records import Candidate

    def cand(a: int, runtime: int = 0) -> Candidate:
        return Candidate.of("k", {"A": a, "R": runtime})

    def refill(slots: int) -> cost_policy.Refill:
        return cost_policy.Refill(lambda n: [], slots, lambda c: c.as_dict()["A"], 99, 99)

    asked = [cand(a) for a in range(8)]
    kept = asked[:3]
    # one wave of 16 slots: filled up to the 8 candidates the strategy first asked for
    wave = refill(16).waves_of(kept)
    assert wave.wave_builds == 16 and not wave.full(asked, [*kept, *asked[3:7]])
    assert wave.full(asked, asked)
    # two waves of 2 slots: the second's free slot is filled, not a third wave
    wave = refill(2).waves_of(kept)
    assert wave.wave_builds == 4
    assert not wave.full(asked, kept) and wave.full(asked, asked[:4])
    # one slot: each build waits for the one before, nothing to fill
    assert refill(1).waves_of(kept).full(asked, kept)
    assert refill(16).waves_of([]).full(asked, [])  # nothing built: no wave to fill
    # candidates that differ in runtime genes share one build, and count as candidates
    same_build = [cand(1), cand(1, 1), cand(2)]
    assert refill(4).builds(same_build) == 2
    wave = refill(16).waves_of(same_build)
    assert not wave.full(asked, same_build)  # 3 candidates of the 8 asked, 2 builds of 16


@needs_sklearn
def test_earlier_journals_of_the_kernel_warm_start_the_model(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    """Alone, 30 trials are too few to bound anything; after an earlier search of the
    kernel in the same cache, the model skips from its first generation on."""
    cold = _search(landscape, tmp_path / "cold", cost_model=True, budget=30)
    assert all(o != "skipped" for _, o in _decisions(cold.journal))
    earlier = _search(landscape, tmp_path / "warm", seed=11, budget=90)
    warm = _search(landscape, tmp_path / "warm", cost_model=True, budget=30)
    assert warm.journal != earlier.journal
    measured = sum(1 for t in read(earlier.journal)[0].trials if t.values is not None)
    (note,) = [n for n in warm.notes if "earlier journal" in n]
    assert note.startswith(f"cost model: 1 earlier journal(s) of tiled_matmul ({measured} ")
    assert any(o == "skipped" for _, o in _decisions(warm.journal))


def _kept_in(registry: Path, journal: Path, problem: str) -> Path:
    """``journal`` as the registry keeps it beside an artifact (``registry journal``)."""
    copy = registry / "tiled_matmul" / problem / "sm90-stand-in.jsonl.gz"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(pack(journal.read_bytes()))
    return copy


@needs_sklearn
def test_the_registry_s_journal_copies_train_the_model_on_a_new_machine(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    """A machine whose cache holds no journal, with a registry that keeps one beside an
    artifact: the model learns from it from the first generation (with --cost-model on;
    left out, a registry's copy alone does not turn the model on). The same search in
    the cache and in the registry is read once."""
    _, spec = landscape
    earlier = _search(landscape, tmp_path / "elsewhere", seed=11, budget=90)
    registry = tmp_path / "registry"
    copy = _kept_in(registry, earlier.journal, spec.problem().name)
    assert read(copy)[0].trials == read(earlier.journal)[0].trials
    fresh = tmp_path / "new-machine"
    settings = Settings(cache_dir=fresh, registry=registry)
    assert not cost_policy.on_by_default(settings, spec, "p50", None)
    warm = _search(landscape, fresh, registry=registry, cost_model=True, budget=30)
    (note,) = [n for n in warm.notes if "earlier journal" in n]
    measured = sum(1 for t in read(earlier.journal)[0].trials if t.values is not None)
    assert note.startswith(
        f"cost model: 1 earlier journal(s) of tiled_matmul ({measured} measured trials, "
        "1 kept in the registry) train it"
    )
    assert any(o == "skipped" for _, o in _decisions(warm.journal))
    both = _search(landscape, tmp_path / "elsewhere", registry=registry, cost_model=True, budget=30)
    (note,) = [n for n in both.notes if "earlier journal" in n]
    assert note.startswith(f"cost model: 1 earlier journal(s) of tiled_matmul ({measured} ")
    assert "kept in the registry" not in note  # the cache's own file is read first


def test_a_registry_copy_cannot_be_resumed(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    _, spec = landscape
    earlier = _search(landscape, tmp_path / "cache", budget=20)
    copy = _kept_in(tmp_path / "registry", earlier.journal, spec.problem().name)
    with pytest.raises(UserError, match="a registry's copy of a journal, which is read only"):
        _search(landscape, tmp_path / "cache", budget=20, resume=copy)


@needs_sklearn
def test_a_journal_of_another_gpu_is_named_in_the_note(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    """A warm start from a journal recorded on another GPU says which GPU: its ranking is
    that GPU's, and the user may want --cost-model off."""
    truth, spec = landscape
    elsewhere = copy.deepcopy(truth)
    elsewhere.fingerprint = {**truth.fingerprint, "gpu_name": "stand-in GPU B"}
    _search((elsewhere, spec), tmp_path / "cache", seed=11, budget=90)
    _search(landscape, tmp_path / "cache", seed=12, budget=30)  # one of this GPU's own
    warm = _search(landscape, tmp_path / "cache", cost_model=True, budget=30)
    (note,) = [n for n in warm.notes if "earlier journal" in n]
    assert note.startswith("cost model: 2 earlier journal(s) of tiled_matmul (")
    assert "; 1 on another GPU: replay of stand-in GPU B" in note
    assert "synthetic" not in note.split("another GPU:")[1]  # this GPU's own is not listed


@needs_sklearn
def test_another_shape_s_journal_teaches_ratios_to_its_own_baseline(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    """A journal of sq1024 warm-starts a search of sq2048: its rows carry sq1024's dims, its
    targets are ratios to its own baseline (the replay serves the same times to both)."""
    from ctune.model import FeatureMap

    _, spec = landscape
    earlier = _search(landscape, tmp_path / "cache", budget=60, seed=11)
    features = FeatureMap(spec)
    examples = cost_policy.journal_examples(earlier.journal, features, "p50", "min")
    trials = read(earlier.journal)[0].trials
    assert len(examples) == len(trials) and examples[0].target == 0.0
    column = features.names.index("dim:M")
    assert {e.row[column] for e in examples} == {1024.0}
    base = trials[0].values
    assert base is not None
    for example, trial in zip(examples, trials, strict=True):
        if trial.values is not None:
            assert example.target == pytest.approx(math.log(trial.values[0] / base[0]))
    assert cost_policy.journal_examples(earlier.journal, features, "p99", "min") == []
    other = _search(landscape, tmp_path / "cache", cost_model=True, budget=30, problem="sq2048")
    assert any(n.startswith("cost model: 1 earlier journal(s)") for n in other.notes)
    assert any(o == "skipped" for _, o in _decisions(other.journal))


def test_without_scikit_learn_it_says_so_and_builds_everything(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctune.model

    monkeypatch.setattr(ctune.model, "unavailable", lambda: "scikit-learn is not installed")
    result = _search(landscape, tmp_path / "cache", cost_model=True, budget=20)
    notes = [n for n in result.notes if n.startswith("cost model")]
    assert notes == [
        "cost model unavailable: scikit-learn is not installed; every candidate is built"
    ]
    assert all(o != "skipped" for _, o in _decisions(result.journal))


def test_resume_refuses_another_cost_model_setting(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    first = _search(landscape, tmp_path / "cache", budget=12)
    refused = "cannot resume with --cost-model on: the journal's search ran with --cost-model off"
    with pytest.raises(UserError, match=refused):
        _search(landscape, tmp_path / "cache", resume=first.journal, budget=12, cost_model=True)


def test_on_off_flag() -> None:
    assert cost_policy.parse_on_off("on", "--cost-model") is True
    assert cost_policy.parse_on_off("OFF", "--cost-model") is False
    assert cost_policy.parse_on_off(None, "--cost-model") is None
    with pytest.raises(UserError, match="--cost-model takes on or off, got 'maybe'"):
        cost_policy.parse_on_off("maybe", "--cost-model")


def test_a_skipped_trial_reads_back(tmp_path: Path) -> None:
    from ctune.records import Candidate, Trial
    from ctune.search.journal import Journal

    path = tmp_path / "j.jsonl"
    with Journal.create(path, {"kernel": "k"}) as journal:
        trial = Trial(1, 2, Candidate.of("k", {"A": 1}), Outcome.SKIPPED)
        journal.append(trial, skipped={"bound": 2.0, "leader": 1.0})
    replay, _ = read(path)
    assert replay.trials == [trial]
    assert _lines(path)[1]["skipped"] == {"bound": 2.0, "leader": 1.0}


@needs_sklearn
def test_left_out_it_is_on_after_an_earlier_search_of_the_kernel(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    """--cost-model left out: off in an empty cache, on once an earlier search of the
    kernel (same first objective) is there, saying so; --cost-model off still wins, and a
    resumed search keeps what its journal recorded."""
    cache = tmp_path / "cache"
    first = _search(landscape, cache, budget=30)
    assert "cost_model" not in _lines(first.journal)[0]["search"]  # nothing to learn from
    second = _search(landscape, cache, budget=30, seed=5)
    assert _lines(second.journal)[0]["search"]["cost_model"] is True
    (note,) = [n for n in second.notes if "earlier journal(s)" in n]
    assert note.endswith("; --cost-model off builds every candidate")
    off = _search(landscape, cache, budget=30, seed=6, cost_model=False)
    assert "cost_model" not in _lines(off.journal)[0]["search"]
    resumed = _search(landscape, cache, budget=30, resume=first.journal)
    assert "cost_model" not in _lines(resumed.journal)[0]["search"]


@needs_sklearn
def test_another_objective_s_journal_does_not_turn_it_on(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path
) -> None:
    _, spec = landscape
    cache = tmp_path / "cache"
    _search(landscape, cache, budget=20)
    settings = Settings(cache_dir=cache)
    assert cost_policy.on_by_default(settings, spec, "p50", None)
    assert not cost_policy.on_by_default(settings, spec, "p99", None)
    assert not cost_policy.on_by_default(Settings(cache_dir=tmp_path / "empty"), spec, "p50", None)
    elsewhere = tmp_path / "set" / "journal.jsonl"  # a problem set's folder: its own shapes
    assert not cost_policy.on_by_default(
        Settings(cache_dir=tmp_path / "empty"), spec, "p50", elsewhere
    )


@needs_sklearn
def test_the_first_screen_is_known_before_the_baseline_is_measured(
    landscape: tuple[BinaryTruth, KernelSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What may compile beside the baseline (``ahead``, asked before any measurement) is
    decided by the same bounds as the first screen, call for call, with a model an earlier
    search trained: the baseline is 0 on the model's scale, whatever it measures. (On a
    GPU of the arch's SM, which the decision before the measurement takes for the
    device's. The refills' guess: test_prefetch_first_generation.py.)"""
    from ctune.model import CostModel

    truth, spec = landscape
    truth = copy.deepcopy(truth)
    truth.fingerprint["sm"] = spec.arch  # the replayed GPU: the arch the spec builds for
    _search((truth, spec), tmp_path / "cache", seed=11, budget=90)
    predict, ahead = CostModel.predict, cost_policy.ModelPolicy.ahead
    calls: list[dict[tuple[float, ...], float]] = []
    early: list[int] = []  # how many predictions ``ahead`` asked for

    def spy(self: CostModel, rows: list[list[float]]) -> list[Prediction]:
        out = predict(self, rows)
        calls.append({tuple(row): p.low for row, p in zip(rows, out, strict=True)})
        return out

    def ahead_spy(
        self: cost_policy.ModelPolicy, guessed: Sequence[Candidate], refill: cost_policy.Refill
    ) -> list[Candidate]:
        try:
            return ahead(self, guessed, refill)
        finally:
            early.append(len(calls))

    monkeypatch.setattr(CostModel, "predict", spy)
    monkeypatch.setattr(cost_policy.ModelPolicy, "ahead", ahead_spy)
    warm = _search((truth, spec), tmp_path / "cache", cost_model=True, budget=30)
    n = early[0]  # the first generation's, and its refills' where it skips (here none)
    guess, first_screen = calls[:n], calls[n : 2 * n]
    assert any(math.isfinite(low) for rows in guess for low in rows.values())  # it could skip
    assert guess == first_screen  # the same rows, the same bounds, call for call
    assert read(warm.journal)[0].header["search"]["cost_model"] is True
