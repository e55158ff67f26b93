"""StandInControlsEngine: a small evolutionary engine over fake controls files, for tests.

It is not CompileIQ and its files are not controls files: each is ``FAKE_MAGIC`` followed by
its decisions (a few small integers) and a serial number, so two proposals of the same
decisions differ in bytes, as CompileIQ's do. It behaves like CompileIQ's engine where ctune
can see it: a pool per generation that advances once ``pool_size`` successes are told and
nothing is pending (an ask while files are out grows the generation), a failure's place
proposed again by the next ``ask()``, tell of an id not pending refused, a checkpoint
that restores exactly (pending proposals included), a damaged one refused in one line. It is
deterministic for a seed, and its children are mutations of the best decisions told so far,
so a test can watch it improve a synthetic score (:func:`decisions` reads a file back).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ctune.controls.engine import ControlsEngine, ControlsEngineError, Proposal, failed
from ctune.controls.store import ControlsError
from ctune.records import canonical_json, sha256_hex

FAKE_MAGIC = b"CTUNE-STANDIN-ACF 1\n"
#: decisions per file, and each one's values (0 .. LEVELS-1)
DECISIONS = 8
LEVELS = 16
_CHECKPOINT_MAGIC = b"ctune-standin-controls-checkpoint 1\n"
_OPTIONS = {"pool_size": 8}


def decisions(data: bytes) -> tuple[int, ...]:
    """The decisions a stand-in file holds (ValueError if it is not one)."""
    if not data.startswith(FAKE_MAGIC):
        raise ValueError("not a stand-in controls file")
    body = json.loads(data[len(FAKE_MAGIC) :].decode())
    return tuple(int(v) for v in body["decisions"])


def _file(serial: int, chosen: tuple[int, ...]) -> bytes:
    return FAKE_MAGIC + canonical_json({"decisions": list(chosen), "serial": serial}).encode()


class StandInControlsEngine(ControlsEngine):
    """Deterministic for a seed; checkpoint and restore exact."""

    name: ClassVar[str] = "standin"

    def __init__(self, space: Path, *, seed: int, options: Mapping[str, Any] | None = None):
        given = dict(options or {})
        unknown = sorted(set(given) - set(_OPTIONS))
        if unknown:
            raise ControlsError(f"standin engine option {unknown[0]!r}: unknown (known: pool_size)")
        self.pool_size = int(given.get("pool_size", _OPTIONS["pool_size"]))
        if self.pool_size < 2:
            raise ControlsError(f"standin engine option pool_size={self.pool_size}: expected >= 2")
        space = Path(space)
        material = space.read_bytes() if space.is_file() else str(space).encode()
        self._identity = {
            "engine": self.name,
            "space_sha256": sha256_hex(material),
            "pool_size": str(self.pool_size),
        }
        self._rng = random.Random(seed)
        self._serial = 0
        self._generation = 0
        self._pending: dict[str, tuple[int, ...]] = {}  # id -> decisions, in proposal order
        self._told: list[tuple[float, tuple[int, ...]]] = []  # this generation's successes
        self._parents: list[tuple[float, tuple[int, ...]]] = []  # the best so far

    # --- the contract -------------------------------------------------------------------
    def ask(self, n: int | None = None) -> list[Proposal]:
        if n is None:
            open_places = self.pool_size - len(self._told) - len(self._pending)
            n = open_places if open_places > 0 else self.pool_size
        out = []
        for _ in range(max(0, n)):
            chosen = self._child()
            self._serial += 1
            ident = f"standin-{self._serial:06d}"
            self._pending[ident] = chosen
            out.append(Proposal(ident, _file(self._serial, chosen)))
        return out

    def tell(self, scores: Mapping[str, float | None]) -> None:
        self._check_told(scores)
        for ident, score in scores.items():
            chosen = self._pending.pop(ident)
            if not failed(score):
                assert score is not None
                self._told.append((float(score), chosen))
        if len(self._told) >= self.pool_size and not self._pending:
            ranked = sorted(self._parents + self._told)
            self._parents = ranked[: self.pool_size]
            self._told = []
            self._generation += 1

    def checkpoint(self) -> bytes:
        version, internal, gauss = self._rng.getstate()
        state = {
            "identity": self._identity,
            "rng": [version, list(internal), gauss],
            "serial": self._serial,
            "generation": self._generation,
            "pending": [[k, list(v)] for k, v in self._pending.items()],
            "told": [[s, list(v)] for s, v in self._told],
            "parents": [[s, list(v)] for s, v in self._parents],
        }
        body = canonical_json(state).encode()
        return _CHECKPOINT_MAGIC + sha256_hex(body).encode() + b"\n" + body

    def restore(self, blob: bytes) -> None:
        damaged = "standin engine checkpoint: damaged ({}); start the search afresh"
        if not blob.startswith(_CHECKPOINT_MAGIC):
            raise ControlsEngineError(damaged.format("not a stand-in checkpoint"))
        digest, _, body = blob[len(_CHECKPOINT_MAGIC) :].partition(b"\n")
        if digest.decode(errors="replace") != sha256_hex(body):
            raise ControlsEngineError(damaged.format("its bytes do not match their digest"))
        state = json.loads(body)
        if state["identity"] != self._identity:
            raise ControlsEngineError(
                f"standin engine checkpoint: made for {state['identity']}, this engine is "
                f"{self._identity}; resume with the same space and pool, or start afresh"
            )
        version, internal, gauss = state["rng"]
        self._rng.setstate((version, tuple(internal), gauss))
        self._serial = int(state["serial"])
        self._generation = int(state["generation"])
        self._pending = {k: tuple(v) for k, v in state["pending"]}
        self._told = [(float(s), tuple(v)) for s, v in state["told"]]
        self._parents = [(float(s), tuple(v)) for s, v in state["parents"]]

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(self._pending)

    def identity(self) -> dict[str, str]:
        return dict(self._identity)

    # --- evolution -------------------------------------------------------------------------
    def _child(self) -> tuple[int, ...]:
        """Random decisions in generation 0; later a mutated tournament winner."""
        if not self._parents:
            return tuple(self._rng.randrange(LEVELS) for _ in range(DECISIONS))
        first, second = (
            self._rng.sample(self._parents, 2)
            if len(self._parents) > 1
            else (
                self._parents[0],
                self._parents[0],
            )
        )
        parent = min(first, second)[1]
        child = list(parent)
        for _ in range(1 + self._rng.randrange(2)):
            i = self._rng.randrange(DECISIONS)
            child[i] = min(LEVELS - 1, max(0, child[i] + self._rng.choice((-2, -1, 1, 2))))
        return tuple(child)


__all__ = ["DECISIONS", "FAKE_MAGIC", "LEVELS", "StandInControlsEngine", "decisions"]
