"""Sampling arithmetic: budgets in milliseconds -> counts, tails -> minimum samples.

Pure functions, no GPU. The numbers come from the measurements recorded in
docs/design.md (measured facts, H200): warm-up of at least 25 ms until three batch
means agree within 3% (cap 1 s); p99 needs n >= 1000 on microsecond kernels
(between-process CV of p99 fell from 4.4-4.9% at n=100 to 1.2% at n=1000) and
100-200 samples at 0.3 ms and above; chunks of about 100 samples behind a
10 ms spin kernel; a hang limit of max(10 s, 20x the baseline).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctune import l2policy
from ctune.errors import UserError
from ctune.measure import SamplingPlan

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.spec import KernelSpec

#: NVML's energy counter moves every ~100 ms; windows under 1 s gave 20-22% CV (docs/design.md)
MIN_ENERGY_WINDOW_S = 1.0
WARMUP_CAP_MS = 1000.0
WARMUP_AGREEMENT = 0.03  # three consecutive batch means within 3%
WARMUP_BATCHES = 3
WARMUP_BATCH_MS = 5.0  # GPU time per warm-up batch
WARMUP_BATCH_MAX = 5000
SHORT_KERNEL_MS = 0.1  # "microsecond kernel" for the tail rule
TAIL_SAMPLES_SHORT = 10  # samples beyond the quantile: per-process noise needs more on µs kernels
TAIL_SAMPLES_LONG = 2
CHUNK_MAX = 100  # samples enqueued behind one spin kernel
CHUNK_TARGET_MS = 100.0  # GPU time per chunk: NVML clock/throttle reads happen at chunk edges
SPIN_MS = 10.0  # "10 ms covers 100 samples" (docs/design.md)
SPIN_MAX_MS = 100.0
HANG_FACTOR = 20.0  # rule R3: max(10 s, 20x a typical measurement, 2x the slowest OK one)
#: any measurement may pay again what the slowest OK one did (a new problem's reference and
#: helper kernels JIT-compiled by CuPy: 13-17 s on a fresh machine, against ~0.3-2 s after)
SLOWEST_FACTOR = 2.0
UNKNOWN_BASELINE_TIMEOUT_S = 120.0  # before any candidate of the run has been measured
#: setting a new problem up in a worker (inputs, the reference's outputs, the check's
#: helper kernels, the module), before anything is launched or timed: CuPy JIT-compiles what
#: a new shape needs here, 13-17 s on a bare machine, so no hang limit may count it
SETUP_TIMEOUT_S = 120.0
EXCLUDED_MAX_FRACTION = 0.10  # more excluded than this -> INCONCLUSIVE (rule M2)
TIMING_METHODS = ("auto", "events", "graph")
GRAPH_BELOW_MS = 0.010  # auto: kernels under 10 µs are timed as graph replays
GRAPH_SAMPLE_MS = 0.2  # GPU time of the launches one graph replay (one sample) holds
GRAPH_MAX_LAUNCHES = 1000


@dataclass(frozen=True, slots=True)
class SampleCount:
    """How many samples to take and why."""

    n: int
    by_budget: int  # rep_ms / per-sample cost
    quantile_floor: int  # what the plan's quantile needs
    capped: bool  # max_samples cut it below what budget/min/quantile asked for
    note: str


def validate(plan: SamplingPlan) -> None:
    """Refuse plans that cannot give an honest number, with what to change."""
    try:
        l2policy.check(plan.l2_policy)
    except ValueError as exc:
        raise UserError(f"sampling plan: {l2policy.NAME}={exc}") from None
    if plan.timing not in TIMING_METHODS:
        raise UserError(
            f"sampling plan: timing={plan.timing!r} (allowed: {', '.join(TIMING_METHODS)})"
        )
    if plan.warmup_ms < 0 or plan.rep_ms <= 0:
        raise UserError(
            f"sampling plan: warmup_ms={plan.warmup_ms} and rep_ms={plan.rep_ms} "
            "must be >= 0 and > 0"
        )
    if plan.min_samples < 1 or plan.max_samples < plan.min_samples:
        raise UserError(
            f"sampling plan: need 1 <= min_samples ({plan.min_samples}) "
            f"<= max_samples ({plan.max_samples})"
        )
    if not 0.0 < plan.quantile < 1.0:
        raise UserError(f"sampling plan: quantile={plan.quantile} must lie in (0, 1)")
    if plan.timeout_s < 0:
        raise UserError(f"sampling plan: timeout_s={plan.timeout_s} must be >= 0 (0 = derived)")
    if plan.prune_above_ms is not None and not plan.prune_above_ms > 0:
        raise UserError(f"sampling plan: prune_above_ms={plan.prune_above_ms} must be > 0")
    if plan.energy and plan.energy_window_s < MIN_ENERGY_WINDOW_S:
        raise UserError(
            f"energy window {plan.energy_window_s:g} s is too short: NVML's energy counter "
            f"updates every ~100 ms, so windows under {MIN_ENERGY_WINDOW_S:g} s are noise "
            "(20% CV measured); use an energy window of at least 1 s"
        )


def quantile_min_samples(quantile: float, kernel_ms: float) -> int:
    """Samples needed so that ``quantile`` is not decided by the last one or two values.

    At least 10 samples beyond the quantile for kernels under 0.1 ms (p99 -> 1000,
    p95 -> 200) and 2 for longer ones (p99 -> 200); the A/A data in docs/design.md behind it.
    """
    tail = round(1.0 - max(quantile, 1.0 - quantile), 12)
    beyond = TAIL_SAMPLES_SHORT if kernel_ms < SHORT_KERNEL_MS else TAIL_SAMPLES_LONG
    return math.ceil(beyond / tail - 1e-9)


def _quantile_name(q: float) -> str:
    return f"p{round(q * 100, 2):g}"


def sample_count(per_sample_ms: float, kernel_ms: float, plan: SamplingPlan) -> SampleCount:
    """Triton's rule (rep_ms / cost) raised to min_samples and the quantile's floor, capped."""
    cost = max(per_sample_ms, 1e-6)
    by_budget = math.ceil(plan.rep_ms / cost)
    floor = quantile_min_samples(plan.quantile, kernel_ms)
    wanted = max(by_budget, plan.min_samples, floor)
    n = min(wanted, plan.max_samples)
    reasons = []
    if wanted == floor and floor > max(by_budget, plan.min_samples):
        reasons.append(
            f"{_quantile_name(plan.quantile)} of a {kernel_ms:.4g} ms kernel "
            f"needs >= {floor} samples"
        )
    elif wanted == plan.min_samples and plan.min_samples > by_budget:
        reasons.append(f"min_samples={plan.min_samples}")
    else:
        reasons.append(f"rep_ms={plan.rep_ms:g} at {cost:.4g} ms per sample")
    capped = wanted > plan.max_samples
    if capped:
        reasons.append(f"capped at max_samples={plan.max_samples} (wanted {wanted})")
        if floor > plan.max_samples:
            reasons.append(
                f"below the {floor} that {_quantile_name(plan.quantile)} needs: its CI is wide"
            )
    return SampleCount(n, by_budget, floor, capped, f"n={n}: " + "; ".join(reasons))


def timing_method(requested: str, kernel_ms: float) -> str:
    """``auto`` -> graph replays for kernels under GRAPH_BELOW_MS, single launches otherwise.

    A single launch of a microsecond kernel between two events is dominated by the
    launch's own latency and the events' resolution; a replay of many launches is not.
    """
    if requested != "auto":
        return requested
    return "graph" if kernel_ms < GRAPH_BELOW_MS else "events"


def graph_launches(kernel_ms: float) -> int:
    """Launches per graph replay: about GRAPH_SAMPLE_MS of GPU time, at least 2."""
    wanted = math.ceil(GRAPH_SAMPLE_MS / max(kernel_ms, 1e-6))
    return max(2, min(GRAPH_MAX_LAUNCHES, wanted))


def warmup_batch_size(
    kernel_ms: float,
    host_ms_per_launch: float,
    spin_ms: float = SPIN_MS,
    batch_ms: float = WARMUP_BATCH_MS,
) -> int:
    """Launches per warm-up batch: about ``batch_ms`` (5 ms) of GPU work, enqueued within
    80% of the spin.

    The spin kernel in front of each batch keeps the GPU busy while the host
    enqueues, so the batch runs back to back and its mean is the kernel's time,
    not the host's launch rate.
    """
    by_gpu = math.ceil(batch_ms / max(kernel_ms, 1e-6))
    by_host = math.floor(0.8 * spin_ms / max(host_ms_per_launch, 1e-4))
    return max(1, min(by_gpu, by_host, WARMUP_BATCH_MAX))


#: the shortest spin in front of a warm-up batch: long enough to hide a launch's host latency
WARMUP_SPIN_MIN_MS = 1.0
#: the spin outlasts the host's enqueue of the batch by this factor (the host's pace is measured
#: on the batch before; a slower one only makes the next batch's mean disagree and repeat)
WARMUP_SPIN_MARGIN = 2.0


def warmup_spin_ms(batch: int, host_ms_per_launch: float) -> float:
    """The spin in front of a warm-up batch: as long as enqueueing the batch takes, twice over.

    A fixed 10 ms spin (the sampling chunks' floor) made the warm-up of a 0.2 ms kernel
    60% spin: ~90 ms per candidate where ~35 ms of launches settle the clock as well. The
    agreement rule, not the spin, decides when the warm-up ends; the spin only keeps the
    batch back to back.
    """
    wanted = WARMUP_SPIN_MARGIN * batch * max(host_ms_per_launch, 0.0)
    return min(SPIN_MS, max(WARMUP_SPIN_MIN_MS, wanted))


def batches_agree(means: Sequence[float]) -> bool:
    """True when the last three batch means agree within 3% (the clock has settled)."""
    if len(means) < WARMUP_BATCHES:
        return False
    last = means[-WARMUP_BATCHES:]
    low, high = min(last), max(last)
    return low > 0 and high / low - 1.0 <= WARMUP_AGREEMENT + 1e-12


#: a screen (a search's first look at a candidate that may be pruned): at least this many
#: samples and this much GPU time, so that its median is not one outlier (the threshold it
#: is held to is 10% above the leader by default)
PRUNE_MIN_SAMPLES = 10
PRUNE_CHUNK_MS = 5.0
#: the screen's warm-up: the agreement rule (three batch means within 3%) with this floor
#: instead of the plan's 25 ms. In a search the GPU has just run the candidate before, so
#: its clock is up: the rule settles within a few batches. Only a candidate that goes on
#: gets the rest of the plan's warm-up, and its screen samples are dropped
SCREEN_WARMUP_MS = 3.0
#: GPU time per batch of the screen's warm-up (the protocol's is 5 ms: three would be 15 ms)
SCREEN_BATCH_MS = 1.0
#: host time to enqueue one screen sample (an L2 flush, two events and the launch), in
#: launches of the warm-up's measured pace
SCREEN_HOST_LAUNCHES = 4


def screen_size(per_sample_ms: float) -> int:
    """Samples in a screen: ~5 ms of samples, at most a full chunk, and never fewer than
    :func:`prunes` needs (a kernel slower than 10 ms a sample has a chunk of fewer than
    10: capped by the chunk alone, its screen could never prune)."""
    wanted = min(chunk_size(per_sample_ms), math.ceil(PRUNE_CHUNK_MS / max(per_sample_ms, 1e-6)))
    return max(PRUNE_MIN_SAMPLES, wanted)


def rest_batch_ms(warmup_ms: float) -> float:
    """GPU time per batch of the warm-up a screened candidate still gets: the protocol's
    5 ms batches for a plan whose warm-up holds three of them (a search that reports its
    own measurements keeps the protocol), else the screen's 1 ms (the search phase's 5 ms
    warm-up: the GPU ran the candidate a moment ago)."""
    return WARMUP_BATCH_MS if warmup_ms >= 3 * WARMUP_BATCH_MS else SCREEN_BATCH_MS


def screen_spin_ms(samples: int, host_ms_per_launch: float) -> float:
    """The spin in front of a screen: the warm-up's rule for the host time of ``samples``."""
    return warmup_spin_ms(samples * SCREEN_HOST_LAUNCHES, host_ms_per_launch)


