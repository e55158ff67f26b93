"""Structured input: points sorted by x, drawn from the seed ctune passes."""

import numpy as np


def sorted_points(dims, seed):
    rng = np.random.default_rng(seed)
    points = np.zeros(dims["N"], dtype=[("x", np.float32), ("y", np.float32)])
    points["x"] = np.sort(rng.uniform(-1, 1, dims["N"])).astype(np.float32)
    points["y"] = rng.uniform(0.5, 1.5, dims["N"]).astype(np.float32)
    return points
