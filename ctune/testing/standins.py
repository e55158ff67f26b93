"""Stand-ins for the compiler and the GPU, for strategy and driver logic only.

Their names say what they are not (docs/design.md: stand-ins only test logic): nothing
here compiles CUDA or touches a GPU, and nothing here may be used to decide performance.
:class:`StandInMeasurer` and :class:`StandInCompiler` are seeded, deterministic models;
:class:`ReplayMeasurer` / :class:`ReplayCompiler` serve a recorded ground truth
(``tests/data/ground_truth/``) so strategies can be compared on a real landscape without a
GPU; :func:`standin_spec` writes a small kernel spec whose ``.cu`` is never compiled.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import hashlib
import os
import random
import signal
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.compile.contract import Compiler
from ctune.evidence.identity import gpu_label
from ctune.measure import Measurer
from ctune.measure.plan import PRUNE_MIN_SAMPLES, prunes
from ctune.measure.vendor import is_vendor
from ctune.records import (
    Build,
    Candidate,
    DeviceInfo,
    GeneValue,
    Measurement,
    Outcome,
    Quantiles,
    Resources,
)
from ctune.testing.json_files import load_json, save_json

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.measure import SamplingPlan
    from ctune.spec import KernelSpec, Problem
    from ctune.spec.space.params import Space

STANDIN_DEVICE = DeviceInfo(
    name="stand-in (not a GPU)", uuid="standin-0", sm="sm_00", driver="none"
)
GROUND_TRUTH_FORMAT = "ctune-ground-truth/1"


@functools.lru_cache(maxsize=65536)
def _unit_text(text: str) -> float:
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts (sha256, platform independent)."""
    return _unit_text(":".join(str(p) for p in parts))


def _positions(space: Space, values: Mapping[str, GeneValue]) -> list[float]:
    out = []
    for gene in space.genes:
        n = len(gene.values)
        out.append(gene.index(values[gene.name]) / (n - 1) if n > 1 else 0.0)
    return out


# --- the stand-in measurer --------------------------------------------------------------


