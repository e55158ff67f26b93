"""Build-aware filling: measure runtime-gene variants of good builds while compiles run.

Genes of the ``runtime`` family never reach nvcc, so a variant that changes only them
shares a built candidate's build and costs a GPU measurement and no compile. While every
build the driver waits for is still compiling, it measures such a *filler* instead of
letting the GPU idle: unseen variants of the best trials, nearest first, in an order that
is a pure function of the trials (so a resumed search continues where it stopped).
Fillers are journaled and told like any trial but not counted against the budget
(docs/search.md).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Container, Iterator, Mapping, Sequence

from ctune.records import Candidate, GeneValue, Trial
from ctune.search.strategy import min_form
from ctune.spec.space.params import BuildGroup, Gene, Space

_Ranked = tuple[tuple[float, ...], int, Trial]


def _rank(item: _Ranked) -> tuple[tuple[float, ...], int]:
    return item[0], item[1]


def runtime_genes(space: Space) -> tuple[Gene, ...]:
    """The genes that never reach nvcc (family ``runtime``)."""
    return tuple(g for g in space.genes if not g.compiled)


class Filler:
    """Proposes fillers: unseen runtime-gene variants of the best trials (see module)."""

    def __init__(
        self,
        kernel: str,
        space: Space,
        dims: Mapping[str, int],
        directions: Sequence[str],
    ) -> None:
        self.kernel = kernel
        self.space = space
        self.dims = dict(dims)
        self.directions = tuple(directions)
        self.runtime = runtime_genes(space)
        self._feasible: list[_Ranked] = []  # best first
        self._exhausted: set[str] = set()  # parents with no unseen valid variant left

    @property
    def active(self) -> bool:
        """Only a space with runtime genes has candidates that share a build."""
        return bool(self.runtime)

    def group(self, candidate: Candidate) -> BuildGroup:
        """The candidate's build (:meth:`Space.build_group`)."""
        return self.space.build_group(candidate.genes)

    def observe(self, trial: Trial) -> None:
        """Note a finished trial; a feasible one is a parent, ranked by the first objective."""
        if not self.active:
            return
        point = min_form(trial, self.directions)
        if point is None or trial.build is None or not trial.build.outcome.is_ok:
            return
        bisect.insort(self._feasible, (point[:1], trial.number, trial), key=_rank)

    def pick(
        self, front: Sequence[Trial], seen: Container[str], pending: Container[str]
    ) -> Candidate | None:
        """The next filler, or None. ``seen``: keys tried (never again); ``pending``: keys
        of the batch in flight (they will be measured anyway)."""
        if not self.active:
            return None
        for parent in self._ranked(front):
            key = parent.candidate.key()
            if key in self._exhausted:
                continue
            waiting = False
            for values in self._variants(parent.candidate.as_dict()):
                cand = Candidate.of(self.kernel, values)
                k = cand.key()
                if k in seen:
                    continue
                if k in pending:
                    waiting = True  # not measured yet: do not call the parent exhausted
                    continue
                if self.space.is_valid(values, self.dims):
                    return cand
            if not waiting:
                self._exhausted.add(key)
        return None

    def _ranked(self, front: Sequence[Trial]) -> Iterator[Trial]:
        """Front members by the first objective, then the best feasible trials."""
        keyed = []
        for trial in front:
            point = min_form(trial, self.directions)
            if point is not None:
                keyed.append((point[:1], trial.number, trial))
        keyed.sort(key=_rank)
        done: set[int] = set()
        for _, number, trial in itertools.chain(keyed, self._feasible):
            if number not in done:
                done.add(number)
                yield trial

    def _variants(self, parent: Mapping[str, GeneValue]) -> Iterator[dict[str, GeneValue]]:
        """The parent with 1, then 2, ... runtime genes changed; nearest values first."""
        alternatives = {}
        for gene in self.runtime:
            here = gene.index(parent[gene.name])
            others = [i for i in range(len(gene.values)) if i != here]
            others.sort(key=lambda i: (abs(i - here), i))
            alternatives[gene.name] = [gene.values[i] for i in others]
        for changed in range(1, len(self.runtime) + 1):
            for genes in itertools.combinations(self.runtime, changed):
                names = [g.name for g in genes]
                for values in itertools.product(*(alternatives[n] for n in names)):
                    yield {**parent, **dict(zip(names, values, strict=True))}


__all__ = ["Filler", "runtime_genes"]
