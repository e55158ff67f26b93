"""Time one loaded candidate honestly with CUDA events (runs inside the worker).

The method is Triton's do_bench adapted for tails: samples enqueued in chunks behind a
short spin kernel, each bracketed by its own event pair, one sync per chunk; a warm-up
until batch means agree; a cold-L2 flush outside each sample's event pair; chunks with a
hardware-slowdown or thermal clock reason excluded. The measured reasons: docs/design.md,
"Measured facts". CuPy is passed in (this module is imported only by the worker).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctune.measure import SamplingPlan
from ctune.measure.device import (
    GPU_IDLE,
    SW_POWER_CAP,
    Telemetry,
    describe_reasons,
    excluding,
)
from ctune.measure.plan import (
    SCREEN_BATCH_MS,
    SCREEN_WARMUP_MS,
    SPIN_MS,
    WARMUP_BATCH_MS,
    WARMUP_CAP_MS,
    batches_agree,
    chunk_size,
    graph_launches,
    next_spin_ms,
    prunes,
    rest_batch_ms,
    sample_count,
    screen_size,
    screen_spin_ms,
    timing_method,
    warmup_batch_size,
    warmup_spin_ms,
)

log = logging.getLogger(__name__)

FLUSH_MIN_BYTES = 256 * 1024 * 1024

HELPER_SOURCE = r"""
extern "C" __global__ void ctune_spin(unsigned long long ns) {
  // Keeps the GPU busy while the host enqueues a chunk; %globaltimer is in ns.
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

extern "C" __global__ void ctune_health_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""

Launch = Callable[[], None]


class Helpers:
    """The spin and health-check kernels, compiled once per worker (NVRTC, cached on disk)."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        module = cupy.RawModule(code=HELPER_SOURCE, options=("-std=c++17",))
        self._spin = module.get_function("ctune_spin")
        self._add = module.get_function("ctune_health_add")
        self._spin.kernel  # noqa: B018 -- compile and load now, not inside a timed chunk
        self._add.kernel  # noqa: B018

    def spin(self, ms: float) -> None:
        self._spin((1,), (1,), (np.uint64(int(ms * 1e6)),))

    def health(self, stream: Any) -> str | None:
        """Vector add with a known answer; None when right, else what went wrong. Only this
        worker's own kernel runs on the GPU, between copies from and to the host: CuPy's
        elementwise kernels would each be loaded (or, with a cold cache, compiled) in a
        fresh process first, a large part of a search's first health check."""
        cp = self._cp
        n = 1 << 20
        a = np.arange(n, dtype=np.float32)
        x, y = cp.asarray(a), cp.asarray(2 * a)
        c = cp.asarray(np.full(n, np.nan, dtype=np.float32))
        self._add(((n + 255) // 256,), (256,), (x, y, c, np.int32(n)))
        stream.synchronize()
        wrong = int(np.count_nonzero(cp.asnumpy(c) != 3 * a))  # exact: values stay below 2^24
        return None if wrong == 0 else f"health kernel: {wrong} of {n} sums wrong"


@dataclass(frozen=True, slots=True)
class Warmup:
    launches: int
    kernel_ms: float  # back-to-back time per launch once settled (hot)
    gpu_ms: float  # GPU time spent in timed warm-up batches
    converged: bool
    host_ms_per_launch: float


@dataclass(frozen=True, slots=True)
class Timing:
    samples_ms: tuple[float, ...]  # kept samples, in order
    excluded: int
    total: int
    warmup: Warmup
    flush_ms: float
    flush_bytes: int
    sm_clock_mhz: float | None
    reasons: int
    note: str
    method: str = "events"  # what a sample is (ctune.measure.protocol)
    launches_per_sample: int = 1
    pruned: bool = False  # stopped after the screen (plan.prune_above_ms)

    @property
    def sw_power_capped(self) -> bool:
        return bool(self.reasons & SW_POWER_CAP)


@dataclass(frozen=True, slots=True)
class Sampler:
    """What one sample launches (a single launch, or a captured graph's replay of ``per``)."""

    launch: Launch
    method: str
    per: int
    fallback: str  # why graph timing fell back to events, or ""
    cold: bool  # flush the L2 before every sample
    flush_ms: float


@dataclass(frozen=True, slots=True)
class Screen:
    """A candidate's screen (:meth:`EventTimer.screen`): its timing (pruned or not), what
    its samples launched, and the GPU time it spent, which counts towards the warm-up."""

    timing: Timing
    sampler: Sampler
    gpu_ms: float

    @property
    def pruned(self) -> bool:
        return self.timing.pruned


class EventTimer:
    def __init__(
        self, cupy: Any, stream: Any, helpers: Helpers, l2_bytes: int, telemetry: Telemetry | None
    ) -> None:
        self._cp = cupy
        self._stream = stream
        self._helpers = helpers
        self._telemetry = telemetry
        self.flush_bytes = max(2 * int(l2_bytes), FLUSH_MIN_BYTES)
        self._flush: Any = None
        self._pairs: list[tuple[Any, Any]] = []
        self._spin_end = cupy.cuda.Event(disable_timing=True)

    # --- pieces -----------------------------------------------------------------
    def _pair(self, index: int) -> tuple[Any, Any]:
        while len(self._pairs) <= index:
            self._pairs.append((self._cp.cuda.Event(), self._cp.cuda.Event()))
        return self._pairs[index]

    def _elapsed(self, pair: tuple[Any, Any]) -> float:
        return float(self._cp.cuda.get_elapsed_time(pair[0], pair[1]))

    def _enqueue_flush(self, value: int) -> None:
        if self._flush is None:
            self._flush = self._cp.empty(self.flush_bytes, dtype=self._cp.uint8)
        self._cp.cuda.runtime.memsetAsync(
            self._flush.data.ptr, value & 0xFF, self.flush_bytes, self._stream.ptr
        )

    def _timed(self, launch: Launch, count: int, spin_ms: float = 0.0) -> tuple[float, float]:
        """(GPU ms for ``count`` back-to-back launches, host ms to enqueue them)."""
        if spin_ms > 0:
            self._helpers.spin(spin_ms)
        start, end = self._pair(0)
        t = time.perf_counter()
        start.record(self._stream)
        for _ in range(count):
            launch()
        end.record(self._stream)
        host_ms = (time.perf_counter() - t) * 1e3
        end.synchronize()
        return self._elapsed((start, end)), host_ms

    def flush_cost_ms(self) -> float:
        best = float("inf")
        start, end = self._pair(0)
        for i in range(3):
            start.record(self._stream)
            self._enqueue_flush(i)
            end.record(self._stream)
            end.synchronize()
            best = min(best, self._elapsed((start, end)))
        return best

    # --- warm-up ------------------------------------------------------------------
    def warmup(
        self,
        launch: Launch,
        plan: SamplingPlan,
        floor_ms: float | None = None,
        batch_ms: float = WARMUP_BATCH_MS,
    ) -> Warmup:
        """Batches of ``batch_ms`` of back-to-back launches until ``floor_ms`` (the plan's
        warm-up unless given) of them ran and three batch means agree within 3%."""
        floor = plan.warmup_ms if floor_ms is None else floor_ms
        launch()  # the first launch is dropped (module load, lazy init: 2-3x slow)
        self._stream.synchronize()
        first_ms, host_ms = self._timed(launch, 1)
        launches = 2
        kernel_ms, host_per_launch = first_ms, host_ms
        if first_ms < 1.0:
            gpu_ms, host_ms = self._timed(launch, 5, warmup_spin_ms(5, host_ms))
            kernel_ms, host_per_launch = gpu_ms / 5, host_ms / 5
            launches += 5
        means: list[float] = []
        total_gpu_ms = 0.0
        started = time.perf_counter()
        converged = False
        while True:
            batch = warmup_batch_size(kernel_ms, host_per_launch, batch_ms=batch_ms)
            spin = warmup_spin_ms(batch, host_per_launch) if batch > 1 else 0.0
            gpu_ms, host_ms = self._timed(launch, batch, spin)
            launches += batch
            total_gpu_ms += gpu_ms
            host_per_launch = host_ms / batch
            means.append(gpu_ms / batch)
            kernel_ms = means[-1]
            if total_gpu_ms >= floor and batches_agree(means):
                converged = True
                break
            if (time.perf_counter() - started) * 1e3 >= WARMUP_CAP_MS:
                break
        settled = statistics.median(means[-3:])
        return Warmup(launches, settled, total_gpu_ms, converged, host_per_launch)

    # --- graph replays ----------------------------------------------------------------
    def capture(self, launch: Launch, count: int) -> Launch:
        """``count`` launches captured into one CUDA graph; the replay as a launch.

        Raises what the capture raised when the launch cannot be captured (a launcher
        that allocates or synchronises): the caller falls back to single launches.
        """
        stream = self._stream
        stream.begin_capture()
        try:
            for _ in range(count):
                launch()
        finally:
            graph = stream.end_capture()
        graph.upload(stream)
        stream.synchronize()

        def replay() -> None:
            graph.launch(stream)

        replay()  # the first replay instantiates on the device: not a sample
        stream.synchronize()
        return replay

    def _prepare(self, launch: Launch, plan: SamplingPlan, warm: Warmup) -> Sampler:
        """What a sample is (events or a graph replay, decided from the warm-up) and the
        cold-L2 flush's cost."""
        method = timing_method(plan.timing, warm.kernel_ms)
        per, fallback = 1, ""
        sample = launch
        if method == "graph":
            per = graph_launches(warm.kernel_ms)
            try:
                sample = self.capture(launch, per)
            except Exception as exc:  # CuPy/CUDA raise their own types; any: single launches
                self._stream.synchronize()
                method, per, sample = "events", 1, launch
                fallback = f"graph capture failed ({type(exc).__name__}: {str(exc)[:80]}): events"
        cold = plan.l2_policy == "cold"
        flush_ms = self.flush_cost_ms() if cold else 0.0
        return Sampler(sample, method, per, fallback, cold, flush_ms)

    # --- sampling ------------------------------------------------------------------
    def _chunk(
        self,
        sampler: Sampler,
        k: int,
        spin_ms: float,
        first_index: int,
        restore: Callable[[], None] | None,
    ) -> tuple[list[float], float, bool]:
        """``k`` samples behind one spin: (their times in ms, the host's enqueue ms, whether
        the spin ended before the host finished enqueueing)."""
        stream = self._stream
        pairs = [self._pair(j) for j in range(k)]
        if restore is not None:
            restore()  # inout buffers back to their initial values, outside the samples
        self._helpers.spin(spin_ms)
        self._spin_end.record(stream)
        t = time.perf_counter()
        for j, (start, end) in enumerate(pairs):
            if sampler.cold:
                self._enqueue_flush(first_index + j)
            start.record(stream)
            sampler.launch()
            end.record(stream)
        enqueue_ms = (time.perf_counter() - t) * 1e3
        # the spin ended before the host finished enqueueing: the GPU may have waited
        was_starved = bool(self._spin_end.done)
        pairs[-1][1].synchronize()
        return [self._elapsed(p) / sampler.per for p in pairs], enqueue_ms, was_starved

    def screen(
        self, launch: Launch, plan: SamplingPlan, restore: Callable[[], None] | None = None
    ) -> Screen:
        """A search's first look at a candidate (``plan.prune_above_ms`` set): a short
        warm-up, then one short chunk whose median decides whether it goes on.

        The screen is search policy, not the protocol: its spin is sized to the host's
        enqueue time, its warm-up is the agreement rule over 1 ms batches with a 3 ms floor
        (the GPU ran the candidate before a moment ago), so a pruned candidate costs a few
        milliseconds. A candidate that goes on is warmed up to the plan's warm-up and
        sampled afresh (:meth:`measure` with ``screened``); its screen samples are dropped.
        """
        assert plan.prune_above_ms is not None
        warm = self.warmup(
            launch, plan, min(plan.warmup_ms, SCREEN_WARMUP_MS), batch_ms=SCREEN_BATCH_MS
        )
        sampler = self._prepare(launch, plan, warm)
        per_sample_ms = warm.kernel_ms * sampler.per + sampler.flush_ms
        k = screen_size(per_sample_ms)
        spin = screen_spin_ms(k, warm.host_ms_per_launch)
        telemetry = self._telemetry
        edge = telemetry.edge() if telemetry else None
        times, _, _ = self._chunk(sampler, k, spin, 0, restore)
        after = telemetry.edge() if telemetry else None
        bits = ((edge.reasons if edge else 0) | (after.reasons if after else 0)) & ~GPU_IDLE
        kept = [] if excluding(bits) else times
        pruned = prunes(kept, plan)
        notes = [
            f"pruned after {k} screening samples: median {statistics.median(kept):.4g} ms > "
            f"{plan.prune_above_ms:.4g} ms"
            if pruned
            else f"screened: {k} samples",
            f"warm-up {warm.launches} launches, {warm.gpu_ms:.0f} ms",
        ]
        clocks = [e.sm_clock_mhz for e in (edge, after) if e and e.sm_clock_mhz]
        timing = self._timing(sampler, warm, kept, k, clocks, bits, notes, pruned)
        gpu_ms = warm.gpu_ms + sum(times) * sampler.per
        return Screen(timing, sampler, gpu_ms)

    def measure(
        self,
        launch: Launch,
        plan: SamplingPlan,
        restore: Callable[[], None] | None = None,
        screened: Screen | None = None,
    ) -> Timing:
        """The sampling protocol's steps in order (warm-up, chunks behind the spin kernel, cold-L2
        flush, clock reads at chunk edges); kept in one function so the order is visible.

        A plan that may prune is screened first (:meth:`screen`, unless ``screened`` is
        its result already); a pruned candidate's timing is the screen's."""
        if screened is None and plan.prune_above_ms is not None:
            screened = self.screen(launch, plan, restore)
        if screened is not None and screened.pruned:
            return screened.timing
        if screened is None:
            warm = self.warmup(launch, plan)
            sampler = self._prepare(launch, plan, warm)
        else:  # the rest of the plan's warm-up, counting the screen's GPU time
            rest = self.warmup(
                launch,
                plan,
                floor_ms=max(0.0, plan.warmup_ms - screened.gpu_ms),
                batch_ms=rest_batch_ms(plan.warmup_ms),
            )
            first = screened.timing.warmup
            warm = Warmup(
                first.launches + rest.launches,
                rest.kernel_ms,
                screened.gpu_ms + rest.gpu_ms,
                rest.converged,
                rest.host_ms_per_launch,
            )
            sampler = screened.sampler
        sample_ms = warm.kernel_ms * sampler.per
        flush_ms = sampler.flush_ms
        count = sample_count(sample_ms + flush_ms, warm.kernel_ms, plan)
        chunk = chunk_size(sample_ms + flush_ms)
        telemetry = self._telemetry
        edge = telemetry.edge() if telemetry else None
        kept: list[float] = []
        clocks: list[float] = []
        excluded = starved = reasons = done = 0
        spin_ms = SPIN_MS
        while done < count.n:
            k = min(chunk, count.n - done)
            times, enqueue_ms, was_starved = self._chunk(sampler, k, spin_ms, done, restore)
            after = telemetry.edge() if telemetry else None
            # edges are read with the GPU just idle (after the sync): its idle bit is ours
            bits = ((edge.reasons if edge else 0) | (after.reasons if after else 0)) & ~GPU_IDLE
            reasons |= bits
            if excluding(bits):
                excluded += k
            else:
                kept.extend(times)
                clocks.extend(e.sm_clock_mhz for e in (edge, after) if e and e.sm_clock_mhz)
            starved += was_starved
            spin_ms = next_spin_ms(spin_ms, enqueue_ms, was_starved)
            edge = after
            done += k
        notes = [count.note]
        if screened is not None:
            notes.append(f"screened first ({screened.timing.total} samples, dropped)")
        if sampler.method == "graph":
            notes.append(
                f"graph timing: a sample is one replay of {sampler.per} launches, divided by "
                f"{sampler.per}"
            )
        if sampler.fallback:
            notes.append(sampler.fallback)
        notes.append(
            f"warm-up {warm.launches} launches, {warm.gpu_ms:.0f} ms"
            + ("" if warm.converged else f", clock not settled within {WARMUP_CAP_MS:.0f} ms")
        )
        if starved:
            notes.append(f"spin ended before the host finished enqueueing in {starved} chunk(s)")
        if telemetry is None:
            notes.append("NVML unavailable: throttling not checked")
        elif excluded:
            notes.append(f"excluded {excluded} samples under {describe_reasons(reasons)}")
        return self._timing(sampler, warm, kept, done, clocks, reasons, notes)

    def _timing(
        self,
        sampler: Sampler,
        warm: Warmup,
        kept: list[float],
        total: int,
        clocks: list[float],
        reasons: int,
        notes: list[str],
        pruned: bool = False,
    ) -> Timing:
        """A screen's or a measurement's samples as a :class:`Timing`."""
        return Timing(
            samples_ms=tuple(kept),
            excluded=total - len(kept),
            total=total,
            warmup=warm,
            flush_ms=sampler.flush_ms,
            flush_bytes=self.flush_bytes if sampler.cold else 0,
            sm_clock_mhz=round(statistics.fmean(clocks), 1) if clocks else None,
            reasons=reasons,
            note="; ".join(notes),
            method=sampler.method,
            launches_per_sample=sampler.per,
            pruned=pruned,
        )


__all__ = [
    "FLUSH_MIN_BYTES",
    "HELPER_SOURCE",
    "EventTimer",
    "Helpers",
    "Sampler",
    "Screen",
    "Timing",
    "Warmup",
]
