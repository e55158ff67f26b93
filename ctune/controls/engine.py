"""The controls engine contract: propose controls files, learn from their scores, checkpoint.

An engine works ask/tell: :meth:`ControlsEngine.ask` proposes controls files (opaque bytes,
each with an id), :meth:`ControlsEngine.tell` takes their scores by id (lower is better;
``None``, an infinity or NaN is a failure: a compile error, a hang, a wrong result), and
:meth:`ControlsEngine.checkpoint` gives bytes that :meth:`ControlsEngine.restore` on a
fresh engine of the same build and space turns back into the same state, so a resumed
search proposes what the uninterrupted one would have. CompileIQ's engine is one
(``compileiq.py``); ``ctune.testing.standin_controls`` is a stand-in for tests, and
``ctune.testing.contract_controls`` is the suite every engine passes.
"""

from __future__ import annotations

import importlib
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ctune.controls.store import ControlsError


@dataclass(frozen=True, slots=True)
class Proposal:
    """One controls file an engine proposes: its id (for :meth:`ControlsEngine.tell`) and
    its bytes (stored by content, ``ControlsStore.put``)."""

    id: str
    data: bytes

    def __repr__(self) -> str:
        return f"Proposal(id={self.id!r}, {len(self.data)} bytes)"


class ControlsEngineError(ControlsError):
    """A misuse of an engine (an unknown id told) or a checkpoint it cannot take back."""


def failed(score: float | None) -> bool:
    """Is this score a failure (None, an infinity, NaN)? The one rule every engine applies."""
    return score is None or not math.isfinite(score)


class ControlsEngine(ABC):
    """Proposes controls files and evolves them from their scores (lower is better)."""

    name: ClassVar[str]

    @abstractmethod
    def ask(self, n: int | None = None) -> list[Proposal]:
        """``n`` new proposals (None: the engine's own batch, its open positions); fewer,
        possibly none, only when it has nothing unseen left to propose."""

    @abstractmethod
    def tell(self, scores: Mapping[str, float | None]) -> None:
        """Scores of pending proposals by id, any subset; a failure is :func:`failed`. An id
        that is not pending (never asked, or told already) is a ControlsEngineError and
        nothing is told."""

    @abstractmethod
    def checkpoint(self) -> bytes:
        """The whole state, pending proposals included, as bytes."""

    @abstractmethod
    def restore(self, blob: bytes) -> None:
        """Take back a :meth:`checkpoint` (on a fresh engine); a blob that is damaged, or from
        another engine, build or space, is one ControlsEngineError line."""

    @property
    @abstractmethod
    def generation(self) -> int:
        """How many generations the engine has completed."""

    @property
    @abstractmethod
    def pending(self) -> tuple[str, ...]:
        """Ids asked and not yet told, in the order they were proposed."""

    def identity(self) -> dict[str, str]:
        """What names this engine in a journal's header: name, versions, space digest."""
        return {"engine": self.name}

    def close(self) -> None:  # noqa: B027 - an engine without resources needs no close
        """Free what the engine holds (native state, threads)."""

    def __enter__(self) -> ControlsEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_told(self, scores: Mapping[str, float | None]) -> None:
        """The ids of ``scores`` must all be pending: the one check every engine makes."""
        waiting = set(self.pending)
        unknown = [i for i in scores if i not in waiting]
        if unknown:
            shown = ", ".join(repr(i) for i in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
            raise ControlsEngineError(
                f"{self.name} engine: tell of {len(unknown)} id(s) not pending ({shown}); "
                f"{len(waiting)} pending: tell only ids that ask returned, once each"
            )


#: engine name -> "module:Class" (imported when made: CompileIQ is heavy and optional)
ENGINES: dict[str, str] = {
    "compileiq": "ctune.controls.compileiq:CompileIqEngine",
    "standin": "ctune.testing.standin_controls:StandInControlsEngine",  # tests only
}


def make_engine(
    name: str, *, space: Path, seed: int, options: Mapping[str, Any] | None = None
) -> ControlsEngine:
    """A fresh engine ``name`` over the search space file ``space``, seeded."""
    where = ENGINES.get(name)
    if where is None:
        raise ControlsError(f"controls engine {name!r}: unknown (known: {', '.join(ENGINES)})")
    module, cls = where.split(":")
    engine_class = getattr(importlib.import_module(module), cls)
    engine: ControlsEngine = engine_class(Path(space), seed=seed, options=dict(options or {}))
    return engine


__all__ = [
    "ENGINES",
    "ControlsEngine",
    "ControlsEngineError",
    "Proposal",
    "failed",
    "make_engine",
]
