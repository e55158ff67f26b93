"""Search quality on ground truths over distinct binaries: replay, no GPU, 10 seeds.

For each ground truth recorded by ``bench/ground_truth.py`` (its presets', in
``tests/data/ground_truth/``, format ``ctune-ground-truth/2``; a preset not recorded yet
is left out with a note), at a budget of
``--fraction`` of its distinct binaries (GPU measurements), compare:

- ``default``: ctune's default strategy (``auto``) over the joint space;
- ``params-only``: the same strategy over the structure genes alone (every flag at
  its no-op default), at the same budget;
- every other ctune strategy (``ga``, ``staged``, ``parzen``, ``random``, ``tpe`` when
  Optuna is installed) over the joint space, and ``staged:structure=ga``, the default before
  its structure search was the Parzen model;
- ``kernel_tuner_ga``: Kernel Tuner's genetic algorithm in its simulation mode, fed
  the same ground truth as a cache file, with ``max_fevals`` = the budget (it has
  no binary dedup, so each distinct configuration is one of its measurements).

Each run's score is optimum / best found (1.0 = the optimum of the joint space).
Writes ``bench/results/search_quality.json``: per ground truth and strategy
``budget_fraction``, ``median_of_optimum``, ``seeds`` (per-seed scores), and for
the default strategy ``joint_vs_params_only`` (seeds where the joint search is at
least as good as params-only at equal budget), and ``budget_curve``: the medians of the
default strategy, random search, the former default and Kernel Tuner's GA at smaller budgets
(``--curve``, 2, 3 and 5% by default), because at 10% a small ground truth lets several
strategies reach the optimum and tie. Targets: >= 0.98 median at 10%, joint >= params-only
in >= 8 of 10 seeds, above random and Kernel Tuner's GA (at 10%, or along the curve where
10% ties).

    python bench/search_quality.py                       # every recorded ground truth
    python bench/search_quality.py --preset pb_2mm rd_hotspot      # those presets'
    python bench/search_quality.py --synthetic           # the synthetic one (no GPU data)
    python bench/search_quality.py --synthetic --model-seed 5 10 11 --no-kernel-tuner \
        --curve --out bench/results/search_quality-synthetic.json   # landscapes where flags help
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ground_truth import (  # noqa: E402
    PresetUnavailable,
    add_replay_presets,
    given_truths,
    kernel_file,
    recorded_truths,
)

from ctune.spec import KernelSpec, load_spec  # noqa: E402
from ctune.testing.binary_truth import BinaryTruth, synthetic_binary_truth  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "search_quality.json"
#: the synthetic stand-in: tiled_matmul's structure with a few flag genes
SYNTHETIC_SUBSPACE: dict[str, list[Any]] = {
    "BLOCK_X": [16, 32, 64],
    "BLOCK_Y": [2, 4, 8, 16],
    "WORK_X": [1, 2, 4],
    "WORK_Y": [1, 2, 4, 8],
    "TILE_K": [16, 32],
    "PAD": [0],
    "maxrregcount": [0, 32, 64, 128],
    "ptxas_opt": [3, 1],
    "fast_math": [False, True],
    "dlcm": ["default", "cg"],
    "lineinfo": [False, True],
}
TARGET = 0.98


def _best(journal: Path) -> float | None:
    from ctune.search.journal import read

    replay, _ = read(journal)
    values = [t.values[0] for t in replay.trials if t.feasible and t.values is not None]
    return min(values) if values else None


def ctune_run(
    truth: BinaryTruth, spec: KernelSpec, strategy: str, budget: int, seed: int, folder: Path
) -> float | None:
    """One replayed ctune search: the best value it found. ``strategy`` is a name, or a name
    and options as ``NAME:KEY=VALUE,...`` (``staged:structure=ga``: the GA-based default
    this one replaced)."""
    from ctune.objective import parse_objective_spec
    from ctune.search.strategy import parse_option_items
    from ctune.testing.searches import quiet_search
    from ctune.testing.standins import ReplayCompiler, ReplayMeasurer

    name, _, items = strategy.partition(":")
    replay = truth.to_replay()
    result = quiet_search(
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        folder / f"{strategy.replace(':', '-')}-{seed}-{len(spec.space.genes)}",
        strategy=name,
        strategy_options=parse_option_items(items.split(",")) if items else None,
        budget=budget,
        seed=seed,
        compiler=ReplayCompiler(replay),
        measurer=ReplayMeasurer(replay),
        fingerprint=replay.fingerprint,
    )
    return _best(result.journal)


def _member_of(valid: set[tuple[Any, ...]]) -> Callable[..., bool]:
    """A Kernel Tuner restriction over every parameter: the configuration was recorded."""

    def allowed(*values: Any) -> bool:
        return values in valid

    return allowed


def kernel_tuner_run(
    truth: BinaryTruth, spec: KernelSpec, budget: int, seed: int, folder: Path
) -> float | None:
    """Kernel Tuner's GA in simulation mode on a cache file holding the ground truth."""
    import random

    import numpy as np
    from constraint import FunctionConstraint
    from kernel_tuner import tune_kernel

    genes = [g for g in spec.space.genes]
    names = [g.name for g in genes]
    cache: dict[str, Any] = {}
    valid: set[tuple[Any, ...]] = set()
    for cand in truth.candidates.values():
        values = tuple(cand["genes"][n] for n in names)
        if not spec.space.is_valid(cand["genes"], spec.problem(truth.problem).dims):
            continue
        valid.add(values)
        key = ",".join(str(v) for v in values)
        value = truth.value(spec.candidate(cand["genes"]).key())
        cache[key] = {**dict(zip(names, values, strict=True)), "time": value or 1e20}
    path = folder / f"kt-{seed}.json"
    path.write_text(
        json.dumps(
            {
                "device_name": "ground truth",
                "kernel_name": spec.name,
                "problem_size": [1],
                "tune_params_keys": names,
                "tune_params": {g.name: list(g.values) for g in genes},
                "objective": "time",
                "cache": cache,
            }
        )
    )
    random.seed(seed)
    np.random.seed(seed)
    results, _env = tune_kernel(
        spec.name,
        "__global__ void k() {}",
        1,
        [],
        {g.name: list(g.values) for g in genes},
        restrictions=[FunctionConstraint(_member_of(valid))],
        strategy="genetic_algorithm",
        strategy_options={"max_fevals": budget},
        cache=str(path),
        simulation_mode=True,
        quiet=True,
        lang="CUDA",
    )
    times = [r["time"] for r in results if isinstance(r.get("time"), (int, float))]
    return min(times) if times else None


