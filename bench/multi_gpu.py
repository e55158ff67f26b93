"""One search across the GPUs of a multi-GPU host: scaling, fronts, a killed GPU worker (GPU).

The same CUTLASS GEMM search (``kernels/gemm.cu`` on sq8192, ``-O p99``, the
default strategy, one seed and budget, filling off) runs with ``--gpus 0`` (the local
worker on GPU 0) and with ``--gpus all`` (the engine: one Dask worker per GPU), each in a
fresh process. Its space (``SUBSPACE``) has 12 builds, whose runtime genes (SPLITS,
RASTER, SWIZZLE) make 432 candidates of them; ``prebuild`` compiles those
builds into the build cache first (on the GPU host, or on a CPU machine and carried with
``--pack``), so compiles are never the bottleneck: both runs only measure, and the
compile workers (``--jobs``) stay idle.

- ``efficiency`` = (wall 1 GPU / wall N GPUs) / N, the search's own wall time (target
  >= 0.90); the child processes' wall times (Python and imports included) beside it; an
  untimed 3-candidate search first fills CuPy's kernel cache, so neither run pays its JIT;
- ``fronts_agree``: the pinned winners are the same build, or their confirmation runs are
  not told apart by the comparison rule (``search/confirm.significance``);
- ``measured_once``: no candidate is journaled twice and no binary is measured twice;
- ``kill``: a third search on all GPUs whose last GPU's Dask worker is SIGKILLed after
  ``--kill-after`` trials; the engine restarts it and the search ends with its budget.

Writes ``bench/results/multi_gpu-x<N>-<gpu>.json`` (``gpus``, ``wall_s``, ``efficiency``,
``fronts_agree`` and what is behind them). Needs >= 2 GPUs for the parts after prebuild.

    python bench/multi_gpu.py --part prebuild --pack .device/carry/multigpu.tgz  # CPU
    python bench/multi_gpu.py                                     # the GPU host, all parts
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

KERNEL = ROOT / "kernels" / "gemm.cu"
PROBLEM = "sq8192"
OBJECTIVE = "p99"
#: cooperative persistent kernels, data-parallel and stream-K: 12 builds, each measured
#: under its runtime genes (stream-K: 5 x 3 x 4 = 60 settings, data-parallel 12)
SUBSPACE: dict[str, list[Any]] = {
    "TILE_M": [128, 256],
    "TILE_N": [128, 256],
    "TILE_K": [64],
    "CLUSTER_M": [1, 2],
    "CLUSTER_N": [1],
    "SCHEDULE": [0],
    "STAGES": [0],
    "EPILOGUE": [0],
    "SWAP_AB": [0],
    "TILE_SCHED": [0, 1],
    "GEMV": [0],
    "GEMV_THREADS": [128],
    "GEMV_ROW_THREADS": [16],
    "SPLITS": [1, 2, 3, 4, 8],
    "RASTER": [0, 1, 2],
    "SWIZZLE": [1, 2, 4, 8],
}
TARGET = 0.90


# --- the space ---------------------------------------------------------------------------


def load_space(settings: Any) -> tuple[Any, Any]:
    """The kernel's spec cut down to ``SUBSPACE`` (flag genes at their defaults)."""
    from ctune.cli.common import load
    from ctune.testing.binary_truth import BinaryTruth

    spec, toolchain = load(KERNEL, settings)
    return BinaryTruth(spec.name, PROBLEM, OBJECTIVE, False, SUBSPACE).restrict(spec), toolchain


def space_candidates(spec: Any) -> list[Any]:
    problem = spec.problem(PROBLEM)
    return [spec.candidate(values) for values in spec.space.iter_valid(problem.dims)]


def builds_of(spec: Any, candidates: list[Any]) -> dict[Any, Any]:
    """One candidate per build (runtime genes do not reach a build), the default first."""
    wanted: dict[Any, Any] = {}
    for cand in [spec.default_candidate(), *candidates]:
        wanted.setdefault(spec.space.build_group(cand.genes), cand)
    return wanted


def part_prebuild(args: argparse.Namespace, settings: Any) -> dict[str, Any]:
    from ctune.compile.nvcc import NvccCompiler

    spec, toolchain = load_space(settings)
    candidates = space_candidates(spec)
    wanted = builds_of(spec, candidates)
    problem = spec.problem(PROBLEM)
    start = time.monotonic()
    with NvccCompiler.from_settings(spec, toolchain, settings) as compiler:
        futures = [compiler.submit(c, problem) for c in wanted.values()]
        builds = [f.result() for f in futures]
    ok = [b for b in builds if b.outcome.is_ok]
    out = {
        "candidates": len(candidates),
        "builds": len(builds),
        "ok": len(ok),
        "cache_hits": sum(b.cache_hit for b in builds),
        "failed": {b.candidate_key: b.outcome.value for b in builds if not b.outcome.is_ok},
        "seconds": round(time.monotonic() - start, 1),
        "jobs": settings.jobs,
    }
    if args.pack:
        from carry_builds import pack_keys

        pack_keys(args.pack, [b.build_key for b in ok], Path(settings.cache_dir) / "builds")
    return out


