"""Hot kernels, tuned and compared with cuBLAS and PyTorch SDPA on one GPU in one run.

For each kernel (hand-written GEMM, CUTLASS GEMM, hand-written and CUTLASS flash
attention) and each
problem of the chosen set, this:

1. runs ``ctune search --objective p99`` (GA, small budget); the search itself
   re-measures the default build and the tuned winner in 3 fresh worker
   processes, interleaved, so both numbers come from the same confirmation;
2. times the vendor library on the same problem in this process with the same
   method (``EventTimer``: warm-up until stable, cold L2 flushed before every
   sample, an event pair per sample, samples enqueued behind a spin kernel):
   cuBLAS through CuPy (``cupy.matmul``) for GEMM, and for bf16 (which CuPy's
   matmul does not take) cuBLAS through ``torch.matmul``;
   ``torch.nn.functional.scaled_dot_product_attention`` for attention (with
   ``enable_gqa`` where K and V have fewer heads than Q);
3. writes bench/results/kernels_vs_vendor-<gpu_id>.json (with the fingerprint), a
   markdown table and a PNG plot, and each search's artifact under
   bench/results/artifacts/ for ``ctune registry import``.

Ratios, not absolute times, are the targets (issue "Hot kernels"): tuned
CUTLASS >= 1.0x cuBLAS (geomean over the GEMM problems) and >= 1.05x on a
quarter of them; hand-written GEMM >= 70% of cuBLAS at 4096^3; attention >=
0.8x SDPA; tuned vs default >= 1.15x p99 geomean across all; tuned CUTLASS
attention >= 1.0x SDPA (geomean over its prefill problems) and >= 1.10x its
default build. Missed targets are reported with the shortfall, never asserted.

    python bench/kernels_vs_vendor.py --out bench/results [--quick]
    python bench/kernels_vs_vendor.py --case gemm:llm8b-o-t16 --merge ...
    python bench/kernels_vs_vendor.py --problem-set llm8b-fp16 --set-dir .device/sets/llm8b-fp16

``--problem-set`` tunes nothing: it takes the rows of a finished ``ctune search --problem-set``
(each shape's result file, with its default and winner confirmed in the same fresh processes),
times cuBLAS through ``torch.matmul`` for every shape (fp16 and bf16 alike), adds the dispatch
build's loss per shape, and writes bench/results/dispatch-<gpu>.json from the set's table.

``--merge`` keeps the rows of an earlier report for cases not run again (each
row's vendor timing always comes from the run that tuned it). The vendor is timed once
here; ``vendor_rounds.py`` tells a row's gap from process-to-process noise (alternating
fresh processes, a confidence interval).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctune.spec import KernelSpec

ROOT = Path(__file__).resolve().parents[1]

# (kernel, problems): the default plan; --quick takes the first problem of each
PLAN: dict[str, list[str]] = {
    "kernels/gemm.cu": ["sq4096", "llm8b-up-t2048", "llm8b-down-t128", "llm8b-o-t16"],
    "kernels/hand_gemm.cu": ["sq4096", "llm8b-down-t128", "llm8b-up-t2048", "llm8b-o-t16"],
    "kernels/hand_attention.cu": ["prefill-s4096-d128-causal", "prefill-s2048-d128"],
    # the hand kernel's two problems first (same names, same dims: side by side), then
    # more of the prefill set, grouped-query prefill and decode
    "kernels/attention.cu": [
        "prefill-s4096-d128-causal",
        "prefill-s2048-d128",
        "prefill-s8192-d128",
        "prefill-s1024-d64-causal",
        "gqa-s4096-d128-causal",
        "decode-k8192-d128",
    ],
}
# (kernel, default problem, label): the README's main job and the attention job beside it
MAIN_JOBS = [
    ("gemm", "sq4096", "the main job (CUTLASS GEMM at 4096^3)"),
    ("attention", "prefill-s4096-d128-causal", "the attention job (s4096 D 128 causal)"),
]
BUDGET = {
    "kernels/hand_gemm.cu": 28,
    "kernels/gemm.cu": 20,
    "kernels/hand_attention.cu": 20,
    "kernels/attention.cu": 24,
}
ATTENTION = ("hand_attention", "attention")  # kernels timed against SDPA


@dataclass
class Row:
    kernel: str
    problem: str
    default_p50_ms: float | None
    default_p99_ms: float | None
    tuned_p50_ms: float | None
    tuned_p99_ms: float | None
    vendor: str
    vendor_p50_ms: float | None
    vendor_p99_ms: float | None
    tuned_key: str | None
    changed: dict[str, Any]
    evaluations: int
    failures: dict[str, int]
    significance: str
    note: str = ""
    search_wall_s: float | None = None
    gpu_busy_fraction: float | None = None  # the search's measure + confirm time / wall
    fillers: int = 0  # runtime-gene variants measured while builds compiled
    run_started_utc: str = ""  # the run this row's tuning and vendor timing came from
    dispatch_build: str = ""  # --problem-set: the build the dispatch table gives this shape
    dispatch_loss: float | None = None  # ... and how much slower than the shape's best build

    @property
    def tuned_vs_default_p99(self) -> float | None:
        if self.default_p99_ms and self.tuned_p99_ms:
            return self.default_p99_ms / self.tuned_p99_ms
        return None

    # The statistic every side is compared on (the median of the cold-L2 samples): the
    # names the targets read.
    @property
    def tuned_ms(self) -> float | None:
        return self.tuned_p50_ms

    @property
    def default_ms(self) -> float | None:
        return self.default_p50_ms

    @property
    def vendor_ms(self) -> float | None:
        return self.vendor_p50_ms

    @property
    def tuned_vs_vendor(self) -> float | None:
        """> 1: the tuned kernel is faster than the vendor library (medians)."""
        if self.vendor_p50_ms and self.tuned_p50_ms:
            return self.vendor_p50_ms / self.tuned_p50_ms
        return None


def row_from_artifact(
    path: Path, evaluations: int = 0, failures: dict[str, int] | None = None
) -> Row:
    """A table row from a search's result file: confirmed default and tuned numbers."""
    from ctune.registry.store import read_result

    artifact = read_result(path)
    base = artifact.baseline.summary
    tuned = artifact.pinned_member()
    summary = tuned.summary if tuned is not None else {}
    defaults = dict(artifact.baseline.candidate.genes)
    changed = (
        {k: v for k, v in tuned.candidate.genes if defaults.get(k) != v}
        if tuned is not None
        else {}
    )
    return Row(
        kernel=artifact.kernel,
        problem=artifact.problem,
        default_p50_ms=base.get("p50_ms"),
        default_p99_ms=base.get("p99_ms"),
        tuned_p50_ms=summary.get("p50_ms"),
        tuned_p99_ms=summary.get("p99_ms"),
        vendor="",
        vendor_p50_ms=None,
        vendor_p99_ms=None,
        tuned_key=artifact.pinned,
        changed=changed,
        evaluations=evaluations or int(artifact.provenance.get("evaluations", 0)),
        failures=failures or {},
        significance=_verdict(summary),
    )


