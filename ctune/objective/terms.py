"""The built-in objective terms: what one number means, its unit and direction.

A term turns a finished candidate (its Build and Measurement) into one number in its own
unit. It declares what it needs (``needs``: ``{"gpu"}``, ``{"gpu", "nvml"}`` or nothing), so
``ctune search`` refuses ``--objective energy`` without NVML before compiling, and which
latency quantile (``quantile``), so the plan samples enough for a p99. Latency terms prefer
the measurer's summary (it knows which samples rule M2 excluded) and fall back to the raw
samples, which is what a pooled confirmation measurement carries.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ctune.records import Build, Measurement

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

Direction = Literal["min", "max"]

#: capabilities a term may need; checked up front by the search service
CAPABILITIES = ("gpu", "nvml")

#: unit -> {accepted spelling: factor to convert a value in that spelling into the unit}
UNIT_TABLES: dict[str, dict[str, float]] = {
    "ms": {"ms": 1.0, "us": 1e-3, "µs": 1e-3, "ns": 1e-6, "s": 1e3},
    "s": {"s": 1.0, "ms": 1e-3, "min": 60.0},
    "J": {"J": 1.0, "mJ": 1e-3, "uJ": 1e-6, "µJ": 1e-6},
    "W": {"W": 1.0, "mW": 1e-3, "kW": 1e3},
    "TFLOP/s": {"TFLOP/s": 1.0, "GFLOP/s": 1e-3, "PFLOP/s": 1e3},
    "GB/s": {"GB/s": 1.0, "MB/s": 1e-3, "TB/s": 1e3},
    "B": {"B": 1.0, "bytes": 1.0, "KiB": 1024.0, "KB": 1000.0},
    "regs": {"regs": 1.0},
    # energy-delay product: energy per call times the median time of a call
    "J*s": {
        "J*s": 1.0,
        "mJ*s": 1e-3,
        "J*ms": 1e-3,
        "mJ*ms": 1e-6,
        "uJ*s": 1e-6,
        "µJ*s": 1e-6,
        "uJ*ms": 1e-9,
        "µJ*ms": 1e-9,
    },
    # work per joule: (work / s) / W
    "GFLOP/s/W": {"GFLOP/s/W": 1.0, "TFLOP/s/W": 1e3, "MFLOP/s/W": 1e-3, "GFLOP/J": 1.0},
    "calls/J": {"calls/J": 1.0, "calls/mJ": 1e3, "calls/kJ": 1e-3},
}


@dataclass(frozen=True, slots=True)
class TermContext:
    """What a term may know besides the build and the measurement: the problem."""

    dims: Mapping[str, int] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)  # evaluated spec metrics


@runtime_checkable
class ObjectiveTerm(Protocol):
    """One measurable quantity. ``value`` returns None when it cannot be known
    (failed build, failed measurement, no energy reading): never a made-up number."""

    @property
    def name(self) -> str: ...

    @property
    def direction(self) -> Direction: ...

    @property
    def unit(self) -> str: ...

    @property
    def needs(self) -> frozenset[str]:
        """Capabilities: {"gpu"}, {"gpu", "nvml"} or nothing."""
        ...

    @property
    def description(self) -> str: ...

    @property
    def quantile(self) -> float | None:
        """The latency quantile that must be sampled well, if any."""
        ...

    @property
    def requires_metric(self) -> str | None:
        """A spec metric the term needs ("flops", "bytes"), if any."""
        ...

    def value(
        self, build: Build | None, measurement: Measurement | None, context: TermContext
    ) -> float | None: ...

    def from_samples(self, samples_ms: Any, context: TermContext) -> Any:
        """The value computed from latency samples alone (for bootstrap CIs); None
        for terms that are not a statistic of the samples. A 2-D array of
        resamples gives an array with one value per row."""
        ...


def _ok(measurement: Measurement | None) -> bool:
    return measurement is not None and measurement.outcome.is_ok


def quantile_ms(samples_ms: Any, q: float | None) -> Any:
    """Quantile ``q`` (None: mean) of samples, linear interpolation; None if empty.

    A 2-D array gives one value per row (the bootstrap evaluates all its
    resamples in one call)."""
    import numpy as np

    arr = np.asarray(samples_ms, dtype=float)
    if arr.size == 0:
        return None
    out = arr.mean(axis=-1) if q is None else np.quantile(arr, q, axis=-1)
    return float(out) if arr.ndim == 1 else out


_SUMMARY_FIELD = {0.5: "p50_ms", 0.95: "p95_ms", 0.99: "p99_ms"}


@dataclass(frozen=True, slots=True)
class LatencyTerm:
    """A latency statistic in ms: a quantile (p50, p95, p99) or the mean."""

    name: str
    q: float | None  # None: mean
    description: str
    direction: Direction = "min"
    unit: str = "ms"
    needs: frozenset[str] = frozenset({"gpu"})
    requires_metric: str | None = None

    @property
    def quantile(self) -> float | None:
        return 0.5 if self.q is None else self.q

    def value(
        self, build: Build | None, measurement: Measurement | None, context: TermContext
    ) -> float | None:
        if not _ok(measurement):
            return None
        assert measurement is not None
        if measurement.summary is not None:
            field_name = "mean_ms" if self.q is None else _SUMMARY_FIELD[self.q]
            return float(getattr(measurement.summary, field_name))
        return quantile_ms(measurement.samples_ms, self.q)

    def from_samples(self, samples_ms: Any, context: TermContext) -> Any:
        return quantile_ms(samples_ms, self.q)


@dataclass(frozen=True, slots=True)
class ThroughputTerm:
    """Work per second from a spec metric (``flops``, ``bytes``) and the median time."""

    name: str
    metric: str
    per_unit: float  # 1e12 for TFLOP/s, 1e9 for GB/s
    unit: str
    description: str
    direction: Direction = "max"
    needs: frozenset[str] = frozenset({"gpu"})
    quantile: float | None = 0.5

    @property
    def requires_metric(self) -> str | None:
        return self.metric

    def _rate(self, p50_ms: Any, context: TermContext) -> Any:
        work = context.metrics.get(self.metric)
        if p50_ms is None or work is None:
            return None
        if isinstance(p50_ms, float):
            return float(work) / (p50_ms * 1e-3) / self.per_unit if p50_ms > 0 else None
        return float(work) / (p50_ms * 1e-3) / self.per_unit  # one value per bootstrap row

    def value(
        self, build: Build | None, measurement: Measurement | None, context: TermContext
    ) -> float | None:
        if not _ok(measurement):
            return None
        assert measurement is not None
        if measurement.summary is not None:
            return self._rate(measurement.summary.p50_ms, context)
        return self._rate(quantile_ms(measurement.samples_ms, 0.5), context)

    def from_samples(self, samples_ms: Any, context: TermContext) -> Any:
        return self._rate(quantile_ms(samples_ms, 0.5), context)


@dataclass(frozen=True, slots=True)
class MeasuredFieldTerm:
    """A number the measurer reports directly (energy per call, average power)."""

    name: str
    field_name: str
    unit: str
    description: str
    direction: Direction = "min"
    needs: frozenset[str] = frozenset({"gpu", "nvml"})
    quantile: float | None = None
    requires_metric: str | None = None

    def value(
        self, build: Build | None, measurement: Measurement | None, context: TermContext
    ) -> float | None:
        if not _ok(measurement):
            return None
        raw = getattr(measurement, self.field_name)
        return None if raw is None else float(raw)

    def from_samples(self, samples_ms: Any, context: TermContext) -> Any:
        return None


def _energy_per_call(measurement: Measurement | None) -> float | None:
    """The measured energy per call in J, or None (no reading, or a zero the counter
    cannot have meant: it ticks every ~100 ms, so a zero is a window too short)."""
    if not _ok(measurement):
        return None
    assert measurement is not None
    raw = measurement.energy_j
    return float(raw) if raw is not None and raw > 0 else None


@dataclass(frozen=True, slots=True)
class EnergyDelayTerm:
    """Energy-delay product per call (J*s): energy per call x median time.

    It weighs a build that saves energy by running slower (a lower clock, a
    power cap) against the time it costs, which plain ``energy`` does not."""

    name: str
    description: str
    direction: Direction = "min"
    unit: str = "J*s"
    needs: frozenset[str] = frozenset({"gpu", "nvml"})
    quantile: float | None = 0.5
    requires_metric: str | None = None

    def value(
        self, build: Build | None, measurement: Measurement | None, context: TermContext
    ) -> float | None:
        energy = _energy_per_call(measurement)
        if energy is None:
            return None
        assert measurement is not None
        p50 = (
            measurement.summary.p50_ms
            if measurement.summary is not None
            else quantile_ms(measurement.samples_ms, 0.5)
        )
        return None if p50 is None else energy * float(p50) * 1e-3

    def from_samples(self, samples_ms: Any, context: TermContext) -> Any:
        return None  # the energy reading is one number per window, not per sample


@dataclass(frozen=True, slots=True)
class EfficiencyTerm:
    """Work per joule: performance per watt, ``(work/s) / W`` = work / J per call.

    With a spec metric (``flops``) it is GFLOP/s per W; without one it counts
    calls per joule, so a kernel with no work metric can still be tuned for it."""

    name: str
    metric: str | None  # None: calls per joule
    per_unit: float  # 1e9 for GFLOP/s/W
    unit: str
    description: str
    without_metric: str | None = None  # the term to suggest when the spec lacks the metric
    direction: Direction = "max"
    needs: frozenset[str] = frozenset({"gpu", "nvml"})
    quantile: float | None = None

    @property
    def requires_metric(self) -> str | None:
        return self.metric

    def value(
        self, build: Build | None, measurement: Measurement | None, context: TermContext
    ) -> float | None:
        energy = _energy_per_call(measurement)
        if energy is None:
            return None
        work = 1.0 if self.metric is None else context.metrics.get(self.metric)
        return None if work is None else float(work) / energy / self.per_unit

    def from_samples(self, samples_ms: Any, context: TermContext) -> Any:
        return None


@dataclass(frozen=True, slots=True)
class BuildFieldTerm:
    """A property of the build (compile time, registers, spills): no GPU needed."""

    name: str
    field_name: str  # attribute of Build, or "resources.<attr>"
    unit: str
    description: str
    direction: Direction = "min"
    needs: frozenset[str] = frozenset()
    quantile: float | None = None
    requires_metric: str | None = None

    def value(
        self, build: Build | None, measurement: Measurement | None, context: TermContext
    ) -> float | None:
        if build is None or not build.outcome.is_ok:
            return None
        owner: object = build
        name = self.field_name
        if name.startswith("resources."):
            owner, name = build.resources, name.split(".", 1)[1]
        raw = getattr(owner, name)
        return None if raw is None else float(raw)

    def from_samples(self, samples_ms: Any, context: TermContext) -> Any:
        return None


def _builtin_terms() -> dict[str, ObjectiveTerm]:
    terms: list[ObjectiveTerm] = [
        LatencyTerm("p50", 0.5, "median kernel time"),
        LatencyTerm("p95", 0.95, "95th-percentile kernel time"),
        LatencyTerm("p99", 0.99, "99th-percentile kernel time (tail latency)"),
        LatencyTerm("mean", None, "mean kernel time"),
        ThroughputTerm(
            "tflops",
            "flops",
            1e12,
            "TFLOP/s",
            "compute throughput: the spec's flops metric / median time",
        ),
        ThroughputTerm(
            "gbps", "bytes", 1e9, "GB/s", "memory throughput: the spec's bytes metric / median time"
        ),
        MeasuredFieldTerm("energy", "energy_j", "J", "energy per call (NVML energy counter)"),
        MeasuredFieldTerm("power", "avg_power_w", "W", "average board power while running"),
        EnergyDelayTerm("edp", "energy-delay product: energy per call x median time"),
        EfficiencyTerm(
            "perf_per_watt",
            "flops",
            1e9,
            "GFLOP/s/W",
            "performance per watt: the spec's flops metric / energy per call",
            without_metric="calls_per_joule",
        ),
        EfficiencyTerm("calls_per_joule", None, 1.0, "calls/J", "calls per joule: 1 / energy"),
        BuildFieldTerm("compile_time", "compile_s", "s", "nvcc wall time for the candidate"),
        BuildFieldTerm("regs", "resources.regs", "regs", "registers per thread (ptxas)"),
        BuildFieldTerm("spills", "resources.spills_bytes", "B", "spill stores + loads (ptxas)"),
        BuildFieldTerm("smem", "resources.smem_bytes", "B", "static shared memory (ptxas)"),
    ]
    return {t.name: t for t in terms}


#: the built-in term table, by name
TERMS: dict[str, ObjectiveTerm] = _builtin_terms()

#: other spellings users type
ALIASES: dict[str, str] = {
    "median": "p50",
    "latency": "p50",
    "energy_j": "energy",
    "power_w": "power",
    "energy_delay": "edp",
    "gflops_per_watt": "perf_per_watt",
    "perf_per_joule": "calls_per_joule",
    "compile_s": "compile_time",
    "registers": "regs",
}


def get_term(name: str) -> ObjectiveTerm | None:
    """A term by name or alias, or None. Entry-point terms are looked up only
    when the name is not built in (nothing is scanned at import)."""
    key = ALIASES.get(name, name)
    if key in TERMS:
        return TERMS[key]
    return _entry_point_term(key)


def _entry_point_term(name: str) -> ObjectiveTerm | None:
    ep = _objective_entry_points().get(name)
    if ep is None:
        return None
    term = ep.load()
    return term() if isinstance(term, type) else term


@functools.cache
def _objective_entry_points() -> dict[str, EntryPoint]:
    """The ``ctune.objectives`` entry points by name, scanned once a process: the scan
    reads every installed distribution's metadata (about 1.6 ms), and a reader asks for
    each name it meets (a Kernel Tuner T4 file's ``time`` in every result)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group="ctune.objectives")}


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


__all__ = [
    "ALIASES",
    "CAPABILITIES",
    "TERMS",
    "UNIT_TABLES",
    "BuildFieldTerm",
    "Direction",
    "EfficiencyTerm",
    "EnergyDelayTerm",
    "LatencyTerm",
    "MeasuredFieldTerm",
    "ObjectiveTerm",
    "TermContext",
    "ThroughputTerm",
    "get_term",
    "is_finite",
    "quantile_ms",
]
