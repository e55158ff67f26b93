"""Stand-ins on a simulated clock, for how the driver spends wall time.

NOT NVCC and NOT A GPU (stand-ins only test logic): they exist to test compile-ahead,
build-aware filling and in-flight build sharing without sleeping. Every duration advances
a :class:`FakeClock`, which the driver reads through ``run_search(clock=...)``; a compile
"finishes" when the clock passes its end, so ``Future.done()`` answers as a real compile
would, and waiting on an unfinished one moves the clock to its end.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.compile.contract import Compiler
from ctune.records import Build, Candidate, Measurement, Outcome, Resources
from ctune.spec.space.params import BuildGroup
from ctune.testing.standins import StandInMeasurer, write_standin_kernel

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.measure import SamplingPlan
    from ctune.spec import KernelSpec, Problem


class FakeClock:
    """Simulated seconds; call it for the time (the driver's ``clock``). What is due at a
    time (a compile's end) happens when the clock passes it, watched or not."""

    def __init__(self, start_s: float = 0.0) -> None:
        self.now_s = start_s
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # equal times: first registered, first run

    def __call__(self) -> float:
        return self.now_s

    def at(self, when_s: float, action: Callable[[], None]) -> None:
        """Run ``action`` once the clock reaches ``when_s``."""
        heapq.heappush(self._due, (when_s, next(self._order), action))
        self._run_due()

    def advance(self, seconds: float) -> None:
        self.now_s += seconds
        self._run_due()

    def advance_to(self, when_s: float) -> None:
        self.now_s = max(self.now_s, when_s)
        self._run_due()

    def _run_due(self) -> None:
        while self._due and self._due[0][0] <= self.now_s:
            heapq.heappop(self._due)[2]()


class _SimulatedCompile(Future[Build]):
    """A compile that ends at ``end_s`` on the fake clock."""

    def __init__(self, clock: FakeClock, end_s: float, build: Build) -> None:
        super().__init__()
        self._clock = clock
        self._end_s = end_s
        self._build = build
        clock.at(end_s, self._settle)  # it ends whether or not anyone waits for it

    def _settle(self) -> None:
        if not self.done():
            self.set_result(self._build)

    def result(self, timeout: float | None = None) -> Build:
        """The caller blocks until the compile ends, or for ``timeout`` simulated seconds
        (then ``TimeoutError``, as a real future's ``result`` raises)."""
        if not self.done():
            if timeout is not None and self._clock() + timeout < self._end_s:
                self._clock.advance(timeout)
                raise FutureTimeout
            self._clock.advance_to(self._end_s)  # the clock settles it at its end
        return super().result(timeout)


class SlowStandInCompiler(Compiler):
    """NOT NVCC: every distinct build takes ``compile_s`` simulated seconds on a slot
    (``compile_s_of``, where given: that candidate's build's seconds).

    One build per distinct set of compiled genes (runtime genes are not part of a build, as
    with nvcc), on one of ``jobs`` slots, first come first served, like the thread pool of
    ``NvccCompiler``. A request for a finished build is a cache hit (instant); a request
    that starts while the same build is compiling holds its slot until that one ends, as
    the compiler's per-key wait does. ``submits``, ``nvcc_runs`` and ``slot_waits`` record
    what the driver asked for, what was really compiled, and how many requests held a slot
    only to wait for another.
    """

    def __init__(
        self,
        spec: KernelSpec,
        clock: FakeClock,
        *,
        compile_s: float = 60.0,
        jobs: int = 4,
        compile_s_of: Callable[[Candidate], float] | None = None,
    ) -> None:
        self.spec = spec
        self.clock = clock
        self.compile_s = compile_s
        self.compile_s_of = compile_s_of or (lambda _: compile_s)
        self.jobs = jobs
        self._slots = [0.0] * jobs  # when each slot is free
        self._ready: dict[BuildGroup, float] = {}  # build -> when it is in the cache
        self.submits: list[BuildGroup] = []  # builds requested through submit(), in order
        self.nvcc_runs: list[BuildGroup] = []  # builds really compiled, in order
        self.slot_waits = 0  # requests that held a slot waiting for the same build

    def group(self, candidate: Candidate) -> BuildGroup:
        """The compiled genes: candidates that agree on them share a build."""
        return self.spec.space.build_group(candidate.genes)

    def _record(
        self, candidate: Candidate, group: BuildGroup, hit: bool, seconds: float = 0.0
    ) -> Build:
        digest = hashlib.sha256(repr(group).encode()).hexdigest()
        return Build(
            candidate_key=candidate.key(),
            argv=("standin-slow-cc", *(f"-D{k}={v}" for k, v in group), "standin.cu"),
            toolchain="slow stand-in compiler (not nvcc)",
            outcome=Outcome.OK,
            binary_path=f"standin://{digest[:16]}",
            sass_sha256=digest,
            compile_s=0.0 if hit else seconds,
            resources=Resources(regs=64, spills_store_bytes=0, spills_load_bytes=0),
            cache_hit=hit,
            build_key=digest[:32],
        )

    def _schedule(self, candidate: Candidate, start_s: float) -> tuple[float, Build]:
        """(when it ends, the build) for a request that gets a slot at ``start_s``."""
        group = self.group(candidate)
        ready = self._ready.get(group)
        if ready is not None:
            # in the cache, or being compiled: wait for that one, never compile twice
            return max(start_s, ready), self._record(candidate, group, hit=True)
        seconds = self.compile_s_of(candidate)
        end = start_s + seconds
        self._ready[group] = end
        self.nvcc_runs.append(group)
        return end, self._record(candidate, group, hit=False, seconds=seconds)

    def build(self, candidate: Candidate, problem: Problem) -> Build:
        """Synchronous: the caller's clock waits for the compile (or the one in flight)."""
        end, build = self._schedule(candidate, self.clock())
        self.clock.advance_to(end)
        return build

    def submit(self, candidate: Candidate, problem: Problem) -> Future[Build]:
        self.submits.append(self.group(candidate))
        slot = min(range(self.jobs), key=lambda i: self._slots[i])
        start = max(self.clock(), self._slots[slot])
        ready = self._ready.get(self.group(candidate))
        self.slot_waits += ready is not None and ready > start
        end, build = self._schedule(candidate, start)
        self._slots[slot] = end
        return _SimulatedCompile(self.clock, end, build)

    def fingerprint_fields(self) -> dict[str, str]:
        return {"nvcc_version": "slow stand-in compiler (not nvcc)", "ptxas_version": "stand-in"}

    def source_inputs(self, spec: KernelSpec, settings: Settings) -> dict[str, Any]:
        return {}  # nothing was compiled: no sources to list

    def close(self) -> None:
        pass


class TimedStandInMeasurer(StandInMeasurer):
    """NOT A GPU: the analytic stand-in, ``measure_s`` simulated seconds per candidate."""

    def __init__(
        self, clock: FakeClock, *, measure_s: float = 1.0, seed: int = 0, **options: object
    ) -> None:
        super().__init__(seed, **options)  # type: ignore[arg-type]
        self.clock = clock
        self.measure_s = measure_s

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        self.clock.advance(self.measure_s)
        return super().measure(spec, candidate, build, problem, plan)

    def remeasure(
        self,
        spec: KernelSpec,
        items: Sequence[tuple[Candidate, Build]],
        problem: Problem,
        plan: SamplingPlan,
        processes: int,
        *,
        seed: int | None = None,
    ) -> dict[str, list[Measurement]]:
        self.clock.advance(self.measure_s * len(items) * processes)
        return super().remeasure(spec, items, problem, plan, processes, seed=seed)


RUNTIME_YAML = """\
name: {name}
description: stand-in kernel with runtime genes, for driver tests (never compiled)
entry: standin_kernel
genes:
  TILE_M: {{pow2: [16, 256], default: 64, family: template, suggest: [128]}}
  TILE_N: {{pow2: [16, 256], default: 64, family: template, suggest: [128]}}
  STAGES: {{range: [1, 4], default: 2, family: template}}
  SPLIT_K: {{values: [1, 2, 4, 8], default: 1, family: runtime}}
  RASTER: {{values: [0, 1, 2], default: 0, family: runtime}}
restrictions:
  - "TILE_M * TILE_N <= 16384"
  - "TILE_M * TILE_N * STAGES <= 32768"
  - "SPLIT_K * TILE_M <= 512"
launch:
  grid: ["ceil_div(M, TILE_M) * ceil_div(N, TILE_N) * SPLIT_K", "1 + RASTER"]  # stand-in use
  block: [128]
problems:
  - {{name: small, dims: {{M: 1024, N: 1024, K: 1024}}}}
args:
  - {{name: A, role: input, dtype: float32, shape: [M, K]}}
  - {{name: C, role: output, dtype: float32, shape: [M, N]}}
reference:
  python: {name}_ref.py:reference
metrics:
  flops: "2 * M * N * K"
"""


def runtime_standin_spec(folder: Path, name: str = "standin_rt") -> KernelSpec:
    """Write and load the runtime-gene stand-in kernel (its ``.cu`` is never compiled).

    SPLIT_K and RASTER are runtime genes: 12 runtime settings per build, fewer where a
    restriction ties SPLIT_K to the tile.
    """
    from ctune.spec import load_spec

    return load_spec(write_standin_kernel(Path(folder), name, RUNTIME_YAML))


__all__ = [
    "FakeClock",
    "SlowStandInCompiler",
    "TimedStandInMeasurer",
    "runtime_standin_spec",
]
