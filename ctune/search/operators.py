"""Genetic operators on index-encoded candidates; pure, driven by one seeded RNG.

A candidate is a vector of value indices (``Space.encode``). An ordered numeric gene mostly
mutates by a +-1 step (neighbouring tile sizes behave alike), else by a uniform resample; a
categorical gene only by a resample; a two-valued gene flips. Crossover is uniform per gene.
Validity is the caller's (``Space.repair``). They take ``random.Random`` explicitly: DEAP's
use the global ``random``, which would make seeded runs depend on the rest of the process.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ctune.spec.space.params import Gene, Space


def is_ordered(gene: Gene) -> bool:
    """Numeric, non-boolean values: a +-1 step moves to a neighbouring value."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in gene.values)


def mutate_gene(gene: Gene, index: int, rng: random.Random, step_prob: float) -> int:
    """A different value index for one gene."""
    n = len(gene.values)
    if n < 2:
        return index
    if n == 2:
        return 1 - index
    if is_ordered(gene) and rng.random() < step_prob:
        step = rng.choice((-1, 1))
        moved = index + step
        if not 0 <= moved < n:  # reflect at the ends of the list
            moved = index - step
        return moved
    other = rng.randrange(n - 1)
    return other if other < index else other + 1


def mutate(
    codes: Sequence[int], space: Space, rng: random.Random, gene_prob: float, step_prob: float
) -> list[int]:
    """Each gene mutates with probability ``gene_prob``."""
    out = list(codes)
    for i, gene in enumerate(space.genes):
        if rng.random() < gene_prob:
            out[i] = mutate_gene(gene, out[i], rng, step_prob)
    return out


def force_change(
    codes: Sequence[int], space: Space, rng: random.Random, step_prob: float
) -> list[int]:
    """Mutate exactly one gene that has a choice (to escape a duplicate)."""
    out = list(codes)
    choices = [i for i, g in enumerate(space.genes) if len(g.values) > 1]
    if choices:
        i = rng.choice(choices)
        out[i] = mutate_gene(space.genes[i], out[i], rng, step_prob)
    return out


def crossover_uniform(
    a: Sequence[int], b: Sequence[int], rng: random.Random, swap_prob: float = 0.5
) -> tuple[list[int], list[int]]:
    """Swap each gene between the parents with probability ``swap_prob``."""
    x, y = list(a), list(b)
    for i in range(len(x)):
        if rng.random() < swap_prob:
            x[i], y[i] = y[i], x[i]
    return x, y


__all__ = ["crossover_uniform", "force_change", "is_ordered", "mutate", "mutate_gene"]
