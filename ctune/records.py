"""The vocabulary: frozen, hashable, JSON-round-trippable value objects.

Everything that flows between the compiler, the measurer, the strategy, the
journal and the registry is one of these records. They are frozen for real
(Optuna's ``FrozenTrial`` is not), so a record can be a cache key and can be
shared between threads without copies.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

GeneValue = int | float | str | bool


class Outcome(enum.StrEnum):
    """The closed set of ways a candidate can end; exactly one per trial."""

    OK = "ok"
    INVALID = "invalid"  # rejected by space restrictions or device limits: infeasible, not failed
    COMPILE_ERROR = "compile_error"  # nvcc/ptxas rejected it (stderr tail kept)
    RESOURCE_LIMIT = "resource_limit"  # too many registers / too much smem
    COMPILER_CRASH = "compiler_crash"  # signal or internal compiler error
    BUILD_TIMEOUT = "build_timeout"  # compile exceeded its wall-clock limit
    BUILD_OOM = "build_oom"  # compile exceeded its host-memory guard
    LAUNCH_ERROR = "launch_error"  # non-sticky launch failure (bad grid, too many resources)
    RUNTIME_FAULT = "runtime_fault"  # sticky fault: illegal address, trap, assert; worker replaced
    RUN_TIMEOUT = "run_timeout"  # kernel hung; worker killed
    WRONG_RESULT = "wrong_result"  # failed the reference check; never eligible
    NONDETERMINISTIC = "nondeterministic"  # results differ between runs of a deterministic kernel
    INCONCLUSIVE = "inconclusive"  # too many samples excluded (throttling): no number
    SKIPPED = "skipped"  # the cost model ruled it out before building (search/cost_policy.py)

    @property
    def is_ok(self) -> bool:
        return self is Outcome.OK

    @property
    def is_build_failure(self) -> bool:
        return self in _BUILD_FAILURES


_BUILD_FAILURES = frozenset(
    {
        Outcome.INVALID,
        Outcome.COMPILE_ERROR,
        Outcome.RESOURCE_LIMIT,
        Outcome.COMPILER_CRASH,
        Outcome.BUILD_TIMEOUT,
        Outcome.BUILD_OOM,
    }
)


def canonical_json(value: Any) -> str:
    """The one serialisation that keys and digests are computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()


_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def is_sha256_hex(value: object) -> bool:
    """Is ``value`` a sha256 digest as :func:`sha256_hex` writes it (64 lower-case hex)?
    The one rule for a content digest that names a file (a controls file's gene value)."""
    return isinstance(value, str) and _SHA256_HEX.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Candidate:
    """One point of the genome: flag, launch and template genes together.

    ``genes`` is sorted by gene name, so two candidates with the same values
    compare, hash and key equal however they were built.
    """

    kernel: str
    genes: tuple[tuple[str, GeneValue], ...]

    @classmethod
    def of(cls, kernel: str, genes: Mapping[str, GeneValue]) -> Candidate:
        return cls(kernel, tuple(sorted(genes.items())))

    def as_dict(self) -> dict[str, GeneValue]:
        return dict(self.genes)

    def key(self) -> str:
        """Stable 16-hex key: the cache, dedup, journal and registry key."""
        return sha256_hex(canonical_json({"kernel": self.kernel, "genes": self.as_dict()}))[:16]

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "genes": self.as_dict()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Candidate:
        return cls.of(str(data["kernel"]), dict(data["genes"]))


@dataclass(frozen=True, slots=True)
class Resources:
    """What ptxas reported for the entry kernel (``-Xptxas -v``)."""

    regs: int | None = None
    spills_store_bytes: int | None = None
    spills_load_bytes: int | None = None
    smem_bytes: int | None = None  # static shared memory
    stack_bytes: int | None = None
    cmem_bytes: int | None = None

    @property
    def spills_bytes(self) -> int | None:
        if self.spills_store_bytes is None and self.spills_load_bytes is None:
            return None
        return (self.spills_store_bytes or 0) + (self.spills_load_bytes or 0)


