"""Scale-out through the Dask engine: compile throughput, GPU busy, and the same front.

Three parts, each reported, never asserted (``--part``, comma-separated, default all):

- ``compile``: CUTLASS GEMM candidates (distinct builds near the default) compiled on 1,
  2, 4, 8, 16 engine compile workers of this host, each count in a fresh build cache, so
  every build runs nvcc. ``candidates_per_s`` = builds / wall; ``efficiency`` =
  throughput(N) / (N * throughput(1)); the lowest free memory during each wave gives
  the memory one build takes and so how many workers the host's memory allows.
  Target: efficiency >= 0.8 at 8 workers.
- ``search``: a CUTLASS search through the engine (``executor = dask``: compile workers
  plus one GPU worker) for ``--search-time``; ``gpu_busy_fraction`` is the search's own
  (measuring and confirming time / wall time, as the ``busy`` stage of bench/device.sh
  reports it). The default build is compiled first, outside the timed search. Target >= 0.7.
- ``front``: the same search (a small one, on kernels/hand_gemm.yaml) through the engine and
  locally with the same seed: the candidates each proposes and the fronts they report,
  compared by the significance rule of confirmation (``search/confirm.py``).

Wall time: a compile wave takes about one build (~40 s for CUTLASS on the H100/H200
host), so ``--workers 1,2,4,8,16 --builds-per-worker 1`` is five waves, ~4 min with the
cluster starts; ``search`` takes ``--search-time`` plus one baseline build; ``front`` two
searches of ``--front-budget``. All three fit ~9 min at the defaults; ``--max-wall``
skips the waves that would not fit (said in the result). Run them as separate calls if
needed: each part is merged into ``bench/results/scale_out-<gpu_id>.json``.

    python bench/scale_out.py [--part compile,search,front] [--workers 1,2,4,8,16] ...
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctune.config import Settings, resolve  # noqa: E402
from ctune.errors import CtuneError  # noqa: E402
from ctune.evidence.identity import gpu_id  # noqa: E402

EFFICIENCY_TARGET = 0.8
BUSY_TARGET = 0.70


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes (empty where there is none)."""
    out: dict[str, int] = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            out[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


class MemoryWatch:
    """The lowest MemAvailable while a wave runs (sampled twice a second)."""

    def __init__(self) -> None:
        self.start = meminfo().get("MemAvailable", 0)
        self.low = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.low = min(self.low, meminfo().get("MemAvailable", self.low))

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def used(self) -> int:
        return max(0, self.start - self.low)


# --- candidates ---------------------------------------------------------------------------


def distinct_builds(spec: Any, problem: Any, count: int) -> list[Any]:
    """``count`` valid candidates of distinct builds: the default, then one compiled gene
    changed at a time (near the default, so each compiles like a search's would)."""
    space = spec.space
    base = space.default_values()
    out, groups = [spec.default_candidate()], {space.build_group(spec.default_candidate().genes)}
    changes = [(g.name, v) for g in space.genes if g.compiled for v in g.values if v != g.default]
    pairs = [(a, b) for i, a in enumerate(changes) for b in changes[i + 1 :] if a[0] != b[0]]
    for change in [(c,) for c in changes] + pairs:
        if len(out) >= count:
            break
        values = {**base, **dict(change)}
        if space.violations(values, problem.dims):
            continue
        cand = spec.candidate(values)
        group = space.build_group(cand.genes)
        if group not in groups:
            groups.add(group)
            out.append(cand)
    if len(out) < count:
        raise CtuneError(f"only {len(out)} distinct valid builds near the default of {spec.name}")
    return out


# --- part: compile throughput -------------------------------------------------------------


def compile_wave(
    spec: Any, problem: Any, toolchain: Any, settings: Settings, cands: list[Any], n: int
) -> dict[str, Any]:
    """``cands`` compiled on a fresh cluster of ``n`` compile workers, in a fresh cache."""
    import distributed

    from ctune.scale.compiler import EngineCompiler
    from ctune.scale.engine import Engine, start_local_cluster

    cluster = start_local_cluster(n, ())
    engine = Engine(distributed.Client(cluster), cluster, cluster.scheduler_address)
    try:
        with tempfile.TemporaryDirectory(prefix=f"ctune-scale-{n}-") as cache:
            cfg = dataclasses.replace(settings, cache_dir=Path(cache))
            compiler = EngineCompiler(spec, toolchain, cfg, engine)
            with MemoryWatch() as memory:
                start = time.monotonic()
                futures = [compiler.submit(c, problem) for c in cands]
                builds = [f.result() for f in futures]
                wall = time.monotonic() - start
    finally:
        engine.close()
    outcomes: dict[str, int] = {}
    for b in builds:
        outcomes[b.outcome.value] = outcomes.get(b.outcome.value, 0) + 1
    compile_s = sorted(b.compile_s for b in builds)
    return {
        "compile_workers": n,
        "builds": len(builds),
        "wall_s": round(wall, 2),
        "candidates_per_s": round(len(builds) / wall, 5),
        "compile_s_median": compile_s[len(compile_s) // 2],
        "compile_s_max": compile_s[-1],
        "outcomes": outcomes,
        "memory_used_gb": round(memory.used / 1e9, 2),
        "memory_per_build_gb": round(memory.used / 1e9 / min(n, len(builds)), 2),
    }


def part_compile(args: argparse.Namespace, settings: Settings, deadline: float) -> dict[str, Any]:
    from ctune.compile.select_toolchain import toolchain_for
    from ctune.spec import load_spec

    toolchain = toolchain_for(settings)
    spec = load_spec(ROOT / args.kernel, toolchain.help_text)
    problem = spec.problem(args.problem)
    counts = [int(n) for n in args.workers.split(",")]
    cands = distinct_builds(spec, problem, max(counts) * args.builds_per_worker)
    waves: list[dict] = []
    skipped: list[int] = []
    for n in counts:
        if waves:  # a wave takes about builds-per-worker builds, slower as more run at once
            estimate = waves[0]["wall_s"] * 1.5 + 15
            if time.monotonic() + estimate > deadline:
                skipped.append(n)
                continue
        some = cands[: n * args.builds_per_worker]
        wave = compile_wave(spec, problem, toolchain, settings, some, n)
        waves.append(wave)
        print(f"compile: {n} workers, {wave['builds']} builds in {wave['wall_s']} s", flush=True)
    one = waves[0]["candidates_per_s"] if waves else 0.0
    for wave in waves:
        wave["efficiency"] = round(wave["candidates_per_s"] / (wave["compile_workers"] * one), 3)
    mem_total = meminfo().get("MemTotal", 0)
    per_build = max((w["memory_per_build_gb"] for w in waves), default=0.0)
    at8 = next((w["efficiency"] for w in waves if w["compile_workers"] == 8), None)
    return {
        "kernel": spec.name,
        "problem": problem.name,
        "waves": waves,
        "skipped_for_time": skipped,
        "compile_workers": [w["compile_workers"] for w in waves],
        "candidates_per_s": [w["candidates_per_s"] for w in waves],
        "efficiency": [w["efficiency"] for w in waves],
        "memory_total_gb": round(mem_total / 1e9, 1),
        "memory_per_build_gb": per_build,
        "memory_bound_workers": int(mem_total / 1e9 / per_build) if per_build else None,
        "cpu_cores": os.cpu_count(),
        "target": {
            "target": f"compile efficiency >= {EFFICIENCY_TARGET} at 8 engine workers",
            "value": at8,
            "met": at8 is not None and at8 >= EFFICIENCY_TARGET,
        },
    }


# --- parts: a search through the engine ---------------------------------------------------


def run_one(settings: Settings, yaml: Path, objective: str, **options: Any) -> Any:
    """A search as ``ctune search`` runs it (the settings pick the executor)."""
    from ctune.cli.common import load
    from ctune.objective import parse_objective_spec
    from ctune.search.driver import SearchOptions, run_search

    spec, toolchain = load(yaml, settings)
    parsed = parse_objective_spec([objective], [], spec.metrics)
    return run_search(settings, spec, parsed, SearchOptions(**options), toolchain=toolchain)


def part_search(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    from ctune.compile.select_toolchain import toolchain_for
    from ctune.search.session import compiler_for
    from ctune.spec import load_spec

    cache = Path(tempfile.mkdtemp(prefix="ctune-scale-search-"))
    cfg = dataclasses.replace(settings, cache_dir=cache, executor="dask", jobs=args.search_jobs)
    toolchain = toolchain_for(cfg)
    spec = load_spec(ROOT / args.kernel, toolchain.help_text)
    start = time.monotonic()
    # the default build before the clock; the compiler holds the engine the search shares
    compiler = compiler_for(spec, toolchain, cfg)
    try:
        baseline = compiler.build(spec.default_candidate(), spec.problem(args.problem))
        setup_s = time.monotonic() - start
        result = run_one(
            cfg,
            ROOT / args.kernel,
            "p99",
            problem=args.problem,
            budget=args.search_budget,
            time_s=args.search_time,
            seed=5,
            confirm_processes=1,
        )
    finally:
        compiler.close()
    busy = result.timing.gpu_busy_fraction
    return {
        "kernel": spec.name,
        "problem": result.problem,
        "compile_workers": args.search_jobs,
        "baseline_compile_s": baseline.compile_s,
        "setup_s": round(setup_s, 1),
        "evaluations": result.evaluations,
        "fillers": result.fillers,
        "stop_reason": result.stop_reason,
        "wall_s": round(result.timing.wall_s, 1),
        "measure_s": round(result.timing.measure_s, 1),
        "compile_wait_s": round(result.timing.compile_wait_s, 1),
        "gpu_busy_fraction": round(busy, 3),
        "failures": result.failures,
        "target": {
            "target": f"GPU busy >= {BUSY_TARGET:.0%} on a CUTLASS search through the engine",
            "value": round(busy, 3),
            "met": busy >= BUSY_TARGET,
        },
    }


def part_front(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """The same seeded search through the engine (1 GPU) and locally; fronts compared."""
    from ctune.search import journal as journal_mod

    cache = Path(tempfile.mkdtemp(prefix="ctune-scale-front-"))
    runs: dict[str, Any] = {}
    for where in ("engine", "local"):  # one cache: the local run compiles nothing again
        executor = "dask" if where == "engine" else "local"
        cfg = dataclasses.replace(
            settings, cache_dir=cache, executor=executor, jobs=args.search_jobs
        )
        runs[where] = run_one(
            cfg,
            ROOT / args.front_kernel,
            "p50",
            problem=args.front_problem,
            budget=args.front_budget,
            seed=3,
            fill=False,
            journal=cache / f"{where}.jsonl",
        )
    keys = {
        where: [t.candidate.key() for t in journal_mod.read(run.journal)[0].trials]
        for where, run in runs.items()
    }
    return {"kernel": runs["local"].kernel, **compare_fronts(runs["engine"], runs["local"], keys)}


def compare_fronts(engine: Any, local: Any, keys: dict[str, list[str]]) -> dict[str, Any]:
    from ctune.search.confirm import significance

    def best(result: Any) -> Any:
        return next((m for m in result.front if m.key == result.pinned), None)

    e, lo = best(engine), best(local)
    verdict, told_apart = None, True
    if e is not None and lo is not None and e.per_process and lo.per_process:
        compared = significance(e.per_process, lo.per_process)
        verdict, told_apart = compared.difference.value, compared.significant
    first_gen = min(len(keys["engine"]), len(keys["local"]))
    same_winner = e is not None and lo is not None and e.key == lo.key
    within = same_winner or not told_apart
    return {
        "evaluations": [engine.evaluations, local.evaluations],
        "same_candidates": keys["engine"] == keys["local"],
        "same_candidates_until": next(
            (i for i in range(first_gen) if keys["engine"][i] != keys["local"][i]), first_gen
        ),
        "front_engine": [[m.key, list(m.values)] for m in engine.front],
        "front_local": [[m.key, list(m.values)] for m in local.front],
        "winner_engine": e.key if e else None,
        "winner_local": lo.key if lo else None,
        "winners_compared": verdict,
        "target": {
            "target": "the engine's 1-GPU search gives the local front (same seed, "
            "within the significance rule)",
            "value": "same winner" if same_winner else verdict,
            "met": within,
        },
    }


# --- main --------------------------------------------------------------------------------


def fingerprint(settings: Settings) -> dict[str, Any]:
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.evidence.identity import probe_gpu_machine
    from ctune.identity_probe import probe_toolchain

    fields: dict[str, Any] = dict(probe_gpu_machine() or {})
    try:
        fields.update(probe_toolchain(nvcc_for(settings)))
    except CtuneError as exc:
        fields["toolchain"] = str(exc)
    try:
        import dask
        import distributed

        fields["dask"] = f"dask {dask.__version__}, distributed {distributed.__version__}"
    except ImportError:
        fields["dask"] = "not installed"
    fields["host"] = socket.gethostname()
    return fields


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", default="compile,search,front")
    parser.add_argument("--workers", default="1,2,4,8,16")
    parser.add_argument("--builds-per-worker", type=int, default=1)
    parser.add_argument("--kernel", default="kernels/gemm.yaml")
    parser.add_argument("--problem", default="llm8b-o-t16")
    parser.add_argument("--search-time", type=float, default=120.0)
    parser.add_argument("--search-budget", type=int, default=400)
    parser.add_argument("--search-jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--front-kernel", default="kernels/hand_gemm.yaml")
    parser.add_argument("--front-problem", default="llm8b-o-t16")
    parser.add_argument("--front-budget", type=int, default=16)
    parser.add_argument("--max-wall", type=float, default=520.0, help="seconds for all parts")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    started = time.monotonic()
    settings = resolve()
    fp = fingerprint(settings)
    machine = gpu_id(fp)
    path = args.out / f"scale_out-{machine}.json"
    result: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    result.update({"benchmark": "scale_out", "fingerprint": fp})
    parts = {
        "compile": lambda: part_compile(args, settings, started + args.max_wall),
        "search": lambda: part_search(args, settings),
        "front": lambda: part_front(args, settings),
    }
    for name in args.part.split(","):
        begun = time.monotonic()
        try:
            result[name] = parts[name]()
        except Exception as exc:  # report the part as failed, keep going
            result[name] = {"error": "".join(traceback.format_exception(exc))[-3000:]}
        result[name]["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        result[name]["part_s"] = round(time.monotonic() - begun, 1)
        print(f"{name}: {json.dumps(result[name].get('target', result[name]))[:400]}", flush=True)
    headline(result)
    args.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path} in {time.monotonic() - started:.0f} s")
    return 0


def headline(result: dict[str, Any]) -> None:
    """The four headline fields the issue names, at the top level of the file."""
    comp, search = result.get("compile", {}), result.get("search", {})
    result["compile_workers"] = comp.get("compile_workers")
    result["candidates_per_s"] = comp.get("candidates_per_s")
    result["efficiency"] = comp.get("efficiency")
    result["gpu_busy_fraction"] = search.get("gpu_busy_fraction")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
