"""A/A repeatability of ctune's measurement harness, on this machine's GPU.

Measures the same candidate in >= 10 separate worker processes and reports the
between-process CV of the median and of p99 (n = 1000 per process), the
harness overhead per candidate in a warm worker, and the fault recovery time
(fault -> a healthy replacement worker), against the issue's targets:

  CV of the median  <= 0.3% (>= 100 µs kernels)   <= 1.5% (µs kernels, decode GEMM)
  CV of p99         <= 0.5% (>= 100 µs kernels)   <= 2%   (µs kernels, decode GEMM)

Cases: saxpy 1M timed with events and with graph replays, stream 64M, a decode GEMM
(M = 16, timing auto) and the 4096^3 GEMM default build; each records the timing method
it used and the launches per sample.
  overhead per candidate < 0.5 s;  fault recovery < 2 s

Targets are reported pass/fail, never asserted. Results, with the fingerprint
(GPU, UUID, driver, nvcc, CuPy), go to OUT/aa_repeatability-<gpu_id>.json
(ctune.evidence.identity.gpu_id, e.g. sm90-nvidia-h200).

    python bench/aa_repeatability.py --out bench/results [--processes 10] [--no-gemm]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctune.compile.nvcc import NvccCompiler  # noqa: E402
from ctune.compile.toolchain import probe_toolchain  # noqa: E402
from ctune.config import resolve  # noqa: E402
from ctune.errors import CtuneError  # noqa: E402
from ctune.evidence.identity import gpu_id  # noqa: E402
from ctune.evidence.stats import cv  # noqa: E402
from ctune.measure import SamplingPlan  # noqa: E402
from ctune.measure.session import WorkerMeasurer, measure_in_fresh_processes  # noqa: E402
from ctune.records import Outcome, to_json  # noqa: E402
from ctune.spec import load_spec  # noqa: E402

DATA = ROOT / "tests" / "data" / "kernels"
TARGETS = {
    # (class, metric) -> limit
    ("small", "cv_median"): 0.015,
    ("small", "cv_p99"): 0.02,
    ("large", "cv_median"): 0.003,
    ("large", "cv_p99"): 0.005,
}
OVERHEAD_TARGET_S = 0.5
RECOVERY_TARGET_S = 2.0


def cupy_version() -> str:
    for dist in ("cupy-cuda13x", "cupy-cuda12x", "cupy"):
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "not installed"


class Builder:
    def __init__(self, toolchain: Any, settings: Any) -> None:
        self.toolchain, self.settings = toolchain, settings
        self.compilers: dict[str, NvccCompiler] = {}

    def __call__(self, spec: Any, problem: Any, **genes: Any) -> tuple[Any, Any]:
        key = str(spec.yaml_path)
        if key not in self.compilers:
            self.compilers[key] = NvccCompiler(spec, self.toolchain, self.settings.cache_dir)
        candidate = spec.candidate({**spec.space.default_values(), **genes})
        build = self.compilers[key].build(candidate, problem)
        if not build.outcome.is_ok:
            raise RuntimeError(
                f"{spec.name} {genes}: {build.outcome.value}: {build.log_tail[-800:]}"
            )
        return candidate, build


def repeatability_case(
    name: str,
    size_class: str,
    spec: Any,
    problem: Any,
    build: tuple[Any, Any],
    args: Any,
    timing: str = "events",
) -> dict[str, Any]:
    plan = SamplingPlan(
        quantile=0.99, min_samples=1000, max_samples=1000, rep_ms=100.0, timing=timing
    )
    started = time.monotonic()
    runs = measure_in_fresh_processes(
        spec, *build, problem, plan, processes=args.processes, device=args.device
    )
    elapsed = time.monotonic() - started
    ok = [m for m in runs if m.outcome is Outcome.OK and m.summary is not None]
    case: dict[str, Any] = {
        "name": name,
        "class": size_class,
        "kernel": spec.name,
        "problem": problem.name,
        "candidate": build[0].key(),
        "processes": len(runs),
        "ok_processes": len(ok),
        "timing_requested": timing,
        "timing": sorted({m.timing_method for m in ok}),
        "launches_per_sample": sorted({m.launches_per_sample for m in ok}),
        "outcomes": [m.outcome.value for m in runs],
        "errors": [m.error[:300] for m in runs if m.error],
        "wall_s": round(elapsed, 2),
    }
    if len(ok) >= 2:
        medians = [m.summary.p50_ms for m in ok]
        p99s = [m.summary.p99_ms for m in ok]
        case.update(
            n_per_process=[m.summary.n for m in ok],
            excluded=[m.excluded_samples for m in ok],
            medians_ms=medians,
            p99s_ms=p99s,
            median_ms=statistics.median(medians),
            cv_median=cv(medians),
            cv_p99=cv(p99s),
            sm_clock_mhz=[m.sm_clock_mhz for m in ok],
            throttle_reasons=[m.throttle_reasons for m in ok],
            other_processes=max(m.other_processes for m in ok),
            measure_wall_s=[round(m.wall_s, 3) for m in ok],
            sampling_note=ok[0].sampling_note,
        )
    # harness overhead in a warm worker (what a search pays per candidate): wall time of a
    # measure call minus the kernel's own time (the sum of its samples)
    with WorkerMeasurer(args.device) as measurer:
        t = time.monotonic()
        measurer.device_info()
        start_s = time.monotonic() - t
        first = measurer.measure(spec, *build, problem, plan)
        warm = [measurer.measure(spec, *build, problem, plan) for _ in range(3)]
    # a graph-timed sample is a per-launch mean: the GPU ran launches_per_sample of them
    overheads = [
        m.wall_s - sum(m.samples_ms) * m.launches_per_sample / 1e3
        for m in warm
        if m.outcome is Outcome.OK
    ]
    case.update(
        worker_start_s=round(start_s, 3),
        first_call_overhead_s=round(
            first.wall_s - sum(first.samples_ms) * first.launches_per_sample / 1e3, 3
        ),
        warm_overhead_s=[round(o, 3) for o in overheads],
        overhead_s=round(statistics.median(overheads), 3) if overheads else None,
    )
    return case


def fault_recovery(builder: Builder, args: Any) -> dict[str, Any]:
    spec = load_spec(DATA / "faults.yaml")
    problem = spec.problem("n64k")
    builds = {mode: builder(spec, problem, MODE=mode) for mode in (0, 1, 2, 3, 6)}
    plan = SamplingPlan(rep_ms=10, min_samples=50, quantile=0.5)
    hang_plan = SamplingPlan(rep_ms=10, min_samples=50, quantile=0.5, timeout_s=2.0)
    events = []
    with WorkerMeasurer(args.device) as measurer:
        measurer.measure(spec, *builds[0], problem, plan)
        for mode, label in ((1, "illegal address"), (2, "trap"), (6, "device assert"), (3, "hang")):
            fault = measurer.measure(spec, *builds[mode], problem, hang_plan if mode == 3 else plan)
            fault_done = time.monotonic()
            after = measurer.measure(spec, *builds[0], problem, plan)
            events.append(
                {
                    "fault": label,
                    "outcome": fault.outcome.value,
                    "fault_wall_s": round(fault.wall_s, 3),
                    "recovery_s": round(measurer.recoveries_s[-1], 3)
                    if measurer.recoveries_s
                    else None,
                    "to_next_ok_measurement_s": round(time.monotonic() - fault_done, 3),
                    "next_outcome": after.outcome.value,
                    "evidence": fault.error[:300],
                }
            )
    recoveries = [e["recovery_s"] for e in events if e["recovery_s"] is not None]
    return {"events": events, "max_recovery_s": max(recoveries) if recoveries else None}


def targets(cases: list[dict[str, Any]], faults: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for case in cases:
        for metric in ("cv_median", "cv_p99"):
            limit = TARGETS[(case["class"], metric)]
            value = case.get(metric)
            out.append(
                {
                    "target": f"{case['name']} {metric} <= {limit:.1%}",
                    "value": value,
                    "pass": value is not None and value <= limit,
                }
            )
        value = case.get("overhead_s")
        out.append(
            {
                "target": f"{case['name']} overhead per candidate < {OVERHEAD_TARGET_S} s",
                "value": value,
                "pass": value is not None and value < OVERHEAD_TARGET_S,
            }
        )
    value = faults.get("max_recovery_s")
    out.append(
        {
            "target": f"fault recovery < {RECOVERY_TARGET_S} s",
            "value": value,
            "pass": value is not None and value < RECOVERY_TARGET_S,
        }
    )
    return out


def print_table(result: dict[str, Any]) -> None:
    fp = result["fingerprint"]
    print(f"\nA/A repeatability on {fp['gpu']} ({fp['uuid']}), driver {fp['driver']}")
    print(
        f"{'case':<12} {'problem':<10} {'median':>12} {'CV med':>8} {'CV p99':>8} "
        f"{'overhead':>9} {'ok':>6}"
    )
    for c in result["cases"]:
        median = f"{c['median_ms'] * 1e3:.2f} us" if "median_ms" in c else "-"
        cvm = f"{c['cv_median']:.3%}" if "cv_median" in c else "-"
        cvp = f"{c['cv_p99']:.3%}" if "cv_p99" in c else "-"
        over = f"{c['overhead_s']:.3f} s" if c.get("overhead_s") is not None else "-"
        print(
            f"{c['name']:<12} {c['problem']:<10} {median:>12} {cvm:>8} {cvp:>8} {over:>9} "
            f"{c['ok_processes']:>3}/{c['processes']}"
        )
    for e in result["faults"].get("events", []):
        print(
            f"fault {e['fault']:<16} -> {e['outcome']:<14} recovery {e['recovery_s']} s, "
            f"next measurement {e['next_outcome']} after {e['to_next_ok_measurement_s']} s"
        )
    print()
    for t in result["targets"]:
        value = t["value"]
        shown = "-" if value is None else (f"{value:.3%}" if "cv_" in t["target"] else f"{value} s")
        print(f"[{'PASS' if t['pass'] else 'FAIL'}] {t['target']}: {shown}")


def main() -> int:
    try:
        return run()
    except CtuneError as exc:  # no GPU, no nvcc: one line, like the CLI
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def run() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--no-gemm", action="store_true", help="skip kernels/hand_gemm.yaml")
    parser.add_argument("--only", nargs="*", help="case names to run (default: all)")
    parser.add_argument("--no-faults", action="store_true", help="skip the fault recovery")
    args = parser.parse_args()
    started = time.monotonic()
    settings = resolve()
    toolchain = probe_toolchain(settings.nvcc)
    builder = Builder(toolchain, settings)
    with WorkerMeasurer(args.device) as probe:
        device = probe.device_info()
    fingerprint = {
        "gpu": device.name,
        "uuid": device.uuid,
        "sm": device.sm,
        "driver": device.driver,
        "nvcc": toolchain.describe(),
        "cupy": cupy_version(),
        "python": platform.python_version(),
        "device": to_json(device),
    }
    saxpy = load_spec(DATA / "saxpy.yaml", toolchain.help_text)
    faults = load_spec(DATA / "faults.yaml", toolchain.help_text)
    plans: list[tuple[str, str, Any, str, str]] = [
        ("saxpy-1m", "small", saxpy, "n1m", "events"),
        ("saxpy-1m-graph", "small", saxpy, "n1m", "graph"),
        ("stream-64m", "large", faults, "n64m", "events"),
    ]
    gemm_yaml = ROOT / "kernels" / "hand_gemm.yaml"
    if gemm_yaml.exists() and not args.no_gemm:
        gemm = load_spec(gemm_yaml, toolchain.help_text)
        # a decode GEMM (M = 16: tens of microseconds) and the 4096^3 default
        plans.append(("gemm-decode-m16", "small", gemm, "llm8b-o-t16", "auto"))
        plans.append(("gemm-4096", "large", gemm, gemm.default_problem, "events"))
    if args.only:
        plans = [p for p in plans if p[0] in args.only]
    cases = []
    for name, size_class, spec, problem_name, timing in plans:
        problem = spec.problem(problem_name)
        try:
            build = builder(spec, problem)
            cases.append(repeatability_case(name, size_class, spec, problem, build, args, timing))
        except Exception as exc:  # report the case as failed, keep going
            cases.append(
                {
                    "name": name,
                    "class": size_class,
                    "kernel": spec.name,
                    "problem": problem_name,
                    "processes": args.processes,
                    "ok_processes": 0,
                    "error": "".join(traceback.format_exception(exc))[-2000:],
                }
            )
        print(f"{name}: done at {time.monotonic() - started:.0f} s", flush=True)
    try:
        fault_result = {} if args.no_faults else fault_recovery(builder, args)
    except Exception as exc:
        fault_result = {"error": "".join(traceback.format_exception(exc))[-2000:]}
    result = {
        "benchmark": "aa_repeatability",
        "fingerprint": fingerprint,
        "processes": args.processes,
        "cases": cases,
        "faults": fault_result,
        "targets": targets(cases, fault_result),
        "total_s": round(time.monotonic() - started, 1),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"aa_repeatability-{gpu_id(device)}.json"
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print_table(result)
    print(f"\nwrote {path} in {result['total_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
