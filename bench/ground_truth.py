"""Record exhaustive ground truths over DISTINCT binaries (GPU machine), in stages.

Every candidate of a preset subspace is compiled; candidates are grouped by their
binary identity (``ctune.search.dedup.binary_identity``: SASS digest, launch
geometry, runtime arguments); each distinct binary is measured once in each of
several fresh worker processes; its value is the median of its process medians,
with their spread. The result, ``tests/data/ground_truth/<preset>-<problem>.json.gz``
(``ctune-ground-truth/2``, ``ctune/testing/binary_truth.py``), is what
``bench/search_quality.py`` and ``bench/cost_model.py`` replay.

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
  structure its own binary on an H100 map);
- ``cutlass_gemm`` (sq4096), ``cutlass_gemm_up`` (llm8b-up-t2048), ``cutlass_gemm_qkv``
  (llm8b-qkv-t2048) and ``cutlass_gemm_down`` (llm8b-down-t2048): the CUTLASS GEMM, 24
  builds (40-80 s each) x 9 runtime settings = 216 candidates per shape, the builds
  shared between the shapes. The maps are committed (made on the build machine with the
  GPU machine's nvcc 13.0.88, 91 of sq4096's on an H200), so a GPU call only measures; it
  compiles the 24 builds again, or finds them in a carried build archive
  (``.device/carry``: 12 MB, ~10 s to unpack).

Kernels from public projects, tuned as written (``bench/external/``; their sources are
fetched into the git-ignored ``bench/external/src/`` and must be there, or carried to the GPU
machine), each with its spec's own genes, the flags limited to those that change the SASS:

- ``pb_gesummv``, ``pb_atax`` (PolyBench/GPU, 1-D blocks): 72 candidates, 54 binaries each;
- ``pb_2mm`` (PolyBench/GPU, 2-D blocks within 1,024 threads): 252 candidates, 189 binaries;
- ``rd_hotspot`` (Rodinia, the block edge a macro): 180 compiles, 99 binaries.

The map stage needs no GPU: their maps were made on a CPU machine with the GPU machine's
nvcc and are committed (``*.map.jsonl`` is not ignored), so a GPU call only measures.

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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from external_kernels import MANIFEST, load_manifest, missing_or_changed  # noqa: E402

PARTIAL = ROOT / "bench" / "results" / "ground_truth"
OUT = ROOT / "tests" / "data" / "ground_truth"
EXTERNAL = ROOT / "bench" / "external"
SOURCES = EXTERNAL / "src"  # where bench/external_kernels.py fetches them (git-ignored)
CUTLASS_SUBSPACE: dict[str, list[Any]] = {
    "TILE_M": [128, 256],
    "TILE_N": [128, 256],  # 256 x 256 is ruled out: 256 accumulators per thread
    "TILE_K": [64],
    "CLUSTER_M": [1, 2],
    "CLUSTER_N": [1],
    "SCHEDULE": [0],
    "STAGES": [0, 3],
    "EPILOGUE": [0],
    "SWAP_AB": [0],
    "TILE_SCHED": [0, 1],
    "GEMV": [0],
    "SPLITS": [1],
    "RASTER": [0, 1, 2],
    "SWIZZLE": [1, 4, 8],
}
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
    # the CUTLASS GEMM (kernels/gemm.cu) on two shapes of one subspace: a problem set the
    # cost model's replay warms from one shape to the other. 24 builds (the tiles and
    # schedules its H200 searches led with), each with 9 runtime-gene settings
    "cutlass_gemm": {
        "kernel": "kernels/gemm.cu",
        "problem": "sq4096",
        "subspace": CUTLASS_SUBSPACE,
    },
    "cutlass_gemm_up": {
        "kernel": "kernels/gemm.cu",
        "problem": "llm8b-up-t2048",
        "subspace": CUTLASS_SUBSPACE,
    },
    "cutlass_gemm_qkv": {
        "kernel": "kernels/gemm.cu",
        "problem": "llm8b-qkv-t2048",
        "subspace": CUTLASS_SUBSPACE,
    },
    "cutlass_gemm_down": {
        "kernel": "kernels/gemm.cu",
        "problem": "llm8b-down-t2048",
        "subspace": CUTLASS_SUBSPACE,
    },
    # kernels from public projects, tuned as written (bench/external/: their sources are
    # fetched, not committed); each subspace holds the spec's default and its tuned winner
    "pb_gesummv": {
        "kernel": "bench/external/gesummv.yaml",
        "problem": "standard",
        "subspace": {
            "BLOCK_X": [32, 64, 128, 256, 512, 1024],
            "ptxas_opt": [3, 2, 1, 0],
            "maxrregcount": [0],  # 24-31 registers: every cap the gene offers is a no-op
            "dlcm": ["default", "cg", "ca"],
        },
    },
    "pb_atax": {
        "kernel": "bench/external/atax.yaml",
        "problem": "standard",
        "subspace": {
            "BLOCK_X": [32, 64, 128, 256, 512, 1024],
            "ptxas_opt": [3, 2, 1, 0],
            "maxrregcount": [0],  # 24-31 registers: every cap the gene offers is a no-op
            "dlcm": ["default", "cg", "ca"],
        },
    },
    "pb_2mm": {
        "kernel": "bench/external/2mm.yaml",
        "problem": "standard",
        "subspace": {
            "BLOCK_X": [32, 64, 128, 256, 512, 1024],
            "BLOCK_Y": [1, 2, 4, 8, 16, 32],
            "ptxas_opt": [3, 2, 1, 0],
            "maxrregcount": [0],  # 22-31 registers: every cap the gene offers is a no-op
            "dlcm": ["default", "cg", "ca"],
        },
    },
    "rd_hotspot": {
        "kernel": "bench/external/hotspot.yaml",
        "problem": "g4096-p2",
        "subspace": {
            "RD_WG_SIZE_0_0": [8, 16, 32],
            "ptxas_opt": [3, 2, 1, 0],
            "maxrregcount": [0, 32, 40, 48, 64],  # 32-42 registers: a higher cap is a no-op
            "dlcm": ["default", "cg", "ca"],
        },
    },
}


class PresetUnavailable(Exception):
    """A preset this checkout cannot load: one line that says what to do."""


def kernel_file(preset: str) -> Path:
    return ROOT / PRESETS[preset]["kernel"]


def truth_file(preset: str) -> Path:
    """Where ``finish`` writes the preset's ground truth (and the replays look for it)."""
    return OUT / f"{preset}-{PRESETS[preset]['problem']}.json.gz"


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def unavailable(preset: str) -> str | None:
    """Why the preset's kernel cannot be loaded here, or None: an external kernel's source
    (git-ignored, fetched by ``bench/external_kernels.py``) absent or not the manifest's."""
    kernel = kernel_file(preset)
    if not kernel.is_relative_to(EXTERNAL):
        return None
    table = json.loads(MANIFEST.read_text())["kernels"]
    local = next((k["file"] for k in table if k["spec"] == kernel.name), None)
    if local is None:
        return f"{preset}: {kernel.name} is not in {MANIFEST.relative_to(ROOT)}"
    bad = missing_or_changed([f for f in load_manifest() if f.local == local], SOURCES)
    if not bad:
        return None
    return (
        f"{preset}: {_shown(SOURCES)}/{bad[0]}: run `python bench/external_kernels.py fetch` "
        "(on a machine without the network, carry bench/external/src)"
    )


