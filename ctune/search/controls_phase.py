"""The controls phase: controls files proposed by an engine, on the leading build.

Advanced-controls files change the machine code of every build but mostly make it slower,
so they are searched last, on the *base*: every gene of the best build told so far with its
controls at ``none``. Each file the engine (``ctune.controls``) proposes is stored by
content and becomes a candidate with an ``acf_*`` gene set to its digest; the trial's value
goes back as its score, so the engine learns from measured times, never from a model. The
phase's state holds the engines' checkpoints for ``--resume`` (docs/advanced-controls.md).

An engine learns only once every file it gave out is told, so one engine's generation
waits for its slowest ptxas run. With more than one engine (acf genes, or ``islands``:
independent populations of one gene) the next engine in turn is idle while another's
generation is measured: :meth:`ControlsPhase.upcoming` asks it then, and the search
compiles its files while the slow build finishes.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctune.controls.engine import ControlsEngine, make_engine
from ctune.controls.setup import ControlsSetup
from ctune.controls.store import ControlsStore
from ctune.records import Candidate, GeneValue, Trial
from ctune.spec.space.nvcc import NO_CONTROLS

#: a trial's score for the engine: its value to minimise, None when it failed
Score = Callable[[Trial], float | None]


#: engine batches one ask may take while each is known already (a resumed search)
MAX_REFILLS = 4
#: seed offset of each island after the first (the first keeps the search's seed)
ISLAND_SEED_STRIDE = 1_000_003


def engine_key(gene: str, island: int) -> str:
    """The name of ``gene``'s engine ``island`` in the phase's state: the gene itself for
    the first (what journals of one engine per gene hold), ``gene#i`` for the others."""
    return gene if island == 0 else f"{gene}#{island}"


def _gene_and_island(key: str) -> tuple[str, int]:
    gene, _, island = key.partition("#")
    return gene, int(island or 0)