# --- one search in a fresh process ---------------------------------------------------------


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One search in this process (``--child``): what the parent compares, as JSON."""
    from ctune.config import resolve
    from ctune.objective import parse_objective_spec
    from ctune.search.driver import SearchOptions, run_search

    settings = resolve({"gpus": args.gpus, "jobs": args.jobs})
    spec, toolchain = load_space(settings)
    killer = Killer(settings, Path(args.journal), args.kill_after) if args.kill_after else None
    # filling off: with every build cached it adds nothing, and it would make the two
    # searches measure different numbers of candidates (fillers do not count to the budget)
    options = SearchOptions(
        problem=PROBLEM,
        budget=args.budget,
        seed=args.seed,
        journal=Path(args.journal),
        fill=False,
    )
    timeline = Timeline()
    try:
        result = run_search(
            settings,
            spec,
            parse_objective_spec([OBJECTIVE], [], spec.metrics),
            options,
            toolchain=toolchain,
            on_event=timeline,
        )
    finally:
        kill = killer.finish() if killer is not None else None
    wall = time.monotonic() - timeline.start
    out = summary(spec, result, wall) | {"timeline": timeline.to_json()}
    return out | ({"kill": kill} if kill is not None else {})


class Timeline:
    """When the search measured what, where (its events, in this process): the start up to
    the baseline, each trial (journaled at, GPU time, GPU, generation, pruned), confirming."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.marks: dict[str, float] = {}
        self.trials: list[tuple[float, float, str, int, bool]] = []

    def __call__(self, event: object) -> None:
        from ctune.search.events import BaselineMeasured, Confirming, TrialFinished

        now = round(time.monotonic() - self.start, 3)
        if isinstance(event, BaselineMeasured):
            self.marks["baseline_measured"] = now
        elif isinstance(event, Confirming):
            self.marks["confirming"] = now
        elif isinstance(event, TrialFinished) and event.trial.measurement is not None:
            m = event.trial.measurement
            gpu = m.device.uuid[-4:] if m.device is not None else "?"
            self.trials.append((now, round(m.wall_s, 3), gpu, event.trial.generation, m.pruned))

    def to_json(self) -> dict[str, Any]:
        """The marks, each GPU's idle time between the baseline and confirming, the trials."""
        begin = self.marks.get("baseline_measured", 0.0)
        end = self.marks.get("confirming", self.trials[-1][0] if self.trials else begin)
        busy: dict[str, float] = {}
        for _, wall, gpu, _, _ in self.trials:
            busy[gpu] = busy.get(gpu, 0.0) + wall
        return {
            **self.marks,
            "search_phase_s": round(end - begin, 2),
            "busy_s": {gpu: round(b, 2) for gpu, b in busy.items()},
            "idle_s": {gpu: round(end - begin - b, 2) for gpu, b in busy.items()},
            "trials": self.trials,
        }


def summary(spec: Any, result: Any, wall: float) -> dict[str, Any]:
    from ctune.records import to_json

    pinned = next((m for m in result.front if m.key == result.pinned), None)
    t = result.timing
    return {
        "wall_s": round(wall, 2),
        "evaluations": result.evaluations,
        "binaries": result.binaries,
        "reused": result.reused,
        "pruned": result.pruned,
        "failures": result.failures,
        "stop_reason": result.stop_reason,
        "pinned": result.pinned,
        "pinned_genes": pinned.candidate.as_dict() if pinned else None,
        "pinned_values": list(pinned.values) if pinned else None,
        "pinned_per_process": [to_json(m) for m in pinned.per_process] if pinned else [],
        "baseline_values": list(result.baseline.values) if result.baseline else None,
        "confirmation": result.confirmation.to_json() if result.confirmation else None,
        "timing": {
            "measure_s": round(t.measure_s, 2),
            "compile_wait_s": round(t.compile_wait_s, 2),
            "confirm_s": round(t.confirm_s, 2),
            "gpu_busy_fraction": round(t.gpu_busy_fraction, 3),
        },
        "journal": str(result.journal),
        **journal_checks(spec, result.journal, PROBLEM),
    }


