"""The dispatch cover: exact small cases, ties, margin edges, holes, groups, failures."""

from __future__ import annotations

import itertools
import random

import pytest

from ctune.errors import UserError
from ctune.search.pruning import parse_margin
from ctune.sets.dispatch import ANY_GROUP, Matrix, covers, greedy_cover


def grid(times: dict[str, dict[str, float | None]], **groups: dict[str, str]) -> Matrix:
    """times[shape][build]; an absent build is an unmeasured cell."""
    shapes = tuple(times)
    builds = tuple(dict.fromkeys(b for row in times.values() for b in row))
    cells = {(s, b): v for s, row in times.items() for b, v in row.items()}
    return Matrix(
        shapes, builds, cells, groups.get("shape_group", {}), groups.get("build_group", {})
    )


def test_one_build_best_everywhere_is_the_whole_cover() -> None:
    m = grid({"s1": {"a": 1.0, "b": 2.0}, "s2": {"a": 1.0, "b": 1.5}})
    c = greedy_cover(m, 0.03)
    assert c.builds == ("a",)
    assert c.assignment == {"s1": "a", "s2": "a"}
    assert c.max_loss == 0.0


def test_two_specialists_need_two_builds() -> None:
    m = grid({"s1": {"a": 1.0, "b": 2.0}, "s2": {"a": 2.0, "b": 1.0}})
    c = greedy_cover(m, 0.03)
    assert set(c.builds) == {"a", "b"}
    assert c.assignment == {"s1": "a", "s2": "b"}


def test_a_generalist_within_the_margin_replaces_two_specialists() -> None:
    m = grid(
        {
            "s1": {"a": 1.00, "b": 1.50, "g": 1.02},
            "s2": {"a": 1.50, "b": 1.00, "g": 1.02},
        }
    )
    c = greedy_cover(m, 0.03)
    assert c.builds == ("g",)
    assert c.losses == pytest.approx({"s1": 0.02, "s2": 0.02})
    assert c.best == {"s1": "a", "s2": "b"}
    # at 1 % the generalist covers nothing: back to the specialists
    assert set(greedy_cover(m, 0.01).builds) == {"a", "b"}


def test_margin_edge_counts_as_covered() -> None:
    m = grid({"s1": {"a": 1.0, "b": 2.0, "g": 1.03}, "s2": {"a": 2.0, "b": 1.0, "g": 1.03}})
    assert greedy_cover(m, 0.03).builds == ("g",)  # exactly 3 % slower: inside
    assert set(greedy_cover(m, 0.0299).builds) == {"a", "b"}  # just outside


def test_zero_margin_takes_only_per_shape_bests() -> None:
    m = grid({"s1": {"a": 1.0, "b": 1.0000001}, "s2": {"a": 1.0000001, "b": 1.0}})
    assert set(greedy_cover(m, 0.0).builds) == {"a", "b"}


def test_tie_in_count_goes_to_the_smaller_summed_loss() -> None:
    # x and y both cover both shapes; y loses less in total
    m = grid(
        {
            "s1": {"p": 1.0, "q": 2.0, "x": 1.02, "y": 1.00},
            "s2": {"p": 2.0, "q": 1.0, "x": 1.00, "y": 1.01},
        }
    )
    assert greedy_cover(m, 0.03).builds == ("y",)


def test_full_tie_goes_to_the_earlier_build() -> None:
    m = grid({"s1": {"x": 1.0, "y": 1.0}, "s2": {"x": 1.0, "y": 1.0}})
    assert greedy_cover(m, 0.03).builds == ("x",)
    m2 = grid({"s1": {"y": 1.0, "x": 1.0}, "s2": {"y": 1.0, "x": 1.0}})
    assert greedy_cover(m2, 0.03).builds == ("y",)


def test_assignment_takes_the_fastest_chosen_build_not_the_first() -> None:
    # a covers s1..s3 (picked first), b covers s3, s4; s3 is faster on b
    m = grid(
        {
            "s1": {"a": 1.0, "b": 3.0},
            "s2": {"a": 1.0, "b": 3.0},
            "s3": {"a": 1.02, "b": 1.0},
            "s4": {"a": 3.0, "b": 1.0},
        }
    )
    c = greedy_cover(m, 0.03)
    assert c.builds == ("a", "b")
    assert c.assignment["s3"] == "b"
    assert c.losses["s3"] == 0.0


