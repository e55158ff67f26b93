"""ControlsEngineContract: the tests every controls engine passes (Optuna's pattern).

Subclass it in a test module and override the ``engine_factory`` fixture (a seed -> a
fresh engine of pool :attr:`ControlsEngineContract.pool_size`)::

    class TestStandIn(ControlsEngineContract):
        @pytest.fixture
        def engine_factory(self, tmp_path):
            return lambda seed: StandInControlsEngine(tmp_path, seed=seed,
                                                      options={"pool_size": self.pool_size})

The suite checks what ctune relies on: ``ask(n)`` gives n proposals with unique ids that
are then pending; a tell of an id not pending is refused and tells nothing; a failure's
place is proposed again by the next ``ask()``; a pool of successes ends a generation, and
only once nothing is pending (so asking ahead grows a generation, never starts one); the
same seed makes the same decisions; a checkpoint restored on a fresh engine proposes what
the engine it came from proposes next, with the same pending ids; a damaged checkpoint is
one line. "The same decisions" is what :meth:`ControlsEngineContract.observe` sees: the
bytes by default; an engine whose bytes are randomised (CompileIQ's) observes what its
files do to a compiler, or what it can see of its state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ctune.controls.engine import ControlsEngine, ControlsEngineError, Proposal

EngineFactory = Callable[[int], ControlsEngine]


class ControlsEngineContract:
    """Override ``engine_factory``; may override :meth:`observe`."""

    pool_size = 8

    @pytest.fixture
    def engine_factory(self) -> EngineFactory:
        raise NotImplementedError("override the engine_factory fixture")

    @pytest.fixture
    def make(self, engine_factory: EngineFactory) -> Iterator[EngineFactory]:
        """The factory, with every engine it made closed after the test."""
        made: list[ControlsEngine] = []

        def make_one(seed: int) -> ControlsEngine:
            engine = engine_factory(seed)
            made.append(engine)
            return engine

        yield make_one
        for engine in made:
            engine.close()

    # --- hooks ----------------------------------------------------------------------------
    def observe(self, engine: ControlsEngine, proposals: list[Proposal]) -> list[Any]:
        """What shows that two runs made the same decisions: the files' bytes."""
        return [p.data for p in proposals]

    @staticmethod
    def scores(proposals: list[Proposal], fail_every: int = 0) -> dict[str, float | None]:
        """Scores by position (the same for the same decisions in the same order); every
        ``fail_every``-th is a failure."""
        return {
            p.id: None if fail_every and i % fail_every == 0 else float(i % 5)
            for i, p in enumerate(proposals)
        }

    def _one_generation(self, engine: ControlsEngine) -> None:
        batch = engine.ask(self.pool_size)
        engine.tell(self.scores(batch))

    # --- the contract -----------------------------------------------------------------------
    def test_ask_gives_as_many_as_asked(self, make: EngineFactory) -> None:
        engine = make(1)
        for n in (3, 1):
            batch = engine.ask(n)
            assert len(batch) == n
            assert all(isinstance(p, Proposal) and p.data for p in batch)
        assert engine.ask(0) == []
        assert len(engine.ask()) >= 1

    def test_ids_are_unique_and_pending_in_order(self, make: EngineFactory) -> None:
        engine = make(1)
        first, second = engine.ask(self.pool_size), engine.ask(3)
        ids = [p.id for p in first + second]
        assert len(set(ids)) == len(ids)
        assert list(engine.pending) == ids

    def test_tell_of_an_id_not_pending_is_refused_and_tells_nothing(
        self, make: EngineFactory
    ) -> None:
        engine = make(1)
        batch = engine.ask(4)
        with pytest.raises(ControlsEngineError, match="not pending") as caught:
            engine.tell({batch[0].id: 1.0, "no-such-id": 2.0})
        assert "\n" not in str(caught.value)
        assert list(engine.pending) == [p.id for p in batch]
        engine.tell({batch[0].id: 1.0})
        with pytest.raises(ControlsEngineError, match="not pending"):
            engine.tell({batch[0].id: 1.0})  # told already

    def test_failures_are_proposed_again(self, make: EngineFactory) -> None:
        engine = make(2)
        batch = engine.ask()
        assert len(batch) == self.pool_size
        scores = self.scores(batch, fail_every=2)  # None, inf and nan: all failures
        failures = [k for k, v in scores.items() if v is None]
        scores[failures[0]] = float("inf")
        scores[failures[1]] = float("nan")
        engine.tell(scores)
        assert engine.generation == 0
        refill = engine.ask()
        assert len(refill) == len(failures)
        engine.tell(self.scores(refill))
        assert engine.generation == 1

    def test_a_generation_ends_only_when_nothing_is_pending(self, make: EngineFactory) -> None:
        """Files asked for while others are out join the same generation: an engine learns
        from its scores only once every file it gave out is told (why the controls phase
        keeps islands instead of asking one engine ahead: docs/advanced-controls.md)."""
        engine = make(4)
        batch, ahead = engine.ask(self.pool_size), engine.ask(2)
        engine.tell(self.scores(batch))
        assert engine.generation == 0 and list(engine.pending) == [p.id for p in ahead]
        engine.tell(self.scores(ahead))
        assert engine.generation == 1 and not engine.pending

    def test_same_seed_same_decisions(self, make: EngineFactory) -> None:
        one, two = make(5), make(5)
        for engine in (one, two):
            self._one_generation(engine)
        assert self.observe(one, one.ask(3)) == self.observe(two, two.ask(3))

    def test_restored_checkpoint_proposes_what_the_original_does(self, make: EngineFactory) -> None:
        original = make(7)
        self._one_generation(original)
        waiting = original.ask(2)  # a checkpoint holds pending proposals too
        saved = original.checkpoint()
        restored = make(8)  # the checkpoint's seed is the one that counts
        restored.restore(saved)
        assert restored.pending == original.pending == tuple(p.id for p in waiting)
        assert restored.generation == original.generation
        expected = self.observe(original, original.ask(3))
        assert self.observe(restored, restored.ask(3)) == expected
        for engine in (original, restored):
            engine.tell(self.scores(waiting))  # the ids a checkpoint kept are told as such
        assert len(restored.pending) == len(original.pending) == 3

    @pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "foreign"])
    def test_damaged_checkpoint_is_one_line(self, make: EngineFactory, damage: str) -> None:
        engine = make(3)
        self._one_generation(engine)
        blob = engine.checkpoint()
        broken = {
            "flip": blob[: len(blob) // 2]
            + bytes([blob[len(blob) // 2] ^ 0x40])
            + blob[len(blob) // 2 + 1 :],
            "truncate": blob[: len(blob) - 7],
            "empty": b"",
            "foreign": b"PK\x03\x04 not a checkpoint at all",
        }[damage]
        with pytest.raises(ControlsEngineError) as caught:
            make(3).restore(broken)
        assert "\n" not in str(caught.value)
        assert "checkpoint" in str(caught.value)

    def test_identity_names_the_engine(self, make: EngineFactory) -> None:
        identity = make(1).identity()
        assert identity["engine"]
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in identity.items())


__all__ = ["ControlsEngineContract", "EngineFactory"]
