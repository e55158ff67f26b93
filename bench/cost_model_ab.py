"""One real search with the cost model off and on, same seed, read from their journals (no
GPU): wall time, builds, compiler CPU, skips, and the value each arm found.

The arms ran on a GPU machine, each from an empty build cache, with the same earlier journal
of the kernel in the cache (what the model warm-starts from; the arm without the model
ignores it). A result file, where the arm finished, gives its confirmed pinned value.

    python bench/cost_model_ab.py --arm off=JOURNAL[,RESULT] --arm on=JOURNAL[,RESULT] \\
        --out bench/results/cost_model_search-sm90-nvidia-h200.json [--note TEXT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from journal_timeline import device, read_journal  # noqa: E402


def driver(records: list[dict[str, Any]]) -> dict[str, str]:
    """The driver the arm's measurements name (a journal's header does not)."""
    for record in records:
        measured = (record.get("trial") or {}).get("measurement") or {}
        if (measured.get("device") or {}).get("driver"):
            return {"driver": str(measured["device"]["driver"])}
    return {}


def arm_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What one arm's journal says: its builds and their compile seconds, its skips, its
    generations and the best value its search measured."""
    trials = [r for r in records if r.get("kind") == "trial"]
    compiled = [
        r["trial"]["build"]
        for r in trials
        if r["trial"].get("build") and not r["trial"]["build"].get("cache_hit")
    ]
    measured = [
        r["trial"] for r in trials if r["trial"].get("outcome") == "ok" and r["trial"].get("values")
    ]
    best = min((t["values"][0] for t in measured), default=None)
    ends: dict[int, float] = {}  # a generation ends with its last journaled trial
    for r in trials:
        generation = int(r["trial"].get("generation") or 0)
        ends[generation] = max(ends.get(generation, 0.0), float(r.get("elapsed_s") or 0.0))
    return {
        "last_trial_at_s": trials[-1]["elapsed_s"] if trials else None,
        "generation_ends_s": [ends[g] for g in sorted(ends) if g > 0],
        "generations": sum(r.get("kind") == "generation" for r in records),
        "builds": len(compiled),
        "compiler_cpu_s": round(sum(b.get("compile_s") or 0.0 for b in compiled), 1),
        "skipped": sum(r["trial"].get("outcome") == "skipped" for r in trials),
        "fillers": sum(bool(r.get("filler")) for r in trials),
        "confirmed": any(r.get("kind") == "confirmation" for r in records),
        "best_in_search_p99_ms": best,
    }


def pinned_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The pinned member of a finished arm's result file: its genes and confirmed value."""
    search = (result.get("extensions") or {}).get("search") or {}
    pinned = result.get("pinned")
    member = next((m for m in result.get("front", []) if m.get("key") == pinned), {})
    return {
        "pinned": pinned,
        "pinned_genes": (member.get("candidate") or {}).get("genes"),
        "pinned_values": member.get("values"),
        "pinned_summary": member.get("summary"),
        "baseline": {k: (result.get("baseline") or {}).get(k) for k in ("key", "values")},
        "stop_reason": search.get("stop_reason"),
        "wall_s": (search.get("timing") or {}).get("wall_s"),
    }


def read_arm(text: str) -> tuple[str, Path, str, list[dict[str, Any]], dict[str, Any]]:
    """An ``--arm NAME=JOURNAL[,RESULT]``: its name, journal, result file ('' without one),
    the journal's records and the fingerprint they give (the GPU, its driver, the build's)."""
    name, _, paths = text.partition("=")
    journal, _, result = paths.partition(",")
    records = read_journal(Path(journal))
    header = next(r for r in records if r.get("kind") == "header")
    fingerprint = {**device(records), **driver(records), **header.get("fingerprint", {})}
    return name, Path(journal), result, records, fingerprint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", action="append", required=True, help="NAME=JOURNAL[,RESULT]")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--note", default="", help="what the arms' names mean (leases, policy)")
    args = parser.parse_args(argv)
    arms: dict[str, Any] = {}
    fingerprint: dict[str, Any] = {}
    for text in args.arm:
        name, journal, result, records, fingerprint = read_arm(text)
        arms[name] = {
            "journal": str(journal.resolve().relative_to(ROOT)),
            "search": records[0].get("search"),
            **arm_summary(records),
        }
        if result:
            arms[name].update(pinned_summary(json.loads(Path(result).read_text())))
    report = {"benchmark": "cost_model_search", "fingerprint": fingerprint, "arms": arms}
    if args.note:
        report["note"] = args.note
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for name, arm in arms.items():
        shown = {k: v for k, v in arm.items() if not isinstance(v, dict) and k != "journal"}
        print(name, json.dumps(shown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
