"""Space: codec, enumeration, counting, sampling and repair against brute force."""

from __future__ import annotations

import itertools
import random

import pytest

from ctune.expr import parse
from ctune.records import Candidate
from ctune.spec.space import CATALOGUE, Gene, Space


def _space() -> Space:
    genes = (
        CATALOGUE["ptxas_opt"].gene,
        CATALOGUE["fast_math"].gene,
        Gene("BM", (32, 64, 128, 256), 128, "template"),
        Gene("BN", (32, 64, 128), 64, "template"),
        Gene("WARPS", (2, 4, 8), 4, "launch"),
        Gene("STAGES", (1, 2, 3, 4), 2, "template"),
    )
    derived = (("smem", parse("STAGES * (BM + BN) * 32 * 2")),)
    restrictions = (parse("BM * BN // (WARPS * 32) >= 32"), parse("smem <= SMEM_MAX"))
    return Space(genes, restrictions, derived)


DIMS = {"SMEM_MAX": 48 * 1024}


def _brute(space: Space) -> list[dict]:
    return [
        dict(zip(space.names, combo, strict=True))
        for combo in itertools.product(*(g.values for g in space.genes))
        if space.is_valid(dict(zip(space.names, combo, strict=True)), DIMS)
    ]


def test_count_and_enumeration_match_brute_force() -> None:
    space = _space()
    brute = _brute(space)
    count, exact = space.count_valid(DIMS)
    assert exact and count == len(brute) > 0
    enumerated = list(space.iter_valid(DIMS))
    assert len(enumerated) == len(brute)
    assert {tuple(sorted(v.items())) for v in enumerated} == {
        tuple(sorted(v.items())) for v in brute
    }
    assert enumerated == list(space.iter_valid(DIMS))  # deterministic order


def test_count_estimate_when_over_limit() -> None:
    space = _space()
    exact_count, _ = space.count_valid(DIMS)
    estimate, exact = space.count_valid(DIMS, limit=100)
    assert not exact and estimate > 0
    assert abs(estimate - exact_count) / exact_count < 0.8


def _linked_space() -> Space:
    """Two independent groups, a derived value on the problem only, one that can fail."""
    genes = (
        Gene("A", (1, 2, 3, 4), 1, "template"),
        Gene("B", (0, 1, 2), 0, "template"),
        Gene("C", (1, 2, 4, 8), 1, "template"),
        Gene("D", (0, 1, 2, 3), 0, "template"),
        Gene("FREE", (0, 1), 0, "define"),
    )
    derived = (("cap", parse("SMEM_MAX // 1024")), ("ratio", parse("C // B")))
    restrictions = (
        parse("A * 8 <= cap"),
        parse("ratio >= 1"),  # B == 0 divides by zero: invalid, like Space.violations says
        parse("D < C"),
        parse("cap > 0"),
    )
    return Space(genes, restrictions, derived)


@pytest.mark.parametrize("dims", [DIMS, {"SMEM_MAX": 16 * 1024}, {"SMEM_MAX": 0}])
def test_pruned_count_and_order_match_the_filtered_product(dims: dict) -> None:
    space = _linked_space()
    product = [
        dict(zip(space.names, combo, strict=True))
        for combo in itertools.product(*(g.values for g in space.genes))
    ]
    brute = [v for v in product if space.is_valid(v, dims)]
    assert space.count_valid(dims) == (len(brute), True)
    assert list(space.iter_valid(dims)) == brute  # the product's order, broken ones left out


def test_codec_round_trip() -> None:
    space = _space()
    for values in space.iter_valid(DIMS):
        assert space.decode(space.encode(values)) == values


def test_sample_is_valid_distinct_and_seeded() -> None:
    space = _space()
    a = space.sample(random.Random(3), 20, DIMS)
    b = space.sample(random.Random(3), 20, DIMS)
    assert a == b and len(a) == 20
    assert all(space.is_valid(v, DIMS) for v in a)
    assert len({space.encode(v) for v in a}) == 20


def test_violations_name_the_restriction() -> None:
    space = _space()
    values = {**space.default_values(), "BM": 256, "BN": 128, "STAGES": 4}
    assert space.violations(values, DIMS) == ["smem <= SMEM_MAX"]


