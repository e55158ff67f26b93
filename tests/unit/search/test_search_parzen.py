"""The Parzen-estimator strategy: its startup, its model, and what it proposes from it."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from ctune.errors import UserError
from ctune.records import Candidate, GeneValue, Outcome, Trial
from ctune.search import make_strategy
from ctune.search.parzen import density, log_ratio, split_good_bad
from ctune.search.strategy import StrategyContext, seed_values
from ctune.spec import KernelSpec, load_spec
from ctune.testing.binary_truth import synthetic_binary_truth
from tests.unit.search.test_search_staged import SUBSPACE, _best

MATMUL = Path(__file__).resolve().parents[3] / "kernels" / "tiled_matmul.yaml"


def _context(spec: KernelSpec, seed: int = 0) -> StrategyContext:
    return StrategyContext(spec.name, spec.space, spec.problem().dims, ("min",), seed)


def _trial(number: int, cand: Candidate, value: float | None) -> Trial:
    if value is None:
        return Trial(number, 1, cand, Outcome.COMPILE_ERROR)
    return Trial(number, 1, cand, Outcome.OK, values=(value,))


def _run(
    strategy_options: Mapping[str, str],
    spec: KernelSpec,
    cost: Callable[[Mapping[str, GeneValue]], float | None],
    rounds: int,
    seed: int = 0,
    name: str = "parzen",
) -> list[list[Candidate]]:
    """Ask and tell ``rounds`` generations on a cost function; the batches asked."""
    strategy = make_strategy(name, _context(spec, seed), strategy_options)
    batches: list[list[Candidate]] = []
    number = 0
    for _ in range(rounds):
        batch = strategy.ask(64)
        batches.append(batch)
        trials = []
        for cand in batch:
            trials.append(_trial(number, cand, cost(cand.as_dict())))
            number += 1
        strategy.tell(trials)
    return batches


def test_startup_is_the_default_build_then_the_suggestions(spec: KernelSpec) -> None:
    strategy = make_strategy("parzen", _context(spec))
    first = strategy.ask(64)
    assert len(first) == 8  # the batch option, not what the driver allows
    seeds = seed_values(spec.space, spec.problem().dims, random.Random(0))
    assert seeds[0] == spec.space.default_values() and len(seeds) >= 3
    assert [c.as_dict() for c in first[: len(seeds)]] == seeds


def test_good_and_bad_split_by_value_with_failures_bad(spec: KernelSpec) -> None:
    cands = [spec.candidate({**spec.space.default_values(), "STAGES": s}) for s in (1, 2, 3, 4)]
    trials = [_trial(0, cands[0], 3.0), _trial(1, cands[1], 1.0), _trial(2, cands[2], None)]
    trials.append(_trial(3, cands[3], 2.0))
    good, bad = split_good_bad(trials, ("min",), gamma=0.25)
    assert [t.number for t in good] == [1]  # ceil(0.25 x 3 feasible) = 1: the fastest
    assert sorted(t.number for t in bad) == [0, 2, 3]  # the failed build is bad too
    l_dens, g_dens = density(spec.space, good), density(spec.space, bad)
    stages = spec.space.gene("STAGES")
    assert l_dens["STAGES"][stages.index(2)] == pytest.approx((1 + 0.25) / 2)  # prior 1 / 4
    assert g_dens["STAGES"][stages.index(2)] == pytest.approx(0.25 / 4)
    assert log_ratio(spec.space, l_dens, g_dens, cands[1].as_dict()) > 0
    assert log_ratio(spec.space, l_dens, g_dens, cands[0].as_dict()) < 0


def test_the_model_proposes_what_the_good_trials_share(spec: KernelSpec) -> None:
    """A landscape where SCHEDULE=swizzle halves the time: after the startup the model asks
    for it far more often than random search does (a third of the time)."""

    def cost(values: Mapping[str, GeneValue]) -> float:
        return (0.5 if values["SCHEDULE"] == "swizzle" else 1.0) * (
            1 + 0.01 * int(values["STAGES"])
        )

    def share(batches: list[list[Candidate]]) -> float:
        later = [c for batch in batches[1:] for c in batch]
        return sum(c.as_dict()["SCHEDULE"] == "swizzle" for c in later) / len(later)

    model = share(_run({"startup_trials": "8", "batch": "8"}, spec, cost, rounds=4))
    uniform = share(_run({"batch_size": "8"}, spec, cost, rounds=4, name="random"))
    assert model >= 0.6 and model >= 1.5 * uniform


def test_failed_regions_are_avoided(spec: KernelSpec) -> None:
    """Builds with SPLIT_K 4 fail: the model, which counts failures as bad, stops asking."""

    def cost(values: Mapping[str, GeneValue]) -> float | None:
        return None if values["SPLIT_K"] == 4 else 1.0 + 0.001 * int(values["TILE_M"])

    batches = _run({"startup_trials": "8", "batch": "8"}, spec, cost, rounds=5)
    late = [c for batch in batches[2:] for c in batch]
    assert sum(c.as_dict()["SPLIT_K"] == 4 for c in late) <= len(late) // 6


def test_it_proposes_every_valid_candidate_once_then_nothing(spec: KernelSpec) -> None:
    valid = {spec.candidate(v).key() for v in spec.space.iter_valid(spec.problem().dims)}
    batches = _run({"batch": "16"}, spec, lambda v: 1.0 + 0.01 * int(v["TILE_N"]), rounds=200)
    keys = [c.key() for batch in batches for c in batch]
    assert len(keys) == len(set(keys)) == len(valid) and set(keys) == valid
    assert batches[-1] == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"gamma": "1.0"}, "option gamma=1.0 for parzen: must be within (0, 1)"),
        ({"batch": "0"}, "option batch=0 for parzen: must be an integer >= 1"),
    ],
)
def test_bad_options_are_one_line(spec: KernelSpec, options: dict[str, str], message: str) -> None:
    with pytest.raises(UserError) as err:
        make_strategy("parzen", _context(spec), options)
    assert str(err.value) == message


def test_it_is_single_objective(spec: KernelSpec) -> None:
    ctx = StrategyContext(spec.name, spec.space, spec.problem().dims, ("min", "min"))
    with pytest.raises(UserError, match="strategy parzen optimises one objective, not 2"):
        make_strategy("parzen", ctx)


def test_on_a_replay_it_beats_random_search_at_a_small_budget(tmp_path: Path) -> None:
    """A synthetic matmul landscape, 66 structures, 16 measurements, 7 seeds: the model's
    median best is faster than random search's (measured: 0.971 vs 0.838 of the optimum;
    the recorded ground truths are in docs/search.md)."""
    matmul = load_spec(MATMUL)
    truth = synthetic_binary_truth(matmul, matmul.problem(), SUBSPACE, seed=0)
    params = truth.restrict(matmul, flags=False)
    model = statistics.median(
        _best(truth, params, "parzen", s, tmp_path, budget=16) for s in range(7)
    )
    uniform = statistics.median(
        _best(truth, params, "random", s, tmp_path, budget=16) for s in range(7)
    )
    assert model < uniform
