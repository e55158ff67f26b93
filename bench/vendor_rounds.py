"""A pinned artifact against the vendor call, round after round in fresh processes.

``kernels_vs_vendor.py`` times the vendor once, in its own process, beside a search's
confirmation: one number each, so a 1% gap cannot be told from what one process differs
from the next (the CUTLASS ground truths' process-to-process spread is a median 2%). Here
each round measures the registry's pinned build in a fresh ctune worker and the vendor
call (cuBLAS or PyTorch SDPA, ``kernels_vs_vendor.VendorTimer``: the same event method,
cold L2) in a fresh process of its own, the order alternating between rounds. Each round
gives a ratio, vendor over ctune (> 1: ctune faster), at p50 and p99; the report gives
their geometric mean with a 95% confidence interval (Student's t over the log ratios,
scipy.stats) and says whether 1.0 is inside it.

    python bench/vendor_rounds.py --case gemm:sq4096 --case attention:prefill-s4096-d64 \\
        --rounds 8 --out bench/results
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DEVICE_CLASS = "sm90-nvidia-h200"
QUANTILES = ("p50", "p99")


def ratio_summary(ratios: list[float], confidence: float = 0.95) -> dict[str, Any]:
    """Geometric mean of ``ratios`` and its ``confidence`` interval (t over the logs)."""
    from scipy import stats

    logs = [math.log(r) for r in ratios]
    n = len(logs)
    mean = sum(logs) / n
    if n < 2:
        return {"geomean": math.exp(mean), "low": None, "high": None, "rounds": n}
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = stats.t.ppf((1 + confidence) / 2, n - 1) * sd / math.sqrt(n)
    low, high = math.exp(mean - half), math.exp(mean + half)
    verdict = "faster" if low > 1 else "slower" if high < 1 else "same (1.0 inside)"
    return {"geomean": math.exp(mean), "low": low, "high": high, "rounds": n, "ctune": verdict}


def _vendor_once(kernel: str, problem_name: str) -> dict[str, Any]:
    """One fresh process's vendor timing (this script run with ``--vendor-once``)."""
    from kernels_vs_vendor import ATTENTION, VendorTimer

    from ctune.spec import load_spec

    spec = load_spec(ROOT / "kernels" / f"{kernel}.yaml")
    problem = spec.problem(problem_name)
    bf16 = bool(problem.defines.get("CTUNE_BF16", 0))
    timer = VendorTimer()
    if spec.name in ATTENTION:
        name, p50, p99 = timer.sdpa(problem.dims, bf16)
    else:
        name, p50, p99 = timer.gemm(problem.dims, bf16)
    return {"vendor": name, "p50_ms": p50, "p99_ms": p99}


def _vendor_in_a_fresh_process(kernel: str, problem: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--vendor-once", f"{kernel}:{problem}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run_case(kernel: str, problem_name: str, rounds: int) -> dict[str, Any]:
    """The pinned build of ``kernel/problem_name`` on this GPU class, ``rounds`` rounds."""
    from ctune.cli.common import load, settings
    from ctune.compile.nvcc import NvccCompiler
    from ctune.measure.plan import plan_from_json
    from ctune.measure.session import WorkerMeasurer
    from ctune.registry.store import read_artifact_file

    path = ROOT / "registry" / kernel / problem_name / f"{DEVICE_CLASS}.json"
    artifact = read_artifact_file(path)
    pinned = artifact.pinned_member()
    cfg = settings()
    spec, toolchain = load(ROOT / "kernels" / f"{kernel}.cu", cfg)
    candidate = spec.in_space((pinned or artifact.baseline).candidate)
    problem = spec.problem(problem_name)
    plan = plan_from_json({**dict(artifact.protocol["plan"]), "l2_policy": "cold"})
    with NvccCompiler.from_settings(spec, toolchain, cfg) as compiler:
        build = compiler.build(candidate, problem)
    if not build.outcome.is_ok:
        return {"key": f"{kernel}/{problem_name}", "error": f"build {build.outcome.value}"}
    rows: list[dict[str, Any]] = []
    with WorkerMeasurer(0, cfg) as measurer:
        for r in range(rounds):
            row: dict[str, Any] = {"round": r + 1, "vendor_first": r % 2 == 1}
            for side in ("vendor", "ctune") if r % 2 else ("ctune", "vendor"):
                if side == "vendor":
                    row["vendor"] = _vendor_in_a_fresh_process(kernel, problem_name)
                    continue
                measurer.restart()
                m = measurer.measure(spec, candidate, build, problem, plan)
                if not m.outcome.is_ok or m.summary is None:
                    row["ctune"] = {"outcome": m.outcome.value, "error": m.error}
                    continue
                row["ctune"] = {"p50_ms": m.summary.p50_ms, "p99_ms": m.summary.p99_ms}
            rows.append(row)
            print(f"  {kernel}/{problem_name} round {r + 1}: {row}", flush=True)
    clean = [r for r in rows if "p50_ms" in r["ctune"]]
    return {
        "key": f"{kernel}/{problem_name}/{DEVICE_CLASS}",
        "candidate": candidate.as_dict(),
        "pinned": pinned is not None,
        "vendor": rows[0]["vendor"]["vendor"],
        "rounds": rows,
        **{
            f"vendor_over_ctune_{q}": ratio_summary(
                [r["vendor"][f"{q}_ms"] / r["ctune"][f"{q}_ms"] for r in clean]
            )
            for q in QUANTILES
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--case", action="append", default=[], help="KERNEL:PROBLEM")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--vendor-once", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.vendor_once:
        print(json.dumps(_vendor_once(*args.vendor_once.split(":", 1))))
        return 0
    from ctune.evidence.identity import gpu_id
    from ctune.identity_probe import current_fingerprint
    from ctune.spec import load_spec

    if not args.case or args.rounds < 2:
        raise SystemExit("error: give --case KERNEL:PROBLEM (one or more) and --rounds >= 2")
    cases = [tuple(c.split(":", 1)) for c in args.case]
    results = [run_case(k, p, args.rounds) for k, p in cases]
    spec = load_spec(ROOT / "kernels" / f"{cases[0][0]}.yaml")
    fingerprint = current_fingerprint(spec, True, problem=cases[0][1])
    report = {
        "benchmark": "vendor_rounds",
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "fingerprint": fingerprint,
        "rounds": args.rounds,
        "cases": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"vendor_rounds-{gpu_id(fingerprint)}.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    for case in results:
        summary = {q: case.get(f"vendor_over_ctune_{q}") for q in QUANTILES}
        print(f"{case['key']}: {json.dumps(summary)}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