class ControlsPhase:
    """``islands`` engines per acf gene, taking turns by generation; each proposes for the
    same base.

    Proposals wait in a queue until asked for, so a batch never asks an engine for more
    than it offers at once (its open positions), and a proposal the journal already
    measured (a resumed search) is told to its engine at once instead of measured again.
    An engine is asked only when none of its files is out, so what each proposes depends
    on its own scores alone, whenever it is asked: the same proposals for a seed.
    """

    def __init__(
        self, setup: ControlsSetup, kernel: str, seed: int, score: Score, islands: int = 1
    ) -> None:
        self.setup = setup
        self.kernel = kernel
        self.seed = seed
        self.score = score
        self.islands = islands
        self.store = ControlsStore(setup.store_root)
        self.base: dict[str, GeneValue] | None = None
        self.engines: dict[str, ControlsEngine] = {}  # engine key -> engine
        self.pending: dict[str, tuple[str, str]] = {}  # candidate key -> (engine key, id)
        self.queue: list[Candidate] = []  # proposed, not yet handed out
        self.turn = 0

    @property
    def keys(self) -> tuple[str, ...]:
        """The engines in their turn order: every gene's first island, then the next."""
        genes = self.setup.genes
        return tuple(engine_key(g, i) for i in range(self.islands) for g in genes)

    @property
    def started(self) -> bool:
        return self.base is not None

    def start(self, base: Mapping[str, GeneValue]) -> None:
        """Fix the base build (its acf genes at ``none``) and make the engines."""
        self.base = {k: (NO_CONTROLS if k in self.setup.spaces else v) for k, v in base.items()}
        for key in self.keys:
            self.engines[key] = self._engine(key)

    def _engine(self, key: str) -> ControlsEngine:
        gene, island = _gene_and_island(key)
        return make_engine(
            self.setup.engine,
            space=self.setup.spaces[gene],
            seed=self.seed + island * ISLAND_SEED_STRIDE,
            options=self.setup.options,
        )

    def _idle(self, key: str) -> bool:
        """None of this engine's files is out (queued, or handed out and not told): asking
        it now starts its next generation (asked while files are out, it would add to the
        current one). The phase's own ledger, so looking costs no call into the engine."""
        return all(engine != key for engine, _ in self.pending.values())

    def _refill(self) -> bool:
        """Queue the next idle engine's open proposals, each stored and made a candidate;
        False when the engines in turn are busy or have nothing left to propose."""
        assert self.base is not None
        keys = self.keys
        for _ in keys:
            key = keys[self.turn % len(keys)]
            if not self._idle(key):
                return False  # its generation is out: never ask past it
            self.turn += 1
            proposals = self.engines[key].ask()
            gene, _ = _gene_and_island(key)
            for proposal in proposals:
                digest = self.store.put(proposal.data)
                cand = Candidate.of(self.kernel, {**self.base, gene: digest})
                self.pending[cand.key()] = (key, proposal.id)
                self.queue.append(cand)
            if proposals:
                return True
        return False

    def upcoming(self, n: int) -> list[Candidate]:
        """What :meth:`ask` will hand out next, without handing it out: the queue, refilled
        from the next engine in turn where it is idle (while another's generation is out,
        so its files compile meanwhile); empty where the next engine is busy."""
        if self.base is None or n <= 0:
            return []
        if not self.queue:
            self._refill()
        return self.queue[:n]

    def ask(self, n: int, known: Mapping[str, Trial]) -> list[Candidate]:
        """Up to ``n`` candidates, the base with a proposed controls file each; proposals
        ``known`` already (measured before a resume) are told, not handed out."""
        if self.base is None or n <= 0:
            return []
        out: list[Candidate] = []
        refills = 0
        while len(out) < n:
            if not self.queue:
                # one engine batch per ask (what it offers at once), unless all of it was
                # known: the same batches as the uninterrupted search, so the same proposals
                if out or refills >= MAX_REFILLS or not self._refill():
                    break
                refills += 1
            cand = self.queue.pop(0)
            trial = known.get(cand.key())
            if trial is None:
                out.append(cand)
            else:
                self.tell([trial])
        return out

    def tell(self, trials: Sequence[Trial]) -> None:
        """Scores of the phase's own candidates, to the engine that proposed each."""
        by_engine: dict[str, dict[str, float | None]] = {}
        for trial in trials:
            asked = self.pending.pop(trial.candidate.key(), None)
            if asked is None:
                continue
            key, proposal = asked
            by_engine.setdefault(key, {})[proposal] = self.score(trial)
        for key, scores in by_engine.items():
            self.engines[key].tell(scores)

    def state(self) -> dict[str, Any]:
        """JSON-able: the base, the islands, whose turn it is, what waits, each engine's
        checkpoint."""
        if self.base is None:
            return {}
        return {
            "base": dict(self.base),
            "islands": self.islands,
            "turn": self.turn,
            "pending": {k: list(v) for k, v in self.pending.items()},
            "queue": [dict(c.genes) for c in self.queue],
            "engines": {
                key: {
                    "identity": engine.identity(),
                    "checkpoint": base64.b64encode(engine.checkpoint()).decode("ascii"),
                }
                for key, engine in self.engines.items()
            },
        }

    def load_state(self, state: Mapping[str, Any], told: Mapping[str, Trial]) -> None:
        """Take the phase back from :meth:`state`: fresh engines restored from their
        checkpoints, then told what the journal already measured of their pending files. The
        journal's island count holds (one where it names none: journals from before islands)."""
        if not state:
            return
        self.base = dict(state["base"])
        self.islands = int(state.get("islands", 1))
        self.turn = int(state.get("turn", 0))
        self.pending = {k: (str(v[0]), str(v[1])) for k, v in dict(state["pending"]).items()}
        self.queue = [Candidate.of(self.kernel, genes) for genes in state.get("queue", [])]
        for key, saved in dict(state["engines"]).items():
            engine = self._engine(key)
            engine.restore(base64.b64decode(saved["checkpoint"]))
            self.engines[key] = engine
        self.tell([told[key] for key in list(self.pending) if key in told])
        self.queue = [c for c in self.queue if c.key() in self.pending]

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


__all__ = ["ControlsPhase", "engine_key"]
