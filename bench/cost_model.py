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
- ``off_at_warm_builds``: no model, with a budget of the median builds ``on_warm`` made;
- ``on_slots`` and ``on_warm_slots``: ``on`` and ``on_warm`` with ``--slots`` compile slots
  (16, a GPU machine's), where a generation asks for more candidates to fill the slots its
  skips freed. The arms above have one slot, where a skip saves a build's whole time;
- ``on_shape`` and ``on_shape_slots`` (with ``--other-shape``, ground truths of the same
  kernel and subspace on other problems): ``on`` warm from one search of each of those
  shapes (no model, seeds from 2000): what the later shapes of a problem set get;
- ``on_gpu`` and ``on_gpu_slots`` (with ``--other-gpu``, ground truths of the same kernel,
  problem and subspace recorded on other GPUs): ``on`` warm from one search on each of
  them (no model, seeds from 3000): what a first search on a new GPU gets. Each warm-from
  arm has its search as short without the model beside it (``off_at_shape_builds``,
  ``off_at_gpu_builds``).

``--problem-set P1 P2 ...`` replays each preset's ground truth in turn warm from searches
of all the others (the last shape of a problem set of them), into
``bench/results/cost_model_problem_set.json``.

The replay compiles nothing, so each run's **compile wall** is simulated from the ground
truth's recorded compile seconds: each generation's builds go in order to the first free of
the arm's slots, and the next generation starts when the last build ends (measurements are
left out: every arm measures its budget). ``wall_to_0.99`` is the compile wall at the end
of the generation that first reached 0.99 of the optimum. ``off`` is reported at both slot
counts: without the model the slots change when a build ends, not what is built.

A build is a trial with a build that is not a filler (the baseline included). Each run's
score is optimum / best found; ``builds_to_0.99`` is when a run first reached 0.99 of the
optimum (None: never). Writes ``bench/results/cost_model.json`` with the ground truths'
fingerprints and this machine's. Target (issue 50): at least 50% fewer builds at at least
0.99 of the optimum (median over seeds).

    python bench/cost_model.py                 # every recorded preset, 20 seeds
    python bench/cost_model.py --preset pb_2mm rd_hotspot
    python bench/cost_model.py --seeds 2 --fraction 0.05 --ground-truth FILE
    python bench/cost_model.py --slots 16        # the compile slots of the *_slots arms
    python bench/cost_model.py --preset cutlass_gemm \
        --other-shape tests/data/ground_truth/cutlass_gemm_up-llm8b-up-t2048.json.gz
    python bench/cost_model.py --problem-set cutlass_gemm cutlass_gemm_up cutlass_gemm_qkv \
        cutlass_gemm_down
    python bench/cost_model.py --ground-truth tests/data/ground_truth/sm90-nvidia-h200/\
gemm-sq4096.json.gz --other-gpu tests/data/ground_truth/gemm-sq4096.json.gz \
        --out bench/results/cost_model_other_gpu-hand_gemm.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import heapq
import json
import math
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
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
PROBLEM_SET_RESULTS = ROOT / "bench" / "results" / "cost_model_problem_set.json"
TARGET_SAVED = 0.5
TARGET_QUALITY = 0.99
CUTLASS = (
    "a problem set of the CUTLASS GEMM (4 shapes, 216 candidates each): "
    f"{PROBLEM_SET_RESULTS.relative_to(ROOT)}, from --problem-set"
)


def run(
    truth: BinaryTruth,
    spec: KernelSpec,
    budget: int,
    seed: int,
    folder: Path,
    model: bool,
    cache: Path | None = None,
    slots: int = 1,
    wall_slots: tuple[int, ...] = (),
) -> dict[str, Any]:
    """One replayed search: its score, builds, skips, when it reached 0.99 and its
    simulated compile wall with ``slots`` compile slots and with each of ``wall_slots``
    (``cache``: its cache folder, where earlier journals may be; by default one of its
    own)."""
    from ctune.objective import parse_objective_spec
    from ctune.search.journal import read
    from ctune.testing.searches import quiet_search
    from ctune.testing.standins import ReplayCompiler, ReplayMeasurer

    replay = truth.to_replay()
    result = quiet_search(
        spec,
        parse_objective_spec(["p50"], [], spec.metrics),
        cache or folder / f"{'on' if model else 'off'}-{seed}-{budget}-{slots}",
        strategy="auto",
        budget=budget,
        seed=seed,
        compiler=ReplayCompiler(replay),
        measurer=ReplayMeasurer(replay),
        fingerprint=replay.fingerprint,
        cost_model=model,
        jobs=slots,
        problem=truth.problem,
    )
    journal, _ = read(result.journal)
    optimum = truth.optimum()
    best, builds, skipped, reached = math.inf, 0, 0, None
    compiles: dict[int, list[float]] = {}  # generation -> its builds' compile seconds
    reached_in: int | None = None  # the generation that first reached 0.99
    for trial in journal.trials:
        if trial.outcome.value == "skipped":
            skipped += 1
            continue
        build = trial.build
        if build is not None and trial.candidate.key() not in journal.fillers:
            builds += 1
            if not build.cache_hit:
                compiles.setdefault(trial.generation, []).append(build.compile_s)
        if trial.feasible and trial.values is not None:
            best = min(best, trial.values[0])
        if reached is None and optimum / best >= TARGET_QUALITY:
            reached, reached_in = builds, trial.generation
    walls = {n: compile_walls(compiles, n) for n in dict.fromkeys((slots, *wall_slots))}
    return {
        "of_optimum": optimum / best if math.isfinite(best) else 0.0,
        "builds": builds,
        "skipped": skipped,
        "builds_to_0.99": reached,
        "stop_reason": result.stop_reason,
        "generations": len(journal.states),
        **{f"compile_wall_s@{n}": round(sum(per.values()), 3) for n, per in walls.items()},
        **{
            f"wall_to_0.99_s@{n}": None
            if reached_in is None
            else round(sum(w for g, w in per.items() if g <= reached_in), 3)
            for n, per in walls.items()
        },
    }


