"""bench/relink_ab.py: a search's builds by how they were made, and relinked SASS against
whole runs of the same argv, read from journals."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

STRUCTURE = ["nvcc", "-shared", "-Xptxas", "-v", "-DTILE_M=128", "-o", "out.so", "k.cu"]


def _build(argv: list[str], sass: str, seconds: float, log: str = "") -> dict[str, Any]:
    return {"argv": argv, "sass_sha256": sass, "compile_s": seconds, "log_tail": log}


def _trial(generation: int, elapsed_s: float, build: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "trial",
        "elapsed_s": elapsed_s,
        "trial": {"generation": generation, "build": build},
    }


def _variant(option: str) -> list[str]:
    """The structure's argv with a ptxas option of its own (a flag variant)."""
    return [*STRUCTURE[:5], "-Xptxas", option, *STRUCTURE[5:]]


def test_builds_are_told_apart_and_relinked_sass_is_checked(
    bench_module: Callable[[str], ModuleType],
) -> None:
    ab = bench_module("relink_ab")
    made = "[ctune] relinked from front end abc (made in 51.00 s)"
    reused = "[ctune] relinked from front end abc (reused)"
    arm = [
        _trial(0, 40.0, _build(STRUCTURE, "plain", 40.0)),
        _trial(1, 92.0, _build(_variant("-O1"), "o1", 52.0, made)),
        _trial(1, 92.1, _build(_variant("-O2"), "o2", 51.9, reused)),  # waited for it
        _trial(2, 93.0, _build(_variant("-O0"), "o0", 0.4, reused)),
        _trial(2, 93.1, _build(_variant("-O0"), "o0", 0.0, reused) | {"cache_hit": True}),
    ]
    summary = ab.arm_summary(arm)
    assert summary["generation_ended_s"] == {"0": 40.0, "1": 92.1, "2": 93.1}
    assert summary["whole_builds"]["builds"] == 1 and summary["front_ends"] == 1
    assert summary["relinked_as_their_front_end_was_made"]["builds"] == 2
    assert summary["relinked_from_a_kept_front_end"] == {
        "builds": 1,
        "median_s": 0.4,
        "min_s": 0.4,
        "max_s": 0.4,
        "total_s": 0.4,
    }
    elsewhere = ["/other/nvcc", *STRUCTURE[1:4], "-I/some/include", *STRUCTURE[4:]]
    whole = [
        _trial(3, 1.0, _build([*elsewhere[:6], "-Xptxas", "-O1", *elsewhere[6:]], "o1", 44.0)),
        _trial(3, 2.0, _build([*elsewhere[:6], "-Xptxas", "-O2", *elsewhere[6:]], "xx", 44.0)),
    ]
    check = ab.sass_check(arm, whole)
    assert check["compared"] == 2 and check["same"] == 1  # -O0 was never built whole
    assert [r["ptxas_options"] for r in check["rows"] if not r["same"]] == [["-Xptxas", "-O2"]]
