"""Strategy plumbing: options, names, operators, seeds."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from ctune.errors import UserError
from ctune.search import make_strategy, option_table, resolve_name, strategy_class
from ctune.search.operators import crossover_uniform, is_ordered, mutate, mutate_gene
from ctune.search.strategy import StrategyContext, parse_option_items, resolve_options, seed_values
from ctune.spec import KernelSpec
from ctune.spec.space.params import Gene

TABLE = {"population_size": ("size", 16), "crossover_prob": ("p", 0.9), "flag": ("f", False)}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, {"population_size": 16, "crossover_prob": 0.9, "flag": False}),
        ({"population_size": "8"}, {"population_size": 8, "crossover_prob": 0.9, "flag": False}),
        (
            {"crossover_prob": "0.5", "flag": "yes"},
            {"population_size": 16, "crossover_prob": 0.5, "flag": True},
        ),
    ],
)
def test_options_coerce_to_the_default_type(
    given: dict[str, str], expected: dict[str, object]
) -> None:
    assert resolve_options("ga", TABLE, given) == expected


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"popsize": "3"},
            "unknown option 'popsize' for ga (allowed: population_size, crossover_prob, flag)",
        ),
        ({"population_size": "many"}, "option population_size='many' for ga: not a valid int"),
        ({"flag": "maybe"}, "option flag='maybe' for ga: not a valid bool"),
    ],
)
def test_bad_options(given: dict[str, str], message: str) -> None:
    with pytest.raises(UserError) as err:
        resolve_options("ga", TABLE, given)
    assert str(err.value) == message


def test_option_items() -> None:
    assert parse_option_items(["a=1", " b = x "]) == {"a": "1", "b": "x"}
    with pytest.raises(UserError, match="expected NAME=VALUE"):
        parse_option_items(["population_size"])


def test_names_and_tables() -> None:
    assert resolve_name("auto", 1) == "staged" and resolve_name("auto", 2) == "nsga2"
    assert resolve_name("random", 2) == "random"
    with pytest.raises(UserError, match="unknown strategy 'cmaes' \\(allowed: auto, nsga2, ga,"):
        strategy_class("cmaes")
    assert option_table("nsga2")["population_size"][1] == 24
    assert "tournament_size" in option_table("ga")


class _OldPlugin:
    """A plugin strategy written to the contract before ``upcoming`` was part of it."""

    def ask(self, n: int) -> list:
        return []

    def tell(self, trials: object) -> None: ...

    def state(self) -> dict:
        return {}

    def load_state(self, state: object) -> None: ...


def test_a_plugin_strategy_missing_part_of_the_contract_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata

    from ctune.search.baselines import RandomStrategy

    class EntryPoint:
        def __init__(self, name: str, cls: type) -> None:
            self.name, self.value, self.cls = name, f"plugin:{cls.__name__}", cls

        def load(self) -> type:
            return self.cls

    plugins = [EntryPoint("old", _OldPlugin), EntryPoint("fine", RandomStrategy)]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: plugins)
    with pytest.raises(
        UserError, match="strategy 'old' \\(plugin:_OldPlugin\\) lacks upcoming, guess_first_asks: "
    ):
        strategy_class("old")
    assert strategy_class("fine") is RandomStrategy


def test_option_tables_do_not_import_deap() -> None:
    import subprocess

    code = (
        "import sys; from ctune.search import STRATEGIES, option_table; "
        "[option_table(name) for name in STRATEGIES]; "
        "import ctune.search.driver, ctune.cli.search; assert 'deap' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"population_size": "1"}, "must be an integer >= 4"),
        ({"crossover_prob": "1.5"}, "must be within [0, 1]"),
    ],
)
def test_nsga2_validates_values(spec: KernelSpec, options: dict[str, str], message: str) -> None:
    ctx = StrategyContext(spec.name, spec.space, spec.problem().dims, ("min", "min"))
    with pytest.raises(UserError, match=message.replace("[", "\\[").replace("]", "\\]")):
        make_strategy("nsga2", ctx, options)


def test_ga_is_single_objective(spec: KernelSpec) -> None:
    ctx = StrategyContext(spec.name, spec.space, spec.problem().dims, ("min", "min"))
    with pytest.raises(UserError, match="strategy ga optimises one objective, not 2"):
        make_strategy("ga", ctx)


def test_mutation_respects_gene_types() -> None:
    rng = random.Random(0)
    ordered = Gene("T", (16, 32, 64, 128), 64)
    categorical = Gene("S", ("row", "col", "swizzle"), "row")
    flag = Gene("F", (False, True), False)
    assert is_ordered(ordered) and not is_ordered(categorical) and not is_ordered(flag)
    steps = {mutate_gene(ordered, 1, rng, step_prob=1.0) for _ in range(50)}
    assert steps == {0, 2}  # only neighbours
    assert {mutate_gene(ordered, 0, rng, step_prob=1.0) for _ in range(20)} == {1}  # reflected
    assert all(mutate_gene(categorical, 0, rng, 1.0) in (1, 2) for _ in range(20))
    assert {mutate_gene(flag, 0, rng, 0.5) for _ in range(5)} == {1}


def test_mutation_and_crossover_stay_in_range(spec: KernelSpec) -> None:
    rng = random.Random(1)
    space = spec.space
    codes = list(space.encode(space.default_values()))
    for _ in range(200):
        codes = mutate(codes, space, rng, 0.5, 0.7)
        assert all(0 <= c < len(g.values) for c, g in zip(codes, space.genes, strict=True))
    a, b = [0] * 5, [1] * 5
    x, y = crossover_uniform(a, b, rng)
    assert all({p, q} == {0, 1} for p, q in zip(x, y, strict=True))


def test_seeds_start_with_the_default_and_use_suggestions(spec: KernelSpec) -> None:
    dims = spec.problem().dims
    seeds = seed_values(spec.space, dims, random.Random(0))
    assert seeds[0] == spec.space.default_values()
    # the zipped suggestion (128, 128, 3) breaks a restriction and is repaired
    assert seeds[1]["STAGES"] == 3 and seeds[1] != seeds[0]
    assert any(s["TILE_M"] == 128 for s in seeds) and any(s["TILE_N"] == 128 for s in seeds)
    assert all(spec.space.is_valid(s, dims) for s in seeds)
    assert len({tuple(spec.space.encode(s)) for s in seeds}) == len(seeds)


def test_every_suggested_value_is_seeded_where_some_candidate_has_it() -> None:
    """A suggestion whose one-gene draft on the default breaks a restriction is repaired
    around (gemm: ping-pong and the non-persistent kernel cannot hold the default 128 x 256
    tile's accumulators), not dropped."""
    from ctune.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[3] / "kernels" / "gemm.yaml")
    dims = spec.problem("llm8b-qkv-t16").dims
    seeds = seed_values(spec.space, dims, random.Random(0))
    for gene in (g for g in spec.space.genes if g.suggest and not g.open):
        assert {s[gene.name] for s in seeds} >= set(gene.suggest), gene.name
    assert {s["SCHEDULE"] for s in seeds} >= {1, 2}


def test_state_restores_the_rng(spec: KernelSpec) -> None:
    ctx = StrategyContext(spec.name, spec.space, spec.problem().dims, ("min",), seed=3)
    a = make_strategy("random", ctx)
    a.ask(4)
    state = a.state()
    b = make_strategy("random", ctx)
    b.load_state(state)  # type: ignore[attr-defined]
    assert [c.key() for c in a.ask(4)] == [c.key() for c in b.ask(4)]
