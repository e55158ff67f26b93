"""The controls phase: controls files proposed by an engine, on the leading build.

Advanced-controls files change the machine code of every build but mostly make it slower,
so they are searched last, on the *base*: every gene of the best build told so far with its
controls at ``none``. Each file the engine (``ctune.controls``) proposes is stored by
content and becomes a candidate with an ``acf_*`` gene set to its digest; the trial's value
goes back as its score, so the engine learns from measured times, never from a model. The
phase's state holds the engine's checkpoint for ``--resume`` (docs/advanced-controls.md).
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


class ControlsPhase:
    """One engine per acf gene, taking turns by generation; each proposes for the same base.

    Proposals wait in a queue until asked for, so a batch never asks an engine for more
    than it offers at once (its open positions), and a proposal the journal already
    measured (a resumed search) is told to its engine at once instead of measured again.
    """

    def __init__(self, setup: ControlsSetup, kernel: str, seed: int, score: Score) -> None:
        self.setup = setup
        self.kernel = kernel
        self.seed = seed
        self.score = score
        self.store = ControlsStore(setup.store_root)
        self.base: dict[str, GeneValue] | None = None
        self.engines: dict[str, ControlsEngine] = {}
        self.pending: dict[str, tuple[str, str]] = {}  # candidate key -> (gene, proposal id)
        self.queue: list[Candidate] = []  # proposed, not yet handed out
        self.turn = 0

    @property
    def started(self) -> bool:
        return self.base is not None

    def start(self, base: Mapping[str, GeneValue]) -> None:
        """Fix the base build (its acf genes at ``none``) and make the engines."""
        self.base = {k: (NO_CONTROLS if k in self.setup.spaces else v) for k, v in base.items()}
        for gene in self.setup.genes:
            self.engines[gene] = self._engine(gene)

    def _engine(self, gene: str) -> ControlsEngine:
        return make_engine(
            self.setup.engine,
            space=self.setup.spaces[gene],
            seed=self.seed,
            options=self.setup.options,
        )

    def _refill(self) -> bool:
        """Queue the next engine's open proposals, each stored and made a candidate."""
        assert self.base is not None
        genes = self.setup.genes
        for _ in genes:
            gene = genes[self.turn % len(genes)]
            self.turn += 1
            proposals = self.engines[gene].ask()
            for proposal in proposals:
                digest = self.store.put(proposal.data)
                cand = Candidate.of(self.kernel, {**self.base, gene: digest})
                self.pending[cand.key()] = (gene, proposal.id)
                self.queue.append(cand)
            if proposals:
                return True
        return False

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
            gene, proposal = asked
            by_engine.setdefault(gene, {})[proposal] = self.score(trial)
        for gene, scores in by_engine.items():
            self.engines[gene].tell(scores)

    def state(self) -> dict[str, Any]:
        """JSON-able: the base, whose turn it is, what waits, each engine's checkpoint."""
        if self.base is None:
            return {}
        return {
            "base": dict(self.base),
            "turn": self.turn,
            "pending": {k: list(v) for k, v in self.pending.items()},
            "queue": [dict(c.genes) for c in self.queue],
            "engines": {
                gene: {
                    "identity": engine.identity(),
                    "checkpoint": base64.b64encode(engine.checkpoint()).decode("ascii"),
                }
                for gene, engine in self.engines.items()
            },
        }

    def load_state(self, state: Mapping[str, Any], told: Mapping[str, Trial]) -> None:
        """Take the phase back from :meth:`state`: fresh engines restored from their
        checkpoints, then told what the journal already measured of their pending files."""
        if not state:
            return
        self.base = dict(state["base"])
        self.turn = int(state.get("turn", 0))
        self.pending = {k: (str(v[0]), str(v[1])) for k, v in dict(state["pending"]).items()}
        self.queue = [Candidate.of(self.kernel, genes) for genes in state.get("queue", [])]
        for gene, saved in dict(state["engines"]).items():
            engine = self._engine(gene)
            engine.restore(base64.b64decode(saved["checkpoint"]))
            self.engines[gene] = engine
        self.tell([told[key] for key in list(self.pending) if key in told])
        self.queue = [c for c in self.queue if c.key() in self.pending]

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


__all__ = ["ControlsPhase"]
