"""Pareto arithmetic against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctune.objective.pareto import (
    as_minimization,
    crowding_distance,
    dominates,
    hypervolume,
    non_dominated,
    nondominated_sort,
)


def test_as_minimization_negates_max_columns() -> None:
    out = as_minimization([[1.0, 10.0], [2.0, 20.0]], ["min", "max"])
    assert out.tolist() == [[1.0, -10.0], [2.0, -20.0]]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1, 1], [2, 2], True),
        ([1, 2], [2, 1], False),
        ([1, 1], [1, 1], False),
        ([1, 2], [1, 3], True),
        ([2, 2], [1, 1], False),
    ],
)
def test_dominates(a: list[float], b: list[float], expected: bool) -> None:
    assert dominates(a, b) is expected


def test_non_dominated_filter() -> None:
    pts = [[1, 5], [2, 3], [3, 4], [4, 1], [2, 3], [5, 5]]
    assert non_dominated(pts).tolist() == [True, True, False, True, True, False]
    assert non_dominated(np.zeros((0, 2))).tolist() == []


def test_nondominated_sort_fronts() -> None:
    pts = [[1, 5], [2, 3], [3, 4], [4, 1], [5, 5]]
    fronts = nondominated_sort(pts)
    assert [sorted(f.tolist()) for f in fronts] == [[0, 1, 3], [2], [4]]


def test_crowding_distance_by_hand() -> None:
    pts = [[0.0, 4.0], [1.0, 2.0], [2.0, 1.0], [4.0, 0.0]]
    d = crowding_distance(pts)
    assert math.isinf(d[0]) and math.isinf(d[3])
    # middle points: (x_next - x_prev)/4 + (y_prev - y_next)/4
    assert d[1] == pytest.approx((2 - 0) / 4 + (4 - 1) / 4)
    assert d[2] == pytest.approx((4 - 1) / 4 + (2 - 0) / 4)
    assert np.isinf(crowding_distance([[1.0, 1.0], [2.0, 0.0]])).all()


@pytest.mark.parametrize(
    ("points", "ref", "expected"),
    [
        ([[1.0]], [3.0], 2.0),
        ([[1.0], [2.0]], [3.0], 2.0),
        ([[1.0, 1.0]], [3.0, 3.0], 4.0),
        # staircase: (1,3),(2,2),(3,1) with ref (4,4): 3*1 + 2*1 + 1*1 ... = 6
        ([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]], [4.0, 4.0], 6.0),
        ([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0], [3.0, 3.0]], [4.0, 4.0], 6.0),  # dominated adds 0
        ([[5.0, 1.0]], [4.0, 4.0], 0.0),  # outside the reference box
        ([[0.0, 0.0, 0.0]], [1.0, 2.0, 3.0], 6.0),
        # two boxes: [0,2]x[0,1]x[0,1] and [0,1]x[0,2]x[0,1] overlap in 1 -> 2 + 2 - 1 = 3,
        # within ref (2, 2, 1)
        ([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], [2.0, 2.0, 1.0], 3.0),
        # 3-D staircase in slices: z=0 point (1,1) and z=1 point (0,0), ref (2,2,2):
        # slice z in [0,1): area (2-1)*(2-1)=1; z in [1,2): union of (1,1) and (0,0) = 4
        ([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [2.0, 2.0, 2.0], 5.0),
    ],
)
def test_hypervolume_by_hand(points: list[list[float]], ref: list[float], expected: float) -> None:
    assert hypervolume(points, ref) == pytest.approx(expected)


def test_hypervolume_3d_matches_monte_carlo() -> None:
    rng = np.random.default_rng(3)
    pts = rng.random((12, 3))
    ref = np.array([1.0, 1.0, 1.0])
    probes = rng.random((200_000, 3))
    covered = np.zeros(len(probes), dtype=bool)
    for p in pts:
        covered |= np.all(probes >= p, axis=1)
    assert hypervolume(pts, ref) == pytest.approx(covered.mean(), abs=0.01)
