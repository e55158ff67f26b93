"""The stand-in engine improves a synthetic score, so a test of a controls stage can see it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.controls.engine import ControlsEngineError, make_engine
from ctune.controls.store import ControlsError
from ctune.testing.standin_controls import FAKE_MAGIC, StandInControlsEngine, decisions


def _distance(data: bytes) -> float:
    return float(sum((d - 3) ** 2 for d in decisions(data)))


def test_it_evolves_towards_a_better_score(tmp_path: Path) -> None:
    engine = make_engine("standin", space=tmp_path, seed=11, options={"pool_size": 8})
    best_by_generation = []
    for _ in range(15):
        batch = engine.ask()
        scores = {p.id: _distance(p.data) for p in batch}
        best_by_generation.append(min(scores.values()))
        engine.tell(scores)
    assert engine.generation == 15
    assert min(best_by_generation[-3:]) < best_by_generation[0] / 2


def test_its_files_are_recognisably_fake_and_unique(tmp_path: Path) -> None:
    engine = StandInControlsEngine(tmp_path, seed=1)
    batch = engine.ask(20)
    assert all(p.data.startswith(FAKE_MAGIC) for p in batch)
    assert len({p.data for p in batch}) == 20
    with pytest.raises(ValueError, match="not a stand-in"):
        decisions(b"\x8f real controls")


def test_a_checkpoint_of_another_pool_is_refused(tmp_path: Path) -> None:
    blob = StandInControlsEngine(tmp_path, seed=1, options={"pool_size": 4}).checkpoint()
    with pytest.raises(ControlsEngineError, match="same space and pool"):
        StandInControlsEngine(tmp_path, seed=1, options={"pool_size": 6}).restore(blob)
    with pytest.raises(ControlsError, match="option 'seed_range'"):
        StandInControlsEngine(tmp_path, seed=1, options={"seed_range": 1})
