"""The exhaustive strategy's order: builds shuffled by the search's seed, or product order.

The last test replays the tiled matmul's recorded ground truth with the driver's pruning
rule, which is why the order matters: a good leader found early prunes more of the rest.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ctune.errors import UserError
from ctune.records import Build, Candidate, GeneValue, Outcome, Trial
from ctune.search import baselines, make_strategy
from ctune.search.baselines import ExhaustiveStrategy
from ctune.search.strategy import StrategyContext
from ctune.spec import KernelSpec, load_spec
from ctune.spec.space.params import BuildGroup
from ctune.testing.binary_truth import BinaryTruth
from ctune.testing.slow_builds import runtime_standin_spec

ROOT = Path(__file__).resolve().parents[3]
TRUTH = ROOT / "tests" / "data" / "ground_truth" / "tiled_matmul-sq1024.json.gz"
MARGIN = 0.10  # DEFAULT_PRUNE_MARGIN


@pytest.fixture
def rt_spec(tmp_path: Path) -> KernelSpec:
    return runtime_standin_spec(tmp_path / "kernel")


def _strategy(spec: KernelSpec, seed: int = 0, **options: Any) -> ExhaustiveStrategy:
    context = StrategyContext(spec.name, spec.space, dict(spec.problem().dims), seed=seed)
    strategy = make_strategy("exhaustive", context, options)
    assert isinstance(strategy, ExhaustiveStrategy)
    return strategy


def _drain(strategy: ExhaustiveStrategy, n: int = 4) -> list[Candidate]:
    out: list[Candidate] = []
    while batch := strategy.ask(n):
        out += batch
    return out


def _trial(spec: KernelSpec, number: int, values: Mapping[str, GeneValue], value: float) -> Trial:
    cand = spec.candidate(values)
    build = Build(cand.key(), (), "stand-in", Outcome.OK)
    return Trial(number, 0, cand, Outcome.OK, build, None, (value,))


def _valid(spec: KernelSpec) -> list[Candidate]:
    return [spec.candidate(v) for v in spec.space.iter_valid(spec.problem().dims)]


def _build(spec: KernelSpec, cand: Candidate) -> BuildGroup:
    return spec.space.build_group(cand.genes)


def test_every_valid_candidate_is_proposed_once(rt_spec: KernelSpec) -> None:
    asked = _drain(_strategy(rt_spec), n=3)
    keys = [c.key() for c in asked]
    assert len(keys) == len(set(keys))
    assert set(keys) == {c.key() for c in _valid(rt_spec)}
    count, exact = rt_spec.space.count_valid(rt_spec.problem().dims)
    assert exact and len(keys) == count


def test_the_seed_decides_the_order(rt_spec: KernelSpec) -> None:
    first = _drain(_strategy(rt_spec, seed=3))
    assert _drain(_strategy(rt_spec, seed=3)) == first
    assert _drain(_strategy(rt_spec, seed=4)) != first
    assert first != _valid(rt_spec)


def test_product_order_is_iter_valid(rt_spec: KernelSpec) -> None:
    assert _drain(_strategy(rt_spec, order="product")) == _valid(rt_spec)


def test_a_space_over_the_cap_keeps_product_order(
    rt_spec: KernelSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(baselines, "SHUFFLE_CAP", 10)
    assert _drain(_strategy(rt_spec, seed=5)) == _valid(rt_spec)


def test_a_builds_candidates_are_adjacent_in_product_order(rt_spec: KernelSpec) -> None:
    asked = [_build(rt_spec, c) for c in _drain(_strategy(rt_spec, seed=1))]
    runs = [b for i, b in enumerate(asked) if i == 0 or b != asked[i - 1]]
    assert len(runs) == len(set(runs))  # no build comes back after another one
    assert runs != list(dict.fromkeys(_build(rt_spec, c) for c in _valid(rt_spec)))
    by_build: dict[BuildGroup, list[Candidate]] = {}
    for c in _drain(_strategy(rt_spec, seed=1)):
        by_build.setdefault(_build(rt_spec, c), []).append(c)
    for c in _valid(rt_spec):
        assert by_build[_build(rt_spec, c)].pop(0) == c  # product order within a build
    assert not any(by_build.values())


def test_upcoming_is_what_the_next_asks_propose(rt_spec: KernelSpec) -> None:
    strategy = _strategy(rt_spec, seed=2)
    ahead = strategy.upcoming(10)  # before any ask: the order is drawn here
    assert len(ahead) == 10
    assert strategy.ask(4) + strategy.ask(4) + strategy.ask(2) == ahead
    ahead = strategy.upcoming(7)
    filler = ahead.pop(1)  # told in between, never asked: skipped by both
    strategy.tell([_trial(rt_spec, 0, filler.as_dict(), 1.0)])
    assert strategy.ask(4) + strategy.ask(2) == ahead


def test_a_resumed_search_proposes_the_same_rest(rt_spec: KernelSpec) -> None:
    strategy = _strategy(rt_spec, seed=7)
    generations = [
        [_trial(rt_spec, 4 * g + i, c.as_dict(), 1.0 + i) for i, c in enumerate(strategy.ask(4))]
        for g in range(5)
    ]
    for told in generations:
        strategy.tell(told)
    state = strategy.state()  # what the journal holds: the RNG as it is after 5 generations
    rest = _drain(strategy)

    resumed = _strategy(rt_spec, seed=7)
    for told in generations:
        resumed.tell(told)
    resumed.load_state(state)
    assert resumed.upcoming(6) == rest[:6]
    assert _drain(resumed) == rest


def test_an_unknown_order_is_one_user_error(rt_spec: KernelSpec) -> None:
    with pytest.raises(UserError) as err:
        _strategy(rt_spec, order="sorted")
    assert str(err.value) == (
        "option order='sorted' for exhaustive: expected one of shuffled, product"
    )


# --- the recorded ground truth ---------------------------------------------------------------


def _unpruned(truth: BinaryTruth, spec: KernelSpec, strategy: ExhaustiveStrategy) -> int:
    """Candidates the driver's rule measures in full after the baseline: those within the
    margin of the best value at their generation's start."""
    baseline = spec.default_candidate()
    best = truth.value(baseline.key())
    assert best is not None
    strategy.tell([_trial(spec, 0, baseline.as_dict(), best)])
    unpruned = 0
    while generation := strategy.ask(4):
        threshold = best * (1.0 + MARGIN)
        values = [v for v in (truth.value(c.key()) for c in generation) if v is not None]
        unpruned += sum(1 for v in values if v <= threshold)
        best = min([best, *values])
    return unpruned


def test_a_shuffled_order_prunes_more_of_the_recorded_tiled_matmul(
    bench_module: Callable[[str], ModuleType],
) -> None:
    subspace = bench_module("search_overhead").SUBSPACE  # its 36 structures, flags at defaults
    truth = BinaryTruth.load(TRUTH)
    spec = BinaryTruth(truth.kernel, truth.problem, truth.objective, False, subspace).restrict(
        load_spec(ROOT / "kernels" / "tiled_matmul.yaml")
    )
    assert spec.space.count_valid(spec.problem(truth.problem).dims) == (36, True)

    def unpruned(seed: int, order: str) -> int:
        context = StrategyContext(
            spec.name, spec.space, spec.problem(truth.problem).dims, seed=seed
        )
        strategy = make_strategy("exhaustive", context, {"order": order})
        assert isinstance(strategy, ExhaustiveStrategy)
        return _unpruned(truth, spec, strategy)

    product = unpruned(0, "product")
    shuffled = [unpruned(seed, "shuffled") for seed in range(20)]
    assert statistics.median(shuffled) < product
