"""Where one measurement's time goes, phase by phase (GPU).

The search overhead benchmark gives one number per candidate; this splits it. It builds
the tiled matmul's structures (the overhead benchmark's space), then measures each in
this process through the worker's own service (no pipe), timing the phases the protocol
runs: load, correctness checks, buffers, warm-up, sampling; then the same candidates
through a worker process (the pipe and the parent's bookkeeping included), as a search
does. Each pass runs with the default plan and with a pruning threshold that prunes
every candidate, the two paths a search takes.

    python bench/measure_profile.py [--count 24] [--profile]

Writes ``bench/results/measure_profile-<gpu_id>.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import datetime as dt
import functools
import io
import json
import pstats
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search_overhead import KERNEL, SPACES  # noqa: E402

#: module attribute -> phase name; wrapped for the in-process pass only
PHASES = {
    ("ctune.measure.worker", "WorkerService._load"): "load",
    ("ctune.measure.correctness", "run_checks"): "checks",
    ("ctune.measure.arrays", "make_buffers"): "buffers",
    ("ctune.measure.cupy_events", "EventTimer.warmup"): "warmup",
    ("ctune.measure.cupy_events", "EventTimer.screen"): "screen (warm-up included)",
    ("ctune.measure.cupy_events", "EventTimer.measure"): "timing (warm-up included)",
}


def _timed(table: dict[str, float], name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            table[name] += time.perf_counter() - start

    return wrapper


def _instrument(table: dict[str, float]) -> None:
    import importlib

    for (module_name, attr), phase in PHASES.items():
        module = importlib.import_module(module_name)
        owner: Any = module
        parts = attr.split(".")
        for part in parts[:-1]:
            owner = getattr(owner, part)
        setattr(owner, parts[-1], _timed(table, phase, getattr(owner, parts[-1])))
    # run_checks and the worker import make_buffers by name: wrap those names too
    import ctune.measure.arrays as arrays
    import ctune.measure.correctness as correctness

    correctness.make_buffers = arrays.make_buffers


def fresh_rounds(
    measurer: Any, spec: Any, pairs: list[Any], problem: Any, plan: Any, rounds: int = 3
) -> dict[str, float]:
    """A confirmation round's steps one after another, averaged over ``rounds``: the last
    worker's exit, a prestarted spare's take-over (its health check), then each item
    measured by the full plan; to set beside ``worker/full`` (the same in a warm worker).
    A search's round (``WorkerMeasurer.remeasure``) overlaps the exit with the first
    measurement's set-up (``prepare``); the confirmation cost's ``round_seconds`` give
    what a round takes then."""
    steps: dict[str, float] = defaultdict(float)
    t = time.perf_counter()
    measurer.prestart(rounds)  # as the search does: the spares start together, ahead
    starting = time.perf_counter() - t
    for _ in range(rounds):
        t = time.perf_counter()
        measurer.restart()
        steps["exit of the last worker"] += time.perf_counter() - t
        t = time.perf_counter()
        measurer.device_info()
        steps["spare takes over (health check)"] += time.perf_counter() - t
        for i, (cand, build) in enumerate(pairs):
            t = time.perf_counter()
            measurer.measure(spec, cand, build, problem, plan)
            steps[f"measurement {i + 1} (full plan)"] += time.perf_counter() - t
    return {f"{rounds} spares started together (once)": starting} | {
        k: v / rounds for k, v in steps.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--problem", default="sq1024")
    parser.add_argument("--count", type=int, default=24, help="candidates (structures) measured")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also write cProfile's top functions to measure_profile-top-<gpu_id>.txt",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)

    from ctune.cli.common import load
    from ctune.compile.nvcc import NvccCompiler
    from ctune.config import resolve
    from ctune.evidence.identity import gpu_id
    from ctune.measure import SamplingPlan
    from ctune.measure.session import WorkerMeasurer
    from ctune.measure.worker import MeasureRequest, WorkerService
    from ctune.records import Candidate
    from ctune.testing.binary_truth import BinaryTruth

    tmp = Path(tempfile.mkdtemp(prefix="ctune-profile-"))
    cfg = resolve({"cache_dir": tmp, "l2_policy": "cold"})
    spec, toolchain = load(KERNEL, cfg)
    space = BinaryTruth(spec.name, args.problem, "p50", False, SPACES["structure"]).restrict(spec)
    problem = space.problem(args.problem)
    values = list(space.space.iter_valid(problem.dims))[: args.count]
    cands = [Candidate.of(space.name, v) for v in values]
    start = time.perf_counter()
    with NvccCompiler.from_settings(space, toolchain, cfg) as compiler:
        futures = [compiler.submit(c, problem) for c in cands]
        builds = [f.result() for f in futures]
    compile_s = time.perf_counter() - start
    pairs = [(c, b) for c, b in zip(cands, builds, strict=True) if b.outcome.is_ok]
    plans = {
        "full": SamplingPlan(),
        "pruned": SamplingPlan(prune_above_ms=1e-6),  # every candidate stops after its screen
    }

    phases: dict[str, dict[str, float]] = {}
    walls: dict[str, float] = {}
    samples: dict[str, int] = {}
    service = WorkerService(0)
    first = MeasureRequest(space.yaml_path, *pairs[0], problem.name, plans["full"])
    service.measure(first)  # the reference and CuPy's helper kernels JIT-compile once, here
    profiler = cProfile.Profile()
    table: dict[str, float] = defaultdict(float)
    _instrument(table)
    for name, plan in plans.items():
        table.clear()
        n = 0
        started = time.perf_counter()
        profiler.enable()
        for cand, build in pairs:
            m, _ = service.measure(MeasureRequest(space.yaml_path, cand, build, problem.name, plan))
            n += len(m.samples_ms)
        profiler.disable()
        walls[f"in_process/{name}"] = (time.perf_counter() - started) / len(pairs)
        phases[name] = {k: v / len(pairs) for k, v in table.items()}
        samples[name] = n // len(pairs)
    with WorkerMeasurer(0, cfg) as measurer:
        measurer.device_info()
        for name, plan in plans.items():
            started = time.perf_counter()
            for cand, build in pairs:
                measurer.measure(space, cand, build, problem, plan)
            walls[f"worker/{name}"] = (time.perf_counter() - started) / len(pairs)
        fresh = fresh_rounds(measurer, space, pairs[:2], problem, plans["full"])
    device = service.info
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(45)
    report = {
        "benchmark": "measure_profile",
        "kernel": spec.name,
        "problem": problem.name,
        "candidates": len(pairs),
        "compile_s_total": compile_s,
        "s_per_candidate": walls,
        "phase_s_per_candidate": phases,
        "samples_per_candidate": samples,
        "fresh_round_s": fresh,
        "plan": dataclasses.asdict(SamplingPlan()),
        "fingerprint": {
            "gpu_name": device.name,
            "uuid": device.uuid,
            "sm": device.sm,
            "driver": device.driver,
            "nvcc": toolchain.describe(),
        },
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    print(json.dumps(report, indent=2))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.profile:
        (args.out / f"measure_profile-top-{gpu_id(device)}.txt").write_text(text.getvalue())
    path = args.out / f"measure_profile-{gpu_id(device)}.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
