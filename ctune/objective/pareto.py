"""Pareto arithmetic over minimisation points: pure numpy, no ctune types.

Callers turn raw objective values into minimisation form first
(:func:`as_minimization` negates the ``max`` columns). Hypervolume is exact
for 1 to 3 objectives (the search allows at most 3): a sweep in 2-D and
slices over the third axis in 3-D, which is plenty for fronts of a few
hundred points.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def sign(direction: str) -> float:
    """+1 for an objective to minimise, -1 for one to maximise: the one home of direction."""
    if direction not in ("min", "max"):
        raise ValueError(f"direction {direction!r} is neither 'min' nor 'max'")
    return -1.0 if direction == "max" else 1.0


def minimized(values: Sequence[float], directions: Sequence[str]) -> tuple[float, ...]:
    """One row of raw values -> the row to minimise (``max`` values negated)."""
    return tuple(sign(d) * v for v, d in zip(values, directions, strict=True))


def as_minimization(values: Sequence[Sequence[float]], directions: Sequence[str]) -> np.ndarray:
    """Rows of raw values -> rows to minimise (``max`` columns negated)."""
    arr = np.asarray(values, dtype=float).reshape(-1, len(directions))
    return arr * np.array([sign(d) for d in directions])


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a is no worse than b everywhere and better somewhere (minimisation): the one
    dominance rule; raw values go through :func:`minimized` first."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.all(x <= y) and np.any(x < y))


def non_dominated(points: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """Boolean mask of the points no other point dominates (equal points all stay)."""
    pts = np.asarray(points, dtype=float)
    if pts.size == 0:
        return np.zeros(0, dtype=bool)
    pts = pts.reshape(len(pts), -1)
    le = np.all(pts[:, None, :] <= pts[None, :, :], axis=2)  # le[i, j]: i <= j everywhere
    lt = np.any(pts[:, None, :] < pts[None, :, :], axis=2)
    dominated_by = le & lt  # [i, j]: i dominates j
    return ~np.any(dominated_by, axis=0)


def nondominated_sort(points: np.ndarray | Sequence[Sequence[float]]) -> list[np.ndarray]:
    """Indices of front 0, front 1, ... (Deb's non-dominated sorting)."""
    pts = np.asarray(points, dtype=float)
    remaining = np.arange(len(pts))
    fronts: list[np.ndarray] = []
    while remaining.size:
        mask = non_dominated(pts[remaining])
        fronts.append(remaining[mask])
        remaining = remaining[~mask]
    return fronts


def crowding_distance(points: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """NSGA-II crowding distance of each point within its front (boundaries: inf)."""
    pts = np.asarray(points, dtype=float)
    n = len(pts)
    if n == 0:
        return np.zeros(0)
    pts = pts.reshape(n, -1)
    dist = np.zeros(n)
    if n <= 2:
        return np.full(n, np.inf)
    for m in range(pts.shape[1]):
        order = np.argsort(pts[:, m], kind="stable")
        col = pts[order, m]
        span = col[-1] - col[0]
        dist[order[0]] = dist[order[-1]] = np.inf
        if span <= 0:
            continue
        dist[order[1:-1]] += (col[2:] - col[:-2]) / span
    return dist


def _hv2(pts: np.ndarray, ref: np.ndarray) -> float:
    order = np.argsort(pts[:, 0], kind="stable")
    volume, best_y = 0.0, ref[1]
    for x, y in pts[order]:
        if y < best_y:
            volume += (ref[0] - x) * (best_y - y)
            best_y = y
    return float(volume)


def hypervolume(points: np.ndarray | Sequence[Sequence[float]], ref: Sequence[float]) -> float:
    """Volume dominated by ``points`` and bounded by ``ref`` (minimisation, 1-3 D).

    Points not strictly better than ``ref`` in every coordinate add nothing.
    """
    r = np.asarray(ref, dtype=float)
    pts = np.asarray(points, dtype=float).reshape(-1, len(r))
    pts = pts[np.all(pts < r, axis=1)]
    if len(pts) == 0:
        return 0.0
    dims = len(r)
    if dims == 1:
        return float(r[0] - pts[:, 0].min())
    pts = pts[non_dominated(pts)]
    if dims == 2:
        return _hv2(pts, r)
    if dims == 3:
        zs = np.unique(pts[:, 2])
        bounds = np.append(zs, r[2])
        volume = 0.0
        for i, z in enumerate(zs):
            layer = pts[pts[:, 2] <= z][:, :2]
            volume += _hv2(layer, r[:2]) * (bounds[i + 1] - z)
        return float(volume)
    raise ValueError(f"hypervolume is implemented for 1-3 objectives, not {dims}")


__all__ = [
    "as_minimization",
    "crowding_distance",
    "dominates",
    "hypervolume",
    "minimized",
    "non_dominated",
    "nondominated_sort",
    "sign",
]