class StandInMeasurer(Measurer):
    """NOT A GPU: an analytic, seeded cost model that speaks the Measurer protocol.

    Each gene's value index is mapped to a position in [0, 1]; latency is a product of
    smooth bowls around hashed optima plus a coupling between neighbouring genes (smooth
    in index space, like tile sizes, but not separable); the tail grows with a hashed mix
    of positions (so p99 and p50 disagree); energy has its own optima (so a 2-D front
    exists). Noise is multiplicative and seeded by (seed, candidate, process): a candidate
    measures the same every time in one "process" (the true front is computable by
    exhaustive enumeration) and differently across confirmation processes. Positions
    averaging above ``fault_corner`` give RUNTIME_FAULT; every ``wrong_every``-th key (by
    hash) gives WRONG_RESULT.
    """

    device_name = gpu_label(STANDIN_DEVICE)
    capabilities = frozenset({"gpu", "nvml"})

    def __init__(
        self,
        seed: int = 0,
        *,
        base_ms: float = 1.0,
        noise: float = 0.02,
        samples: int | None = None,
        fault_corner: float | None = 0.85,
        wrong_every: int | None = 31,
        interrupt_at: int | None = None,
        sigint_at: int | None = None,
        sigints: int = 1,
        sigint_at_round: int | None = None,
        vendor_factor: float = 0.9,
        vendor_fails: bool = False,
    ) -> None:
        self.seed = seed
        self.base_ms = base_ms
        self.noise = noise
        self.samples = samples
        self.fault_corner = fault_corner
        self.wrong_every = wrong_every
        self.interrupt_at = interrupt_at
        self.sigint_at = sigint_at  # a real SIGINT to this process (a user's Ctrl-C) ...
        self.sigints = sigints  # ... this many times, during that measurement
        self.sigint_at_round = sigint_at_round  # ... or during this remeasure() call
        # a spec's vendor call (measure/vendor.py): the default build's time times this,
        # or a LAUNCH_ERROR (its function raised)
        self.vendor_factor = vendor_factor
        self.vendor_fails = vendor_fails
        self.calls: list[str] = []  # candidate keys measured by measure(), in order
        self.remeasured: list[str] = []  # keys measured by remeasure(), per process
        self.processes = 0  # fresh "processes" remeasure() started, over all its calls

    # --- the model ---------------------------------------------------------------
    def _params(self, kernel: str, gene: str, what: str) -> tuple[float, float]:
        center = 0.1 + 0.8 * _unit(self.seed, kernel, gene, what, "c")
        weight = 0.2 + 1.3 * _unit(self.seed, kernel, gene, what, "w")
        return center, weight

    def latency_ms(
        self, spec: KernelSpec, values: Mapping[str, GeneValue], problem: Problem
    ) -> float:
        """Noise-free median time of a candidate."""
        u = _positions(spec.space, values)
        t = self.base_ms * (0.5 + 1.5 * _unit(self.seed, spec.name, problem.name, "scale"))
        for gene, x in zip(spec.space.genes, u, strict=True):
            c, w = self._params(spec.name, gene.name, "lat")
            t *= 1.0 + w * (x - c) ** 2
        for i in range(len(u) - 1):
            coupling = 0.5 * _unit(self.seed, spec.name, i, "couple")
            t *= 1.0 + coupling * (u[i] - u[i + 1]) ** 2
        return t * self.controls_factor(spec, values)

    def controls_factor(self, spec: KernelSpec, values: Mapping[str, GeneValue]) -> float:
        """A controls file's effect: a fixed factor per file, 0.96 to 1.06 (most are slower,
        as most of CompileIQ's random files are on real kernels)."""
        factor = 1.0
        for gene in spec.space.genes:
            value = values.get(gene.name)
            if gene.open and value is not None and value != gene.default:
                factor *= 0.96 + 0.10 * _unit(self.seed, spec.name, gene.name, value)
        return factor

    def tail_factor(self, spec: KernelSpec, values: Mapping[str, GeneValue]) -> float:
        """p99 / p50 of the candidate (1.05 to 1.6, smooth in the genes)."""
        u = _positions(spec.space, values)
        weights = [_unit(self.seed, spec.name, g.name, "tail") for g in spec.space.genes]
        mix = sum(w * x for w, x in zip(weights, u, strict=True)) / max(sum(weights), 1e-9)
        return 1.05 + 0.55 * mix

    def energy_j(
        self, spec: KernelSpec, values: Mapping[str, GeneValue], problem: Problem
    ) -> float:
        """Noise-free energy per call; its optima differ from latency's (a trade-off)."""
        u = _positions(spec.space, values)
        e = self.latency_ms(spec, spec.space.default_values(), problem) * 1e-3 * 300.0
        for gene, x in zip(spec.space.genes, u, strict=True):
            c, w = self._params(spec.name, gene.name, "lat")
            d = 0.7 * (1.0 - c) + 0.3 * _unit(self.seed, spec.name, gene.name, "energy")
            e *= 1.0 + 0.8 * w * (x - d) ** 2
        return e

    def outcome_for(self, spec: KernelSpec, values: Mapping[str, GeneValue]) -> Outcome:
        cand = Candidate.of(spec.name, values)
        if cand == spec.default_candidate():
            return Outcome.OK
        u = _positions(spec.space, values)
        if self.fault_corner is not None and u and sum(u) / len(u) > self.fault_corner:
            return Outcome.RUNTIME_FAULT
        if self.wrong_every and int(cand.key(), 16) % self.wrong_every == 0:
            return Outcome.WRONG_RESULT
        return Outcome.OK

    # --- Measurer protocol -------------------------------------------------------------
    def _n_samples(self, plan: SamplingPlan) -> int:
        if self.samples is not None:
            return self.samples
        return 1000 if plan.quantile >= 0.99 else 200

    def _measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
        process: int,
    ) -> Measurement:
        key = candidate.key()
        if not build.outcome.is_ok:
            return Measurement(
                key,
                problem.name,
                build.outcome,
                STANDIN_DEVICE,
                error="stand-in: the build failed; nothing to run",
            )
        values = candidate.as_dict()
        vendor = is_vendor(candidate)
        if vendor and self.vendor_fails:
            return Measurement(
                key,
                problem.name,
                Outcome.LAUNCH_ERROR,
                STANDIN_DEVICE,
                error="stand-in: the vendor call raised ImportError setting up",
            )
        outcome = self.outcome_for(spec, values)
        if not outcome.is_ok:
            return Measurement(
                key,
                problem.name,
                outcome,
                STANDIN_DEVICE,
                error=f"stand-in: scripted {outcome.value}",
            )
        import numpy as np

        rng = np.random.default_rng(int(_unit(self.seed, key, problem.name, process) * 2**63))
        n = self._n_samples(plan)
        t = self.latency_ms(spec, values, problem) * (self.vendor_factor if vendor else 1.0)
        proc = 1.0 + 0.004 * rng.standard_normal()  # a small per-process offset
        samples = t * proc * np.exp(self.noise * rng.standard_normal(n))
        tail = max(1, n // 50)  # 2% of samples form the tail
        samples[rng.choice(n, tail, replace=False)] *= self.tail_factor(spec, values) * 1.02
        pruned = prunes(list(samples[:PRUNE_MIN_SAMPLES]), plan)  # as the worker's first chunk
        if pruned:
            samples = samples[:PRUNE_MIN_SAMPLES]
        energy = power = None
        if plan.energy:
            energy = self.energy_j(spec, values, problem) * (1 + 0.003 * rng.standard_normal())
            power = energy / (float(np.median(samples)) * 1e-3)
        return Measurement(
            candidate_key=key,
            problem=problem.name,
            outcome=Outcome.OK,
            device=STANDIN_DEVICE,
            samples_ms=tuple(float(s) for s in samples),
            summary=summarize_samples(samples),
            n_warmup=0,
            l2_policy=plan.l2_policy,
            energy_j=energy,
            avg_power_w=power,
            energy_method="stand-in" if plan.energy else "",
            wall_s=0.0,
            pruned=pruned,
        )

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        self.calls.append(candidate.key())
        if self.interrupt_at is not None and len(self.calls) >= self.interrupt_at:
            raise KeyboardInterrupt  # a user pressing Ctrl-C while this candidate runs
        if self.sigint_at is not None and len(self.calls) == self.sigint_at:
            for _ in range(self.sigints):
                os.kill(os.getpid(), signal.SIGINT)  # the handler runs right here
        return self._measure(spec, candidate, build, problem, plan, 0)

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
        out: dict[str, list[Measurement]] = {c.key(): [] for c, _ in items}
        order = list(items)
        shuffle = random.Random(self.seed if seed is None else seed)
        for _ in range(processes):
            self.processes += 1
            p = self.processes  # a new process: new noise, also across calls
            shuffle.shuffle(order)  # interleaved, order varied per process (rule M11)
            for cand, build in order:
                self.remeasured.append(cand.key())
                out[cand.key()].append(self._measure(spec, cand, build, problem, plan, p))
            if self.sigint_at_round == self.processes:
                for _ in range(self.sigints):
                    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while this process runs
        return out

    def fingerprint_fields(self) -> dict[str, str]:
        return {"gpu_name": STANDIN_DEVICE.name, "sm": STANDIN_DEVICE.sm, "driver": "none"}

    def close(self) -> None:
        pass

    def __enter__(self) -> StandInMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def summarize_samples(samples: Any) -> Quantiles:
    """Quantiles with order-statistic 95% CIs, exactly as the real measurer reports them."""
    from ctune.evidence.stats import summarize

    return summarize(samples)


class DefaultWinsMeasurer(StandInMeasurer):
    """NOT A GPU: every gene changed from the default costs time (+50% each) and energy
    (+20% each) but lowers the average power (500 W for the default build), so a power cap
    below 500 W leaves only builds the default one beats on both (the inconclusive case)."""

    def __init__(self, seed: int = 0, samples: int = 60) -> None:
        super().__init__(seed, samples=samples, fault_corner=None, wrong_every=None)

    @staticmethod
    def changes(spec: KernelSpec, values: Mapping[str, GeneValue]) -> int:
        return sum(values[k] != v for k, v in spec.space.default_values().items())

    def latency_ms(
        self, spec: KernelSpec, values: Mapping[str, GeneValue], problem: Problem
    ) -> float:
        return 1.0 + 0.5 * self.changes(spec, values)

    def energy_j(
        self, spec: KernelSpec, values: Mapping[str, GeneValue], problem: Problem
    ) -> float:
        return 0.5 * (1.0 + 0.2 * self.changes(spec, values))


# --- the stand-in compiler ---------------------------------------------------------------


def _argv(candidate: Candidate) -> tuple[str, ...]:
    defines = [f"-D{k}={int(v) if isinstance(v, bool) else v}" for k, v in candidate.genes]
    return (
        "standin-cc",
        "--generate-code=arch=compute_90,code=sm_90",
        "-cubin",
        *defines,
        "-o",
        "standin.cubin",
        "standin.cu",
    )


class StandInCompiler(Compiler):
    """NOT NVCC: Builds with scripted outcomes, instantly, and a register estimate.

    COMPILE_ERROR for every ``fail_every``-th distinct candidate (in request order;
    ``submit`` builds synchronously so that order is the driver's), RESOURCE_LIMIT when the
    register estimate exceeds ``regs_limit``. Its "SASS digest" covers the genes other than
    ``noop_genes`` (genes that, like many flags, leave the machine code unchanged), so
    candidates differing only in those share one.
    """

    def __init__(
        self,
        spec: KernelSpec,
        *,
        fail_every: int | None = 7,
        regs_limit: int = 255,
        fail_all: bool = False,
        fail_baseline: bool = False,
        compile_s: float = 0.3,
        noop_genes: Sequence[str] = (),
    ) -> None:
        self.spec = spec
        self.noop_genes = frozenset(noop_genes)
        self.fail_every = fail_every
        self.regs_limit = regs_limit
        self.fail_all = fail_all
        self.fail_baseline = fail_baseline
        self.compile_s = compile_s
        self.jobs = 4
        self.order: list[str] = []  # distinct keys, in order of first request
        self.calls = 0
        self._builds: dict[str, Build] = {}

    def sass_digest(self, candidate: Candidate) -> str:
        """Stands for the digest of the machine code: the genes that reach it."""
        code = {k: v for k, v in candidate.genes if k not in self.noop_genes}
        return hashlib.sha256(repr(sorted(code.items())).encode()).hexdigest()

    def regs_estimate(self, values: Mapping[str, GeneValue]) -> int:
        defaults = self.spec.space.default_values()
        values = {**values, **{k: defaults[k] for k in self.noop_genes}}  # not in the code
        u = _positions(self.spec.space, values)
        return int(32 + 48 * sum(u))

    def _scripted(self, candidate: Candidate, index: int) -> tuple[Outcome, str]:
        is_default = candidate == self.spec.default_candidate()
        if is_default:
            if self.fail_baseline:
                return Outcome.COMPILE_ERROR, (
                    'standin.cu(3): error: identifier "CTUNE_MISSING" is undefined\n'
                    '1 error detected in the compilation of "standin.cu".'
                )
            return Outcome.OK, ""
        if self.fail_all or (self.fail_every and index % self.fail_every == 0):
            return Outcome.COMPILE_ERROR, (
                f"standin.cu(12): error: scripted stand-in compile error (candidate #{index})"
            )
        if self.regs_estimate(candidate.as_dict()) > self.regs_limit:
            return Outcome.RESOURCE_LIMIT, (
                f"ptxas error   : Entry function 'standin' uses too many registers "
                f"({self.regs_estimate(candidate.as_dict())} > {self.regs_limit})"
            )
        return Outcome.OK, ""

    def build(self, candidate: Candidate, problem: Problem) -> Build:
        self.calls += 1
        key = candidate.key()
        if key in self._builds:
            return dataclasses.replace(self._builds[key], cache_hit=True)
        self.order.append(key)
        outcome, log = self._scripted(candidate, len(self.order))
        values = candidate.as_dict()
        regs = self.regs_estimate(values)
        cap = values.get("maxrregcount")
        spills = 0
        if isinstance(cap, int) and not isinstance(cap, bool) and 0 < cap < regs:
            spills, regs = 4 * (regs - cap), cap
        build = Build(
            candidate_key=key,
            argv=_argv(candidate),
            toolchain="stand-in compiler (not nvcc)",
            outcome=outcome,
            binary_path=f"standin://{key}" if outcome.is_ok else None,
            sass_sha256=self.sass_digest(candidate) if outcome.is_ok else None,
            compile_s=round(self.compile_s * (1 + _unit(key, "compile")), 4),
            resources=Resources(
                regs=regs,
                spills_store_bytes=spills,
                spills_load_bytes=0,
                smem_bytes=0,
                stack_bytes=0,
            ),
            log_tail=log,
            cache_hit=False,
            build_key=key,
        )
        self._builds[key] = build
        return build

    def submit(self, candidate: Candidate, problem: Problem) -> Future[Build]:
        # built now, synchronously: request order (the driver's) decides "every 7th"
        future: Future[Build] = Future()
        future.set_result(self.build(candidate, problem))
        return future

    def fingerprint_fields(self) -> dict[str, str]:
        return {"nvcc_version": "stand-in compiler (not nvcc)", "ptxas_version": "stand-in"}

    def source_inputs(self, spec: KernelSpec, settings: Settings) -> dict[str, Any]:
        return {}  # nothing was compiled: no sources to list

    def close(self) -> None:
        pass

    def __enter__(self) -> StandInCompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- recorded ground truth --------------------------------------------------------------------


@dataclass
class GroundTruth:
    """Every valid candidate of one space, compiled and measured once (format: README)."""

    kernel: str
    problem: str
    objective: str
    synthetic: bool
    fingerprint: dict[str, str] = field(default_factory=dict)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> entry
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": GROUND_TRUTH_FORMAT,
            "kernel": self.kernel,
            "problem": self.problem,
            "objective": self.objective,
            "synthetic": self.synthetic,
            "fingerprint": dict(self.fingerprint),
            "meta": dict(self.meta),
            "entries": [{"key": k, **v} for k, v in sorted(self.entries.items())],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroundTruth:
        if data.get("format") != GROUND_TRUTH_FORMAT:
            raise ValueError(f"not a ctune ground truth (format {data.get('format')!r})")
        entries = {}
        for entry in data["entries"]:
            body = dict(entry)
            entries[str(body.pop("key"))] = body
        return cls(
            str(data["kernel"]),
            str(data["problem"]),
            str(data["objective"]),
            bool(data["synthetic"]),
            dict(data.get("fingerprint") or {}),
            entries,
            dict(data.get("meta") or {}),
        )

    @classmethod
    def load(cls, path: Path) -> GroundTruth:
        return cls.from_json(load_json(path))

    def save(self, path: Path) -> Path:
        return save_json(self.to_json(), path)

    def values(self, metric: str = "p50_ms") -> dict[str, float]:
        """key -> metric for every candidate that compiled and measured OK."""
        return {
            k: float(e[metric])
            for k, e in self.entries.items()
            if e.get("outcome") == "ok" and e.get(metric) is not None
        }


def ground_truth_entry(candidate: Candidate, build: Build, m: Measurement | None) -> dict[str, Any]:
    """One record: genes, build outcome and resources, measured quantiles and energy."""
    entry: dict[str, Any] = {
        "genes": candidate.as_dict(),
        "build_outcome": build.outcome.value,
        "compile_s": build.compile_s,
        "regs": build.resources.regs,
        "spills_bytes": build.resources.spills_bytes,
        "smem_bytes": build.resources.smem_bytes,
        "sass_sha256": build.sass_sha256,
        "outcome": build.outcome.value if m is None else m.outcome.value,
    }
    if m is not None and m.outcome.is_ok:
        s = m.summary or (summarize_samples(m.samples_ms) if m.samples_ms else None)
        if s is not None:
            entry.update(
                {
                    "p50_ms": s.p50_ms,
                    "p95_ms": s.p95_ms,
                    "p99_ms": s.p99_ms,
                    "mean_ms": s.mean_ms,
                    "n": s.n,
                }
            )
        entry["energy_j"] = m.energy_j
        entry["avg_power_w"] = m.avg_power_w
        entry["device"] = gpu_label(m.device) if m.device else ""
    elif m is not None:
        entry["error"] = m.error[:300]
    return entry


class ReplayCompiler(Compiler):
    """Builds as recorded in a ground truth (unknown keys: COMPILE_ERROR, say so)."""

    def __init__(self, truth: GroundTruth) -> None:
        self.truth = truth
        self.jobs = 4
        self.calls = 0

    def build(self, candidate: Candidate, problem: Problem) -> Build:
        self.calls += 1
        key = candidate.key()
        entry = self.truth.entries.get(key)
        if entry is None:
            return Build(
                key,
                _argv(candidate),
                "replay",
                Outcome.COMPILE_ERROR,
                log_tail="replay: candidate not in the ground truth",
            )
        spills = entry.get("spills_bytes")
        return Build(
            candidate_key=key,
            argv=_argv(candidate),
            toolchain="replay",
            outcome=Outcome(entry["build_outcome"]),
            binary_path=f"replay://{key}",
            sass_sha256=entry.get("sass_sha256"),
            compile_s=float(entry.get("compile_s") or 0.0),
            resources=Resources(
                regs=entry.get("regs"),
                spills_store_bytes=spills,
                spills_load_bytes=0 if spills is not None else None,
                smem_bytes=entry.get("smem_bytes"),
            ),
            log_tail=entry.get("error", ""),
            build_key=key,
        )

    def submit(self, candidate: Candidate, problem: Problem) -> Future[Build]:
        future: Future[Build] = Future()
        future.set_result(self.build(candidate, problem))
        return future

    def fingerprint_fields(self) -> dict[str, str]:
        return {
            k: v
            for k, v in self.truth.fingerprint.items()
            if k in ("nvcc_version", "ptxas_version")
        } or {"nvcc_version": "replay"}

    def source_inputs(self, spec: KernelSpec, settings: Settings) -> dict[str, Any]:
        return {}  # nothing was compiled: no sources to list

    def close(self) -> None:
        pass


class ReplayMeasurer(Measurer):
    """Serves the recorded measurements of a ground truth, keyed by candidate key (Kernel
    Tuner's ``SimulationRunner`` idea).

    There are no samples, only the recorded quantiles (CIs collapse to the
    point); a key that was not recorded is INCONCLUSIVE, never a guess.
    """

    def __init__(self, truth: GroundTruth) -> None:
        self.truth = truth
        self.calls: list[str] = []
        gpu = truth.fingerprint.get("gpu_name", "unknown GPU")
        self.device = DeviceInfo(
            name=f"replay of {gpu}",
            uuid="replay",
            sm=truth.fingerprint.get("sm", "sm_00"),
            driver="replay",
        )
        self.device_name = gpu_label(self.device)
        has_energy = any(e.get("energy_j") is not None for e in truth.entries.values())
        self.capabilities = frozenset({"gpu", "nvml"} if has_energy else {"gpu"})

    def _measurement(self, candidate: Candidate, build: Build, problem: Problem) -> Measurement:
        key = candidate.key()
        if not build.outcome.is_ok:
            return Measurement(
                key,
                problem.name,
                build.outcome,
                self.device,
                error=f"not measured: the build ended {build.outcome.value}",
            )
        entry = self.truth.entries.get(key)
        if entry is None:
            return Measurement(
                key,
                problem.name,
                Outcome.INCONCLUSIVE,
                self.device,
                error="replay: candidate not in the ground truth",
            )
        outcome = Outcome(entry["outcome"])
        if not outcome.is_ok:
            return Measurement(
                key, problem.name, outcome, self.device, error=entry.get("error", "")
            )
        p50, p95, p99 = (float(entry[f"{q}_ms"]) for q in ("p50", "p95", "p99"))
        mean = float(entry.get("mean_ms") or p50)
        summary = Quantiles(
            n=int(entry.get("n") or 0),
            mean_ms=mean,
            p50_ms=p50,
            p95_ms=p95,
            p99_ms=p99,
            min_ms=p50,
            max_ms=p99,
            stdev_ms=0.0,
            p50_ci_ms=(p50, p50),
            p95_ci_ms=(p95, p95),
            p99_ci_ms=(p99, p99),
        )
        return Measurement(
            key,
            problem.name,
            Outcome.OK,
            self.device,
            summary=summary,
            energy_j=entry.get("energy_j"),
            avg_power_w=entry.get("avg_power_w"),
            timing_method="replay",
        )

    def measure(
        self,
        spec: KernelSpec,
        candidate: Candidate,
        build: Build,
        problem: Problem,
        plan: SamplingPlan,
    ) -> Measurement:
        self.calls.append(candidate.key())
        return self._measurement(candidate, build, problem)

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
        return {
            c.key(): [self._measurement(c, b, problem) for _ in range(processes)] for c, b in items
        }

    def fingerprint_fields(self) -> dict[str, str]:
        return {k: v for k, v in self.truth.fingerprint.items() if k in ("gpu_name", "sm")}

    def close(self) -> None:
        pass


def synthetic_ground_truth(
    spec: KernelSpec,
    problem: Problem,
    *,
    objective: str = "p50",
    seed: int = 0,
    fixed: Mapping[str, GeneValue] | None = None,
    plan: SamplingPlan | None = None,
) -> GroundTruth:
    """A ground truth from the stand-ins, flagged ``synthetic`` (for developing benches)."""
    from ctune.measure import SamplingPlan

    plan = plan or SamplingPlan(quantile=0.99 if objective == "p99" else 0.5)
    measurer = StandInMeasurer(seed, samples=200)
    compiler = StandInCompiler(spec)
    truth = GroundTruth(
        spec.name,
        problem.name,
        objective,
        True,
        {**compiler.fingerprint_fields(), **measurer.fingerprint_fields()},
        meta={
            "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "fixed": dict(fixed or {}),
            "seed": seed,
            "generator": "ctune.testing.standins.synthetic_ground_truth",
        },
    )
    for values in spec.space.iter_valid(problem.dims):
        if fixed and any(values[k] != v for k, v in fixed.items()):
            continue
        cand = spec.candidate(values)
        build = compiler.build(cand, problem)
        m = measurer.measure(spec, cand, build, problem, plan) if build.outcome.is_ok else None
        truth.entries[cand.key()] = ground_truth_entry(cand, build, m)
    return truth


# --- a stand-in kernel spec ---------------------------------------------------------------------

STANDIN_YAML = """\
name: {name}
description: stand-in kernel for strategy and driver tests (never compiled)
entry: standin_kernel
genes:
  TILE_M: {{pow2: [16, 256], default: 64, family: template, suggest: [128, 64]}}
  TILE_N: {{pow2: [16, 256], default: 64, family: template, suggest: [128, 64]}}
  STAGES: {{range: [1, 4], default: 2, family: template, suggest: [3]}}
  SPLIT_K: {{values: [1, 2, 4], default: 1}}
  SCHEDULE: {{values: [row, col, swizzle], default: row}}
restrictions:
  - "TILE_M * TILE_N <= 16384"
  - "TILE_M * TILE_N * STAGES <= 32768"
launch:
  grid: ["ceil_div(M, TILE_M) * ceil_div(N, TILE_N) * SPLIT_K"]
  block: [128]
problems:
  - {{name: small, dims: {{M: 1024, N: 1024, K: 1024}}}}
  - {{name: large, dims: {{M: 4096, N: 4096, K: 4096}}}}
args:
  - {{name: A, role: input, dtype: float32, shape: [M, K]}}
  - {{name: C, role: output, dtype: float32, shape: [M, N]}}
reference:
  python: {name}_ref.py:reference
metrics:
  flops: "2 * M * N * K"
  bytes: "4 * (M * K + K * N + M * N)"
"""

STANDIN_CU = """\
// Stand-in kernel: ctune's unit tests load this spec but never compile it.
extern "C" __global__ void standin_kernel(const float* A, float* C) {}
"""

STANDIN_REF = '''\
"""Reference of the stand-in kernel (never called: the stand-in measurer checks nothing)."""


def reference(A, C):
    return {"C": C}
'''


def write_standin_kernel(folder: Path, name: str = "standin", yaml: str = STANDIN_YAML) -> Path:
    """Write ``<name>.yaml`` (from the ``yaml`` template), ``<name>.cu`` and ``<name>_ref.py``
    into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.cu").write_text(STANDIN_CU)
    (folder / f"{name}_ref.py").write_text(STANDIN_REF)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.format(name=name))
    return path


def standin_spec(folder: Path, name: str = "standin") -> KernelSpec:
    """The stand-in kernel's spec (5 genes, 738 valid candidates), written into ``folder``."""
    from ctune.spec import load_spec

    return load_spec(write_standin_kernel(folder, name))


__all__ = [
    "GROUND_TRUTH_FORMAT",
    "STANDIN_DEVICE",
    "GroundTruth",
    "ReplayCompiler",
    "ReplayMeasurer",
    "StandInCompiler",
    "StandInMeasurer",
    "ground_truth_entry",
    "standin_spec",
    "summarize_samples",
    "synthetic_ground_truth",
    "write_standin_kernel",
]