def test_a_restriction_that_raises_is_broken_and_says_why() -> None:
    """The candidate is infeasible, as a false restriction's is, and the error is kept."""
    space = Space(
        (Gene("U", (1, 2), 1, "template"),),
        (parse("U < 8"), parse("8 / (U - 1) > 0")),
        (("per", parse("8 // (2 - U)")),),
    )
    assert space.is_valid({"U": 2}, {}) is False  # per divides by zero
    assert space.is_valid({"U": 1}, {}) is False  # the second restriction does
    (breach,) = space.breaches({"U": 1}, {})
    assert (breach.index, breach.source, breach.error) == (1, "8 / (U - 1) > 0", "division by zero")
    assert space.violations({"U": 1}, {}) == [
        "8 / (U - 1) > 0 (cannot be evaluated: division by zero)"
    ]
    (derived,) = space.breaches({"U": 2}, {})
    assert (derived.derived, derived.error) == ("per", "division by zero")
    assert space.violations({"U": 2}, {}) == ["derived value per: division by zero"]


def test_repair_returns_valid_and_changes_few_genes() -> None:
    space = _space()
    rng = random.Random(0)
    for _ in range(50):
        values = space.random_values(rng)
        repaired = space.repair(values, DIMS, rng)
        assert repaired is not None and space.is_valid(repaired, DIMS)
        assert repaired["ptxas_opt"] == values["ptxas_opt"]  # unrestricted genes are kept
        if space.is_valid(values, DIMS):
            assert repaired == values


def test_repair_keeps_the_named_genes_while_others_can_change() -> None:
    """STAGES 4 with the default 128 x 64 tile overflows 40 KiB of shared memory; fewer
    stages is one way out and a smaller tile another: kept, STAGES stays at 4."""
    space = _space()
    dims = {"SMEM_MAX": 40 * 1024}
    draft = {**space.default_values(), "STAGES": 4}
    assert not space.is_valid(draft, dims)
    for seed in range(20):
        kept = space.repair(draft, dims, random.Random(seed), keep=("STAGES",))
        assert kept is not None and space.is_valid(kept, dims) and kept["STAGES"] == 4
    # without keep the repair takes either way out: over these seeds, fewer stages at least once
    freed = [space.repair(draft, dims, random.Random(seed)) for seed in range(20)]
    assert any(r is not None and r["STAGES"] != 4 for r in freed)


def test_repair_none_when_nothing_is_valid() -> None:
    space = _space()
    assert space.repair(space.default_values(), {"SMEM_MAX": 0}, random.Random(0)) is None


def test_gene_rejects_bad_definitions() -> None:
    with pytest.raises(ValueError):
        Gene("X", (1, 1), 1)
    with pytest.raises(ValueError):
        Gene("X", (1, 2), 3)
    with pytest.raises(ValueError):
        Gene("X", (), 1)
    with pytest.raises(ValueError):
        Space((Gene("X", (1,), 1), Gene("X", (2,), 2)))


def test_candidate_key_is_order_independent_and_stable() -> None:
    a = Candidate.of("gemm", {"BM": 128, "fast_math": True})
    b = Candidate.of("gemm", {"fast_math": True, "BM": 128})
    assert a == b and hash(a) == hash(b) and a.key() == b.key()
    assert (
        a.key() == "278a0fd3070ddd04"
    )  # sha256 of the canonical JSON; pinned: keys name registry artifacts and cache entries
    assert Candidate.of("gemm", {"BM": 64, "fast_math": True}).key() != a.key()
    assert Candidate.from_json(a.to_json()) == a


def test_catalogue_defaults_render_nothing() -> None:
    from ctune.spec.space.nvcc import render_flags

    defaults = {name: spec.gene.default for name, spec in CATALOGUE.items()}
    assert render_flags(defaults) == []
    assert render_flags({"ptxas_opt": 1, "dlcm": "cg", "prec_div": False}) == [
        "-Xptxas",
        "-O1",
        "--prec-div=false",
        "-Xptxas",
        "-dlcm=cg",
    ]
    numerics = {name for name, spec in CATALOGUE.items() if spec.gene.numerics}
    assert numerics == {"fast_math", "ftz", "prec_div", "prec_sqrt", "fmad"}
