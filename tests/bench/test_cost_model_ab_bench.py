"""bench/cost_model_ab.py: an arm's builds, skips and compiler CPU read from its journal."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any


def _trial(
    number: int,
    outcome: str,
    build: dict[str, Any] | None,
    value: float | None,
    generation: int = 1,
) -> dict:
    return {
        "kind": "trial",
        "elapsed_s": float(number),
        "trial": {
            "number": number,
            "generation": generation,
            "outcome": outcome,
            "build": build,
            "values": None if value is None else [value],
        },
    }


def test_an_arm_counts_compiles_not_cache_hits_nor_skips(
    bench_module: Callable[[str], ModuleType], tmp_path: Path
) -> None:
    ab = bench_module("cost_model_ab")
    records = [
        {"kind": "header", "device": "NVIDIA H200 (sm_90)", "fingerprint": {"arch": "sm_90a"}},
        _trial(0, "ok", {"compile_s": 40.0, "cache_hit": False}, 0.20, generation=0),
        _trial(1, "ok", {"compile_s": 40.0, "cache_hit": True}, 0.17) | {"filler": True},
        _trial(2, "skipped", None, None),
        _trial(3, "ok", {"compile_s": 50.0, "cache_hit": False}, 0.18),
        {"kind": "generation", "generation": 1},
        _trial(4, "ok", {"compile_s": 45.0, "cache_hit": False}, 0.19, generation=2),
        _trial(5, "ok", {"compile_s": 5.0, "cache_hit": True}, 0.19) | {"filler": True},
    ]
    journal = tmp_path / "arm.jsonl.gz"
    with gzip.open(journal, "wt") as handle:
        handle.write("\n".join(json.dumps(r) for r in records) + "\n")
    summary = ab.arm_summary(ab.read_journal(journal))
    assert summary["builds"] == 3 and summary["compiler_cpu_s"] == 135.0
    assert summary["skipped"] == 1 and summary["fillers"] == 2
    assert summary["best_in_search_p99_ms"] == 0.17  # a runtime-gene filler is a candidate too
    assert summary["generations"] == 1 and not summary["confirmed"]
    assert summary["last_trial_at_s"] == 5.0
    # the baseline's generation 0 is not one; a filler journaled late still ends its own
    assert summary["generation_ends_s"] == [5.0, 4.0]