def test_redundant_first_pick_is_pruned() -> None:
    # greedy takes w (3 shapes) first, then needs p and q for s4, s5, which also cover s1-s3
    m = grid(
        {
            "s1": {"w": 1.0, "p": 1.0, "q": 9.0},
            "s2": {"w": 1.0, "p": 1.0, "q": 9.0},
            "s3": {"w": 1.0, "p": 9.0, "q": 1.0},
            "s4": {"w": 9.0, "p": 1.0, "q": 9.0},
            "s5": {"w": 9.0, "p": 9.0, "q": 1.0},
        }
    )
    c = greedy_cover(m, 0.03)
    assert set(c.builds) == {"p", "q"}


def test_failed_cells_never_cover_and_a_shape_nothing_ran_is_unservable() -> None:
    m = grid(
        {"s1": {"a": None, "b": 2.0}, "s2": {"a": 1.0, "b": None}, "s3": {"a": None, "b": None}}
    )
    c = greedy_cover(m, 0.5)
    assert set(c.builds) == {"a", "b"}
    assert c.assignment == {"s1": "b", "s2": "a"}
    assert c.unservable == ("s3",)


def test_missing_cell_refuses_to_cover() -> None:
    m = grid({"s1": {"a": 1.0, "b": 1.1}, "s2": {"a": 1.0}})
    assert m.missing() == [("s2", "b")]
    with pytest.raises(UserError, match=r"1 cell.*build b on s2"):
        greedy_cover(m, 0.03)


def test_groups_keep_builds_to_their_shapes_and_are_not_holes() -> None:
    m = grid(
        {"h1": {"fa": 1.0, "fb": 1.2}, "h2": {"fa": 1.5, "fb": 1.0}, "b1": {"ba": 1.0}},
        shape_group={"h1": "", "h2": "", "b1": "bf16"},
        build_group={"fa": "", "fb": "", "ba": "bf16"},
    )
    assert m.missing() == []
    c = greedy_cover(m, 0.03)
    assert set(c.builds) == {"fa", "fb", "ba"}
    assert c.assignment["b1"] == "ba"


def test_a_column_of_any_group_serves_every_group_and_its_holes_count() -> None:
    """The vendor call's column (``--dispatch-vendor``): every shape may take it, so a shape
    of any group without its cell is a hole."""
    times = {
        "h1": {"fa": 1.0, "fb": 1.5, "v": 0.9},
        "h2": {"fa": 1.5, "fb": 1.0, "v": 1.02},
        "b1": {"ba": 1.0, "v": 0.8},
        "b2": {"ba": 1.0, "v": 1.5},
    }
    groups = {
        "shape_group": {"h1": "", "h2": "", "b1": "bf16", "b2": "bf16"},
        "build_group": {"fa": "", "fb": "", "ba": "bf16", "v": ANY_GROUP},
    }
    m = grid(times, **groups)
    assert m.missing() == [] and m.eligible("b1", "v") and not m.eligible("b1", "fa")
    # shipped (it costs no kernel): it takes every shape within the margin of that shape's
    # best, builds the rest; each shape goes to its fastest chosen column
    c = greedy_cover(m, 0.03, {"v"})
    assert set(c.builds) == {"v", "ba"} and c.shipped == ("v",)
    assert c.assignment == {"h1": "v", "h2": "v", "b1": "v", "b2": "ba"}
    assert c.losses["h2"] == pytest.approx(0.02)
    # at 1 % it no longer serves h2: fb does, and only where it wins is it taken
    c = greedy_cover(m, 0.01, {"v"})
    assert set(c.builds) == {"v", "fb", "ba"}
    assert c.assignment == {"h1": "v", "h2": "fb", "b1": "v", "b2": "ba"}
    del times["b2"]["v"]
    assert grid(times, **groups).missing() == [("b2", "v")]