def _verdict(summary: dict[str, Any]) -> str:
    if "significant" not in summary:
        return "n/a"
    if not summary["significant"]:
        return "no significant difference"
    return "faster" if summary.get("effect", 0) < 0 else "slower"


def tune(kernel: str, problem: str, budget: int, out_dir: Path, seed: int) -> Row:
    from ctune.cli.common import load, settings
    from ctune.objective import parse_objective_spec
    from ctune.registry.assemble import ResultPublisher
    from ctune.search.driver import SearchOptions, run_search

    cfg = settings()
    spec, toolchain = load(ROOT / kernel, cfg)
    objective = parse_objective_spec(["p99"], [], spec.metrics)
    options = SearchOptions(
        problem=problem,
        budget=budget,
        seed=seed,
        confirm_processes=3,
    )
    publish = ResultPublisher(
        cfg.registry, Path(cfg.cache_dir), out_dir / f"{spec.name}-{problem}.json"
    )
    result = run_search(cfg, spec, objective, options, toolchain=toolchain, publish=publish)
    if result.artifact_path is None:
        raise RuntimeError("the search wrote no result file")
    row = row_from_artifact(result.artifact_path, result.evaluations, dict(result.failures))
    row.search_wall_s = round(result.timing.wall_s, 1)
    row.gpu_busy_fraction = round(result.timing.gpu_busy_fraction, 3)
    row.fillers = result.fillers
    return row


