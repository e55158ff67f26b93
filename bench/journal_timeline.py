"""A finished search's timeline from its journal (no GPU): when each build's first measurement
landed, what it cost to compile, and the runtime-gene fillers measured between builds.

``bench/search_timeline.py`` instruments a search as it runs; this reads what any search
already records (each trial's ``elapsed_s``, its build's ``compile_s`` and ``cache_hit``),
so the README's main job, run once on a fresh GPU machine, shows where its wall time went.

    python bench/journal_timeline.py bench/results/artifacts/main-job/*.jsonl.gz \\
        --out bench/results/main_job_timeline-sm90-nvidia-h200.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The journal's records, from a ``.jsonl`` or a ``.jsonl.gz``."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def device(records: list[dict[str, Any]]) -> dict[str, str]:
    """The GPU the journal's header names (``NVIDIA H200 (sm_90)``), as a result file's
    ``gpu`` and ``sm``: a timeline is named by the GPU it was measured on."""
    header = next((r for r in records if r.get("kind") == "header"), {})
    match = re.fullmatch(r"(.+) \((sm_\d+a?)\)", str(header.get("device", "")))
    return {"gpu": match[1], "sm": match[2]} if match else {}


def timeline(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per build (a trial whose build was not a cache hit): when its first measurement was
    recorded, its compile seconds and value, and the fillers (trials of builds already
    made) recorded since the build before it; then the totals."""
    builds: list[dict[str, Any]] = []
    fillers_since = 0
    best = None
    for record in records:
        if record.get("kind") != "trial":
            continue
        trial = record["trial"]
        build = trial.get("build") or {}
        values = trial.get("values") or []
        value = values[0] if values and trial.get("outcome") == "ok" else None
        if value is not None and (best is None or value < best["value"]):
            best = {"value": value, "at_s": record["elapsed_s"], "trial": trial["number"]}
        if build.get("cache_hit"):
            fillers_since += 1
            continue
        builds.append(
            {
                "trial": trial["number"],
                "generation": trial.get("generation"),
                "recorded_at_s": record["elapsed_s"],
                "compile_s": build.get("compile_s"),
                "outcome": trial.get("outcome"),
                "value": value,
                "fillers_before": fillers_since,
            }
        )
        fillers_since = 0
    compiles = [b["compile_s"] for b in builds if b["compile_s"] is not None]
    trials = [r for r in records if r.get("kind") == "trial"]
    return {
        "builds": builds,
        "summary": {
            "builds": len(builds),
            "fillers": len(trials) - len(builds),
            "compile_s_median": statistics.median(compiles) if compiles else None,
            "compile_s_max": max(compiles) if compiles else None,
            "first_measurement_at_s": builds[0]["recorded_at_s"] if builds else None,
            "last_trial_at_s": trials[-1]["elapsed_s"] if trials else None,
            "best_in_search": best,
        },
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| trial | generation | recorded at (s) | compile (s) | value | fillers before |",
        "|---|---|---|---|---|---|",
    ]
    for b in result["builds"]:
        value = "-" if b["value"] is None else f"{b['value']:.4f}"
        compile_s = "-" if b["compile_s"] is None else f"{b['compile_s']:.0f}"
        lines.append(
            f"| {b['trial']} | {b['generation']} | {b['recorded_at_s']:.0f} | "
            f"{compile_s} | {value} | {b['fillers_before']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("journal", type=Path)
    parser.add_argument("--out", type=Path, help="write the timeline as JSON here")
    args = parser.parse_args(argv)
    if not args.journal.is_file():
        print(f"{args.journal}: no such journal", file=sys.stderr)
        return 2
    records = read_journal(args.journal)
    result = {"journal": args.journal.name, **device(records), **timeline(records)}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    print(json.dumps(result["summary"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