def test_bad_cells_are_refused() -> None:
    with pytest.raises(UserError, match="positive time"):
        Matrix(("s",), ("b",), {("s", "b"): 0.0})
    with pytest.raises(UserError, match="names no row"):
        Matrix(("s",), ("b",), {("s", "x"): 1.0})


@pytest.mark.parametrize(
    ("text", "value"), [("3%", 0.03), ("0.03", 0.03), (" 5 %", 0.05), ("0", 0.0), ("0%", 0.0)]
)
def test_parse_margin(text: str, value: float) -> None:
    assert parse_margin(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["abc", "-1%", "100%", "nan", "1.5"])
def test_parse_margin_refuses(text: str) -> None:
    with pytest.raises(UserError, match="--dispatch-margin"):
        parse_margin(text)


def _minimum_size(m: Matrix, margin: float) -> int:
    sets = covers(m, margin)
    need = set().union(*sets.values())
    for k in range(1, len(m.builds) + 1):
        for combo in itertools.combinations(m.builds, k):
            if need <= set().union(*(sets[b] for b in combo)):
                return k
    return 0


@pytest.mark.parametrize("seed", range(30))
def test_greedy_is_a_valid_cover_near_the_minimum(seed: int) -> None:
    """Random 8 x 6 matrices: every shape within the margin, every chosen build needed,
    and the size within the greedy bound of the brute-force minimum."""
    rng = random.Random(seed)
    shapes = [f"s{i}" for i in range(8)]
    builds = [f"b{j}" for j in range(6)]
    times = {s: {b: rng.choice([1.0, 1.01, 1.02, 1.05, 1.2, 2.0]) for b in builds} for s in shapes}
    m = grid(times)
    margin = 0.03
    c = greedy_cover(m, margin)
    sets = covers(m, margin)
    for s in shapes:
        best = min(times[s].values())
        assert times[s][c.assignment[s]] <= best * (1 + margin) + 1e-12
        assert c.losses[s] <= margin + 1e-9
    for b in c.builds:  # no redundant member
        rest = [x for x in c.builds if x != b]
        assert not set(shapes) <= set().union(*(sets[x] for x in rest))
    low = _minimum_size(m, margin)
    assert low <= len(c.builds) <= low * 2  # H(8) ~ 2.7; pruning keeps these small cases tight


def test_shipped_builds_are_taken_first_and_new_ones_only_for_the_rest() -> None:
    """A re-searched part of a shape list: alone, its generalist g and the specialist n make
    the cover; the engine already ships a and b, which serve s1 and s2 within the margin, so
    only s3 needs a build (n), and c, shipped too but serving nothing here, stays out."""
    m = grid(
        {
            "s1": {"a": 1.02, "b": 1.50, "g": 1.00, "n": 1.40, "c": 2.0},
            "s2": {"a": 1.50, "b": 1.01, "g": 1.00, "n": 1.40, "c": 2.0},
            "s3": {"a": 1.50, "b": 1.50, "g": 1.50, "n": 1.00, "c": 2.0},
        }
    )
    assert set(greedy_cover(m, 0.03).builds) == {"g", "n"}  # two new builds
    c = greedy_cover(m, 0.03, shipped={"a", "b", "c"})
    assert set(c.builds) == {"a", "b", "n"}  # one new build
    assert set(c.shipped) == {"a", "b"}
    assert c.assignment == {"s1": "a", "s2": "b", "s3": "n"}
    assert c.losses == pytest.approx({"s1": 0.02, "s2": 0.01, "s3": 0.0})
    # shipped builds that serve every shape: nothing new at all
    every = greedy_cover(m, 0.03, shipped={"a", "b", "n"})
    assert set(every.builds) == set(every.shipped) == {"a", "b", "n"}


def test_a_redundant_new_build_leaves_before_a_shipped_one() -> None:
    m = grid({"s1": {"n": 1.0, "a": 1.01}, "s2": {"n": 1.0, "a": 1.02}})
    c = greedy_cover(m, 0.03, shipped={"a"})
    assert c.builds == ("a",) and c.shipped == ("a",)
    assert c.losses == pytest.approx({"s1": 0.01, "s2": 0.02})