def load_preset_spec(preset: str) -> Any:
    """The preset's kernel spec as the replays load it (no toolchain probe)."""
    from ctune.spec import load_spec

    why = unavailable(preset)
    if why is not None:
        raise PresetUnavailable(why)
    return load_spec(kernel_file(preset))


def recorded_truths(presets: Iterable[str], note: Callable[[str], None]) -> list[tuple[Any, Any]]:
    """(ground truth, base spec) of each preset recorded here, in order, for the replays;
    a preset not recorded yet, or whose kernel cannot be loaded, is a ``note`` and left out."""
    from ctune.testing.binary_truth import BinaryTruth

    out = []
    for preset in presets:
        path = truth_file(preset)
        if not path.is_file():
            note(
                f"{preset}: no ground truth yet ({_shown(path)}; "
                "bench/ground_truth.py records it on a GPU): left out"
            )
            continue
        try:
            out.append((BinaryTruth.load(path), load_preset_spec(preset)))
        except PresetUnavailable as exc:
            note(f"{exc}: left out")
    return out


def add_replay_presets(parser: argparse.ArgumentParser) -> None:
    """A replay's ``--preset``: which recorded ground truths it replays (the replays share it)."""
    parser.add_argument(
        "--preset",
        nargs="+",
        choices=list(PRESETS),
        default=list(PRESETS),
        help="bench/ground_truth.py presets whose recorded ground truths to replay (default: "
        "every one recorded; one not recorded yet is left out with a note)",
    )