Run = Callable[[int, Path], float | None]


def replay(runs: dict[str, Run], seeds: int) -> dict[str, list[float | None]]:
    """Each run's best time per seed."""
    bests: dict[str, list[float | None]] = {name: [] for name in runs}
    with tempfile.TemporaryDirectory(prefix="ctune-quality-") as tmp:
        for seed in range(seeds):
            for name, run in runs.items():
                bests[name].append(run(seed, Path(tmp)))
    return bests


def evaluate(truth: BinaryTruth, base: KernelSpec, args: argparse.Namespace) -> dict[str, Any]:
    joint, params = truth.restrict(base), truth.restrict(base, flags=False)
    optimum = truth.optimum()

    def budget_at(fraction: float) -> int:
        return max(2, math.ceil(fraction * truth.distinct_binaries()))

    def runs_at(budget: int, names: list[str]) -> dict[str, Run]:
        def ours(space: KernelSpec, strategy: str) -> Run:
            return lambda s, f: ctune_run(truth, space, strategy, budget, s, f)

        runs = {"default": ours(joint, "auto")}
        for name in names:
            runs[name] = ours(params, "auto") if name == "params-only" else ours(joint, name)
        if args.kernel_tuner:
            runs["kernel_tuner_ga"] = lambda s, f: kernel_tuner_run(truth, joint, budget, s, f)
        return runs

    budget = budget_at(args.fraction)
    bests = replay(runs_at(budget, ["params-only", *args.strategies]), args.seeds)
    scores = {name: [optimum / b if b else 0.0 for b in got] for name, got in bests.items()}
    # the same comparison at smaller budgets: where every strategy finds the optimum at the
    # headline budget (a tie), the smaller ones still tell a good search from a lucky one
    curve = []
    for fraction in args.curve:
        at = replay(runs_at(budget_at(fraction), args.curve_strategies), args.seeds)
        curve.append(
            {
                "budget_fraction": fraction,
                "budget": budget_at(fraction),
                "median_of_optimum": {
                    name: statistics.median(optimum / b if b else 0.0 for b in runs)
                    for name, runs in at.items()
                },
            }
        )
    pairs = list(zip(bests["default"], bests["params-only"], strict=True))
    wins = sum(1 for j, p in pairs if j is not None and (p is None or j <= p * (1 + 1e-12)))
    # where a flag helps, the joint search should find it: strictly better than params-only
    strict = sum(1 for j, p in pairs if j is not None and (p is None or j < p * (1 - 1e-12)))
    out: dict[str, Any] = {}
    for name, got in scores.items():
        out[name] = {
            "budget_fraction": args.fraction,
            "budget": budget,
            "median_of_optimum": statistics.median(got),
            # where medians tie at the optimum, these tell the strategies apart
            "mean_of_optimum": statistics.fmean(got),
            "worst_of_optimum": min(got),
            "seeds_at_optimum": sum(1 for g in got if g >= 1.0),
            "seeds": got,
        }
    out["default"]["joint_vs_params_only"] = {
        "at_least_as_good": wins,
        "strictly_better": strict,
        "seeds": args.seeds,
    }

    def beats_on_curve(other: str) -> bool:
        """At least as good at every budget of the curve, better at one."""
        pairs = [
            (p["median_of_optimum"]["default"], p["median_of_optimum"][other])
            for p in curve
            if other in p["median_of_optimum"]
        ]
        return bool(pairs) and all(d >= o for d, o in pairs) and any(d > o for d, o in pairs)

    return {
        "kernel": truth.kernel,
        "problem": truth.problem,
        "synthetic": truth.synthetic,
        "candidates": len(truth.candidates),
        "distinct_binaries": truth.distinct_binaries(),
        "optimum_ms": optimum,
        "params_only_optimum_ms": truth.optimum(truth.structural_keys(base)),
        "model_seed": truth.meta.get("seed") if truth.synthetic else None,
        "strategies": out,
        "budget_curve": curve,
        "meets_targets": {
            "median_at_least_0.98": out["default"]["median_of_optimum"] >= TARGET,
            "joint_vs_params_only_8_of_10": wins >= math.ceil(0.8 * args.seeds),
            "beats_random": out["default"]["median_of_optimum"]
            > out.get("random", {"median_of_optimum": -1})["median_of_optimum"],
            "beats_kernel_tuner_ga": out["default"]["median_of_optimum"]
            > out.get("kernel_tuner_ga", {"median_of_optimum": -1})["median_of_optimum"],
            # a tie at the optimum (both medians 1.0) is no win: then the mean says more
            "beats_kernel_tuner_ga_on_mean": out["default"]["mean_of_optimum"]
            > out.get("kernel_tuner_ga", {"mean_of_optimum": -1})["mean_of_optimum"],
            "beats_random_on_curve": beats_on_curve("random"),
            "beats_kernel_tuner_ga_on_curve": beats_on_curve("kernel_tuner_ga"),
        },
    }


