"""The cost model's skips on recorded ground truths: builds saved, quality kept (replay).

For each ground truth over distinct binaries that ``bench/ground_truth.py``'s presets have
recorded (``tests/data/ground_truth/``, format 2, as ``bench/search_quality.py`` replays
them; a preset not recorded yet is left out with a note) and each seed, ctune's default
strategy runs three times on the replay stand-ins, at a budget of ``--fraction`` of the
distinct binaries (GPU measurements):

- ``off``: no cost model, the measured budget B;
- ``on``: ``--cost-model on`` at the same measured budget B (skipped candidates are never
  built and cost no budget; the compile cap, 4 x B candidates decided, ends a search whose
  model rules out everything the strategy proposes);
- ``off_at_on_builds``: no model, with a budget of the median builds ``on`` made: does
  the model do better than a search that is simply shorter?
- ``on_warm``: ``on`` again, with the journal of an earlier search of the kernel (no
  model, seed + 1000, the same budget) in its cache: the warm start a second search of
  the same kernel gets (same shape and GPU here; the ground truths hold one each);
- ``off_at_warm_builds``: no model, with a budget of the median builds ``on_warm`` made.

A build is a trial with a build that is not a filler (the baseline included). Each run's
score is optimum / best found; ``builds_to_0.99`` is when a run first reached 0.99 of the
optimum (None: never). Writes ``bench/results/cost_model.json`` with the ground truths'
fingerprints and this machine's. Target (issue 50): at least 50% fewer builds at at least
0.99 of the optimum (median over seeds).

    python bench/cost_model.py                 # every recorded preset, 20 seeds
    python bench/cost_model.py --preset pb_2mm rd_hotspot
    python bench/cost_model.py --seeds 2 --fraction 0.05 --ground-truth FILE
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ground_truth import (  # noqa: E402
    PresetUnavailable,
    add_replay_presets,
    given_truths,
    kernel_file,
    recorded_truths,
)
from search_quality import SYNTHETIC_SUBSPACE  # noqa: E402

from ctune.spec import KernelSpec, load_spec  # noqa: E402
from ctune.testing.binary_truth import BinaryTruth  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "cost_model.json"
TARGET_SAVED = 0.5
TARGET_QUALITY = 0.99
CUTLASS = (
    "not replayed: no committed record holds a CUTLASS problem set's per-candidate trials. "
    "bench/results/dispatch*.json keep only the builds each shape's dispatch chose, and no "
    "CUTLASS journal or ground truth is committed; a replay needs the set's search journals "
    "(every trial's genes, value and compile seconds per shape), or an exhaustive "
    "format-2 ground truth of a CUTLASS space on a few shapes (bench/ground_truth.py, GPU)"
)


def run(
    truth: BinaryTruth,
    spec: KernelSpec,
    budget: int,
    seed: int,
    folder: Path,
    model: bool,
    cache: Path | None = None,
) -> dict[str, Any]:
    """One replayed search: its score, builds, skips and when it reached 0.99 (``cache``:
    its cache folder, where earlier journals may be; by default one of its own)."""
    from ctune.objective import parse_objective_spec
    from ctune.search.journal import read
    from ctune.testing.searches import quiet_search
    from ctune.testing.standins import ReplayCompiler, ReplayMeasurer

    replay = truth.to_replay()
    result = quiet_search(
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        cache or folder / f"{'on' if model else 'off'}-{seed}-{budget}",
        strategy="auto",
        budget=budget,
        seed=seed,
        compiler=ReplayCompiler(replay),
        measurer=ReplayMeasurer(replay),
        fingerprint=replay.fingerprint,
        cost_model=model,
    )
    journal, _ = read(result.journal)
    optimum = truth.optimum()
    best, builds, skipped, reached = math.inf, 0, 0, None
    for trial in journal.trials:
        if trial.outcome.value == "skipped":
            skipped += 1
            continue
        if trial.build is not None and trial.candidate.key() not in journal.fillers:
            builds += 1
        if trial.feasible and trial.values is not None:
            best = min(best, trial.values[0])
        if reached is None and optimum / best >= TARGET_QUALITY:
            reached = builds
    return {
        "of_optimum": optimum / best if math.isfinite(best) else 0.0,
        "builds": builds,
        "skipped": skipped,
        "builds_to_0.99": reached,
        "stop_reason": result.stop_reason,
    }


def _arm(runs: list[dict[str, Any]]) -> dict[str, Any]:
    reached = [r["builds_to_0.99"] for r in runs]
    to_target = statistics.median(math.inf if b is None else b for b in reached)
    return {
        "median_builds_to_0.99": to_target if math.isfinite(to_target) else None,
        "median_of_optimum": statistics.median(r["of_optimum"] for r in runs),
        "worst_of_optimum": min(r["of_optimum"] for r in runs),
        "median_builds": statistics.median(r["builds"] for r in runs),
        "seeds_reaching_0.99": sum(1 for b in reached if b is not None),
        "runs": runs,
    }


def evaluate(
    truth: BinaryTruth, base: KernelSpec, seeds: int, fraction: float, log: Any
) -> dict[str, Any]:
    spec = truth.restrict(base)
    budget = max(2, math.ceil(fraction * truth.distinct_binaries()))
    arms: dict[str, list[dict[str, Any]]] = {"off": [], "on": [], "on_warm": []}
    with tempfile.TemporaryDirectory(prefix="ctune-cost-model-") as tmp:
        for seed in range(seeds):
            arms["off"].append(run(truth, spec, budget, seed, Path(tmp), False))
            arms["on"].append(run(truth, spec, budget, seed, Path(tmp), True))
            earlier = Path(tmp) / f"warm-{seed}"
            run(truth, spec, budget, seed + 1000, Path(tmp), False, cache=earlier)
            arms["on_warm"].append(run(truth, spec, budget, seed, Path(tmp), True, cache=earlier))
            log(f"  seed {seed}: " + ", ".join(f"{k} {v[-1]}" for k, v in arms.items()))

        def shorter(arm: str) -> tuple[int, list[dict[str, Any]]]:
            """No model, at the median builds ``arm`` made (the baseline is one of them)."""
            budget = max(2, math.ceil(statistics.median(r["builds"] for r in arms[arm])))
            return budget, [run(truth, spec, budget, s, Path(tmp), False) for s in range(seeds)]

        on_builds, short_on = shorter("on")
        warm_builds, short_warm = shorter("on_warm")
    off, on, warm = _arm(arms["off"]), _arm(arms["on"]), _arm(arms["on_warm"])
    saved = 1 - on["median_builds"] / off["median_builds"]
    warm_saved = 1 - warm["median_builds"] / off["median_builds"]
    return {
        "kernel": truth.kernel,
        "problem": truth.problem,
        "synthetic": truth.synthetic,
        "distinct_binaries": truth.distinct_binaries(),
        "candidates": len(truth.candidates),
        "optimum_ms": truth.optimum(),
        "budget": budget,
        "budget_fraction": fraction,
        "fingerprint": dict(truth.fingerprint),
        "off": off,
        "on": on,
        "on_warm": warm,
        "off_at_on_builds": {"budget": on_builds, **_arm(short_on)},
        "off_at_warm_builds": {"budget": warm_builds, **_arm(short_warm)},
        "builds_saved": saved,
        "builds_saved_warm": warm_saved,
        "meets_target": saved >= TARGET_SAVED and on["median_of_optimum"] >= TARGET_QUALITY,
        "meets_target_warm": warm_saved >= TARGET_SAVED
        and warm["median_of_optimum"] >= TARGET_QUALITY,
        # does the model do better than a search with as many builds and no model?
        "on_beats_a_search_as_short": on["median_of_optimum"] > _arm(short_on)["median_of_optimum"],
        "on_warm_beats_a_search_as_short": warm["median_of_optimum"]
        > _arm(short_warm)["median_of_optimum"],
    }


def synthetic() -> tuple[BinaryTruth, KernelSpec]:
    """SYNTHETIC: the stand-in landscape bench/search_quality.py develops on (tests)."""
    from ctune.testing.binary_truth import synthetic_binary_truth

    spec = load_spec(kernel_file("tiled_matmul"))
    return synthetic_binary_truth(spec, spec.problem(), SYNTHETIC_SUBSPACE, seed=5), spec


def machine() -> dict[str, str]:
    """This machine's fingerprint: the replay uses no GPU."""
    import sklearn

    try:
        nvcc = (
            subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=30)
            .stdout.strip()
            .splitlines()[-1]
        )
    except (OSError, subprocess.SubprocessError, IndexError):
        nvcc = "none"
    return {
        "gpu": "none (a replay of recorded ground truths)",
        "python": platform.python_version(),
        "scikit_learn": sklearn.__version__,
        "machine": platform.machine(),
        "nvcc": nvcc,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    add_replay_presets(parser)
    parser.add_argument(
        "--ground-truth", action="append", default=None, help="a preset's file instead"
    )
    parser.add_argument(
        "--synthetic", action="store_true", help="search_quality.py's synthetic ground truth"
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--fraction", type=float, default=0.10)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    from ctune import __version__
    from ctune.model import DEFAULT_ALPHA, unavailable

    why = unavailable()
    if why is not None:
        raise SystemExit(f"bench/cost_model.py needs the model: {why}")
    try:
        if args.synthetic:
            truths = [synthetic()]
        elif args.ground_truth:
            truths = given_truths(args.ground_truth)
        else:
            truths = recorded_truths(args.preset, print)
    except PresetUnavailable as exc:
        raise SystemExit(f"error: {exc}") from None
    results = []
    for truth, base in truths:
        print(f"{truth.kernel}/{truth.problem}", flush=True)
        results.append(evaluate(truth, base, args.seeds, args.fraction, print))
    report = {
        "benchmark": "cost_model",
        "alpha": DEFAULT_ALPHA,
        "seeds": args.seeds,
        "fraction": args.fraction,
        "target": {"builds_saved": TARGET_SAVED, "median_of_optimum": TARGET_QUALITY},
        "ground_truths": results,
        "cutlass_problem_set": CUTLASS,
        "fingerprint": machine(),
        "ctune_version": __version__,
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    for gt in results:
        print(
            f"{gt['kernel']}/{gt['problem']} at budget {gt['budget']}: off "
            f"{gt['off']['median_of_optimum']:.4f} ({gt['off']['median_builds']} builds), on "
            f"{gt['on']['median_of_optimum']:.4f} ({gt['on']['median_builds']} builds, "
            f"{gt['builds_saved']:.0%} saved), warm {gt['on_warm']['median_of_optimum']:.4f} "
            f"({gt['on_warm']['median_builds']} builds, {gt['builds_saved_warm']:.0%} saved), "
            f"off at {gt['off_at_on_builds']['budget']} "
            f"{gt['off_at_on_builds']['median_of_optimum']:.4f}, off at "
            f"{gt['off_at_warm_builds']['budget']} "
            f"{gt['off_at_warm_builds']['median_of_optimum']:.4f}; target met: "
            f"{gt['meets_target']} (warm {gt['meets_target_warm']})"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