def given_truths(paths: Iterable[str | Path], kernel: str | Path | None = None) -> list[Any]:
    """(ground truth, base spec) of each file named on a replay's command line: the spec is
    ``kernel``'s, else that of the preset whose file it is (by its name)."""
    from ctune.spec import load_spec
    from ctune.testing.binary_truth import BinaryTruth

    out = []
    for path in map(Path, paths):
        preset = next((p for p in PRESETS if truth_file(p).name == path.name), None)
        if kernel is None and preset is None:
            raise PresetUnavailable(f"{path}: no preset's ground truth; name its kernel (--kernel)")
        try:
            truth = BinaryTruth.load(path)
        except (OSError, ValueError) as exc:
            raise PresetUnavailable(f"{path}: not a ctune-ground-truth/2 file ({exc})") from None
        spec = load_spec(Path(kernel)) if kernel is not None else load_preset_spec(str(preset))
        out.append((truth, spec))
    return out


def _setup(preset: str) -> tuple[Any, Any, Any, Any, Any]:
    from ctune.cli.common import load
    from ctune.config import resolve
    from ctune.testing.binary_truth import BinaryTruth

    why = unavailable(preset)
    if why is not None:
        raise PresetUnavailable(why)
    info = PRESETS[preset]
    cfg = resolve({"l2_policy": "cold", "jobs": os.cpu_count() or 4})
    spec, toolchain = load(kernel_file(preset), cfg)
    problem = spec.problem(info["problem"])
    truth = BinaryTruth(spec.name, problem.name, "p50", False, _subspace(spec, info))
    return cfg, spec, toolchain, problem, truth


def _subspace(spec: Any, info: dict[str, Any]) -> dict[str, list[Any]]:
    """The preset's values; structure genes it does not name keep all of theirs (flag
    genes it does not name stay at their defaults)."""
    out = {g.name: info["subspace"].get(g.name, list(g.values)) for g in spec.genes}
    out.update({k: v for k, v in info["subspace"].items() if k not in out})
    return out


def _valid_space(spec: Any, truth: Any, flags: bool = True) -> Any:
    """The preset's subspace within the target's limits (threads and shared memory per
    block), as a search sees it: a block the device cannot launch is no candidate."""
    from ctune.spec.space.limits import device_limits

    cut = truth.restrict(spec, flags=flags)
    return device_limits(spec.arch).constrain(cut.space, cut.launch)


def _candidates(spec: Any, problem: Any, truth: Any) -> list[Any]:
    return [spec.candidate(v) for v in _valid_space(spec, truth).iter_valid(problem.dims)]


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


def _compiled(
    compiler: Any, spec: Any, todo: list[Any], problem: Any, deadline: float
) -> Iterator[Any]:
    """(candidate, build) in order, ``jobs`` distinct builds compiling ahead; after the
    deadline, only those whose build is done. Candidates that differ only in runtime genes
    share one build and one request: each request holds a compile slot, so asking again for
    a build under way would leave the slot waiting (a CUTLASS map compiled 2 builds at a
    time on 16 slots)."""
    futures: dict[int, Any] = {}
    shared: dict[Any, Any] = {}  # build group -> its one request
    ahead = 0
    for i, cand in enumerate(todo):
        if time.monotonic() > deadline:
            if i in futures and futures[i].done():
                yield cand, futures.pop(i).result()
                continue
            break
        ahead = max(ahead, i)
        while ahead < len(todo):
            busy = {id(f) for j, f in futures.items() if j >= i and not f.done()}
            group = spec.space.build_group(todo[ahead].genes)
            if group not in shared and len(busy) > compiler.jobs:
                break
            if group not in shared:
                shared[group] = compiler.submit(todo[ahead], problem)
            futures[ahead] = shared[group]
            ahead += 1
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
            _compiled(compiler, spec, todo, problem, start + args.max_s), 1
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
        for cand, build in _compiled(compiler, spec, todo, problem, start + args.max_s):
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