def truths(args: argparse.Namespace) -> list[tuple[BinaryTruth, KernelSpec]]:
    """(ground truth, base spec) pairs: the synthetic ones, the files named, or every
    ``--preset`` recorded so far (one not recorded yet is a note on stdout)."""
    if args.synthetic:
        spec = load_spec(kernel_file("tiled_matmul"))
        return [
            (synthetic_binary_truth(spec, spec.problem(), SYNTHETIC_SUBSPACE, seed=seed), spec)
            for seed in args.model_seed
        ]
    try:
        if args.ground_truth:
            return given_truths(args.ground_truth, args.kernel)
        out = recorded_truths(args.preset, print)
    except PresetUnavailable as exc:
        raise SystemExit(f"error: {exc}") from None
    if not out:
        raise SystemExit(
            "no ground truth of the presets is recorded; record one (bench/ground_truth.py) "
            "or pass --synthetic"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    add_replay_presets(parser)
    parser.add_argument(
        "--ground-truth", action="append", default=None, help="a file instead of the presets"
    )
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument(
        "--model-seed",
        type=int,
        nargs="+",
        default=[0],
        help="synthetic landscape seeds (one ground truth each; 5, 10 and 11 have a flag gain "
        "at the optimum, 0 has none)",
    )
    parser.add_argument(
        "--kernel", default=None, help="the kernel of a --ground-truth file of no preset"
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--fraction", type=float, default=0.10)
    parser.add_argument(
        "--curve",
        type=float,
        nargs="*",
        default=[0.02, 0.03, 0.05],
        help="smaller budget fractions at which the default, --curve-strategies and Kernel "
        "Tuner's GA run too",
    )
    parser.add_argument(
        "--strategies",
        nargs="*",
        default=["ga", "staged", "staged:structure=ga", "parzen", "random", "tpe"],
    )
    parser.add_argument(
        "--curve-strategies",
        nargs="*",
        default=["random", "staged:structure=ga"],
        help="what runs beside the default along the curve (staged:structure=ga: the default "
        "before its structure search was the Parzen model)",
    )
    parser.add_argument("--no-kernel-tuner", dest="kernel_tuner", action="store_false")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    import importlib.util

    if importlib.util.find_spec("optuna") is None and "tpe" in args.strategies:
        args.strategies.remove("tpe")
    if args.kernel_tuner and importlib.util.find_spec("kernel_tuner") is None:
        print("kernel_tuner is not installed (pip install kernel_tuner): left out")
        args.kernel_tuner = False
    from ctune import __version__

    report = {
        "benchmark": "search_quality",
        "ground_truths": [evaluate(t, base, args) for t, base in truths(args)],
        "seeds": args.seeds,
        "fraction": args.fraction,
        "ctune_version": __version__,
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    for gt in report["ground_truths"]:
        flag = " (SYNTHETIC)" if gt["synthetic"] else ""
        print(
            f"{gt['kernel']}/{gt['problem']}{flag}: {gt['candidates']} candidates, "
            f"{gt['distinct_binaries']} binaries"
        )
        for name, row in gt["strategies"].items():
            extra = ""
            if "joint_vs_params_only" in row:
                j = row["joint_vs_params_only"]
                extra = (
                    f"; joint >= params-only in {j['at_least_as_good']}/{j['seeds']}, "
                    f"better in {j['strictly_better']}"
                )
            median = row["median_of_optimum"]
            print(f"  {name:16s} median {median:.4f} at budget {row['budget']}{extra}")
        for point in gt["budget_curve"]:
            medians = ", ".join(f"{n} {m:.4f}" for n, m in point["median_of_optimum"].items())
            print(f"  at {point['budget_fraction']:.0%} (budget {point['budget']}): {medians}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
