"""Screen stream-K split-K builds of the CUTLASS GEMM against each shape's pinned build.

Decode GEMMs with few output tiles leave SMs idle (the 8B O and down projections fill 64
of 132 with 64-row tiles); split-K is the textbook remedy. For each named problem this
times, with ``ctune bench`` in a fresh process each (cold L2, correctness checked): the
registry's pinned build, then cooperative 128-row SWAP_AB tiles with stream-K at 1, 2, 3,
4 and 8 slices (TILE_N 16 and 32), then the pinned build again, and writes
``bench/results/splitk_screen-<gpu>.json`` (rows and, per shape, the best split-K build
against the pinned one). On the GPU machine, with the builds carried:

    python3 bench/splitk_screen.py llm8b-down-t1 llm8b-down-t16 llm8b-gateup-t16
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SPLITK = {"CLUSTER_M": 1, "CLUSTER_N": 1, "EPILOGUE": 0, "SCHEDULE": 0, "STAGES": 0,
          "SWAP_AB": 1, "TILE_K": 128, "TILE_M": 128, "TILE_SCHED": 1, "RASTER": 0,
          "SWIZZLE": 1}  # fmt: skip


def bench(problem: str, genes: dict[str, Any], label: str) -> dict[str, Any]:
    args = ["ctune", "bench", "kernels/gemm.cu", "--problem", problem, "--json"]
    for name, value in genes.items():
        args += ["-s", f"{name}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=ROOT)
    try:
        result = json.loads(done.stdout[done.stdout.index("{") :])
    except ValueError:
        result = {"error": (done.stderr or done.stdout)[-300:]}
    m = result.get("measurement") or {}
    s = m.get("summary") or {}
    print(problem, label, done.returncode, s.get("p50_ms"), flush=True)
    return {
        "problem": problem,
        "label": label,
        "genes": genes,
        "outcome": m.get("outcome", "error"),
        "p50_ms": s.get("p50_ms"),
        "p99_ms": s.get("p99_ms"),
        "samples": len(m.get("samples_ms") or []),
        "temperature_c": m.get("temperature_c"),
    }


def pinned_genes(problem: str) -> dict[str, Any]:
    """The registry artifact's pinned build: its kernel genes (the flags at their defaults)."""
    from ctune.registry.store import read_result
    from ctune.spec import load_spec

    flags = {g.name for g in load_spec(ROOT / "kernels" / "gemm.yaml").flag_genes}
    path = ROOT / "registry" / "gemm" / problem / "sm90-nvidia-h200.json"
    member = read_result(path).pinned_member()
    assert member is not None, f"{path}: no pinned member"
    return {k: v for k, v in member.candidate.as_dict().items() if k not in flags}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    rows = []
    for problem in args.problems:
        genes = pinned_genes(problem)
        rows.append(bench(problem, genes, "pinned"))
        for tile_n in (16, 32):
            for splits in (1, 2, 3, 4, 8):
                variant = {**SPLITK, "TILE_N": tile_n, "SPLITS": splits}
                rows.append(bench(problem, variant, f"splitk-n{tile_n}-s{splits}"))
        rows.append(bench(problem, genes, "pinned-again"))
    from ctune.evidence.identity import gpu_id, probe_gpu_machine
    from ctune.identity_probe import probe_toolchain

    gpu = probe_gpu_machine() or {}
    summary = {}
    for problem in args.problems:
        mine = [r for r in rows if r["problem"] == problem and r["p50_ms"]]
        pinned = min(r["p50_ms"] for r in mine if r["label"].startswith("pinned"))
        split = [r for r in mine if r["label"].startswith("splitk")]
        best = min(split, key=lambda r: r["p50_ms"])
        summary[problem] = {
            "pinned_p50_ms": pinned,
            "best_splitk": best["label"],
            "best_splitk_p50_ms": best["p50_ms"],
            "best_splitk_vs_pinned": pinned / best["p50_ms"],
            "worst_splitk_vs_pinned": pinned / max(r["p50_ms"] for r in split),
        }
    doc = {
        "benchmark": "splitk_screen",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "what": __doc__.split("\n\n", 2)[1].replace("\n", " "),
        "fingerprint": {**gpu, **probe_toolchain(), "l2_policy": "cold"},
        "summary": summary,
        "rows": rows,
    }
    out = Path(args.out) / f"splitk_screen-{gpu_id(gpu)}.json"
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
