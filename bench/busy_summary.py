"""Search throughput from a finished ``ctune search --json`` run: how busy the GPU was.

Issue "Search and objectives" sets the target: with compile ahead and caching the GPU
measures for at least 70% of a search's wall time on the CUTLASS GEMM (16 cores
compiling), and the harness adds under 0.5 s per candidate. This reads the search's own
time split (``timing`` in its JSON), adds the machine's fingerprint and writes
``OUT/search_busy-<gpu_id>.json``; targets are reported, never asserted.

    python bench/busy_summary.py SEARCH.json OUT
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BUSY_TARGET = 0.70
OVERHEAD_TARGET_S = 0.5


def summarize(search: dict[str, Any]) -> dict[str, Any]:
    timing = search["timing"]
    evaluations = max(int(search.get("evaluations", 0)), 1)
    busy = float(timing["gpu_busy_fraction"])
    overhead = float(timing["overhead_s"]) / evaluations
    return {
        "kernel": search["kernel"],
        "problem": search["problem"],
        "device": search.get("device", ""),
        "evaluations": search.get("evaluations"),
        "fillers": search.get("fillers", 0),
        "cached": search.get("cached", 0),
        "failures": search.get("failures", {}),
        "stop_reason": search.get("stop_reason"),
        "timing": timing,
        "overhead_per_candidate_s": round(overhead, 3),
        "targets": [
            {
                "target": f"GPU busy measuring >= {BUSY_TARGET:.0%} of wall time",
                "value": round(busy, 3),
                "met": busy >= BUSY_TARGET,
            },
            {
                "target": f"harness overhead < {OVERHEAD_TARGET_S} s per candidate",
                "value": round(overhead, 3),
                "met": overhead < OVERHEAD_TARGET_S,
            },
        ],
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    source, out_dir = Path(argv[0]), Path(argv[1])
    try:
        search = json.loads(source.read_text())
    except (OSError, ValueError) as exc:
        print(f"error: {source}: no search result to read ({exc})", file=sys.stderr)
        return 1
    from ctune.evidence.identity import gpu_id, probe_gpu_machine
    from ctune.identity_probe import probe_toolchain

    gpu = probe_gpu_machine()
    result = {
        "benchmark": "search_busy",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "fingerprint": {**(gpu or {}), **probe_toolchain()},
        **summarize(search),
    }
    out = out_dir / f"search_busy-{gpu_id(gpu)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for t in result["targets"]:
        print(f"[{'PASS' if t['met'] else 'FAIL'}] {t['target']}: {t['value']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