@dataclass(frozen=True, slots=True)
class Build:
    """The result of compiling one candidate for one problem's defines."""

    candidate_key: str
    argv: tuple[str, ...]
    toolchain: str  # e.g. "nvcc 13.0.88 / ptxas 13.0.88"
    outcome: Outcome
    binary_path: str | None = None  # cubin (entry kind "kernel") or .so (kind "launcher")
    sass_sha256: str | None = None  # over the machine code, not the cubin bytes
    compile_s: float = 0.0
    resources: Resources = field(default_factory=Resources)
    log_tail: str = ""
    cache_hit: bool = False
    build_key: str = ""  # content address of (sources, argv, toolchain)
    entry_symbol: str = ""  # the kernel's symbol in the cubin (mangled unless extern "C")


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Names the GPU a measurement was taken on."""

    name: str
    uuid: str
    sm: str  # e.g. "sm_90"
    driver: str
    sm_count: int = 0
    memory_bytes: int = 0
    l2_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Quantiles:
    """A latency distribution summary in milliseconds, with CIs on each quantile."""

    n: int
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float
    stdev_ms: float
    p50_ci_ms: tuple[float, float]
    p95_ci_ms: tuple[float, float]
    p99_ci_ms: tuple[float, float]


@dataclass(frozen=True, slots=True)
class Measurement:
    """One candidate timed (and checked) on one problem on one device."""

    candidate_key: str
    problem: str
    outcome: Outcome
    device: DeviceInfo | None = None
    samples_ms: tuple[float, ...] = ()
    summary: Quantiles | None = None
    n_warmup: int = 0
    l2_policy: str = "cold"  # "cold" (flushed before each sample) or "hot"
    timing_method: str = "events"  # "events" or "graph" (batched; a sample is a mean)
    launches_per_sample: int = 1  # graph: the launches one replay holds
    excluded_samples: int = 0  # dropped under HW slowdown / thermal throttle
    sm_clock_mhz: float | None = None
    throttle_reasons: int = 0  # NVML clocks-event-reason bitmask seen during timing
    sw_power_capped: bool = False
    temperature_c: float | None = None
    energy_j: float | None = None  # per call
    avg_power_w: float | None = None
    energy_window_s: float | None = None
    energy_launches: int | None = None
    energy_method: str = ""
    rel_l2_error: float | None = None
    max_abs_error: float | None = None
    other_processes: int = 0  # other compute processes on the GPU during the run
    error: str = ""  # evidence for a failed outcome
    wall_s: float = 0.0
    l2_flush_bytes: int = 0  # size of the buffer memset before each sample (cold); 0 when hot
    sampling_note: str = (
        ""  # why n is what it is (budget, quantile floor, cap), warm-up, starvation
    )
    pruned: bool = False  # stopped after its first chunk: clearly slower than the leader


@dataclass(frozen=True, slots=True)
class Trial:
    """A finished candidate: what the journal stores and strategies are told."""

    number: int
    generation: int
    candidate: Candidate
    outcome: Outcome
    build: Build | None = None
    measurement: Measurement | None = None
    values: tuple[float, ...] | None = None  # in ObjectiveSpec order, raw units
    violations: tuple[float, ...] = ()  # > 0 means infeasible

    @property
    def feasible(self) -> bool:
        return (
            self.outcome.is_ok and self.values is not None and all(v <= 0 for v in self.violations)
        )


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One fingerprint field that differs, and whether that makes it stale."""

    name: str
    old: str
    new: str
    severity: str  # "hard" (stale) or "soft" (warning)


# --- JSON round trip -------------------------------------------------------


def to_json(record: Any) -> Any:
    """Record -> plain JSON value (enums as their value, tuples as lists)."""
    if isinstance(record, enum.Enum):
        return record.value
    if isinstance(record, Candidate):
        return record.to_json()
    if hasattr(record, "__dataclass_fields__"):
        return {f.name: to_json(getattr(record, f.name)) for f in fields(record)}
    if isinstance(record, (list, tuple)):
        return [to_json(v) for v in record]
    if isinstance(record, dict):
        return {k: to_json(v) for k, v in record.items()}
    return record


def _tuplify(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value


def build_from_json(data: Mapping[str, Any]) -> Build:
    d = dict(data)
    d["outcome"] = Outcome(d["outcome"])
    d["argv"] = tuple(d["argv"])
    d["resources"] = Resources(**d.get("resources") or {})
    return Build(**d)


def measurement_from_json(data: Mapping[str, Any]) -> Measurement:
    d = dict(data)
    d["outcome"] = Outcome(d["outcome"])
    d["device"] = DeviceInfo(**d["device"]) if d.get("device") else None
    d["samples_ms"] = tuple(d.get("samples_ms") or ())
    if d.get("summary"):
        s = {k: _tuplify(v) for k, v in d["summary"].items()}
        d["summary"] = Quantiles(**s)
    return Measurement(**d)


def trial_from_json(data: Mapping[str, Any]) -> Trial:
    return Trial(
        number=int(data["number"]),
        generation=int(data["generation"]),
        candidate=Candidate.from_json(data["candidate"]),
        outcome=Outcome(data["outcome"]),
        build=build_from_json(data["build"]) if data.get("build") else None,
        measurement=measurement_from_json(data["measurement"]) if data.get("measurement") else None,
        values=tuple(data["values"]) if data.get("values") is not None else None,
        violations=tuple(data.get("violations") or ()),
    )


__all__ = [
    "Build",
    "Candidate",
    "DeviceInfo",
    "FieldChange",
    "GeneValue",
    "Measurement",
    "Outcome",
    "Quantiles",
    "Resources",
    "Trial",
    "build_from_json",
    "canonical_json",
    "measurement_from_json",
    "sha256_hex",
    "to_json",
    "trial_from_json",
]