def prunes(kept_ms: list[float], plan: SamplingPlan) -> bool:
    """Is this candidate, on its screen samples, clearly slower than the plan's threshold?"""
    if plan.prune_above_ms is None or len(kept_ms) < PRUNE_MIN_SAMPLES:
        return False
    return bool(statistics.median(kept_ms) > plan.prune_above_ms)


def chunk_size(per_sample_ms: float) -> int:
    """Samples per chunk: about 100 ms of GPU time, at most 100 samples."""
    return max(1, min(CHUNK_MAX, math.floor(CHUNK_TARGET_MS / max(per_sample_ms, 1e-6))))


def next_spin_ms(current_ms: float, enqueue_ms: float, starved: bool) -> float:
    """The spin must outlast the host's enqueue of a chunk; grow it when it did not."""
    wanted = max(current_ms, 2.0 * enqueue_ms)
    if starved:
        wanted = max(wanted, 2.0 * current_ms)
    return min(SPIN_MAX_MS, max(SPIN_MS, wanted))


def hang_timeout_s(
    plan: SamplingPlan,
    baseline_s: float | None,
    floor_s: float = 10.0,
    slowest_s: float | None = None,
) -> float:
    """Per-request limit: the plan's own, else max(floor, 20x a typical measurement's wall
    time, 2x the slowest OK one's)."""
    if plan.timeout_s > 0:
        return plan.timeout_s
    if baseline_s is None:
        return max(floor_s, UNKNOWN_BASELINE_TIMEOUT_S)
    return max(floor_s, HANG_FACTOR * baseline_s, SLOWEST_FACTOR * (slowest_s or 0.0))


