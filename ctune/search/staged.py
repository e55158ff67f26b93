"""Structure first, flags on the leading builds: a joint search flag genes cannot make worse.

Flags matter only on builds that are already good, and most flag changes leave the machine
code unchanged, so this strategy alternates a **structure** phase (the non-flag genes,
every flag at its no-op default: ``parzen.py``, or the GA with ``structure=ga``) with a
**flags** phase once it stagnates (one-flag-at-a-time descent from the ``leaders`` best
builds), and ends with a **controls** phase where the space has acf genes
(``controls_phase.py``). Why and how, with the measurements: docs/search.md.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ctune.controls.setup import ControlsSetup
from ctune.errors import UserError
from ctune.records import Candidate, GeneValue, Trial
from ctune.search import make_strategy
from ctune.search.controls_phase import ControlsPhase
from ctune.search.evolution import GA_OPTIONS
from ctune.search.parzen import PARZEN_OPTIONS
from ctune.search.strategy import (
    BaseStrategy,
    OptionTable,
    StrategyContext,
    check_at_least,
    check_one_objective,
    min_form,
)
from ctune.spec.space.nvcc import NO_CONTROLS
from ctune.spec.space.params import Gene, Space

#: the strategies a structure phase can run, and their options
STRUCTURE_STRATEGIES: dict[str, OptionTable] = {"parzen": PARZEN_OPTIONS, "ga": GA_OPTIONS}
STAGED_OPTIONS: OptionTable = {
    "structure": ("strategy of the structure phase: parzen (a model) or ga", "parzen"),
    **PARZEN_OPTIONS,
    **GA_OPTIONS,
    "patience": ("structure generations without improvement before the flags are tried", 2),
    "leaders": ("best builds whose flags are tuned in a flag phase", 2),
    "controls_pool": ("controls files per generation of the controls engine", 32),
    "controls_islands": (
        "controls engines per acf gene, each its own population, taking turns by generation: "
        "one's files compile while another's generation waits for its slowest build; auto: "
        "2 for one acf gene, 1 each for two (their engines take turns already)",
        "auto",
    ),
    "start": (
        "the phase to start in: structure, or controls (on the best build told first)",
        "structure",
    ),
}


def controls_islands(value: Any, controls: ControlsSetup | None) -> int:
    """The ``controls_islands`` option as a count: ``auto`` gives two engines in turn in
    all, two islands of one acf gene or one engine of each of two; else an integer >= 1."""
    genes = len(controls.genes) if controls is not None else 1
    if str(value).strip() == "auto":
        return 2 if genes == 1 else 1
    try:
        islands = int(str(value))
    except ValueError:
        islands = 0
    if islands < 1:
        raise UserError(
            f"option controls_islands={value} for staged: must be auto or an integer >= 1"
        )
    return islands


def flag_genes(space: Space) -> tuple[Gene, ...]:
    """The compiler-flag genes that have something to choose."""
    return tuple(g for g in space.genes if g.flag and len(g.values) > 1)


def structure_space(space: Space) -> Space:
    """``space`` with every flag gene pinned to its no-op default."""
    pinned = tuple(
        dataclasses.replace(g, values=(g.default,), suggest=()) if g.flag else g
        for g in space.genes
    )
    return Space(pinned, space.restrictions, space.derived)


class StagedStrategy(BaseStrategy):
    """Structure search with flags at their defaults, flag coordinate descent on stagnation."""

    name: ClassVar[str] = "staged"
    OPTIONS: ClassVar[OptionTable] = STAGED_OPTIONS

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        check_one_objective(self.name, context.directions)
        super().__init__(context, options)
        check_at_least(self.name, self.options, "patience", 1)
        check_at_least(self.name, self.options, "leaders", 1)
        structure = str(self.options["structure"])
        if structure not in STRUCTURE_STRATEGIES:
            raise UserError(
                f"option structure={structure} for staged: expected one of "
                f"{', '.join(STRUCTURE_STRATEGIES)}"
            )
        table = STRUCTURE_STRATEGIES[structure]
        inner_options = {k: v for k, v in self.options.items() if k in table}
        inner_context = dataclasses.replace(context, space=structure_space(context.space))
        self.inner = make_strategy(structure, inner_context, inner_options)
        self.flags = flag_genes(context.space)
        self.defaults = {g.name: g.default for g in self.flags}
        start = str(self.options["start"])
        if start not in ("structure", "controls"):
            raise UserError(f"option start={start} for staged: expected structure or controls")
        if start == "controls" and context.controls is None:
            raise UserError(
                "option start=controls for staged: the space has no acf genes "
                "(ask for them with --acf or the spec's acf)"
            )
        check_at_least(self.name, self.options, "controls_pool", 2)
        self.controls = (
            ControlsPhase(
                dataclasses.replace(
                    context.controls,
                    options={
                        "pool_size": self.options["controls_pool"],
                        **context.controls.options,
                    },
                ),
                context.kernel,
                context.seed,
                self._value,
                islands=controls_islands(self.options["controls_islands"], context.controls),
            )
            if context.controls is not None
            else None
        )
        self.phase = "controls" if start == "controls" else "structure"
        self.stale = 0  # structure generations without improvement
        self.best: float | None = None
        self.probe_improved = False
        self.probes: list[Candidate] = []

    # --- helpers ----------------------------------------------------------------------------
    def _value(self, trial: Trial) -> float | None:
        point = min_form(trial, self.context.directions)
        return None if point is None else point[0]

    def _structural(self, trial: Trial) -> bool:
        """Flags at their defaults and no controls file: a point of the structure phase."""
        genes = trial.candidate.as_dict()
        flags_off = all(genes.get(name) == default for name, default in self.defaults.items())
        controls = self.context.controls
        return flags_off and (
            controls is None
            or all(genes.get(g, NO_CONTROLS) == NO_CONTROLS for g in controls.genes)
        )

    def _leaders(self) -> list[Trial]:
        ranked = sorted(
            (t for t in self.told.values() if self._value(t) is not None),
            key=lambda t: (self._value(t), t.number),
        )
        out: list[Trial] = []
        seen: set[tuple[tuple[str, GeneValue], ...]] = set()
        for trial in ranked:  # one leader per structure: its flags are what we tune
            shape = tuple((k, v) for k, v in trial.candidate.genes if k not in self.defaults)
            if shape not in seen:
                seen.add(shape)
                out.append(trial)
            if len(out) >= int(self.options["leaders"]):
                break
        return out

    def _flag_probes(self) -> list[Candidate]:
        """Every unseen one-flag change of each leader, the leaders taking turns (each
        flag value on every leader before the next value): a flag can suit the runner-up's
        structure and not the leader's, and a small budget then still reaches it."""
        per_leader: list[list[Candidate]] = []
        keys: set[str] = set()
        dims = self.context.dims
        for leader in self._leaders():
            genes = leader.candidate.as_dict()
            probes: list[Candidate] = []
            for gene in self.flags:
                for value in gene.values:
                    if value == genes[gene.name]:
                        continue
                    values = {**genes, gene.name: value}
                    cand = self.candidate(values)
                    key = cand.key()
                    if self.seen(key) or key in keys or not self.space.is_valid(values, dims):
                        continue
                    keys.add(key)
                    probes.append(cand)
            per_leader.append(probes)
        turns = itertools.zip_longest(*per_leader)
        return [cand for turn in turns for cand in turn if cand is not None]

    # --- protocol -----------------------------------------------------------------------------
    def _best_told(self) -> Trial | None:
        ranked = [t for t in self.told.values() if self._value(t) is not None]
        return min(ranked, key=lambda t: (self._value(t), t.number), default=None)

    def _ask_controls(self, n: int) -> list[Candidate]:
        """The controls phase's batch, started on the best build when it first asks."""
        assert self.controls is not None
        if not self.controls.started:
            best = self._best_told()
            if best is None:
                return []
            self.controls.start(best.candidate.as_dict())
        return [c for c in self.controls.ask(n, self.told) if not self.seen(c.key())]

    def ask(self, n: int) -> list[Candidate]:
        if n <= 0:
            return []
        if self.phase == "controls":
            batch = self._ask_controls(n)
            if batch:
                self.asked.update(c.key() for c in batch)
                return batch
            if self.controls is not None and self.controls.started:
                return []  # the engine has nothing unseen left: the search is done
        if self.phase == "flags":
            if not self.probes:
                self.probes = self._flag_probes()
            batch, self.probes = self.probes[:n], self.probes[n:]
            if batch:
                self.asked.update(c.key() for c in batch)
                return batch
            self.phase, self.stale = "structure", 0
        batch = [c for c in self.inner.ask(n) if not self.seen(c.key())]
        if not batch and self.flags:  # the structures are exhausted: flags only from now
            self.phase, self.probes = "flags", self._flag_probes()
            batch, self.probes = self.probes[:n], self.probes[n:]
        if not batch and self.controls is not None and self.phase != "controls":
            self.phase = "controls"  # nothing else left to try
            batch = self._ask_controls(n)
        self.asked.update(c.key() for c in batch)
        return batch

    def upcoming(self, n: int) -> list[Candidate]:
        """In the controls phase, the next engine's files while another's generation is out
        (``ControlsPhase.upcoming``): the search compiles them ahead. Elsewhere nothing."""
        if self.phase != "controls" or self.controls is None or not self.controls.started:
            return []
        return [c for c in self.controls.upcoming(n) if not self.seen(c.key())]

    def first_asks_ignore_values(self) -> bool:
        """In the structure phase, where its strategy's first asks do (Parzen's seeds and
        samples, the GA's first population) and the baseline alone cannot end the phase
        (a patience of 2 or more)."""
        return (
            self.phase == "structure"
            and int(self.options["patience"]) >= 2
            and isinstance(self.inner, BaseStrategy)
            and self.inner.first_asks_ignore_values()
        )

    def tell(self, trials: Sequence[Trial]) -> None:
        super().tell(trials)
        if self.controls is not None and self.controls.started:
            self.controls.tell(trials)
        structural = [t for t in trials if self._structural(t)]
        if structural:
            self.inner.tell(structural)
        values = [v for v in (self._value(t) for t in trials) if v is not None]
        improved = bool(values) and (self.best is None or min(values) < self.best)
        if improved:
            self.best = min(values)
        if self.phase == "controls":
            return
        if self.phase == "structure":
            self.stale = 0 if improved else self.stale + 1
            if self.flags and self.stale >= int(self.options["patience"]):
                self.phase, self.probes, self.probe_improved = "flags", [], False
            elif self.controls is not None and self.stale >= int(self.options["patience"]):
                self.phase = "controls"  # no flags to tune: the structure has settled
        else:
            self.probe_improved |= improved
            if improved:
                self.probes = []  # a new leader: descend from it
            elif not self.probes and not self.probe_improved:
                # a flag round that brought nothing: the other genes have settled
                self.phase = "controls" if self.controls is not None else "structure"
                self.stale = 0
            elif not self.probes:
                self.probe_improved = False  # another round from the improved leaders

    def state(self) -> dict[str, Any]:
        out = super().state()
        out.update(
            {
                "phase": self.phase,
                "stale": self.stale,
                "inner": self.inner.state(),
                "probes": [c.key() for c in self.probes],
                "controls": self.controls.state() if self.controls is not None else {},
            }
        )
        return out

    def load_state(self, state: Mapping[str, Any]) -> None:
        super().load_state(state)
        if state.get("strategy") != self.name:
            return
        self.phase = str(state.get("phase", self.phase))
        self.stale = int(state.get("stale", self.stale))
        inner = state.get("inner")
        if isinstance(inner, Mapping):
            self.inner.load_state(inner)
        keys = state.get("probes") or []
        if keys:
            pending = {c.key(): c for c in self._flag_probes()}
            self.probes = [pending[k] for k in keys if k in pending]
        controls = state.get("controls")
        if controls and self.controls is None:
            raise UserError(
                "this journal's search tuned controls files: resume it with the same --acf"
            )
        if self.controls is not None and isinstance(controls, Mapping):
            self.controls.load_state(controls, self.told)


__all__ = [
    "STAGED_OPTIONS",
    "STRUCTURE_STRATEGIES",
    "StagedStrategy",
    "controls_islands",
    "flag_genes",
    "structure_space",
]