class VendorTimer:
    """cuBLAS / SDPA timed with ctune's own event method, in this process."""

    def __init__(self) -> None:
        import cupy
        import torch

        from ctune.measure import SamplingPlan
        from ctune.measure.cupy_events import EventTimer, Helpers
        from ctune.measure.device import Telemetry

        self.cp, self.torch = cupy, torch
        torch.cuda.init()
        # one stream for torch's launches, cupy's launches and the timing events
        self.stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        l2_bytes = cupy.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
        with self.stream:
            self.timer = EventTimer(
                cupy, self.stream, Helpers(cupy), l2_bytes, Telemetry.open(None, 0)
            )
        self.plan = SamplingPlan(quantile=0.99, min_samples=200)

    def time_call(self, launch: Any) -> tuple[float, float]:
        """p50 and p99 (ms) of ``launch`` by ctune's event method, cold L2."""
        import numpy as np

        with self.stream:
            timing = self.timer.measure(launch, self.plan)
        samples = np.asarray(timing.samples_ms)
        return float(np.percentile(samples, 50)), float(np.percentile(samples, 99))

    def gemm(
        self, dims: dict[str, int], bf16: bool, via_torch: bool = False
    ) -> tuple[str, float, float]:
        name, launch = self.gemm_launch(dims, bf16, via_torch)
        return (name, *self.time_call(launch))

    def gemm_launch(
        self, dims: dict[str, int], bf16: bool, via_torch: bool = False
    ) -> tuple[str, Callable[[], Any]]:
        """cuBLAS's call for ``dims`` on fresh uniform[-1, 1] inputs, and its name."""
        torch = self.torch
        m, n, k = dims["M"], dims["N"], dims["K"]
        gen = torch.Generator(device="cuda").manual_seed(0)
        dtype = torch.bfloat16 if bf16 else torch.float16
        a = (torch.rand(m, k, device="cuda", generator=gen, dtype=torch.float32) * 2 - 1).to(dtype)
        b = (torch.rand(n, k, device="cuda", generator=gen, dtype=torch.float32) * 2 - 1).to(dtype)
        if bf16 or via_torch:
            c = torch.empty(m, n, device="cuda", dtype=dtype)
            name = f"cuBLAS (torch.matmul, {'bf16' if bf16 else 'fp16'})"
            return name, lambda: torch.matmul(a, b.t(), out=c)
        cp = self.cp
        a_cp, b_cp = cp.from_dlpack(a), cp.from_dlpack(b)
        c_cp = cp.empty((m, n), dtype=cp.float16)
        return "cuBLAS (cupy.matmul)", lambda: cp.matmul(a_cp, b_cp.T, out=c_cp)

    def sdpa(self, dims: dict[str, int], bf16: bool) -> tuple[str, float, float]:
        name, launch = self.sdpa_launch(dims, bf16)
        return (name, *self.time_call(launch))

    def sdpa_launch(self, dims: dict[str, int], bf16: bool) -> tuple[str, Callable[[], Any]]:
        """PyTorch SDPA's call for ``dims`` on fresh normal inputs, and its name."""
        torch = self.torch
        fn = torch.nn.functional.scaled_dot_product_attention
        b, h, s, d = dims["B"], dims["H"], dims["S"], dims["D"]
        hkv, sk = dims.get("HKV", h), dims.get("SK", s)  # grouped-query / decode shapes
        causal = bool(dims.get("CAUSAL", 0))
        dtype = torch.bfloat16 if bf16 else torch.float16
        gen = torch.Generator(device="cuda").manual_seed(0)

        def randn(*shape: int) -> Any:
            return torch.randn(*shape, device="cuda", generator=gen).to(dtype)

        q, k, v = randn(b, h, s, d), randn(b, hkv, sk, d), randn(b, hkv, sk, d)
        if hkv == h:
            return "PyTorch SDPA", lambda: fn(q, k, v, is_causal=causal)
        return "PyTorch SDPA (enable_gqa)", lambda: fn(q, k, v, is_causal=causal, enable_gqa=True)

    def launch(self, kernel: str, problem_name: str) -> tuple[str, Callable[[], Any]]:
        """The vendor call that ``kernels/KERNEL.yaml``'s problem is compared with."""
        from ctune.spec import load_spec

        spec = load_spec(ROOT / "kernels" / f"{kernel}.yaml")
        problem = spec.problem(problem_name)
        bf16 = bool(problem.defines.get("CTUNE_BF16", 0))
        if spec.name in ATTENTION:
            return self.sdpa_launch(problem.dims, bf16)
        return self.gemm_launch(problem.dims, bf16)


def vendor_times(
    cases: list[tuple[str, str]], via_torch: bool = False
) -> dict[tuple[str, str], tuple[str, float, float]]:
    """Vendor timings first, so a slow or failing tuning cannot cost them."""
    from ctune.spec import load_spec

    timer = VendorTimer()
    out: dict[tuple[str, str], tuple[str, float, float]] = {}
    for kernel, problem_name in cases:
        spec = load_spec(ROOT / kernel)
        problem = spec.problem(problem_name)
        bf16 = bool(problem.defines.get("CTUNE_BF16", 0))
        try:
            if spec.name in ATTENTION:
                out[kernel, problem_name] = timer.sdpa(problem.dims, bf16)
            else:
                out[kernel, problem_name] = timer.gemm(problem.dims, bf16, via_torch)
        except Exception as exc:  # reported in the table; the tuning still runs
            print(f"  vendor timing failed for {problem_name}: {exc}", flush=True)
        print(f"  vendor {problem_name}: {out.get((kernel, problem_name))}", flush=True)
    return out


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def targets(rows: list[Row]) -> list[dict[str, Any]]:
    def ratios(kernel: str, attr: str) -> list[float]:
        return [getattr(r, attr) for r in rows if r.kernel == kernel and getattr(r, attr)]

    cutlass = ratios("gemm", "tuned_vs_vendor")
    gemm_sq = [r.tuned_vs_vendor for r in rows if r.kernel == "hand_gemm" and r.problem == "sq4096"]
    attention = ratios("hand_attention", "tuned_vs_vendor")
    all_p99 = [r.tuned_vs_default_p99 for r in rows if r.tuned_vs_default_p99]
    out = []

    def add(name: str, value: float | None, goal: float) -> None:
        # a target this run has no rows for is not a miss: a run of one kernel's set
        # (attention alone) lists only what it measured
        if value is None:
            return
        out.append(
            {
                "target": name,
                "value": value,
                "goal": goal,
                "met": value >= goal,
                "shortfall": None if value >= goal else goal - value,
            }
        )

    add("tuned CUTLASS vs cuBLAS, geomean", geomean(cutlass), 1.0)
    add(
        "share of GEMM shapes where tuned CUTLASS >= 1.05x cuBLAS",
        sum(r >= 1.05 for r in cutlass) / len(cutlass) if cutlass else None,
        0.25,
    )
    add(
        "hand-written GEMM vs cuBLAS at 4096^3",
        gemm_sq[0] if gemm_sq and gemm_sq[0] else None,
        0.70,
    )
    decode = [
        r.tuned_vs_vendor
        for r in rows
        if r.kernel == "gemm" and r.tuned_vs_vendor and _tokens(r.problem) <= 128
    ]
    if decode:
        add("tuned CUTLASS vs cuBLAS, geomean over decode shapes (T <= 128)", geomean(decode), 1.0)
    # The README's two jobs on their default problems, at the median and the tail.
    for kernel, problem, label in MAIN_JOBS:
        job = next((r for r in rows if (r.kernel, r.problem) == (kernel, problem)), None)
        if job is not None and job.vendor_p50_ms and job.vendor_p99_ms:
            for quantile in ("p50", "p99"):
                tuned = getattr(job, f"tuned_{quantile}_ms")
                vendor = getattr(job, f"vendor_{quantile}_ms")
                add(f"{label} vs {job.vendor}, {quantile}", vendor / tuned if tuned else None, 1.0)
    add("attention vs PyTorch SDPA, geomean", geomean(attention), 0.80)
    add("tuned vs default p99, geomean over all", geomean(all_p99), 1.15)
    fmha = [r for r in rows if r.kernel == "attention"]
    if fmha:
        prefill = [
            r.tuned_vs_vendor
            for r in fmha
            if r.problem.startswith("prefill-") and r.tuned_vs_vendor is not None
        ]
        add("tuned CUTLASS attention vs SDPA, geomean over prefill", geomean(prefill), 1.0)
        add(
            "share of prefill problems where tuned CUTLASS attention >= 1.10x SDPA",
            sum(r >= 1.10 for r in prefill if r) / len(prefill) if prefill else None,
            0.25,
        )
        add(
            "tuned vs default p99, CUTLASS attention geomean",
            geomean([r.tuned_vs_default_p99 for r in fmha if r.tuned_vs_default_p99]),
            1.10,
        )
    return out