def setup_timeout_s(hang_limit_s: float) -> float:
    """Limit for setting a problem up in a worker (the ``prepare`` request): never below the
    measurement's own hang limit, never below :data:`SETUP_TIMEOUT_S`."""
    return max(hang_limit_s, SETUP_TIMEOUT_S)


class TypicalWall:
    """The wall times of this run's OK measurements that the hang limit scales with.

    A typical one is the median of the last OK measurements, not the first: the first in a
    fresh worker also pays one-time costs (CuPy compiling the reference's kernels) and was
    seen at 30x a typical one (a CUTLASS attention search: ~10 s against ~0.3 s), which let
    one hung candidate hold the GPU for 200 s. The slowest OK one is kept too: a new problem
    pays those costs again, so no limit is set below twice what was once needed."""

    KEEP = 25

    def __init__(self, seed_s: float | None = None) -> None:
        self._walls: list[float] = [seed_s] if seed_s else []
        self.slowest: float | None = seed_s or None

    def seed(self, seconds: float | None) -> None:
        """A wall time known from elsewhere (a resumed run's baseline), or None to forget."""
        self._walls = [seconds] if seconds else []
        self.slowest = seconds or None

    def add(self, seconds: float | None) -> None:
        if seconds and seconds > 0:
            self._walls = [*self._walls, seconds][-self.KEEP :]
            self.slowest = max(self.slowest or 0.0, seconds)

    @property
    def seconds(self) -> float | None:
        if not self._walls:
            return None
        ordered = sorted(self._walls)
        return ordered[len(ordered) // 2]


def too_many_excluded(excluded: int, total: int) -> bool:
    return total > 0 and excluded / total > EXCLUDED_MAX_FRACTION


def check_seeds(problem_name: str) -> tuple[int, int]:
    """Fixed per problem: check #1 uses s, check #2 uses s + 1 (and timing uses s)."""
    import hashlib

    s = int(hashlib.sha256(problem_name.encode()).hexdigest()[:7], 16)
    return s, s + 1


def plan_for(
    settings: Settings | None = None, spec: KernelSpec | None = None, **overrides: Any
) -> SamplingPlan:
    """A plan from settings (warm-up, rep, energy window) and the spec's L2 policy.

    ``overrides`` with value None are ignored, so CLI options can be passed as they come.
    """
    base: dict[str, Any] = {}
    if settings is not None and settings.timing:
        base["timing"] = settings.timing  # the command line and settings win over the spec
    if settings is not None:
        base.update(
            warmup_ms=settings.warmup_ms,
            rep_ms=settings.rep_ms,
            energy_window_s=settings.energy_window_s,
        )
    if spec is not None:
        base["l2_policy"] = spec.l2_policy
        base.setdefault("timing", spec.timing)
    base.update({k: v for k, v in overrides.items() if v is not None})
    plan = SamplingPlan(**base)
    if plan.min_samples > plan.max_samples:
        plan = dataclasses.replace(plan, max_samples=plan.min_samples)
    return plan


def plan_to_json(plan: SamplingPlan) -> dict[str, Any]:
    return dataclasses.asdict(plan)


#: how a recorded plan field's type is said in a message
_TYPE_WORDS = {float: "a number", int: "a whole number", bool: "true or false", str: "a string"}


def _has_type(value: Any, t: Any) -> bool:
    """``value`` is a ``t`` as a plan field reads it: a float field takes a whole number
    too, and a bool is no number."""
    if isinstance(value, bool) or t is bool:
        return isinstance(value, bool) and t is bool
    return isinstance(value, (int, float) if t is float else t)


def _check_types(data: Mapping[str, Any]) -> None:
    """Each recorded value has its field's type, so a hand-edited plan is refused where it
    is read, not later by the arithmetic that meets it; ValueError naming the field."""
    hints = typing.get_type_hints(SamplingPlan)
    for name, value in data.items():
        allowed = typing.get_args(hints[name]) or (hints[name],)
        if not any(_has_type(value, t) for t in allowed):
            words = " or ".join(_TYPE_WORDS.get(t, "null") for t in allowed)
            raise ValueError(f"{name}={value!r:.40} is not {words}")


def plan_from_json(data: dict[str, Any]) -> SamplingPlan:
    """A recorded plan; one recorded before graph timing existed was timed with events,
    one that spells the L2 policy ``l2`` is read by :func:`ctune.l2policy.migrate`.
    Unknown fields and values of the wrong type are a ValueError naming the field (the
    values themselves: :func:`validate`)."""
    data = l2policy.migrate(data)
    known = {f.name for f in dataclasses.fields(SamplingPlan)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown sampling plan field {unknown[0]!r}")
    _check_types(data)
    return SamplingPlan(**{"timing": "events", **data})


__all__ = [
    "MIN_ENERGY_WINDOW_S",
    "SampleCount",
    "batches_agree",
    "check_seeds",
    "chunk_size",
    "graph_launches",
    "hang_timeout_s",
    "next_spin_ms",
    "plan_for",
    "plan_from_json",
    "plan_to_json",
    "quantile_min_samples",
    "rest_batch_ms",
    "sample_count",
    "screen_size",
    "screen_spin_ms",
    "timing_method",
    "too_many_excluded",
    "validate",
    "warmup_batch_size",
]
