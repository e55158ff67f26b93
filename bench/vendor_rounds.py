"""A pinned artifact against the vendor call, round after round in fresh processes.

``kernels_vs_vendor.py`` times the vendor once, in its own process, beside a search's
confirmation: one number each, so a 1% gap cannot be told from what one process differs
from the next (the CUTLASS ground truths' process-to-process spread is a median 2%). Here
each round measures the registry's pinned build in a fresh ctune worker and the vendor
call (cuBLAS or PyTorch SDPA, ``kernels_vs_vendor.VendorTimer``: the same event method,
cold L2) in a fresh process of its own, the order alternating between rounds. Several
cases share each round's two processes (one worker times every case's build, one process
every vendor call, the cases in an order that rotates), so a set of rows costs little more
than one. Each round
gives a ratio, vendor over ctune (> 1: ctune faster), at p50 and p99; the report gives
their geometric mean with a 95% confidence interval (Student's t over the log ratios,
scipy.stats) and says whether 1.0 is inside it.

    python bench/vendor_rounds.py --case gemm:sq4096 --case attention:prefill-s4096-d64 \\
        --rounds 8 --out bench/results

With ``--change GENE=VALUE`` (repeatable) each round also times each pinned build with
those genes changed, e.g. ``--change ftz=true``: what one gene is worth on every row. With
``--pool FILE`` (T4 configurations, e.g. ``bench/pools/attention-noncausal.t4.json``)
each round's fresh ctune worker measures the pinned build and every pool configuration
valid for the problem, in an order that rotates between rounds, beside the same vendor
process: builds compared with each other and with the vendor in the same rounds, each
with its own interval (``variants``), and with the pinned build round by round, timed by
the same worker (``pinned_over_variant``: > 1, the variant faster), before one of them is
searched for and pinned.
``--case KERNEL:PROBLEM=FILE`` gives that case a pool of its own instead (each row its
neighbours, in one set of rounds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DEVICE_CLASS = "sm90-nvidia-h200"
T = TypeVar("T")
QUANTILES = ("p50", "p99")


def ratio_summary(
    ratios: list[float], confidence: float = 0.95, subject: str = "ctune"
) -> dict[str, Any]:
    """Geometric mean of ``ratios`` and its ``confidence`` interval (t over the logs); the
    verdict, under ``subject``, reads a ratio above 1 as the denominator's side faster."""
    from scipy import stats

    logs = [math.log(r) for r in ratios]
    n = len(logs)
    if n == 0:  # a build that failed (or hung) in every round: reported, not a crash
        return {"geomean": None, "low": None, "high": None, "rounds": 0, subject: "no clean round"}
    mean = sum(logs) / n
    if n < 2:
        return {"geomean": math.exp(mean), "low": None, "high": None, "rounds": n}
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = stats.t.ppf((1 + confidence) / 2, n - 1) * sd / math.sqrt(n)
    low, high = math.exp(mean - half), math.exp(mean + half)
    verdict = "faster" if low > 1 else "slower" if high < 1 else "same (1.0 inside)"
    return {"geomean": math.exp(mean), "low": low, "high": high, "rounds": n, subject: verdict}


def _vendor_once(cases: list[str]) -> list[dict[str, Any]]:
    """One fresh process's vendor timings, one per ``KERNEL:PROBLEM`` (this script run with
    ``--vendor-once``)."""
    from kernels_vs_vendor import VendorTimer

    timer = VendorTimer()
    out = []
    for case in cases:
        name, launch = timer.launch(*case.split(":", 1))
        p50, p99 = timer.time_call(launch)
        out.append({"vendor": name, "p50_ms": p50, "p99_ms": p99})
    return out