def _tokens(problem: str) -> int:
    """T of an LLM shape's name (llm8b-qkv-t16-bf16 -> 16); a large number for the others."""
    for part in problem.split("-"):
        if part[:1] == "t" and part[1:].isdigit():
            return int(part[1:])
    return 1 << 30


def dispatch_target(table: dict[str, Any]) -> dict[str, Any]:
    """Issue target: <= 8 builds cover every shape within 3 % of its per-shape best."""
    n, loss = len(table["builds"]), table["max_loss_vs_per_shape_best"]
    met = n <= 8 and loss <= 0.03 + 1e-9 and not table.get("unservable")
    return {
        "target": "dispatch builds (<= 8) within 3% of each shape's best",
        "value": n,
        "goal": 8,
        "met": met,
        "shortfall": None if met else n - 8,
        "max_loss": loss,
    }


def set_rows(kernel: str, set_name: str, set_dir: Path) -> tuple[list[Row], dict[str, Any]]:
    """Rows of a finished problem-set search (its result files) and its dispatch table."""
    from ctune.spec import load_spec

    spec = load_spec(ROOT / kernel)
    table_path = set_dir / "dispatch.json"
    table = json.loads(table_path.read_text()) if table_path.is_file() else {}
    served = {s["problem"]: s for s in table.get("shapes", [])}
    rows = []
    for name in spec.problem_sets[set_name]:
        path = set_dir / "artifacts" / f"{spec.name}-{name}.json"
        if not path.is_file():
            print(f"  {name}: not searched yet ({path})", flush=True)
            continue
        row = row_from_artifact(path)
        if name in served:
            row.dispatch_build = served[name]["build"]
            row.dispatch_loss = served[name]["loss_vs_per_shape_best"]
        rows.append(row)
    return rows, table


def remeasured_members(spec: KernelSpec, artifact: Any) -> list[tuple[str, Any]]:
    """The artifact's default build and pinned build (when it is another), each in today's
    space: a gene added since the search takes its default (``KernelSpec.in_space``), so an
    artifact recorded before it still builds what it recorded."""
    default = spec.in_space(artifact.baseline.candidate)
    members = [("default", default)]
    pinned = artifact.pinned_member()
    if pinned is not None:
        tuned = spec.in_space(pinned.candidate)
        if tuned.key() != default.key():
            members.append(("tuned", tuned))
    return members


