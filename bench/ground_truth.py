"""Record exhaustive ground truths over DISTINCT binaries (GPU machine), in stages.

Every candidate of a preset subspace is compiled; candidates are grouped by their
binary identity (``ctune.search.dedup.binary_identity``: SASS digest, launch
geometry, runtime arguments); each distinct binary is measured once in each of
several fresh worker processes; its value is the median of its process medians,
with their spread. The result, ``tests/data/ground_truth/<preset>.json.gz``
(``ctune-ground-truth/2``, ``ctune/testing/binary_truth.py``), is what
``bench/search_quality.py`` replays.

Stages (each resumable and bounded by ``--max-s``, so every one fits a 10-minute
device call; progress lives in ``bench/results/ground_truth/``, which
``bench/device.sh`` packs into results.tgz: unpack it into the checkout before the
next call, since a device call starts from the checkout, not from the last call):

    python bench/ground_truth.py map --preset tiled_matmul      # compile all, group
    python bench/ground_truth.py measure --preset tiled_matmul --process 1   # 2, 3 ...
    python bench/ground_truth.py finish --preset tiled_matmul   # -> tests/data/ground_truth

Sizes, measured on this repository's build machine with nvcc 13.0 (one compile at a
time, 2 shared cores): tiled_matmul 0.35-0.45 s per compile, gemm 0.6-1.5 s (2.7 s
for its default build). Presets (``python bench/ground_truth.py sizes`` prints them):

- ``tiled_matmul`` (sq1024): 132 structures x 24 flag settings = 3,168 compiles
  (~2 min on 16 cores), ~1,580 distinct binaries (with ptxas -O1 as well: 6,336 compiles,
  ~3,100 binaries on an H100 map: every flag but lineinfo changes the SASS);
- ``gemm`` (sq4096): 1,156 structures, flags at their defaults: 1,156 compiles
  (~2 min on 16 cores) and as many binaries (with STAGES 2 and 6 too, 1,800: every
  structure its own binary on an H100 map).

A measure stage recompiles the binaries it measures (one representative each, 16 at
a time) because the build cache does not survive between device calls.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTIAL = ROOT / "bench" / "results" / "ground_truth"
OUT = ROOT / "tests" / "data" / "ground_truth"
PRESETS: dict[str, dict[str, Any]] = {
    "tiled_matmul": {
        "kernel": "kernels/tiled_matmul.cu",
        "problem": "sq1024",
        "subspace": {
            "BLOCK_X": [16, 32],
            "BLOCK_Y": [4, 8, 16],
            "WORK_X": [1, 2, 4],
            "WORK_Y": [1, 2, 4, 8],
            "TILE_K": [16, 32],
            "PAD": [0],
            # every flag gene of `flags: all` is in the space; these vary, the rest stay
            # at their no-op defaults (the whole product would be millions of compiles)
            "maxrregcount": [0, 64, 128],
            "fast_math": [False, True],
            "ptxas_opt": [3],  # -O1 too doubles the distinct binaries (~3,100): GPU time
            "dlcm": ["default", "cg"],
            "lineinfo": [False, True],
        },
    },
    "gemm": {
        "kernel": "kernels/hand_gemm.cu",
        "problem": "sq4096",
        "subspace": {
            "BLOCK_M": [64, 128, 256],
            "BLOCK_N": [64, 128, 256],
            "STAGES": [3, 4, 5],
            "MIN_BLOCKS": [1],
        },
    },
}


def _setup(preset: str) -> tuple[Any, Any, Any, Any, Any]:
    from ctune.cli.common import load
    from ctune.config import resolve
    from ctune.testing.binary_truth import BinaryTruth

    info = PRESETS[preset]
    cfg = resolve({"l2_policy": "cold", "jobs": os.cpu_count() or 4})
    spec, toolchain = load(ROOT / info["kernel"], cfg)
    problem = spec.problem(info["problem"])
    truth = BinaryTruth(spec.name, problem.name, "p50", False, _subspace(spec, info))
    return cfg, spec, toolchain, problem, truth


def _subspace(spec: Any, info: dict[str, Any]) -> dict[str, list[Any]]:
    """The preset's values; structure genes it does not name keep all of theirs (flag
    genes it does not name stay at their defaults)."""
    out = {g.name: info["subspace"].get(g.name, list(g.values)) for g in spec.genes}
    out.update({k: v for k, v in info["subspace"].items() if k not in out})
    return out


def _candidates(spec: Any, problem: Any, truth: Any) -> list[Any]:
    cut = truth.restrict(spec)
    return [spec.candidate(v) for v in cut.space.iter_valid(problem.dims)]


def _mapped(preset: str, spec: Any, problem: Any, truth: Any) -> dict[str, dict[str, Any]]:
    """The map stage's records of this preset's current subspace (a narrowed preset keeps
    the records of a wider one on disk; they are not part of its ground truth)."""
    keys = {c.key() for c in _candidates(spec, problem, truth)}
    return {k: m for k, m in _read(PARTIAL / f"{preset}.map.jsonl").items() if k in keys}


def _read(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):  # a torn last line from a stopped stage
                record = json.loads(line)
                out[record["id"]] = record
    return out


@contextlib.contextmanager
def _sink(path: Path) -> Iterator[Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:

        def write(record: dict[str, Any]) -> None:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

        yield write


def _compiled(compiler: Any, todo: list[Any], problem: Any, deadline: float) -> Iterator[Any]:
    """(candidate, build) in order, ``jobs`` compiles ahead; nothing new after the deadline."""
    futures: dict[int, Any] = {}
    for i, cand in enumerate(todo):
        if time.monotonic() > deadline:
            break
        for j in range(i, min(len(todo), i + 1 + compiler.jobs)):
            if j not in futures:
                futures[j] = compiler.submit(todo[j], problem)
        yield cand, futures.pop(i).result()
    for future in futures.values():
        future.cancel()


def stage_map(args: argparse.Namespace) -> int:
    from ctune.compile.nvcc import NvccCompiler
    from ctune.search.dedup import binary_identity

    cfg, spec, toolchain, problem, truth = _setup(args.preset)
    path = PARTIAL / f"{args.preset}.map.jsonl"
    done = _mapped(args.preset, spec, problem, truth)
    todo = [c for c in _candidates(spec, problem, truth) if c.key() not in done]
    print(f"{args.preset}: {len(done)} mapped, {len(todo)} to compile ({cfg.jobs} at a time)")
    start = time.monotonic()
    with NvccCompiler.from_settings(spec, toolchain, cfg) as compiler, _sink(path) as write:
        for n, (cand, build) in enumerate(
            _compiled(compiler, todo, problem, start + args.max_s), 1
        ):
            r = build.resources
            write(
                {
                    "id": cand.key(),
                    "genes": cand.as_dict(),
                    "build_outcome": build.outcome.value,
                    "binary": binary_identity(spec, cand, build, problem),
                    "regs": r.regs,
                    "spills_bytes": r.spills_bytes,
                    "smem_bytes": r.smem_bytes,
                    "compile_s": build.compile_s,
                }
            )
            if n % 500 == 0:
                print(f"  {n}/{len(todo)} in {time.monotonic() - start:.0f} s")
    mapped = _mapped(args.preset, spec, problem, truth)
    binaries = {m["binary"] for m in mapped.values() if m["binary"]}
    print(f"{len(mapped)} candidates mapped -> {len(binaries)} distinct binaries")
    return 0 if len(mapped) >= len(todo) + len(done) else 75  # 75: run the stage again


def stage_measure(args: argparse.Namespace) -> int:
    from ctune.compile.nvcc import NvccCompiler
    from ctune.evidence.identity import gpu_label
    from ctune.measure import SamplingPlan
    from ctune.measure.session import WorkerMeasurer

    cfg, spec, toolchain, problem, truth = _setup(args.preset)
    mapped = _mapped(args.preset, spec, problem, truth)
    first: dict[str, str] = {}
    for key, m in mapped.items():
        if m["binary"]:
            first.setdefault(m["binary"], key)
    path = PARTIAL / f"{args.preset}.p{args.process}.jsonl"
    done = _read(path)
    todo = [spec.candidate(mapped[k]["genes"]) for b, k in first.items() if b not in done]
    print(f"process {args.process}: {len(done)} binaries measured, {len(todo)} to go")
    plan = SamplingPlan(min_samples=args.min_samples, rep_ms=args.rep_ms, l2_policy="cold")
    start = time.monotonic()
    with (
        NvccCompiler.from_settings(spec, toolchain, cfg) as compiler,
        contextlib.closing(WorkerMeasurer(device=0, settings=cfg)) as measurer,
        _sink(path) as write,
    ):
        measurer.restart()  # one fresh process for this stage's measurements
        for cand, build in _compiled(compiler, todo, problem, start + args.max_s):
            m = measurer.measure(spec, cand, build, problem, plan)
            s = m.summary
            write(
                {
                    "id": mapped[cand.key()]["binary"],
                    "outcome": m.outcome.value,
                    "median_ms": s.p50_ms if s is not None and m.outcome.is_ok else None,
                    "n": s.n if s is not None else 0,
                    "device": gpu_label(m.device) if m.device else "",
                }
            )
    left = len(todo) - (len(_read(path)) - len(done))
    print(f"process {args.process}: {left} binaries left after {time.monotonic() - start:.0f} s")
    return 0 if left == 0 else 75


def stage_finish(args: argparse.Namespace) -> int:
    from ctune.identity_probe import current_fingerprint

    cfg, spec, _toolchain, problem, truth = _setup(args.preset)
    mapped = _mapped(args.preset, spec, problem, truth)
    runs = [_read(p) for p in sorted(PARTIAL.glob(f"{args.preset}.p*.jsonl"))]
    for key, m in mapped.items():
        truth.candidates[key] = {
            "genes": m["genes"],
            "binary": m["binary"],
            "build_outcome": m["build_outcome"],
            "compile_s": m["compile_s"],
        }
        if m["binary"] and m["binary"] not in truth.binaries:
            got = [r[m["binary"]] for r in runs if m["binary"] in r]
            medians = [g["median_ms"] for g in got if g["median_ms"] is not None]
            bad = [g["outcome"] for g in got if g["outcome"] != "ok"]
            value = statistics.median(medians) if medians and not bad else None
            truth.binaries[m["binary"]] = {
                "value_ms": value,
                "outcome": bad[0] if bad else ("ok" if medians else "inconclusive"),
                "process_medians_ms": medians,
                "spread": (max(medians) - min(medians)) / value if value else None,
                "regs": m["regs"],
                "spills_bytes": m["spills_bytes"],
                "smem_bytes": m["smem_bytes"],
            }
    truth.fingerprint = current_fingerprint(spec, gpu=True, nvcc=cfg.nvcc, l2_policy="cold")
    truth.meta = {
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "processes": len(runs),
        "value": "median of the per-process medians of each distinct binary",
        "generator": "bench/ground_truth.py",
    }
    out = truth.save(OUT / f"{args.preset}-{problem.name}.json.gz")
    print(f"wrote {out}: {len(truth.candidates)} candidates, {len(truth.binaries)} binaries")
    return 0


def stage_sizes(args: argparse.Namespace) -> int:
    from ctune.spec import load_spec
    from ctune.testing.binary_truth import BinaryTruth

    for name, info in PRESETS.items():
        spec = load_spec(ROOT / info["kernel"])
        problem = spec.problem(info["problem"])
        truth = BinaryTruth(spec.name, problem.name, "p50", False, _subspace(spec, info))
        joint = truth.restrict(spec).space.count_valid(problem.dims)[0]
        structures = truth.restrict(spec, flags=False).space.count_valid(problem.dims)[0]
        print(f"{name}: {structures} structures, {joint} candidates to compile")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("stage", choices=["map", "measure", "finish", "sizes"])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiled_matmul")
    parser.add_argument("--process", type=int, default=1, help="measure: which process (1..)")
    parser.add_argument("--max-s", type=float, default=480.0, help="start nothing new after")
    parser.add_argument("--min-samples", type=int, default=50)
    parser.add_argument("--rep-ms", type=float, default=10.0)
    args = parser.parse_args(argv)
    stages = {"map": stage_map, "measure": stage_measure, "finish": stage_finish}
    return stages.get(args.stage, stage_sizes)(args)


if __name__ == "__main__":
    raise SystemExit(main())
