"""Write the committed search journal that CI plots: a replay of recorded H200 measurements.

``ctune plot`` is tested, and docs/results.md is illustrated, from a journal in the
repository. No journal of a real search is committed, so this one is made by the
real search driver (NSGA-II, p50 and registers) over the saxpy space whose every candidate
was compiled and measured once on an NVIDIA H200
(``tests/data/ground_truth/saxpy-n1m.json.gz``, via ``ReplayCompiler`` and
``ReplayMeasurer``). The objective values are those real measurements; the times in
the journal are simulated (each candidate's recorded compile time on four compile
slots, and its recorded samples at their mean latency plus a fixed per-candidate
cost), so its "search time" axis shows the shape of a run, not a measured one.

    python bench/replay_journal.py            # rewrites tests/data/journals/...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

GROUND_TRUTH = ROOT / "tests" / "data" / "ground_truth" / "saxpy-n1m.json.gz"
OUT = ROOT / "tests" / "data" / "journals" / "saxpy-n1m-replay.jsonl"
KERNEL = ROOT / "tests" / "data" / "kernels" / "saxpy.cu"
#: per-candidate cost besides timing: worker round trip, warm-up, correctness check
MEASURE_OVERHEAD_S = 0.35
COMPILE_SLOTS = 4


class _Timed:
    """A replay compiler or measurer that advances the fake clock as the real one would."""

    def __init__(self, inner: Any, clock: Any, truth: Any) -> None:
        self.inner, self.clock, self.truth = inner, clock, truth

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _entry(self, candidate: Any) -> dict[str, Any]:
        return dict(self.truth.entries.get(candidate.key(), {}))

    def build(self, candidate: Any, problem: Any) -> Any:
        self.clock.advance(float(self._entry(candidate).get("compile_s") or 0.0) / COMPILE_SLOTS)
        return self.inner.build(candidate, problem)

    def submit(self, candidate: Any, problem: Any) -> Any:
        from concurrent.futures import Future

        future: Future[Any] = Future()
        future.set_result(self.build(candidate, problem))
        return future

    def measure(self, spec: Any, candidate: Any, build: Any, problem: Any, plan: Any) -> Any:
        entry = self._entry(candidate)
        timing = float(entry.get("n") or 0) * float(entry.get("mean_ms") or 0.0) / 1e3
        self.clock.advance(MEASURE_OVERHEAD_S + timing)
        return self.inner.measure(spec, candidate, build, problem, plan)


def main(argv: list[str] | None = None) -> int:
    from ga_sample_efficiency import restrict

    from ctune.config import Settings
    from ctune.objective import parse_objective_spec
    from ctune.search.driver import SearchOptions, run_search
    from ctune.spec import load_spec
    from ctune.testing.slow_builds import FakeClock
    from ctune.testing.standins import GroundTruth, ReplayCompiler, ReplayMeasurer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--budget", type=int, default=80)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)

    import tempfile

    truth = GroundTruth.load(GROUND_TRUTH)
    spec = restrict(load_spec(KERNEL), truth.meta.get("fixed", {}))
    clock = FakeClock()
    args.out.unlink(missing_ok=True)
    scratch = tempfile.TemporaryDirectory()  # nothing but the journal is kept
    result = run_search(
        Settings(cache_dir=Path(scratch.name), registry=Path(scratch.name) / "registry"),
        spec,
        parse_objective_spec(["p50", "regs"], [], spec.metrics),
        SearchOptions(
            problem=truth.problem,
            strategy="nsga2",
            budget=args.budget,
            seed=args.seed,
            journal=args.out,
            confirm_processes=0,
            fill=False,
        ),
        compiler=_Timed(ReplayCompiler(truth), clock, truth),
        measurer=_Timed(ReplayMeasurer(truth), clock, truth),
        clock=clock,
    )
    scratch.cleanup()
    print(f"{args.out}: {result.evaluations} evaluations, {len(result.front)} on the front")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