def remeasure_rows(
    kernel: str, rows: list[Row], result_file: Callable[[str, str], Path], processes: int
) -> None:
    """Each row's default and tuned build again, interleaved in the same ``processes`` fresh
    workers, in this run: the run that also times the vendor, so the three numbers of a row
    come from one machine session and one way of timing (the search's own confirmation ran
    earlier, beside its other workers). ``result_file(spec name, problem)`` is the row's
    result file."""
    import numpy as np

    from ctune.cli.common import load, settings
    from ctune.compile.nvcc import NvccCompiler
    from ctune.evidence.stats import summarize
    from ctune.measure.plan import plan_from_json
    from ctune.measure.session import remeasure
    from ctune.registry.store import read_result

    cfg = settings()
    spec, toolchain = load(ROOT / kernel, cfg)
    with NvccCompiler.from_settings(spec, toolchain, cfg) as compiler:
        for row in rows:
            artifact = read_result(result_file(spec.name, row.problem))
            problem = spec.problem(row.problem)
            members = remeasured_members(spec, artifact)
            built = [(c, compiler.build(c, problem)) for _, c in members]
            broken = [b.outcome.value for _, b in built if not b.outcome.is_ok]
            if broken:
                row.note = f"re-measure: a build failed again ({', '.join(broken)})"
                continue
            plan = plan_from_json(dict(artifact.protocol["plan"]))
            measured = remeasure(spec, built, problem, plan, processes, settings=cfg)
            stats = {}
            for role, cand in members:
                ms = measured[cand.key()]
                if not all(m.outcome.is_ok and m.samples_ms for m in ms):
                    row.note = f"re-measure: the {role} build did not run cleanly"
                    break
                stats[role] = summarize(np.concatenate([m.samples_ms for m in ms]))
            else:
                default, tuned = stats["default"], stats.get("tuned", stats["default"])
                row.default_p50_ms, row.default_p99_ms = default.p50_ms, default.p99_ms
                row.tuned_p50_ms, row.tuned_p99_ms = tuned.p50_ms, tuned.p99_ms
                row.note = f"default and tuned re-measured in {processes} fresh processes here"
            print(f"  {row.problem}: {row.note}", flush=True)


def set_main(args: argparse.Namespace) -> int:
    """--problem-set: vendor timings for every shape, rows from the set, the dispatch JSON."""
    from ctune.evidence.identity import gpu_id, probe_gpu_machine
    from ctune.identity_probe import probe_toolchain
    from ctune.spec import load_spec

    kernel = args.kernel
    gpu = probe_gpu_machine() or {}
    device = gpu.get("gpu_name", "unknown GPU")
    slug = gpu_id(gpu)
    started = time.time()
    rows, table = set_rows(kernel, args.problem_set, args.set_dir)
    if args.remeasure:
        set_dir = args.set_dir
        remeasure_rows(
            kernel, rows, lambda name, problem: set_dir / "artifacts" / f"{name}-{problem}.json",
            args.remeasure,
        )  # fmt: skip
    # GEMM: cuBLAS through torch.matmul for fp16 and bf16 alike; attention: SDPA
    vendor = vendor_times([(kernel, r.problem) for r in rows], via_torch=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    for row in rows:
        row.run_started_utc = stamp
        if (kernel, row.problem) in vendor:
            row.vendor, row.vendor_p50_ms, row.vendor_p99_ms = vendor[kernel, row.problem]
    args.out.mkdir(parents=True, exist_ok=True)
    previous = args.out / f"kernels_vs_vendor-{slug}.json"
    if args.merge and previous.exists():
        ours = {(r.kernel, r.problem) for r in rows}
        rows = [r for r in load_rows(previous) if (r.kernel, r.problem) not in ours] + rows
    print(write_report(args.out, slug, device, gpu, rows, started))
    if table:
        fingerprint = {**gpu, **probe_toolchain()}
        publish_table(load_spec(ROOT / kernel), args.problem_set, table, fingerprint, args.out)
    return 0


def publish_table(
    spec: KernelSpec, set_name: str, table: dict[str, Any], fingerprint: dict[str, Any], out: Path
) -> None:
    """A set's dispatch table as ``dispatch-<kernel>-<set>-<gpu>.json`` with its target, and,
    for the GEMM, merged into the summary over every set (``dispatch-<gpu>.json``)."""
    from ctune.evidence.identity import gpu_id

    slug = gpu_id(fingerprint)
    data = {**table, "fingerprint": fingerprint, "target": dispatch_target(table)}
    path = out / f"dispatch-{spec.name}-{set_name}-{slug}.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(
        f"{path}: {len(table['builds'])} builds, worst loss "
        f"{table['max_loss_vs_per_shape_best']:.2%}"
    )
    if spec.name != "gemm":
        return
    merged = merge_dispatch(out / f"dispatch-{slug}.json", set_name, data, spec)
    for label, part in [("all", merged), *merged["by_dtype"].items()]:
        print(
            f"dispatch-{slug}.json, {label}: {len(part['shapes'])} shapes, "
            f"{len(part['builds'])} builds, worst loss {part['max_loss_vs_per_shape_best']:.2%}"
        )