def compile_walls(compiles: dict[int, list[float]], slots: int) -> dict[int, float]:
    """Each generation's compile wall with ``slots`` slots: its builds, in order, each on
    the first slot to come free (the next generation waits for the last one)."""
    return {generation: turns_wall([seconds], slots, 1) for generation, seconds in compiles.items()}


def turns_wall(generations: Sequence[Sequence[float]], slots: int, engines: int) -> float:
    """The compile wall of ``generations`` (each its builds' seconds, in order) taken in turn
    by ``engines`` engines: a generation's builds are submitted once the same engine's
    previous one ends (an engine proposes only after all its files are told), every build
    on the first slot to come free, and generations end in order."""
    free = [0.0] * slots
    ends: list[float] = []
    for k, seconds in enumerate(generations):
        submitted = ends[k - engines] if k >= engines else 0.0
        last = submitted
        for s in seconds:
            start = max(heapq.heappop(free), submitted)
            heapq.heappush(free, start + s)
            last = max(last, start + s)
        ends.append(max(last, ends[-1]) if ends else last)
    return ends[-1] if ends else 0.0


def _median_or_none(values: list[float | None]) -> float | None:
    """The median, a run that never got there counting as infinite (None: most never)."""
    got = statistics.median(math.inf if v is None else v for v in values)
    return got if math.isfinite(got) else None


def _arm(runs: list[dict[str, Any]]) -> dict[str, Any]:
    reached = [r["builds_to_0.99"] for r in runs]
    walls = {
        key: statistics.median(r[key] for r in runs)
        for key in runs[0]
        if key.startswith("compile_wall_s@")
    }
    to_target = {
        key: _median_or_none([r[key] for r in runs])
        for key in runs[0]
        if key.startswith("wall_to_0.99_s@")
    }
    return {
        **{f"median_{k}": v for k, v in {**walls, **to_target}.items()},
        "median_builds_to_0.99": _median_or_none(list(reached)),
        "median_of_optimum": statistics.median(r["of_optimum"] for r in runs),
        "worst_of_optimum": min(r["of_optimum"] for r in runs),
        "median_builds": statistics.median(r["builds"] for r in runs),
        "seeds_reaching_0.99": sum(1 for b in reached if b is not None),
        "runs": runs,
    }


#: where a warm-start arm's earlier searches come from: its name, and the seed offset of
#: those searches (no model) from the arm's own
WARM_SOURCES = {"shape": 2000, "gpu": 3000}


