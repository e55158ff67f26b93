"""bench/multi_gpu.py's checks and verdicts (the searches themselves need >= 2 GPUs)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ctune.config import Settings
from ctune.objective import parse_objective_spec
from ctune.records import Measurement, Outcome, to_json
from ctune.search.driver import SearchOptions, run_search
from ctune.search.journal_records import JournalRecordError
from ctune.testing.standins import StandInCompiler, StandInMeasurer, standin_spec


@pytest.fixture
def bench(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("multi_gpu")


def test_the_journal_check_finds_a_candidate_or_a_binary_measured_twice(
    bench: ModuleType, tmp_path: Path
) -> None:
    spec = standin_spec(tmp_path / "kernel")
    result = run_search(
        Settings(cache_dir=tmp_path / "cache"),
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        SearchOptions(budget=30, seed=4, confirm_processes=0, journal_fsync=False),
        compiler=StandInCompiler(spec, noop_genes=("SCHEDULE",)),
        measurer=StandInMeasurer(seed=4),
    )
    problem = spec.problem().name
    clean = bench.journal_checks(spec, result.journal, problem)
    once = clean["measured_once"]
    assert once["same_binary"] > 0  # twins were proposed, and reused
    assert once["candidates_twice"] == 0 and once["binaries_twice"] == 0
    assert sum(clean["measured_per_gpu"].values()) == once["measured"]
    # a measured candidate's twin (a no-op gene changed: another candidate, its binary)
    # measured again instead of reused: caught as a binary measured twice
    lines = result.journal.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    record = next(
        r for r in records if r["kind"] == "trial" and r["trial"]["measurement"] is not None
    )
    genes = record["trial"]["candidate"]["genes"]
    taken = {
        r["trial"]["candidate"]["genes"]["SCHEDULE"]
        for r in records
        if r["kind"] == "trial"
        and {k: v for k, v in r["trial"]["candidate"]["genes"].items() if k != "SCHEDULE"}
        == {k: v for k, v in genes.items() if k != "SCHEDULE"}
    }
    genes["SCHEDULE"] = next(v for v in spec.space.gene("SCHEDULE").values if v not in taken)
    record["trial"]["number"] = len(lines)
    twin = json.dumps(record)
    result.journal.write_text("\n".join([*lines, twin]) + "\n")
    again = bench.journal_checks(spec, result.journal, problem)["measured_once"]
    assert again["candidates_twice"] == 0 and again["binaries_twice"] == 1
    # the same candidate journaled twice is refused by the journal's reader itself
    result.journal.write_text("\n".join([*lines, twin, twin]) + "\n")
    with pytest.raises(JournalRecordError, match=f"line {len(lines) + 1} has it"):
        bench.journal_checks(spec, result.journal, problem)


def _runs(center_ms: float, seed: int) -> list[dict[str, Any]]:
    """Three processes' measurements around ``center_ms`` (1% noise), as a child reports."""
    rng = random.Random(seed)
    return [
        to_json(
            Measurement(
                "k",
                "p",
                Outcome.OK,
                samples_ms=tuple(center_ms * rng.gauss(1.0, 0.01) for _ in range(200)),
            )
        )
        for _ in range(3)
    ]


def test_fronts_agree_on_the_same_winner_or_winners_the_rule_cannot_tell_apart(
    bench: ModuleType,
) -> None:
    one = {"pinned": "a", "pinned_per_process": _runs(1.0, 1)}
    assert bench.fronts_agree(one, {"pinned": "a", "pinned_per_process": []})["agree"]
    alike = bench.fronts_agree(one, {"pinned": "b", "pinned_per_process": _runs(1.0, 2)})
    assert alike["agree"] and not alike["same_pinned"]
    assert not alike["winners_compared"]["significant"]
    slower = bench.fronts_agree(one, {"pinned": "b", "pinned_per_process": _runs(1.2, 3)})
    assert not slower["agree"] and slower["winners_compared"]["change"] > 0.15


def test_efficiency_is_the_speedup_per_gpu(bench: ModuleType) -> None:
    assert bench.efficiency({"wall_s": 100.0}, {"wall_s": 55.0}, 2) == pytest.approx(0.909, 1e-3)
    assert bench.efficiency({"error": "exit 1"}, {"wall_s": 55.0}, 2) is None
