"""Search quality on the stand-in landscape, against its exhaustively computed optimum.

The stand-in measurer is deterministic per candidate (process 0), so the true
front is known: every valid candidate of the 738-point stand-in space is
compiled and measured once. DEAP's own convergence tests use the same idea.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.measure import SamplingPlan
from ctune.objective import ObjectiveSpec, parse_objective_spec
from ctune.objective.pareto import as_minimization, hypervolume, non_dominated
from ctune.spec import KernelSpec
from ctune.testing.searches import feasible_values, quiet_search
from ctune.testing.standins import StandInCompiler, StandInMeasurer


def _all_values(spec: KernelSpec, objective: ObjectiveSpec) -> list[tuple[float, ...]]:
    problem = spec.problem()
    plan = objective.sampling_plan(SamplingPlan())
    measurer, compiler = StandInMeasurer(samples=60), StandInCompiler(spec, fail_every=None)
    out = []
    for values in spec.space.iter_valid(problem.dims):
        cand = spec.candidate(values)
        build = compiler.build(cand, problem)
        if not build.outcome.is_ok:
            continue
        m = measurer.measure(spec, cand, build, problem, plan)
        if m.outcome.is_ok:
            got, _ = objective.evaluate(build, m, problem.dims)
            assert got is not None
            out.append(got)
    return out


def _searched(
    spec: KernelSpec,
    objective: ObjectiveSpec,
    tmp_path: Path,
    strategy: str,
    seed: int,
    budget: int,
) -> list[tuple[float, ...]]:
    result = quiet_search(
        spec,
        objective,
        tmp_path / f"{strategy}-{seed}",
        strategy=strategy,
        budget=budget,
        seed=seed,
        compiler=StandInCompiler(spec, fail_every=None),
        measurer=StandInMeasurer(samples=60),
    )
    return feasible_values(result)


@pytest.mark.parametrize("seed", [0, 1])
def test_nsga2_reaches_90_percent_of_the_true_hypervolume_in_200(
    spec: KernelSpec, tmp_path: Path, seed: int
) -> None:
    objective = parse_objective_spec(["p99", "energy"], [], spec.metrics)
    everything = as_minimization(_all_values(spec, objective), objective.directions)
    true_front = everything[non_dominated(everything)]
    ref = true_front.max(axis=0) * 1.1  # 10% beyond the true front's nadir
    found = as_minimization(
        _searched(spec, objective, tmp_path, "nsga2", seed, 200), objective.directions
    )
    assert hypervolume(found, ref) >= 0.9 * hypervolume(true_front, ref)


def test_ga_gets_within_2_percent_of_the_optimum_in_120(spec: KernelSpec, tmp_path: Path) -> None:
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    optimum = min(v[0] for v in _all_values(spec, objective))
    best = [
        min(v[0] for v in _searched(spec, objective, tmp_path, "ga", seed, 120))
        for seed in range(3)
    ]
    assert sorted(best)[1] <= 1.02 * optimum  # the median of three seeds
