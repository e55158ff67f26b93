"""How sample-efficient is the GA? Replay searches on an exhaustively measured space.

Performance goal (the search issue): with a budget of 10% of a space of at
least 1,000 valid candidates, the GA (or NSGA-II for several objectives)
reaches >= 98% of the optimum (median over 10 seeds), and beats random
search at the same budget.

Two steps:

``record`` (on the GPU machine, once): compile and measure every valid
candidate with the real NvccCompiler and WorkerMeasurer, and store
candidate genes -> build outcome, p50/p95/p99, energy, resources, plus the
fingerprint, as ``tests/data/ground_truth/<kernel>-<problem>.json.gz``
(format: tests/data/ground_truth/README.md). Resumable: every candidate is
appended (fsync'd) to ``<out>.partial.jsonl`` first, and a rerun skips what
is there. Fast: small sample counts (``--min-samples 50``), L2 cold,
compiles ahead in parallel::

    python bench/ga_sample_efficiency.py record --kernel tests/data/kernels/saxpy.cu \\
        --problem n1m --objective p50 --fix fast_math=False --fix dlcm=default

``replay`` (anywhere, no GPU): run the strategy through the real driver with
``ReplayCompiler``/``ReplayMeasurer`` for 10 seeds at 10% of the space,
random search at the same budget, and write
``bench/results/ga_sample_efficiency.json``. ``--synthetic`` replays a
ground truth generated from the stand-in cost model instead (flagged
``synthetic: true`` in the output: it says nothing about real kernels)::

    python bench/ga_sample_efficiency.py replay \
        --ground-truth tests/data/ground_truth/saxpy-n1m.json.gz
    python bench/ga_sample_efficiency.py replay --synthetic
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctune.records import GeneValue  # noqa: E402
from ctune.spec import KernelSpec, load_spec  # noqa: E402
from ctune.spec.space.params import Gene  # noqa: E402

DEFAULT_KERNEL = ROOT / "tests" / "data" / "kernels" / "saxpy.cu"
DEFAULT_FIX = ("fast_math=False", "dlcm=default")
RESULTS = ROOT / "bench" / "results" / "ga_sample_efficiency.json"
TARGET = 0.98


# --- the space ---------------------------------------------------------------------


def parse_fixed(spec: KernelSpec, items: Sequence[str]) -> dict[str, GeneValue]:
    from ctune.cli.common import parse_sets

    return {k: v for k, v in parse_sets(spec.space, items, {}).items()}


def restrict(spec: KernelSpec, fixed: Mapping[str, GeneValue]) -> KernelSpec:
    """The spec with each fixed gene reduced to its one value (so the search stays inside
    the recorded space); a fixed value becomes that gene's default."""

    def pin(gene: Gene) -> Gene:
        if gene.name not in fixed:
            return gene
        value = fixed[gene.name]
        return dataclasses.replace(gene, values=(value,), default=value, suggest=())

    return spec.with_genes(pin)


def valid_values(
    spec: KernelSpec, dims: Mapping[str, int], fixed: Mapping[str, GeneValue]
) -> list[dict[str, GeneValue]]:
    return [v for v in spec.space.iter_valid(dims) if all(v[k] == x for k, x in fixed.items())]


# --- record (GPU) ----------------------------------------------------------------------