def table_only(kernel: str, set_name: str, set_dir: Path, out: Path) -> int:
    """A finished set's dispatch table published without re-measuring its shapes (no GPU):
    for a set searched to cover shapes whose rows stand (their numbers are the set's own cross
    measurements). The GPU fingerprint is that of the set's result files, the machine that
    measured the table; the report's rows of its shapes take the build and loss it gives."""
    from ctune.evidence.identity import FIELDS, gpu_id
    from ctune.registry.store import read_result
    from ctune.spec import load_spec

    spec = load_spec(ROOT / kernel)
    rows_of_set, table = set_rows(kernel, set_name, set_dir)
    if not table or not rows_of_set:
        print(
            f"{set_dir}: no dispatch table or result files yet; run the set's search until "
            "it prints its dispatch table",
            file=sys.stderr,
        )
        return 2
    first = set_dir / "artifacts" / f"{spec.name}-{rows_of_set[0].problem}.json"
    measured = read_result(first).fingerprint
    # the machine's fields (GPU and toolchain), as a set measured beside the vendor carries
    machine = ("gpu", "toolchain")
    fingerprint = {k: v for k, v in measured.items() if FIELDS.get(k, ("", ""))[1] in machine}
    publish_table(spec, set_name, table, fingerprint, out)
    slug = gpu_id(fingerprint)
    report = out / f"kernels_vs_vendor-{slug}.json"
    if report.is_file():
        served = {r.problem: r for r in rows_of_set}
        rows = load_rows(report)
        for row in rows:
            if row.kernel == spec.name and row.problem in served:
                row.dispatch_build = served[row.problem].dispatch_build
                row.dispatch_loss = served[row.problem].dispatch_loss
        write_again(report, rows)
    return 0


def merge_dispatch(
    path: Path, set_name: str, table: dict[str, Any], spec: KernelSpec
) -> dict[str, Any]:
    """The GEMM's dispatch summary over every set tuned so far: each set's table under
    ``sets``, their shapes, the union of their builds and the worst loss of any shape, and
    the same per output dtype (``by_dtype``: a build is compiled for one dtype, so a serving
    engine ships one dispatch set per dtype).

    A shape searched again in another set (``t128-fp16`` after ``llm8b-decode-fp16``) is
    served by the table merged last: the other sets' entries for it are dropped, with the
    builds that then serve nothing, and each such set names them under ``superseded``.
    Builds are counted by their ids in ``spec``'s space today: a table written before a gene
    was added names the same build by another id."""
    old = json.loads(path.read_text()) if path.is_file() else {}
    sets = {
        name: _without_shapes(t, set_name, table)
        for name, t in (old.get("sets") or {}).items()
        if name != set_name
    }
    sets[set_name] = table
    by_dtype: dict[str, dict[str, Any]] = {}
    for name, t in sets.items():
        dtypes = {s.get("dtype", "unknown") for s in t.get("shapes", [])}
        if not dtypes:
            continue  # every shape went to a later set: it serves nothing, ships nothing
        key = dtypes.pop() if len(dtypes) == 1 else "mixed"
        by_dtype.setdefault(key, {})[name] = t
    merged = {
        **_union(sets, spec),
        "sets": sets,
        "by_dtype": {
            dtype: {**_union(group, spec), "sets": sorted(group)}
            for dtype, group in by_dtype.items()
        },
        "note": "each set's table is chosen within its set; builds: their union",
        # the GPU of the newest set: the file is named by it, and every set ran on one
        "fingerprint": table.get("fingerprint", {}),
    }
    path.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    return merged


def _without_shapes(
    table: dict[str, Any], newer_name: str, newer: dict[str, Any]
) -> dict[str, Any]:
    """``table`` less the shapes that ``newer`` serves: their builds go if nothing else uses
    them, and the worst loss is that of the shapes left."""
    taken = {s["problem"] for s in newer.get("shapes", [])}
    gone = [s["problem"] for s in table.get("shapes", []) if s["problem"] in taken]
    if not gone:
        return table
    shapes = [s for s in table.get("shapes", []) if s["problem"] not in taken]
    used = {s.get("build") for s in shapes}
    return {
        **table,
        "shapes": shapes,
        "builds": [b for b in table.get("builds", []) if b["id"] in used],
        "max_loss_vs_per_shape_best": max(
            (s["loss_vs_per_shape_best"] for s in shapes), default=0.0
        ),
        "superseded": {
            **(table.get("superseded") or {}),
            **{problem: newer_name for problem in gone},
        },
    }


def _union(sets: dict[str, dict[str, Any]], spec: KernelSpec) -> dict[str, Any]:
    """Shapes, the union of builds and the worst loss over some sets' dispatch tables."""
    from ctune.sets.dispatch_table import build_ids_today

    return {
        "shapes": [s for t in sets.values() for s in t.get("shapes", [])],
        "builds": sorted(
            {b for t in sets.values() for b in build_ids_today(spec, t.get("builds", []))}
        ),
        "max_loss_vs_per_shape_best": max(
            (t["max_loss_vs_per_shape_best"] for t in sets.values()), default=0.0
        ),
    }