def evaluate(
    truth: BinaryTruth,
    base: KernelSpec,
    seeds: int,
    fraction: float,
    log: Any,
    slots: int = 16,
    other_shapes: list[BinaryTruth] | None = None,
    other_gpus: list[BinaryTruth] | None = None,
) -> dict[str, Any]:
    """The arms of the module's docstring on ``truth``; with ``other_shapes`` (the same
    kernel and subspace on other problems), also ``on_shape`` and ``on_shape_slots``: warm
    from a search of each of them, what a problem set's later shapes get; with
    ``other_gpus`` (the same kernel, problem and subspace recorded on other GPUs),
    ``on_gpu`` and ``on_gpu_slots``: what a first search on a new GPU gets."""
    spec = truth.restrict(base)
    budget = max(2, math.ceil(fraction * truth.distinct_binaries()))
    others = {k: v for k, v in (("shape", other_shapes), ("gpu", other_gpus)) if v}
    arms: dict[str, list[dict[str, Any]]] = {
        "off": [],
        "on": [],
        "on_warm": [],
        "on_slots": [],
        "on_warm_slots": [],
        **{f"on_{kind}{n}": [] for kind in others for n in ("", "_slots")},
    }
    with tempfile.TemporaryDirectory(prefix="ctune-cost-model-") as tmp:
        folder = Path(tmp)
        for seed in range(seeds):
            for kind, truths in others.items():  # a search of each other truth, no model, first
                earlier = folder / f"{kind}-{seed}"
                for i, other in enumerate(truths):
                    offset = WARM_SOURCES[kind] + 100 * i
                    run(other, spec, budget, seed + offset, folder, False, cache=earlier)
                for arm, n in ((f"on_{kind}", 1), (f"on_{kind}_slots", slots)):
                    copy = folder / f"{kind}-{seed}-{n}"
                    shutil.copytree(earlier, copy)
                    arms[arm].append(run(truth, spec, budget, seed, folder, True, copy, slots=n))
            arms["off"].append(run(truth, spec, budget, seed, folder, False, wall_slots=(slots,)))
            arms["on"].append(run(truth, spec, budget, seed, folder, True))
            arms["on_slots"].append(run(truth, spec, budget, seed, folder, True, slots=slots))
            earlier = folder / f"warm-{seed}"
            run(truth, spec, budget, seed + 1000, folder, False, cache=earlier)
            for arm, n in (("on_warm", 1), ("on_warm_slots", slots)):
                copy = folder / f"warm-{seed}-{n}"
                shutil.copytree(earlier, copy)  # each arm its own copy: it writes a journal
                arms[arm].append(run(truth, spec, budget, seed, folder, True, copy, slots=n))
            log(f"  seed {seed}: " + ", ".join(f"{k} {v[-1]}" for k, v in arms.items()))

        def shorter(arm: str) -> tuple[int, list[dict[str, Any]]]:
            """No model, at the median builds ``arm`` made (the baseline is one of them)."""
            budget = max(2, math.ceil(statistics.median(r["builds"] for r in arms[arm])))
            return budget, [run(truth, spec, budget, s, Path(tmp), False) for s in range(seeds)]

        on_builds, short_on = shorter("on")
        warm_builds, short_warm = shorter("on_warm")
        short_other = {kind: shorter(f"on_{kind}") for kind in others}
    off, on, warm = _arm(arms["off"]), _arm(arms["on"]), _arm(arms["on_warm"])
    on_slots, warm_slots = _arm(arms["on_slots"]), _arm(arms["on_warm_slots"])
    saved = 1 - on["median_builds"] / off["median_builds"]
    warm_saved = 1 - warm["median_builds"] / off["median_builds"]

    def wall_saved(arm: dict[str, Any], n: int) -> float | None:
        """1 - the arm's median compile wall to 0.99 over off's, with ``n`` slots."""
        return _saved(arm[f"median_wall_to_0.99_s@{n}"], off[f"median_wall_to_0.99_s@{n}"])

    named = {
        "shape": ("other_shapes", [o.problem for o in other_shapes or []]),
        "gpu": ("other_gpus", [gpu_name(o) for o in other_gpus or []]),
    }
    return {
        "kernel": truth.kernel,
        "problem": truth.problem,
        "gpu": gpu_name(truth),
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
        "on_slots": on_slots,
        "on_warm_slots": warm_slots,
        **{
            k: v
            for kind in others
            for k, v in _warm_arms(arms, off, slots, kind, *named[kind], short_other[kind]).items()
        },
        "slots": slots,
        "wall_to_0.99_saved": {
            "on@1": wall_saved(on, 1),
            "on_warm@1": wall_saved(warm, 1),
            f"on@{slots}": wall_saved(on_slots, slots),
            f"on_warm@{slots}": wall_saved(warm_slots, slots),
        },
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


def gpu_name(truth: BinaryTruth) -> str:
    """The GPU a ground truth was recorded on ("none": synthetic, or not fingerprinted)."""
    return str(truth.fingerprint.get("gpu_name") or "none")


def _saved(mine: float | None, theirs: float | None) -> float | None:
    """1 - mine / theirs (None: either is missing, or theirs is 0)."""
    return None if mine is None or not theirs else 1 - mine / theirs


def _warm_arms(
    arms: dict[str, list[dict[str, Any]]],
    off: dict[str, Any],
    slots: int,
    kind: str,
    key: str,
    sources: list[str],
    short: tuple[int, list[dict[str, Any]]],
) -> dict[str, Any]:
    """The arms warm from searches of other ground truths (``kind``: other shapes or other
    GPUs, named under ``key``), against ``off``: builds, compile wall (what a CUTLASS
    search waits for) at one slot and at ``slots``, and a search as short without the model."""
    one, many = _arm(arms[f"on_{kind}"]), _arm(arms[f"on_{kind}_slots"])
    walls = {1: (one, "compile_wall_s@1"), slots: (many, f"compile_wall_s@{slots}")}
    budget, runs = short
    return {
        key: sources,
        f"on_{kind}": one,
        f"on_{kind}_slots": many,
        f"builds_saved_{kind}": 1 - one["median_builds"] / off["median_builds"],
        f"compile_wall_saved_{kind}": {
            f"@{n}": _saved(arm[f"median_{k}"], off[f"median_{k}"]) for n, (arm, k) in walls.items()
        },
        f"off_at_{kind}_builds": {"budget": budget, **_arm(runs)},
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
    parser.add_argument("--slots", type=int, default=16, help="compile slots of *_slots arms")
    parser.add_argument(
        "--other-shape",
        nargs="+",
        default=None,
        help="ground truths of the same kernel and subspace on other problems: adds the "
        "arms warm from a search of each (with one --ground-truth or --preset)",
    )
    parser.add_argument(
        "--other-gpu",
        nargs="+",
        default=None,
        help="ground truths of the same kernel, problem and subspace recorded on other GPUs: "
        "adds the arms warm from a search on each (with one --ground-truth or --preset)",
    )
    parser.add_argument(
        "--problem-set",
        nargs="+",
        default=None,
        metavar="PRESET",
        help="presets of one kernel and subspace on several problems: each replayed warm "
        f"from searches of the others (default --out {PROBLEM_SET_RESULTS.relative_to(ROOT)})",
    )
    parser.add_argument("--out", default=None)
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
            truths = recorded_truths(args.problem_set or args.preset, print)
    except PresetUnavailable as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.problem_set is not None:
        if len(truths) < 2 or args.other_shape or args.other_gpu:
            raise SystemExit(
                f"error: --problem-set needs 2 or more recorded presets and no --other-shape "
                f"or --other-gpu, got {len(truths)} recorded"
            )
        others = [[o for o, _ in truths if o is not t] for t, _ in truths]
        gpus: list[list[BinaryTruth]] = [[] for _ in truths]
    else:
        given = [BinaryTruth.load(Path(f)) for f in args.other_shape or []]
        on_gpus = [BinaryTruth.load(Path(f)) for f in args.other_gpu or []]
        if (given or on_gpus) and len(truths) != 1:
            raise SystemExit(
                f"error: --other-shape and --other-gpu go with one ground truth, got {len(truths)}"
            )
        others, gpus = [given] * len(truths), [on_gpus] * len(truths)
    for (truth, _), shapes, other_gpus in zip(truths, others, gpus, strict=True):
        for other in shapes:
            if other.kernel != truth.kernel or other.problem == truth.problem:
                raise SystemExit(
                    f"error: {other.kernel}/{other.problem}: not {truth.kernel} on another "
                    f"problem than {truth.problem}"
                )
        for other in other_gpus:
            if (other.kernel, other.problem) != (truth.kernel, truth.problem) or gpu_name(
                other
            ) == gpu_name(truth):
                raise SystemExit(
                    f"error: {other.kernel}/{other.problem} on {gpu_name(other)}: not "
                    f"{truth.kernel}/{truth.problem} on another GPU than {gpu_name(truth)}"
                )
    results = []
    for (truth, base), shapes, other_gpus in zip(truths, others, gpus, strict=True):
        print(f"{truth.kernel}/{truth.problem} on {gpu_name(truth)}", flush=True)
        results.append(
            evaluate(truth, base, args.seeds, args.fraction, print, args.slots, shapes, other_gpus)
        )
    report = {
        "benchmark": "cost_model",
        "alpha": DEFAULT_ALPHA,
        "seeds": args.seeds,
        "fraction": args.fraction,
        "target": {"builds_saved": TARGET_SAVED, "median_of_optimum": TARGET_QUALITY},
        "ground_truths": results,
        **(
            {"problem_set": args.problem_set}
            if args.problem_set
            else {"cutlass_problem_set": CUTLASS}
        ),
        "fingerprint": machine(),
        "ctune_version": __version__,
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    out = Path(args.out or (PROBLEM_SET_RESULTS if args.problem_set else RESULTS))
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
        if "on_gpu" in gt:
            gpu = gt["on_gpu"]
            print(
                f"  warm from {', '.join(gt['other_gpus'])}: {gpu['median_of_optimum']:.4f}"
                f" ({gpu['median_builds']} builds, {gt['builds_saved_gpu']:.0%} saved), "
                f"off at {gt['off_at_gpu_builds']['budget']} "
                f"{gt['off_at_gpu_builds']['median_of_optimum']:.4f}"
            )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
