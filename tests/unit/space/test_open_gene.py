"""The acf family's open gene: any digest is a value; strategies leave it alone."""

from __future__ import annotations

import importlib.util
import random

import pytest

from ctune.expr import parse
from ctune.records import Candidate, Outcome, Trial, sha256_hex
from ctune.search import STRATEGIES, make_strategy
from ctune.search.strategy import StrategyContext, seed_values
from ctune.spec.space import Gene, Space
from ctune.spec.space.nvcc import acf_gene
from ctune.spec.space.params import SpaceValueError

DIGEST = sha256_hex(b"a controls file")
SEED = sha256_hex(b"the spec's own file")


def _space() -> Space:
    return Space(
        (
            Gene("X", (1, 2, 3, 4), 1, "template"),
            Gene("Y", (1, 2), 1, "template", suggest=(2,)),
            acf_gene("ptxas", [SEED]),
        ),
        (parse("X * Y <= 4"),),
    )


def test_an_open_gene_lists_none_and_takes_any_digest() -> None:
    gene = acf_gene("ptxas")
    assert (gene.values, gene.default, gene.family, gene.open) == (("none",), "none", "acf", True)
    assert gene.flag and gene.compiled
    assert gene.takes("none") and gene.takes(DIGEST)
    assert not gene.takes(DIGEST.upper()) and not gene.takes(DIGEST[:-1]) and not gene.takes(1)
    assert not Gene("N", ("none",), "none").takes(DIGEST)  # a closed gene does not
    with pytest.raises(ValueError, match="lists words, not digests"):
        Gene("acf_ptxas", ("none", DIGEST), "none", "acf", open=True)


def test_check_values_accepts_none_and_a_digest_only() -> None:
    space = _space()
    assert space.check_values({"acf_ptxas": DIGEST}, "--set") == {"acf_ptxas": DIGEST}
    assert space.check_values({"acf_ptxas": "none"}, "--set") == {"acf_ptxas": "none"}
    for bad in (DIGEST.upper(), "ab" * 31, "../../etc/passwd.acf", 7, None):
        with pytest.raises(SpaceValueError, match="a controls file's sha256 digest") as caught:
            space.check_values({"acf_ptxas": bad}, "journal line 3")
        assert str(caught.value).startswith("journal line 3: acf_ptxas=")


def test_a_digest_codes_as_the_default_and_decodes_as_none() -> None:
    space = _space()
    values = {"X": 2, "Y": 2, "acf_ptxas": DIGEST}
    assert space.encode(values) == (1, 1, 0)
    assert space.encode({**values, "acf_ptxas": "none"}) == (1, 1, 0)
    assert space.declared(values) == {**values, "acf_ptxas": "none"}
    assert space.decode(space.encode(values)) == space.declared(values)
    with pytest.raises(ValueError):
        space.encode({**values, "X": 9})  # a closed gene's stranger still fails loudly


def test_repair_sampling_and_counting_leave_the_open_gene_alone() -> None:
    space, rng = _space(), random.Random(3)
    fixed = space.repair({"X": 4, "Y": 2, "acf_ptxas": DIGEST}, {}, rng)
    assert fixed is not None and fixed["acf_ptxas"] == DIGEST and fixed["X"] * fixed["Y"] <= 4
    assert {v["acf_ptxas"] for v in space.sample(rng, 20, {})} == {"none"}
    assert space.count_valid({}) == (6, True)
    assert {v["acf_ptxas"] for v in space.iter_valid({})} == {"none"}


def test_the_seeds_of_an_open_gene_are_not_a_strategy_s_to_propose() -> None:
    seeds = seed_values(_space(), {}, random.Random(0))
    assert [s["acf_ptxas"] for s in seeds] == ["none", "none"]
    assert [s["Y"] for s in seeds] == [1, 2]  # a closed gene's suggestion still is


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_takes_a_trial_with_a_digest_and_proposes_none(name: str) -> None:
    if name == "tpe" and importlib.util.find_spec("optuna") is None:
        pytest.skip("optuna is not installed")
    space = _space()
    strategy = make_strategy(name, StrategyContext("k", space, {}, ("min",), 1))
    told = []
    for number, values in enumerate(
        [{"X": 1, "Y": 1, "acf_ptxas": DIGEST}, {"X": 2, "Y": 2, "acf_ptxas": SEED}]
    ):
        told.append(Trial(number, 0, Candidate.of("k", values), Outcome.OK, values=(1.0 + number,)))
    strategy.tell(told)
    for _ in range(3):
        batch = strategy.ask(8)
        assert all(c.as_dict()["acf_ptxas"] == "none" for c in batch)
        strategy.tell(
            [Trial(100 + i, 1, c, Outcome.OK, values=(float(i),)) for i, c in enumerate(batch)]
        )
