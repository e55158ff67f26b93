"""Flag rounds from a kept front end, read from real searches' journals (no GPU).

For a search run with ``relink`` auto: each generation's end, its builds split into those
made from a kept front end (the log says ``relinked from front end``) and whole nvcc runs,
their compile seconds; and each relinked build's SASS digest against the whole nvcc run of
the same compiled genes (the same argv) in other journals: the same machine code, or not.
An arm whose journal did not come back is given as its transcript's lines (``--transcript``).

    python bench/relink_ab.py --arm auto=JOURNAL[,RESULT] --whole JOURNAL [--whole ...] \\
        [--transcript off=FILE] --out bench/results/relink_auto-sm90-nvidia-h200.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from cost_model_ab import read_arm  # noqa: E402
from journal_timeline import read_journal  # noqa: E402

from ctune.compile.relink import frontend_argv, ptxas_only_items  # noqa: E402

RELINKED = "relinked from front end"
_OUTPUT = re.compile(r"^-o$")


def _compiled(records: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(generation, build) of every trial whose build was compiled here (no cache hit)."""
    out = []
    for record in records:
        trial = record.get("trial") if record.get("kind") == "trial" else None
        build = (trial or {}).get("build")
        if build and not build.get("cache_hit") and build.get("sass_sha256"):
            out.append((int(trial["generation"]), build))
    return out


def _identity(argv: list[str]) -> tuple[str, ...]:
    """A build's argv without its output path and compiler location: what nvcc was asked."""
    out: list[str] = []
    skip = False
    for i, item in enumerate(argv):
        if skip:
            skip = False
            continue
        if _OUTPUT.match(item):
            skip = True
            continue
        if i == 0 or item.startswith("-I") or item.endswith(".cu"):
            continue  # the nvcc, include folders and source path differ between machines
        out.append(item)
    return tuple(out)


def _seconds(builds: list[dict[str, Any]]) -> dict[str, Any]:
    values = [float(b.get("compile_s") or 0.0) for b in builds]
    if not values:
        return {"builds": 0}
    return {
        "builds": len(values),
        "median_s": round(statistics.median(values), 3),
        "min_s": round(min(values), 3),
        "max_s": round(max(values), 3),
        "total_s": round(sum(values), 1),
    }


def arm_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The arm's generations (when each ended), and its builds by how they were made."""
    ends: dict[int, float] = {}
    for record in records:
        if record.get("kind") == "trial":
            generation = int(record["trial"]["generation"])
            ends[generation] = max(ends.get(generation, 0.0), float(record["elapsed_s"]))
    compiled = _compiled(records)
    relinked = [(g, b) for g, b in compiled if RELINKED in (b.get("log_tail") or "")]
    made_in = {  # front end -> the generation whose build made it
        _identity(frontend_argv(b["argv"])): g
        for g, b in relinked
        if "(made in" in (b.get("log_tail") or "")
    }

    def made_now(g: int, b: dict[str, Any]) -> bool:
        return made_in.get(_identity(frontend_argv(b["argv"]))) == g

    whole = [b for _, b in compiled if RELINKED not in (b.get("log_tail") or "")]
    return {
        "generation_ended_s": {str(g): round(s, 1) for g, s in sorted(ends.items())},
        "whole_builds": _seconds(whole),
        "whole_builds_with_ptxas_options": sum(bool(ptxas_only_items(b["argv"])) for b in whole),
        # the builds of the generation that made their front end waited for it
        "relinked_as_their_front_end_was_made": _seconds(
            [b for g, b in relinked if made_now(g, b)]
        ),
        "relinked_from_a_kept_front_end": _seconds([b for g, b in relinked if not made_now(g, b)]),
        "front_ends": len(made_in),
    }


def sass_check(arm: list[dict[str, Any]], whole: list[dict[str, Any]]) -> dict[str, Any]:
    """Each relinked build of ``arm`` against a whole nvcc run of the same argv."""
    reference = {
        _identity(b["argv"]): b["sass_sha256"]
        for _, b in _compiled(whole)
        if RELINKED not in (b.get("log_tail") or "")
    }
    rows = []
    for _, build in _compiled(arm):
        if RELINKED not in (build.get("log_tail") or ""):
            continue
        key = _identity(build["argv"])
        if key in reference:
            rows.append(
                {
                    "ptxas_options": ptxas_only_items(build["argv"]),
                    "relinked_sass": build["sass_sha256"][:16],
                    "whole_sass": reference[key][:16],
                    "same": build["sass_sha256"] == reference[key],
                }
            )
    return {
        "compared": len(rows),
        "same": sum(r["same"] for r in rows),
        "rows": rows,
    }


def transcript(path: Path) -> dict[str, Any]:
    """What an arm's kept transcript lines say: its generations' ends and its time line."""
    text = path.read_text()
    ends = {
        m[1]: m[2] for m in re.finditer(r"^generation (\d+): .*elapsed (\S+)$", text, re.MULTILINE)
    }
    time_line = next((ln for ln in text.splitlines() if ln.startswith("time ")), "")
    stopped = re.search(r"stopped: ([a-z ]+);", text)
    return {
        "transcript": str(path.resolve().relative_to(ROOT)),
        "generation_ended": ends,
        "time": time_line,
        "stopped": stopped[1] if stopped else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", action="append", required=True, help="NAME=JOURNAL[,RESULT]")
    parser.add_argument("--whole", action="append", default=[], type=Path, help="a journal")
    parser.add_argument("--transcript", action="append", default=[], help="NAME=FILE")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)
    whole = [r for path in args.whole for r in read_journal(path)]
    arms: dict[str, Any] = {}
    fingerprint: dict[str, Any] = {}
    for text in args.arm:
        name, journal, result, records, fingerprint = read_arm(text)
        arms[name] = {
            "journal": str(journal.resolve().relative_to(ROOT)),
            "search": records[0].get("search"),
            **arm_summary(records),
            "sass_against_whole_runs": sass_check(records, whole),
        }
        if result:
            timing = (json.loads(Path(result).read_text()).get("extensions") or {}).get(
                "search", {}
            )
            arms[name]["stop_reason"] = timing.get("stop_reason")
            arms[name]["wall_s"] = (timing.get("timing") or {}).get("wall_s")
    for text in args.transcript:
        name, _, path = text.partition("=")
        arms[name] = transcript(Path(path))
    report = {
        "benchmark": "relink_auto",
        "fingerprint": fingerprint,
        "whole_journals": [str(p.resolve().relative_to(ROOT)) for p in args.whole],
        "arms": arms,
    }
    if args.note:
        report["note"] = args.note
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for name, arm in arms.items():
        shown = {k: v for k, v in arm.items() if k not in ("journal", "search", "transcript")}
        print(name, json.dumps(shown)[:900])
    return 0


if __name__ == "__main__":
    sys.exit(main())