def record(args: argparse.Namespace) -> int:
    from ctune.cli.common import load
    from ctune.compile.nvcc import NvccCompiler
    from ctune.config import resolve
    from ctune.measure import SamplingPlan
    from ctune.measure.session import WorkerMeasurer
    from ctune.objective import parse_objective_spec
    from ctune.testing.standins import GroundTruth, ground_truth_entry

    cfg = resolve({"l2_policy": "cold", **({"jobs": args.jobs} if args.jobs else {})})
    spec, toolchain = load(Path(args.kernel), cfg)
    problem = spec.problem(args.problem)
    fixed = parse_fixed(spec, args.fix)
    values = valid_values(spec, problem.dims, fixed)
    if args.limit:
        values = values[: args.limit]
    if len(values) < 1000:
        print(f"warning: only {len(values)} valid candidates (the goal asks for >= 1000)")
    objective = parse_objective_spec([args.objective], [], spec.metrics)
    plan = objective.sampling_plan(
        SamplingPlan(
            min_samples=args.min_samples,
            rep_ms=args.rep_ms,
            l2_policy="cold",
            warmup_ms=cfg.warmup_ms,
        )
    )
    out = Path(
        args.out or ROOT / "tests" / "data" / "ground_truth" / f"{spec.name}-{problem.name}.json.gz"
    )
    partial = out.with_name(out.name + ".partial.jsonl")
    done: dict[str, dict[str, Any]] = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn last line from an interrupted run
            done[entry.pop("key")] = entry
    todo = [spec.candidate(v) for v in values if spec.candidate(v).key() not in done]
    print(
        f"{spec.name}/{problem.name}: {len(values)} valid candidates, {len(done)} recorded, "
        f"{len(todo)} to go; partial results in {partial}"
    )
    partial.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with (
        NvccCompiler.from_settings(spec, toolchain, cfg) as compiler,
        contextlib.closing(WorkerMeasurer(device=0, settings=cfg)) as measurer,
        partial.open("a") as sink,
    ):
        futures: dict[int, Any] = {}
        for i, cand in enumerate(todo):
            for j in range(i, min(len(todo), i + 1 + compiler.jobs)):
                if j not in futures:
                    futures[j] = compiler.submit(todo[j], problem)
            build = futures.pop(i).result()
            m = measurer.measure(spec, cand, build, problem, plan) if build.outcome.is_ok else None
            entry = ground_truth_entry(cand, build, m)
            sink.write(json.dumps({"key": cand.key(), **entry}, sort_keys=True) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            done[cand.key()] = entry
            if (i + 1) % 25 == 0 or i + 1 == len(todo):
                rate = (time.monotonic() - start) / (i + 1)
                print(
                    f"  {i + 1}/{len(todo)} ({rate:.2f} s each, "
                    f"{rate * (len(todo) - i - 1) / 60:.1f} min left)"
                )
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.identity_probe import current_fingerprint

    truth = GroundTruth(
        spec.name,
        problem.name,
        args.objective,
        False,
        current_fingerprint(spec, gpu=True, nvcc=nvcc_for(cfg), l2_policy="cold"),
        {k: v for k, v in done.items() if k in {spec.candidate(x).key() for x in values}},
        meta={
            "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "fixed": {k: v for k, v in fixed.items()},
            "valid": len(values),
            "plan": dataclasses.asdict(plan),
            "generator": "bench/ga_sample_efficiency.py",
        },
    )
    truth.save(out)
    print(f"wrote {out} ({len(truth.entries)} candidates); {partial} can be deleted")
    return 0


# --- replay (no GPU) ----------------------------------------------------------------------


def _best(values: Sequence[Sequence[float]], directions: Sequence[str]) -> float | None:
    if not values:
        return None
    firsts = [v[0] for v in values]
    return max(firsts) if directions[0] == "max" else min(firsts)


def _fraction(found: float | None, optimum: float, direction: str) -> float:
    if found is None:
        return 0.0
    return found / optimum if direction == "max" else optimum / found


def replay(args: argparse.Namespace) -> int:
    from ctune.measure import SamplingPlan
    from ctune.objective import parse_objective_spec
    from ctune.objective.pareto import as_minimization, hypervolume, non_dominated
    from ctune.testing.searches import feasible_values, quiet_search
    from ctune.testing.standins import (
        GroundTruth,
        ReplayCompiler,
        ReplayMeasurer,
        synthetic_ground_truth,
    )

    spec = load_spec(Path(args.kernel))
    objective = parse_objective_spec(args.objective, [], spec.metrics)
    if args.synthetic:
        problem = spec.problem(args.problem)
        fixed = parse_fixed(spec, args.fix)
        truth = synthetic_ground_truth(
            spec,
            problem,
            objective=args.objective[0],
            fixed=fixed,
            plan=objective.sampling_plan(SamplingPlan()),
        )
    else:
        truth = GroundTruth.load(Path(args.ground_truth))
        problem = spec.problem(truth.problem)
        fixed = dict(truth.meta.get("fixed") or {})
        if truth.kernel != spec.name:
            raise SystemExit(f"{args.ground_truth} is for kernel {truth.kernel}, not {spec.name}")
    search_spec = restrict(spec, fixed)
    directions = objective.directions
    size = len(truth.entries)
    budget = max(2, math.ceil(args.fraction * size))

    # the truth: every recorded candidate evaluated as the search would
    replayer = ReplayMeasurer(truth)
    compiler = ReplayCompiler(truth)
    plan = None
    all_values = []
    for key, entry in truth.entries.items():
        cand = search_spec.candidate(entry["genes"])
        assert cand.key() == key, "ground truth keys must be candidate keys"
        build = compiler.build(cand, problem)
        if not build.outcome.is_ok:
            continue
        plan = plan or objective.sampling_plan(SamplingPlan())
        m = replayer.measure(search_spec, cand, build, problem, plan)
        values, _violations = objective.evaluate(build, m, problem.dims)
        if m.outcome.is_ok and values is not None:
            all_values.append(values)
    if not all_values:
        raise SystemExit(
            f"no recorded candidate has every objective ({', '.join(args.objective)}); "
            "was the ground truth recorded with energy readings?"
        )
    points = as_minimization(all_values, directions)
    true_front = points[non_dominated(points)]
    ref = true_front.max(axis=0) * 1.1
    optimum = _best(all_values, directions)
    assert optimum is not None, "no candidate of the ground truth measured OK"

    def one(strategy: str, seed: int, folder: Path) -> dict[str, Any]:
        result = quiet_search(
            search_spec,
            objective,
            folder / f"{strategy}-{seed}",
            strategy=strategy,
            budget=budget,
            seed=seed,
            compiler=ReplayCompiler(truth),
            measurer=ReplayMeasurer(truth),
            fingerprint=truth.fingerprint,
        )
        found = feasible_values(result)
        row: dict[str, Any] = {
            "seed": seed,
            "evaluations": result.evaluations,
            "best": _best(found, directions),
            "fraction": _fraction(_best(found, directions), optimum, directions[0]),
        }
        if len(directions) > 1:
            got = as_minimization(found, directions) if found else points[:0]
            row["hypervolume_fraction"] = hypervolume(got, ref) / hypervolume(true_front, ref)
        return row

    strategy = "auto"
    metric = "fraction" if len(directions) == 1 else "hypervolume_fraction"
    rows: dict[str, list[dict[str, Any]]] = {strategy: [], "random": []}
    with tempfile.TemporaryDirectory(prefix="ctune-bench-") as tmp:
        for seed in range(args.seeds):
            for name in rows:
                rows[name].append(one(name, seed, Path(tmp)))
    med = {name: statistics.median(r[metric] for r in runs) for name, runs in rows.items()}
    wins = sum(a[metric] > b[metric] for a, b in zip(rows[strategy], rows["random"], strict=True))
    from ctune import __version__

    report = {
        "benchmark": "ga_sample_efficiency",
        "synthetic": truth.synthetic,
        "note": (
            "synthetic ground truth from the stand-in cost model: develops the bench, "
            "says nothing about real kernels"
        )
        if truth.synthetic
        else "",
        "kernel": truth.kernel,
        "problem": truth.problem,
        "objectives": [o.text for o in objective.objectives],
        "space_size": size,
        "fixed": {k: v for k, v in fixed.items()},
        "budget": budget,
        "budget_fraction": args.fraction,
        "seeds": args.seeds,
        "optimum": optimum,
        "metric": metric,
        "target": TARGET,
        "strategy": "ga" if len(directions) == 1 else "nsga2",
        "median": {"search": med[strategy], "random": med["random"]},
        "search_beats_random_seeds": wins,
        "meets_target": med[strategy] >= TARGET,
        "runs": {"search": rows[strategy], "random": rows["random"]},
        "fingerprint": dict(truth.fingerprint),
        "ground_truth_meta": dict(truth.meta),
        "ctune_version": __version__,
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    out = Path(args.out or RESULTS)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    flag = " (SYNTHETIC ground truth)" if truth.synthetic else ""
    print(
        f"{truth.kernel}/{truth.problem}{flag}: {size} candidates, budget {budget} "
        f"({args.fraction:.0%}), {args.seeds} seeds"
    )
    print(
        f"  {report['strategy']}: median {metric} {med[strategy]:.4f} "
        f"(target {TARGET}: {'met' if report['meets_target'] else 'NOT met'})"
    )
    print(f"  random: median {metric} {med['random']:.4f}; search better in {wins}/{args.seeds}")
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="exhaustively compile + measure a space on the GPU")
    rec.add_argument("--kernel", default=str(DEFAULT_KERNEL))
    rec.add_argument("--problem", default=None)
    rec.add_argument("--objective", default="p50", help="decides the sampling quantile")
    rec.add_argument(
        "--fix",
        action="append",
        default=None,
        help=f"NAME=VALUE pins a gene (default: {' '.join(DEFAULT_FIX)})",
    )
    rec.add_argument("--min-samples", type=int, default=50)
    rec.add_argument("--rep-ms", type=float, default=10.0)
    rec.add_argument("--jobs", type=int, default=0)
    rec.add_argument("--limit", type=int, default=0, help="record only the first N (testing)")
    rec.add_argument("--out", default=None)
    rep = sub.add_parser("replay", help="GA/NSGA-II vs random on a recorded ground truth")
    src = rep.add_mutually_exclusive_group(required=True)
    src.add_argument("--ground-truth", default=None)
    src.add_argument(
        "--synthetic",
        action="store_true",
        help="generate the ground truth from the stand-in cost model",
    )
    rep.add_argument("--kernel", default=str(DEFAULT_KERNEL))
    rep.add_argument("--problem", default=None)
    rep.add_argument("--fix", action="append", default=None)
    rep.add_argument(
        "--objective", action="append", default=None, help="repeat for NSGA-II (default: p50)"
    )
    rep.add_argument("--seeds", type=int, default=10)
    rep.add_argument("--fraction", type=float, default=0.10)
    rep.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if getattr(args, "fix", None) is None:
        args.fix = list(DEFAULT_FIX)
    if args.command == "record":
        return record(args)
    args.objective = args.objective or ["p50"]
    return replay(args)


if __name__ == "__main__":
    raise SystemExit(main())