def _unmeasured(
    mapped: dict[str, dict[str, Any]], runs: list[dict[str, dict[str, Any]]], processes: int
) -> str | None:
    """What keeps a ground truth from being finished: fewer measure processes than
    ``processes``, or a mapped binary one of them has not measured (a stage cut short)."""
    if len(runs) < processes:
        return f"{len(runs)} of {processes} measure processes recorded"
    binaries = {m["binary"] for m in mapped.values() if m["binary"]}
    short = [i for i, r in enumerate(runs, 1) if not binaries <= set(r)]
    if short:
        return f"processes {short} have not measured every one of {len(binaries)} binaries"
    return None


def stage_finish(args: argparse.Namespace) -> int:
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.identity_probe import current_fingerprint

    cfg, spec, _toolchain, problem, truth = _setup(args.preset)
    mapped = _mapped(args.preset, spec, problem, truth)
    runs = [_read(p) for p in sorted(PARTIAL.glob(f"{args.preset}.p*.jsonl"))]
    unmeasured = _unmeasured(mapped, runs, args.processes)
    if unmeasured:
        print(f"{args.preset}: {unmeasured}; run the measure stage again, nothing written")
        return 75
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
    truth.fingerprint = current_fingerprint(spec, gpu=True, nvcc=nvcc_for(cfg), l2_policy="cold")
    truth.meta = {
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "processes": len(runs),
        "value": "median of the per-process medians of each distinct binary",
        "generator": "bench/ground_truth.py",
    }
    out = truth.save(Path(args.out_dir) / f"{args.preset}-{problem.name}.json.gz")
    print(f"wrote {out}: {len(truth.candidates)} candidates, {len(truth.binaries)} binaries")
    return 0


def stage_sizes(args: argparse.Namespace) -> int:
    from ctune.testing.binary_truth import BinaryTruth

    for name, info in PRESETS.items():
        try:
            spec = load_preset_spec(name)
        except PresetUnavailable as exc:
            print(f"{exc} (skipped)")
            continue
        problem = spec.problem(info["problem"])
        truth = BinaryTruth(spec.name, problem.name, "p50", False, _subspace(spec, info))
        joint = _valid_space(spec, truth).count_valid(problem.dims)[0]
        structures = _valid_space(spec, truth, flags=False).count_valid(problem.dims)[0]
        mapped = _mapped(name, spec, problem, truth)
        binaries = len({m["binary"] for m in mapped.values() if m["binary"]})
        print(
            f"{name}: {structures} structures, {joint} candidates to compile; "
            f"{len(mapped)} mapped -> {binaries} distinct binaries"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("stage", choices=["map", "measure", "finish", "sizes"])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiled_matmul")
    parser.add_argument("--process", type=int, default=1, help="measure: which process (1..)")
    parser.add_argument(
        "--processes", type=int, default=3, help="finish: the measure processes it needs"
    )
    parser.add_argument(
        "--out-dir",
        default=str(OUT),
        help="finish: where the ground truth goes (a preset recorded again on another GPU: "
        "a folder named by its device class, e.g. tests/data/ground_truth/sm90-nvidia-h200)",
    )
    parser.add_argument("--max-s", type=float, default=480.0, help="start nothing new after")
    parser.add_argument("--min-samples", type=int, default=50)
    parser.add_argument("--rep-ms", type=float, default=10.0)
    args = parser.parse_args(argv)
    stages = {"map": stage_map, "measure": stage_measure, "finish": stage_finish}
    try:
        return stages.get(args.stage, stage_sizes)(args)
    except PresetUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