def journal_checks(spec: Any, journal: Path, problem_name: str) -> dict[str, Any]:
    """From the journal: measurements per GPU, and whether any binary was measured twice
    (a run that cannot be reused, a timeout say, is measured again by design and not
    counted). A candidate journaled twice does not get this far: the journal's reader
    refuses it, naming both lines."""
    from ctune.search import journal as journal_mod
    from ctune.search.dedup import binary_identity, reusable

    replay, _ = journal_mod.read(journal)
    problem = spec.problem(problem_name)
    keys = [t.candidate.key() for t in replay.trials]
    measured = [
        t
        for t in replay.trials
        if t.measurement is not None and t.candidate.key() not in replay.same_binary
    ]
    identities = [
        binary_identity(spec, t.candidate, t.build, problem)
        for t in measured
        if t.build is not None and reusable(t)
    ]
    known = [i for i in identities if i is not None]
    per_gpu: dict[str, int] = {}
    for t in measured:
        device = t.measurement.device if t.measurement else None
        name = f"{device.name} {device.uuid}" if device is not None else "none"
        per_gpu[name] = per_gpu.get(name, 0) + 1
    return {
        "measured_per_gpu": per_gpu,
        "measured_once": {
            "trials": len(keys),
            "candidates_twice": len(keys) - len(set(keys)),
            "measured": len(measured),
            "binaries_twice": len(known) - len(set(known)),
            "same_binary": len(replay.same_binary),
        },
    }


class Killer:
    """SIGKILL the last GPU's Dask worker once the journal holds ``after`` trials; then
    check that the engine started a new one (a thread of the searching process, which
    owns the cluster: the engine is acquired here first and shared with the search)."""

    def __init__(self, settings: Any, journal: Path, after: int) -> None:
        from ctune.scale import engine as engine_mod

        self.engine_mod = engine_mod
        self.engine = engine_mod.acquire(settings)
        self.gpus = self.engine.wait_for(engine_mod.GPU, "GPU workers")
        self.journal, self.after = journal, after
        self.killed: dict[str, Any] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _gpu_workers(self) -> dict[str, int]:
        """Worker name (gpu-N) -> pid."""
        names = self.engine.offering(self.engine_mod.GPU)
        pids = self.engine.client.run(os.getpid, workers=list(names))
        return {names[a]: int(pid) for a, pid in pids.items()}

    def _trials(self) -> int:
        """Trials journaled so far (the journal's reader drops a line being written)."""
        from ctune.errors import CtuneError
        from ctune.search import journal as journal_mod

        try:
            return len(journal_mod.read(self.journal)[0].trials)
        except (OSError, CtuneError):  # not written yet, or only part of its header
            return 0

    def _run(self) -> None:
        while not self.stop.is_set() and self._trials() < self.after:
            time.sleep(0.1)
        if self.stop.is_set():
            return
        workers = self._gpu_workers()
        name = sorted(workers)[-1]
        os.kill(workers[name], signal.SIGKILL)  # a worker of this process's own cluster
        self.killed = {"worker": name, "pid": workers[name], "after_trials": self._trials()}

    def finish(self) -> dict[str, Any]:
        self.stop.set()
        self.thread.join()
        deadline = time.monotonic() + 60
        while self.engine.total(self.engine_mod.GPU) < self.gpus and time.monotonic() < deadline:
            time.sleep(0.2)
        workers = self._gpu_workers()
        replaced = bool(self.killed) and workers.get(self.killed["worker"]) not in (
            None,
            self.killed["pid"],
        )
        self.engine_mod.release(self.engine)
        return {**self.killed, "gpu_workers_after": len(workers), "replaced": replaced}


def run_child(args: argparse.Namespace, name: str, gpus: str, **extra: Any) -> dict[str, Any]:
    journal = Path(args.workdir) / f"{name}.jsonl"
    argv = [
        sys.executable,
        __file__,
        "--child",
        "--gpus",
        gpus,
        "--budget",
        str(extra.get("budget", args.budget)),
        "--seed",
        str(args.seed),
        "--jobs",
        str(args.jobs),
        "--journal",
        str(journal),
        "--kill-after",
        str(extra.get("kill_after", 0)),
    ]
    start = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=args.child_timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"ran past {args.child_timeout:g} s", "gpus": gpus}
    process_wall = time.monotonic() - start
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}: {done.stderr[-3000:]}", "gpus": gpus}
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {**out, "gpus": gpus, "process_wall_s": round(process_wall, 2)}


# --- comparing ---------------------------------------------------------------------------


def fronts_agree(one: dict[str, Any], many: dict[str, Any]) -> dict[str, Any]:
    """Same pinned build, or pinned winners not told apart by the comparison rule."""
    from ctune.records import measurement_from_json
    from ctune.search.confirm import significance

    same = one.get("pinned") is not None and one.get("pinned") == many.get("pinned")
    verdict = None
    a = [measurement_from_json(m) for m in one.get("pinned_per_process", [])]
    b = [measurement_from_json(m) for m in many.get("pinned_per_process", [])]
    if not same and a and b:
        compared = significance(b, a)
        verdict = {
            "difference": compared.difference.value,
            "significant": compared.significant,
            "change": compared.change,
            "threshold": compared.threshold,
        }
    agree = same or (verdict is not None and not verdict["significant"])
    return {"agree": agree, "same_pinned": same, "winners_compared": verdict}