def _vendor_in_a_fresh_process(cases: list[str]) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, __file__, "--vendor-once", *cases],
        capture_output=True,
        text=True,
        timeout=300 + 30 * len(cases),
        check=True,
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def _ratios(rows: list[dict[str, Any]], side: str) -> dict[str, Any]:
    """Vendor over ``side`` (a key of each round) at each quantile, over the clean rounds."""
    clean = [r for r in rows if "p50_ms" in r.get(side, {})]
    return {
        f"vendor_over_ctune_{q}": ratio_summary(
            [r["vendor"][f"{q}_ms"] / r[side][f"{q}_ms"] for r in clean]
        )
        for q in QUANTILES
    }


def _pinned_over(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The pinned build's time over the build ``key``'s, round by round (both timed by the
    same worker), at each quantile over the rounds where both are clean: > 1, ``key`` faster."""
    both = [r for r in rows if "p50_ms" in r.get("ctune", {}) and "p50_ms" in r.get(key, {})]
    return {
        f"pinned_over_variant_{q}": ratio_summary(
            [r["ctune"][f"{q}_ms"] / r[key][f"{q}_ms"] for r in both], subject="variant"
        )
        for q in QUANTILES
    }


@dataclass
class _Case:
    """One artifact's builds to time: its pinned build first, then the pool's and the
    pinned build with ``--change``'s genes."""

    name: str  # KERNEL:PROBLEM
    spec: Any
    problem: Any
    plan: Any
    timed: list[Any]  # candidates
    builds: dict[str, Any]
    pinned: bool
    failed: dict[str, str] = field(default_factory=dict)
    pool: Path | None = None  # the T4 file behind the builds after the pinned one


def _prepare(
    name: str, pool: Path | None, cfg: Any, change: Sequence[str] = ()
) -> _Case | dict[str, Any]:
    """The pinned build of ``KERNEL:PROBLEM`` on this GPU class (and the pool's valid
    configurations, and the pinned build with ``change``'s NAME=VALUE genes, where valid), built; a
    dict saying why not where the pinned build fails."""
    from ctune.ci.check import with_recorded_acf
    from ctune.cli.common import load
    from ctune.compile.nvcc import NvccCompiler
    from ctune.exchange.t4 import candidates as pool_candidates
    from ctune.exchange.t4 import read_t4
    from ctune.measure.plan import plan_from_json
    from ctune.registry.store import read_artifact_file

    kernel, problem_name = name.split(":", 1)
    path = ROOT / "registry" / kernel / problem_name / f"{DEVICE_CLASS}.json"
    artifact = read_artifact_file(path)
    pinned = artifact.pinned_member()
    spec, toolchain = load(ROOT / "kernels" / f"{kernel}.cu", cfg)
    spec = with_recorded_acf(spec, artifact)  # a pin with a controls file has its gene
    candidate = spec.in_space((pinned or artifact.baseline).candidate)
    problem = spec.problem(problem_name)
    plan = plan_from_json({**dict(artifact.protocol["plan"]), "l2_policy": "cold"})
    timed = [candidate]
    if pool is not None:
        mapped = pool_candidates(spec.name, spec.space, read_t4(pool), problem.dims)
        timed += [c for c in mapped.candidates if c.key() != candidate.key()]
    if change:
        changed = changed_candidates(spec, candidate, change, problem.dims)
        seen = {t.key() for t in timed}
        timed += [c for c in changed if c.key() not in seen]
    with NvccCompiler.from_settings(spec, toolchain, cfg) as compiler:
        # the compiler's jobs at a time: a pool not in the cache compiles in parallel
        pending = {c.key(): compiler.submit(c, problem) for c in timed}
        builds = {key: future.result() for key, future in pending.items()}
    failed = {k: b.outcome.value for k, b in builds.items() if not b.outcome.is_ok}
    if candidate.key() in failed:
        return {"key": f"{kernel}/{problem_name}", "error": f"build {failed[candidate.key()]}"}
    timed = [c for c in timed if c.key() not in failed]
    return _Case(name, spec, problem, plan, timed, builds, pinned is not None, failed, pool)


def run_cases(
    names: list[str],
    rounds: int,
    pools: Mapping[str, Path | None] | None = None,
    save: Callable[[list[dict[str, Any]]], None] | None = None,
    change: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Each ``KERNEL:PROBLEM``'s pinned build (and its pool's configurations from
    ``pools``, ``variants``) against the vendor, ``rounds`` rounds. A round is one fresh
    ctune worker timing every case's builds and one fresh process timing every case's vendor
    call, the two in alternating order, the cases (and each case's builds) in an order that
    rotates. ``save`` gets the report so far after each round (a call cut short keeps its
    rounds)."""
    from ctune.cli.common import settings
    from ctune.measure.session import WorkerMeasurer

    cfg = settings()
    prepared = [_prepare(name, (pools or {}).get(name), cfg, change) for name in names]
    cases = [c for c in prepared if isinstance(c, _Case)]
    rows: dict[str, list[dict[str, Any]]] = {c.name: [] for c in cases}
    with WorkerMeasurer(0, cfg) as measurer:
        for r in range(rounds):
            now: dict[str, dict[str, Any]] = {
                c.name: {"round": r + 1, "vendor_first": r % 2 == 1} for c in cases
            }
            for side in ("vendor", "ctune") if r % 2 else ("ctune", "vendor"):
                if side == "vendor":
                    timed = _vendor_in_a_fresh_process([c.name for c in cases])
                    for case, vendor in zip(cases, timed, strict=True):
                        now[case.name]["vendor"] = vendor
                    continue
                measurer.restart()
                for case in _rotated(cases, r):
                    for cand in _rotated(case.timed, r):
                        m = measurer.measure(
                            case.spec, cand, case.builds[cand.key()], case.problem, case.plan
                        )
                        if not m.outcome.is_ok or m.summary is None:
                            got: dict[str, Any] = {"outcome": m.outcome.value, "error": m.error}
                        else:
                            got = {"p50_ms": m.summary.p50_ms, "p99_ms": m.summary.p99_ms}
                        now[case.name]["ctune" if cand is case.timed[0] else cand.key()] = got
            for case in cases:
                rows[case.name].append(now[case.name])
            print(f"  round {r + 1}: {json.dumps(now)}", flush=True)
            if save is not None and r >= 1:
                save(_reports(prepared, rows))
    return _reports(prepared, rows)


def _reports(
    prepared: list[_Case | dict[str, Any]],
    rows: dict[str, list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Each case's report from its rounds so far (a case whose pinned build failed: why)."""
    return [item if isinstance(item, dict) else _report(item, rows[item.name]) for item in prepared]


def changed_candidates(
    spec: Any, candidate: Any, change: Sequence[str], dims: Mapping[str, int]
) -> list[Any]:
    """``candidate`` with the ``NAME=VALUE`` items of ``change`` applied as ``ctune compile
    --set`` reads them; empty where the result breaks a restriction at ``dims``."""
    from ctune.cli.common import parse_sets
    from ctune.exchange.t4 import candidates

    values = parse_sets(spec.space, change, candidate.as_dict())
    return candidates(spec.name, spec.space, [values], dims).candidates


def _rotated(items: list[T], r: int) -> list[T]:
    """``items`` starting at position ``r`` (mod their number): each takes each place in turn."""
    shift = r % len(items) if items else 0
    return items[shift:] + items[:shift]


def _report(case: _Case, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One case's rounds and ratios (and its other builds', as ``variants``)."""
    kernel, problem_name = case.name.split(":", 1)
    plain = ("round", "vendor_first", "vendor", "ctune")
    out: dict[str, Any] = {
        "key": f"{kernel}/{problem_name}/{DEVICE_CLASS}",
        "candidate": case.timed[0].as_dict(),
        "pinned": case.pinned,
        "vendor": rows[0]["vendor"]["vendor"],
        "rounds": [{k: v for k, v in r.items() if k in plain} for r in rows],
        **_ratios(rows, "ctune"),
    }
    if len(case.timed) > 1 or case.failed:
        if case.pool is not None:
            pool = case.pool
            out["pool"] = str(pool.relative_to(ROOT) if pool.is_relative_to(ROOT) else pool)
        out["variant_build_failures"] = case.failed
        out["variants"] = [
            {
                "candidate": c.as_dict(),
                "key": c.key(),
                "rounds": [{"round": r["round"], **r.get(c.key(), {})} for r in rows],
                **_ratios(rows, c.key()),
                **_pinned_over(rows, c.key()),
            }
            for c in case.timed[1:]
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        help="KERNEL:PROBLEM, or KERNEL:PROBLEM=POOL with a pool of its own (instead of --pool)",
    )
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--pool", type=Path, default=None, help="T4 configurations timed beside the pinned build"
    )
    parser.add_argument(
        "--change",
        action="append",
        default=[],
        metavar="GENE=VALUE",
        help="also time each pinned build with these genes changed (where that is valid)",
    )
    parser.add_argument(
        "--label", default="", help="in the result file's name: vendor_rounds-LABEL-<gpu>.json"
    )
    parser.add_argument("--vendor-once", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.vendor_once:
        print(json.dumps(_vendor_once(args.vendor_once)))
        return 0
    from ctune.cli.common import settings
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.evidence.identity import gpu_id
    from ctune.identity_probe import current_fingerprint
    from ctune.spec import load_spec

    if not args.case or args.rounds < 2:
        raise SystemExit("error: give --case KERNEL:PROBLEM (one or more) and --rounds >= 2")
    pool = args.pool.resolve() if args.pool is not None else None
    pools: dict[str, Path | None] = {}
    for text in args.case:
        name, own = text.split("=", 1) if "=" in text else (text, "")
        pools[name] = Path(own).resolve() if own else pool
    cases = [tuple(name.split(":", 1)) for name in pools]
    if any(len(c) != 2 for c in cases):
        raise SystemExit("error: each --case is KERNEL:PROBLEM or KERNEL:PROBLEM=POOL")
    missing = [str(p) for p in pools.values() if p is not None and not p.is_file()]
    if missing:
        raise SystemExit(f"error: no pool file {missing[0]}")
    if any("=" not in c for c in args.change):
        raise SystemExit("error: each --change is GENE=VALUE")
    spec = load_spec(ROOT / "kernels" / f"{cases[0][0]}.yaml")
    # the toolchain the builds use: with a ptxas setting, the split one (docs/advanced-controls.md)
    fingerprint = current_fingerprint(spec, True, problem=cases[0][1], nvcc=nvcc_for(settings()))
    args.out.mkdir(parents=True, exist_ok=True)
    label = args.label or (pool.stem.removesuffix(".t4") if pool is not None else "")
    path = args.out / f"vendor_rounds{'-' + label if label else ''}-{gpu_id(fingerprint)}.json"

    def save(results: list[dict[str, Any]]) -> None:
        report = {
            "benchmark": "vendor_rounds",
            "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "fingerprint": fingerprint,
            "rounds": len(next((c["rounds"] for c in results if "rounds" in c), [])),
            "cases": results,
        }
        path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")

    from ctune.errors import UserError

    try:
        results = run_cases(list(pools), args.rounds, pools, save, args.change)
    except UserError as exc:  # e.g. a --change gene the kernel does not have
        raise SystemExit(f"error: {exc}") from None
    save(results)
    for case in results:
        summary = {q: case.get(f"vendor_over_ctune_{q}") for q in QUANTILES}
        print(f"{case['key']}: {json.dumps(summary)}")
        for variant in case.get("variants", []):
            summary = {q: variant.get(f"vendor_over_ctune_{q}") for q in QUANTILES}
            versus = {q: variant.get(f"pinned_over_variant_{q}") for q in QUANTILES}
            print(
                f"  {variant['key']}: {json.dumps(summary)}; pinned over it: {json.dumps(versus)}"
            )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
