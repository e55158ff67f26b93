"""Where a search's wall time goes, step by step (GPU): the start, each candidate, confirming.

``bench/search_overhead.py`` gives the totals (compile wait, measure, confirm); this gives
the order of events behind them, on the same kernel and spaces (``kernels/tiled_matmul.cu``
on sq1024, the exhaustive strategy, confirmation as a user runs it). Each run is a fresh
process, as ``ctune search`` is: nothing is cached from an earlier run in the process (the
device probe, imports), only the CuPy kernel cache on disk (one unreported run first fills
it). The steps are timed by wrapping ctune's own functions (instrumentation, not a stand-in):

- ``prestart``: the worker and the confirmation's spares are asked for;
- ``set-up asked ahead``: each of them asked to set the problem up once it is up;
- ``device limits``: the probe of the GPU's launch limits;
- ``closure digest``, ``baseline compile``: the default build's path, beside the probe
  (``ptx args check`` only where the cubin has no parameter table);
- ``worker ready``: the first measurement's worker is up;
- ``spares settled``: the wait for the confirmation's spares to be up;
- ``problem set up``: the wait for the worker's set-up of the problem (inputs, reference
  outputs), with the spares setting it up beside it;
- ``spares set up``: the wait for the spares' set-ups;
- ``baseline's measurement`` (the request to the worker), ``baseline measured``,
  ``confirming``, ``record`` (the artifact's record), ``processes closed`` (every
  measuring process answered its exit), ``done``;
- in confirmation's rounds, each fresh worker's take-over (its health check; its set-up of
  the problem where it did not set it up ahead; the oldest parked worker's exit where too
  many are parked) and each measurement.

Each candidate's measurement wall time is split by pruned (screened only) and not.
Writes ``bench/results/search_timeline-<gpu_id>.json``: per space the median of each step
over the runs, and every run.

    python bench/search_timeline.py --runs 3
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import search_overhead  # noqa: E402  (the kernel, the problem and the spaces)

#: (module, owner, function, step): the first call of each is timed
STEPS = (
    ("ctune.measure.session", "WorkerMeasurer", "prestart", "prestart"),
    ("ctune.measure.session", "WorkerMeasurer", "set_up_ahead", "set-up asked ahead"),
    ("ctune.search.session", None, "device_limits", "device limits"),
    ("ctune.compile.nvcc", "NvccCompiler", "closure_digest", "closure digest"),
    ("ctune.compile.nvcc", "NvccCompiler", "_compile", "baseline compile"),
    ("ctune.compile.nvcc", "NvccCompiler", "_ptx_sizes", "ptx args check"),
    ("ctune.measure.session", "WorkerMeasurer", "_ensure_worker", "worker ready"),
    ("ctune.measure.session", "WorkerMeasurer", "_settle_spares", "spares settled"),
    ("ctune.measure.session", "WorkerMeasurer", "_set_up_problem", "problem set up"),
    ("ctune.measure.session", "WorkerMeasurer", "_spares_set_up", "spares set up"),
    ("ctune.search.driver", None, "_record", "record"),
    ("ctune.measure.session", "WorkerMeasurer", "close", "processes closed"),
)


#: (module, owner, function, what): every call of each is timed once confirmation began
ROUND_STEPS = (
    ("ctune.measure.session", "WorkerMeasurer", "_take_fresh_worker", "fresh worker takes over"),
    ("ctune.measure.session", "WorkerMeasurer", "measure", "measurement"),
)


def _instrument(
    t0: float, marks: dict[str, tuple[float, float]], rounds: list[tuple[str, float, float]]
) -> None:
    """Wrap each step so that its first call records (start, end) seconds since ``t0``, and
    each round step so that its calls during confirmation do."""
    import importlib

    def wrap(module_name: str, owner_name: str | None, name: str, record: Any) -> None:
        module = importlib.import_module(module_name)
        owner = getattr(module, owner_name) if owner_name else module
        original = getattr(owner, name)

        def timed(*args: Any, **kw: Any) -> Any:
            start = time.monotonic() - t0
            try:
                return original(*args, **kw)
            finally:
                record(round(start, 4), round(time.monotonic() - t0, 4))

        setattr(owner, name, functools.wraps(original)(timed))

    for module_name, owner_name, name, step in STEPS:
        wrap(module_name, owner_name, name, lambda a, b, s=step: marks.setdefault(s, (a, b)))
    for module_name, owner_name, name, what in ROUND_STEPS:

        def during_confirmation(a: float, b: float, what: str = what) -> None:
            if "confirming" in marks:
                rounds.append((what, a, b))

        wrap(module_name, owner_name, name, during_confirmation)


def child(space_name: str, problem: str) -> dict[str, Any]:
    """One search in this (fresh) process, its steps and candidates."""
    t0 = time.monotonic()
    marks: dict[str, tuple[float, float]] = {}
    rounds: list[tuple[str, float, float]] = []
    _instrument(t0, marks, rounds)
    from ctune.cli.common import load
    from ctune.config import resolve
    from ctune.objective import parse_objective_spec
    from ctune.search.driver import SearchOptions, run_search
    from ctune.search.events import BaselineMeasured, Confirming, TrialFinished
    from ctune.testing.binary_truth import BinaryTruth

    trials: list[dict[str, Any]] = []

    def on_event(event: object) -> None:
        now = round(time.monotonic() - t0, 4)
        if isinstance(event, BaselineMeasured):
            marks["baseline measured"] = (now, now)
            if event.trial.measurement is not None:  # its worker's request, as the parent saw it
                wall = event.trial.measurement.wall_s
                marks["baseline's measurement"] = (round(now - wall, 4), now)
        elif isinstance(event, Confirming):
            marks["confirming"] = (now, now)
        elif isinstance(event, TrialFinished) and event.trial.measurement is not None:
            m = event.trial.measurement
            trials.append({"at_s": now, "wall_s": round(m.wall_s, 4), "pruned": m.pruned})

    with tempfile.TemporaryDirectory(prefix="ctune-timeline-") as tmp:
        cfg = resolve({"cache_dir": Path(tmp), "l2_policy": "cold"})
        spec, toolchain = load(search_overhead.KERNEL, cfg)
        subspace = search_overhead.SPACES[space_name]
        space = BinaryTruth(spec.name, problem, "p50", False, subspace).restrict(spec)
        result = run_search(
            cfg,
            space,
            parse_objective_spec(["p50"], [], space.metrics),
            SearchOptions(problem=problem, strategy="exhaustive"),
            toolchain=toolchain,
            on_event=on_event,
        )
    done = round(time.monotonic() - t0, 4)
    marks["done"] = (done, done)
    confirmation = result.confirmation.to_json() if result.confirmation else None
    return {"steps": marks, "trials": trials, "confirmation": confirmation, "rounds": rounds}


def _run_fresh(space_name: str, problem: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", space_name, "--problem", problem],
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over the runs of each step's end, and of the candidates' measurement walls."""
    steps = {
        step: round(statistics.median(r["steps"][step][1] for r in runs), 3)
        for step in runs[0]["steps"]
        if all(step in r["steps"] for r in runs)
    }

    def walls(pruned: bool) -> list[float]:
        return [t["wall_s"] for r in runs for t in r["trials"] if t["pruned"] is pruned]

    per_kind = {
        ("pruned" if kind else "not pruned"): {
            "candidates_per_run": len(walls(kind)) / len(runs),
            "median_ms": round(1e3 * statistics.median(walls(kind)), 1) if walls(kind) else None,
        }
        for kind in (True, False)
    }
    rounds = [s for r in runs if r["confirmation"] for s in r["confirmation"]["round_seconds"]]
    in_rounds: dict[str, list[float]] = {}
    for r in runs:
        for what, start, end in r.get("rounds", []):
            in_rounds.setdefault(what, []).append(end - start)
    return {
        "confirmation_steps_ms_median": {
            what: round(1e3 * statistics.median(took), 1) for what, took in in_rounds.items()
        },
        "step_end_s_median": dict(sorted(steps.items(), key=lambda kv: kv[1])),
        "measurement": per_kind,
        "confirmation_round_s_median": round(statistics.median(rounds), 3) if rounds else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--problem", default="sq1024")
    parser.add_argument(
        "--spaces", default=",".join(search_overhead.SPACES), help="of: small, structure"
    )
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per space")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one run, in a fresh process
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.problem)))
        return 0
    from ctune.measure.session import WorkerMeasurer

    with WorkerMeasurer(0) as probe:
        device = probe.device_info()
    names = args.spaces.split(",")
    _run_fresh(names[0], args.problem)  # fills the CuPy kernel cache: not reported
    spaces: dict[str, Any] = {}
    for name in names:
        runs = [_run_fresh(name, args.problem) for _ in range(args.runs)]
        spaces[name] = {"summary": summary(runs), "runs": runs}
        steps = spaces[name]["summary"]["step_end_s_median"]
        print(f"{name}: " + ", ".join(f"{k} {v:.2f} s" for k, v in steps.items()))
    report = {
        "benchmark": "search_timeline",
        "kernel": "tiled_matmul",
        "problem": args.problem,
        "spaces": spaces,
        "fingerprint": search_overhead.device_fingerprint(device),
    }
    search_overhead.write_result(report, args.out, device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