def efficiency(one: dict[str, Any], many: dict[str, Any], gpus: int) -> float | None:
    if "wall_s" not in one or "wall_s" not in many or not many["wall_s"]:
        return None
    return float(one["wall_s"]) / float(many["wall_s"]) / gpus


def brief(run: dict[str, Any], *keys: str) -> str:
    return json.dumps({k: run.get(k) for k in keys})[:600]


# --- main --------------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", default="prebuild,scaling,kill")
    parser.add_argument("--budget", type=int, default=400)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=8, help="compile workers of each search")
    parser.add_argument("--kill-budget", type=int, default=80)
    parser.add_argument("--kill-after", type=int, default=15)
    parser.add_argument("--child-timeout", type=float, default=400.0)
    parser.add_argument("--pack", type=Path, help="prebuild: also pack the builds for a carry")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ctune-multi-gpu"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--gpus", default="all", help=argparse.SUPPRESS)
    parser.add_argument("--journal", default="", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    from scale_out import fingerprint

    from ctune.config import resolve
    from ctune.evidence.identity import gpu_id
    from ctune.scale.engine import count_gpus

    settings = resolve({"jobs": args.jobs})
    args.workdir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "benchmark": "multi_gpu",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kernel": "gemm",
        "problem": PROBLEM,
        "objective": OBJECTIVE,
        "strategy": "auto (the default)",
        "budget": args.budget,
        "seed": args.seed,
        "compile_workers": args.jobs,
        "subspace": SUBSPACE,
    }
    parts = args.part.split(",")
    if "prebuild" in parts:
        result["prebuild"] = part_prebuild(args, settings)
        print(f"prebuild: {json.dumps(result['prebuild'])}", flush=True)
    if not {"scaling", "kill"} & set(parts):
        return 0
    gpus = count_gpus()
    fp = fingerprint(settings)
    result["fingerprint"] = fp
    result["gpus"] = [1, gpus]
    if gpus < 2:
        print(f"multi_gpu: {gpus} GPU visible; the scaling and kill parts need 2 or more")
        return 3
    path = args.out / f"multi_gpu-x{gpus}-{gpu_id(fp)}.json"  # ends in the gpu_id, as all do
    args.out.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after each search: a call cut short keeps what finished
        path.write_text(json.dumps(result, indent=2, sort_keys=True, default=str) + "\n")

    if "scaling" in parts:
        # untimed: CuPy's disk cache gets the harness's and the reference's kernels, so the
        # first timed search does not pay their JIT compiles (seconds) and the second not
        result["warm_up"] = brief(run_child(args, "warm-up", "0", budget=3), "wall_s", "error")
        runs: dict[str, dict[str, Any]] = {}
        for name, which, journal in (("1", "0", "gpus-1"), (str(gpus), "all", "gpus-n")):
            runs[name] = run_child(args, journal, which)
            result["runs"] = runs
            save()
            print(f"{name} GPU(s): {brief(runs[name], 'wall_s', 'evaluations', 'error')}")
        one, many = runs["1"], runs[str(gpus)]
        eff = efficiency(one, many, gpus)
        result.update(
            {
                "runs": runs,
                "wall_s": {name: run.get("wall_s") for name, run in runs.items()},
                "process_wall_s": {name: run.get("process_wall_s") for name, run in runs.items()},
                "efficiency": None if eff is None else round(eff, 3),
                "target": {
                    "target": f"(wall 1 GPU / wall {gpus} GPUs) / {gpus} >= {TARGET}",
                    "value": eff,
                    "met": eff is not None and eff >= TARGET,
                },
            }
        )
        if "error" not in one and "error" not in many:
            fronts = fronts_agree(one, many)
            result["fronts"] = fronts
            result["fronts_agree"] = fronts["agree"]
            result["measured_once"] = all(
                r["measured_once"]["candidates_twice"] == 0
                and r["measured_once"]["binaries_twice"] == 0
                for r in (one, many)
            )
        save()
    if "kill" in parts:
        kill = run_child(args, "kill", "all", budget=args.kill_budget, kill_after=args.kill_after)
        killed = kill.get("kill") or {}
        result["kill"] = kill
        result["killed_worker_replaced_and_search_finished"] = bool(
            killed.get("replaced") and kill.get("stop_reason") == "budget"
        )
        shown = ("kill", "evaluations", "stop_reason", "failures", "error")
        print(f"kill: {brief(kill, *shown)}")
        save()
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