def _fmt(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def markdown(rows: list[Row], goals: list[dict[str, Any]], device: str) -> str:
    lines = [
        f"# Hot kernels vs vendor libraries on {device}",
        "",
        "Times in ms (cold L2, events, medians and p99 over >= 200 samples; ctune builds "
        "re-measured in 3 fresh processes). GPU busy: the search's measuring time over its "
        "wall time; fillers: runtime-gene variants measured while builds compiled.",
        "",
        "| kernel | problem | default p99 | tuned p99 | tuned/default p99 | tuned p50 "
        "| vendor | vendor p50 | tuned vs vendor | significance | evaluations (fillers) "
        "| GPU busy | tuned genes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        genes = " ".join(f"{k}={v}" for k, v in r.changed.items()) or "(default)"
        busy = "-" if r.gpu_busy_fraction is None else f"{r.gpu_busy_fraction:.0%}"
        lines.append(
            f"| {r.kernel} | {r.problem} | {_fmt(r.default_p99_ms)} | {_fmt(r.tuned_p99_ms)} "
            f"| {_fmt(r.tuned_vs_default_p99, 3)}x | {_fmt(r.tuned_p50_ms)} | {r.vendor} "
            f"| {_fmt(r.vendor_p50_ms)} | {_fmt(r.tuned_vs_vendor, 3)}x | {r.significance} "
            f"| {r.evaluations} ({r.fillers}) | {busy} | {genes} |"
        )
    lines += ["", "| target | value | goal | met |", "|---|---|---|---|"]
    for g in goals:
        lines.append(
            f"| {g['target']} | {_fmt(g['value'], 3)} | {g['goal']} | "
            f"{'yes' if g['met'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[Row], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    labels = [f"{r.kernel}\n{r.problem}" for r in rows]
    default = [
        r.vendor_p50_ms / r.default_p50_ms if r.vendor_p50_ms and r.default_p50_ms else 0.0
        for r in rows
    ]
    tuned = [r.tuned_vs_vendor or 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.9), 4.5))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], default, width=0.4, label="default build")
    ax.bar([i + 0.2 for i in x], tuned, width=0.4, label="tuned (ctune)")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(x), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("speed vs vendor (median, >1 faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--quick", action="store_true", help="first problem of each kernel")
    parser.add_argument("--problems", type=int, default=0, help="first N problems of each kernel")
    parser.add_argument("--kernels", nargs="*", default=list(PLAN))
    parser.add_argument("--budget-scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        help="KERNEL:PROBLEM (e.g. gemm:llm8b-o-t16) instead of the default plan",
    )
    parser.add_argument(
        "--from-result",
        action="append",
        default=[],
        metavar="KERNEL:PROBLEM=FILE",
        help="tune nothing for this case: its row is that search's result file (e.g. the "
        "README's main job), the vendor timed here beside it",
    )
    parser.add_argument(
        "--merge", action="store_true", help="keep an earlier report's rows for other cases"
    )
    parser.add_argument(
        "--problem-set", help="rows from a finished `ctune search --problem-set` (no tuning)"
    )
    parser.add_argument("--set-dir", type=Path, help="that search's --set-dir")
    parser.add_argument(
        "--kernel", default="kernels/gemm.cu", help="--problem-set: the set's kernel"
    )
    parser.add_argument(
        "--remeasure",
        type=int,
        default=3,
        metavar="K",
        help="--problem-set and --from-result: re-measure each row's default and tuned build "
        "in K fresh processes in this run, beside the vendor timing (0: the search's own "
        "confirmation)",
    )
    parser.add_argument(
        "--rebuild",
        type=Path,
        help="re-derive tables from a finished run's report JSON and its artifacts/ (no GPU)",
    )
    parser.add_argument(
        "--retarget", type=Path, help="recompute a report's targets from its stored rows (no GPU)"
    )
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="--problem-set: publish the finished set's dispatch table without re-measuring "
        "its shapes (no GPU); their rows in the report keep their numbers",
    )
    args = parser.parse_args(argv)
    if args.rebuild:
        return rebuild(args.rebuild)
    if args.retarget:
        return retarget(args.retarget)
    if args.problem_set:
        if args.set_dir is None:
            raise SystemExit("--problem-set needs --set-dir (the search's state folder)")
        if args.table_only:
            return table_only(args.kernel, args.problem_set, args.set_dir, args.out)
        return set_main(args)

    from ctune.evidence.identity import gpu_id, probe_gpu_machine

    args.out.mkdir(parents=True, exist_ok=True)
    artifacts = args.out / "artifacts"
    artifacts.mkdir(exist_ok=True)
    gpu = probe_gpu_machine() or {}
    device = gpu.get("gpu_name", "unknown GPU")
    slug = gpu_id(gpu)
    started = time.time()
    run_stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    cases = [_case(text) for text in args.case]
    given = dict(_given_result(text) for text in args.from_result)
    cases += [case for case in given if case not in cases]
    for kernel in [] if cases else args.kernels:
        take = 1 if args.quick else (args.problems or len(PLAN[kernel]))
        cases += [(kernel, problem) for problem in PLAN[kernel][:take]]
    rows: list[Row] = []
    previous = args.out / f"kernels_vs_vendor-{slug}.json"
    if args.merge and previous.exists():
        rows = [
            r for r in load_rows(previous) if (f"kernels/{r.kernel}.cu", r.problem) not in cases
        ]
    print(f"[{time.time() - started:6.0f} s] vendor timings", flush=True)
    vendor = vendor_times(cases)
    for kernel, problem in cases:
        budget = max(8, round(BUDGET[kernel] * args.budget_scale))
        try:
            if (kernel, problem) in given:
                row = result_row(given[kernel, problem])
                if args.remeasure:
                    remeasure_rows(kernel, [row], _the_file(given[kernel, problem]), args.remeasure)
            else:
                print(f"[{time.time() - started:6.0f} s] tuning {kernel} {problem} ({budget})")
                row = tune(kernel, problem, budget, artifacts, args.seed)
        except Exception as exc:
            print(f"  failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        row.run_started_utc = run_stamp
        if (kernel, problem) in vendor:
            row.vendor, row.vendor_p50_ms, row.vendor_p99_ms = vendor[kernel, problem]
        rows = [r for r in rows if (r.kernel, r.problem) != (row.kernel, row.problem)] + [row]
        write_report(args.out, slug, device, gpu, rows, started)  # partial results survive
    print(write_report(args.out, slug, device, gpu, rows, started))
    plot(rows, args.out / f"kernels_vs_vendor-{slug}.png")
    return 0


def _the_file(path: Path) -> Callable[[str, str], Path]:
    """A row's result file, whatever its spec and problem: the one given."""
    return lambda name, problem: path


def _given_result(text: str) -> tuple[tuple[str, str], Path]:
    case, _, path = text.partition("=")
    if not path or not Path(path).is_file():
        raise SystemExit(f"--from-result {text!r}: expected KERNEL:PROBLEM=FILE, a result file")
    return _case(case), Path(path)


def result_row(path: Path) -> Row:
    """A row from a finished search's result file, with that search's wall time and GPU busy."""
    from ctune.registry.store import read_result

    artifact = read_result(path)
    search = artifact.extensions.get("search") or {}
    timing = search.get("timing") or {}
    row = row_from_artifact(path, int(artifact.provenance.get("evaluations") or 0))
    row.search_wall_s = round(float(timing.get("wall_s") or 0.0), 1) or None
    row.gpu_busy_fraction = timing.get("gpu_busy_fraction")
    row.fillers = int(search.get("fillers") or 0)
    return row


def _case(text: str) -> tuple[str, str]:
    kernel, _, problem = text.partition(":")
    if not problem:
        raise SystemExit(f"--case {text!r}: expected KERNEL:PROBLEM, e.g. gemm:sq4096")
    return f"kernels/{kernel}.cu", problem


def load_rows(report_path: Path) -> list[Row]:
    """Rows of an earlier report, as they were (their own run's vendor timings)."""
    fields = set(Row.__dataclass_fields__)
    return [
        Row(**{k: v for k, v in stored.items() if k in fields})
        for stored in json.loads(report_path.read_text())["rows"]
    ]


def retarget(report_path: Path) -> int:
    """The targets and tables again from a report's stored rows, as measured (no GPU): for a
    target added after the run."""
    rows = load_rows(report_path)
    print(write_again(report_path, rows))
    plot(rows, report_path.with_suffix(".png"))
    return 0


def write_again(report_path: Path, rows: list[Row]) -> str:
    """The report written again from these rows, with its run's fingerprint and wall time."""
    old = json.loads(report_path.read_text())
    fingerprint = old["fingerprint"]
    slug = report_path.stem.removeprefix("kernels_vs_vendor-")
    device = fingerprint.get("gpu_name", "unknown GPU")
    started = time.time() - old["wall_s"]
    return write_report(report_path.parent, slug, device, fingerprint, rows, started, True)


def rebuild(report_path: Path) -> int:
    """Rows again from the run's own artifacts (same run, same GPU) plus its vendor timings."""
    old = json.loads(report_path.read_text())
    out = report_path.parent
    rows = []
    for stored in old["rows"]:
        row = row_from_artifact(
            out / "artifacts" / f"{stored['kernel']}-{stored['problem']}.json",
            stored.get("evaluations", 0),
            stored.get("failures") or {},
        )
        row.vendor = stored["vendor"]
        row.vendor_p50_ms, row.vendor_p99_ms = stored["vendor_p50_ms"], stored["vendor_p99_ms"]
        row.run_started_utc = stored.get("run_started_utc", "")
        rows.append(row)
    print(write_again(report_path, rows))
    plot(rows, report_path.with_suffix(".png"))
    return 0


def write_report(
    out: Path,
    slug: str,
    device: str,
    gpu: dict[str, str],
    rows: list[Row],
    started: float,
    complete_fingerprint: bool = False,
) -> str:
    from ctune.identity_probe import probe_toolchain

    goals = targets(rows)
    report = {
        "benchmark": "kernels_vs_vendor",
        "fingerprint": gpu if complete_fingerprint else {**gpu, **probe_toolchain()},
        "wall_s": round(time.time() - started, 1),
        "rows": [
            {
                **r.__dict__,
                "tuned_ms": r.tuned_ms,
                "default_ms": r.default_ms,
                "vendor_ms": r.vendor_ms,
                "statistic": "p50",
                "tuned_vs_default_p99": r.tuned_vs_default_p99,
                "tuned_vs_vendor": r.tuned_vs_vendor,
            }
            for r in rows
        ],
        "targets": goals,
    }
    (out / f"kernels_vs_vendor-{slug}.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(rows, goals, device)
    (out / f"kernels_vs_vendor-{slug}.md").write_text(table)
    return table


if __name__ == "__main__":
    sys.exit(main())
