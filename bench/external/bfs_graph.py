"""A random graph in Rodinia's layout (each node's edges contiguous from ``starting``) and
one BFS level of it: the frontier holds every node of level L, all visited, all at cost L,
so the kernel's writes do not race. Every array comes from one draw per seed."""

from functools import lru_cache

import numpy as np

LEVEL = 3


@lru_cache(maxsize=4)
def _graph(nodes: int, edges: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.integers(0, edges + 1, nodes - 1))
    starting = np.concatenate([[0], cuts]).astype(np.int32)
    degree = np.diff(np.concatenate([starting, [edges]])).astype(np.int32)
    targets = rng.integers(0, nodes, edges).astype(np.int32)
    visited = rng.random(nodes) < 0.3
    frontier = visited & (rng.random(nodes) < 0.3)
    cost = np.where(visited, rng.integers(0, LEVEL, nodes), -1).astype(np.int32)
    cost[frontier] = LEVEL
    node = np.zeros(nodes, dtype=[("starting", np.int32), ("no_of_edges", np.int32)])
    node["starting"], node["no_of_edges"] = starting, degree
    return {
        "nodes": node,
        "edges": targets,
        "mask": frontier.astype(np.uint8),
        "updating": np.zeros(nodes, dtype=np.uint8),
        "visited": visited.astype(np.uint8),
        "cost": cost,
    }


def _part(name: str, dims: dict, seed: int) -> np.ndarray:
    return _graph(int(dims["NO_OF_NODES"]), int(dims["EDGES"]), int(seed))[name].copy()


def nodes(dims, seed):
    return _part("nodes", dims, seed)


def edges(dims, seed):
    return _part("edges", dims, seed)


def mask(dims, seed):
    return _part("mask", dims, seed)


def updating(dims, seed):
    return _part("updating", dims, seed)


def visited(dims, seed):
    return _part("visited", dims, seed)


def cost(dims, seed):
    return _part("cost", dims, seed)
