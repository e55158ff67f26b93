"""A search result becomes a registry artifact: assembly, the result file, the commit.

The search hands over a :class:`~ctune.search.result.SearchResult` (its
front, baseline, evidence and ``record``: fingerprint, provenance, protocol,
source closure); everything about the registry's format and git lives here,
so the search package never imports the registry.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import CtuneError, ToolchainError, UserError
from ctune.evidence import identity
from ctune.evidence.identity import FIELDS
from ctune.evidence.stats import summarize as quantiles
from ctune.records import Build, Candidate, Measurement
from ctune.registry.journals import Found, find
from ctune.registry.schema import Artifact, FrontMember, ObjectiveInfo
from ctune.search.report import median_of
from ctune.search.result import MemberResult, SearchResult, clean_json
from ctune.writes import is_disk_full

if TYPE_CHECKING:
    from ctune.objective.spec import ObjectiveSpec
    from ctune.spec import KernelSpec, Problem

log = logging.getLogger(__name__)


def summarize(m: Measurement | None) -> dict[str, Any]:
    """p50/p95/p99/mean with 95% CIs, n, device, energy: the artifact's ``summary``."""
    if m is None:
        return {}
    out: dict[str, Any] = {}
    if m.samples_ms:
        out.update(_sample_summary(m.samples_ms))
    elif m.summary is not None:
        s = m.summary
        out.update(
            {
                "n": s.n,
                "p50_ms": s.p50_ms,
                "p95_ms": s.p95_ms,
                "p99_ms": s.p99_ms,
                "mean_ms": s.mean_ms,
                "p50_ci_ms": list(s.p50_ci_ms),
                "p95_ci_ms": list(s.p95_ci_ms),
                "p99_ci_ms": list(s.p99_ci_ms),
            }
        )
    if m.device is not None:
        out["device"] = identity.gpu_label(m.device)
    out["l2_policy"] = m.l2_policy
    out["timing_method"] = m.timing_method
    if m.launches_per_sample > 1:
        out["launches_per_sample"] = m.launches_per_sample
    if m.energy_j is not None:
        out["energy_j"] = m.energy_j
    if m.avg_power_w is not None:
        out["avg_power_w"] = m.avg_power_w
    return {k: v for k, v in out.items() if not (isinstance(v, float) and not math.isfinite(v))}


def _sample_summary(samples: Sequence[float]) -> dict[str, Any]:
    """Quantiles with distribution-free 95% CIs from order statistics (binomial ranks),
    plus a normal-theory CI for the mean."""
    q = quantiles(samples)
    sd = q.stdev_ms / math.sqrt(q.n) * 1.96 if q.n > 0 else 0.0
    return {
        "n": q.n,
        "mean_ms": q.mean_ms,
        "mean_ci_ms": [q.mean_ms - sd, q.mean_ms + sd],
        "p50_ms": q.p50_ms,
        "p95_ms": q.p95_ms,
        "p99_ms": q.p99_ms,
        "p50_ci_ms": list(q.p50_ci_ms),
        "p95_ci_ms": list(q.p95_ci_ms),
        "p99_ci_ms": list(q.p99_ci_ms),
    }


def launch_of(spec: KernelSpec, candidate: Candidate, problem: Problem) -> dict[str, Any]:
    """The member's recorded launch; {} (with a warning) where the rule cannot evaluate it."""
    try:
        return spec.launch_geometry(candidate, problem)
    except UserError as exc:  # a launch rule the default passed but this candidate breaks
        log.warning("launch of %s not evaluable: %s", candidate.key(), exc)
        return {}


def _flags(build: Build | None) -> tuple[str, ...]:
    if build is None or not build.argv:
        return ()
    from ctune.compile.command import tuned_flags

    return tuple(tuned_flags(build.argv))


def _defines(spec: KernelSpec, candidate: Candidate, problem: Problem) -> dict[str, Any]:
    # flags are in argv, runtime genes at launch, device genes (clock, power) on the GPU,
    # and an #ifdef switch that is off nowhere: the defines are what the build passed
    from ctune.compile.command import split_genes

    defines, _ = split_genes(spec.space.genes, candidate.as_dict())
    return {**problem.defines, **defines}


def _device(spec: KernelSpec, candidate: Candidate) -> dict[str, int]:
    """The device genes it was measured under, those set only (0 leaves the GPU as found)."""
    names = {g.name for g in spec.genes if g.device}
    return {k: int(v) for k, v in candidate.genes if k in names and v}


def front_member(
    spec: KernelSpec, problem: Problem, m: MemberResult, keep_samples: bool
) -> FrontMember:
    measurement = m.measurement
    summary = summarize(measurement)
    sig = m.significance
    if sig is not None and not math.isnan(sig.p_value):
        summary["p_value"] = sig.p_value
        summary["significant"] = sig.significant
    if sig is not None and not math.isnan(sig.change):
        summary["effect"] = sig.change
    if m.gain is not None:
        summary["gain"] = m.gain.ratio
        summary["gain_ci"] = [m.gain.low, m.gain.high]
    summary["processes"] = len(m.per_process)
    medians = tuple(v for v in (median_of(r) for r in m.per_process) if v is not None)
    samples = tuple(measurement.samples_ms) if keep_samples and measurement is not None else ()
    return FrontMember(
        candidate=m.candidate,
        key=m.key,
        values=tuple(float(v) for v in m.values),
        summary={
            k: v for k, v in summary.items() if not (isinstance(v, float) and not math.isfinite(v))
        },
        samples_ms=samples,
        process_medians_ms=medians,
        sass_sha256=(m.build.sass_sha256 or "") if m.build is not None else "",
        nvcc_flags=_flags(m.build),
        defines=_defines(spec, m.candidate, problem),
        launch=launch_of(spec, m.candidate, problem),
        resources=m.resources(),
        runtime=spec.runtime_values(m.candidate),
        device=_device(spec, m.candidate),
    )


def device_class_of(result: SearchResult, spec: KernelSpec, fingerprint: Mapping[str, str]) -> str:
    base = result.baseline
    measurement = base.measurement if base is not None else None
    if measurement is not None and measurement.device is not None:
        return identity.gpu_id(measurement.device)
    if fingerprint.get("gpu_name"):
        return identity.gpu_id(fingerprint)
    return identity.gpu_id({"sm": spec.arch, "gpu_name": "compile-only"})


def build_artifact(
    spec: KernelSpec,
    problem: Problem,
    objective: ObjectiveSpec,
    result: SearchResult,
) -> Artifact:
    """The registry artifact for ``result`` (samples kept for the pinned member and baseline)."""
    if result.baseline is None or result.record is None:
        raise ValueError("only a finished search with a baseline has an artifact")
    record = result.record
    fingerprint = record.fingerprint
    front = tuple(
        front_member(spec, problem, m, keep_samples=m.key == result.pinned) for m in result.front
    )
    baseline = front_member(spec, problem, result.baseline, keep_samples=True)
    fp = {k: str(v) for k, v in fingerprint.items() if k in FIELDS}
    extensions = {
        "objective_spec": objective.identity(),
        "objective_text": [o.text for o in objective.objectives],
        "search": {
            "plan": dict(result.plan),
            "strategy_options": dict(record.strategy_options),
            "stop_reason": result.stop_reason,
            "generations": result.generations,
            "failures": dict(result.failures),
            "infeasible": result.infeasible,
            **(
                {"baseline_feasible": result.feasibility.baseline_feasible}
                if result.feasibility is not None
                else {}
            ),
            "fillers": result.fillers,
            "confirm_processes": result.confirm_processes,
            "evaluations": result.evaluations,
            "binaries": result.binaries,
            "dropped": [{"key": k, "why": why} for k, why in result.dropped],
            "timing": {
                "wall_s": result.timing.wall_s,
                "compile_wait_s": result.timing.compile_wait_s,
                "measure_s": result.timing.measure_s,
                "confirm_s": result.timing.confirm_s,
                "gpu_busy_fraction": result.timing.gpu_busy_fraction,
            },
            **({"controls": result.controls.to_json()} if result.controls else {}),
            **({"vendor": result.vendor.to_json()} if result.vendor else {}),
        },
    }
    return Artifact(
        kernel=spec.name,
        problem=problem.name,
        device_class=device_class_of(result, spec, fingerprint),
        fingerprint=fp,
        objectives=tuple(
            ObjectiveInfo(o["name"], o["direction"], o["unit"]) for o in objective.infos()
        ),
        front=front,
        baseline=baseline,
        pinned=result.pinned,
        provenance=dict(record.provenance),
        extensions=clean_json(extensions),
        protocol=dict(record.protocol),
        inputs=dict(record.inputs),
    )


def write_artifact(artifact: Artifact, path: Path) -> Path:
    """Write a result file ``ctune registry import`` accepts (the registry's own writer)."""
    from ctune.registry.store import write_result

    return Path(write_result(artifact, Path(path)))


def _unwritten_result(exc: OSError | UserError, out: Path, journal: str | Path) -> CtuneError:
    """The one line for a result file that could not be written after the search ran: what
    went wrong and that the journal keeps the search, which ``--resume`` writes again. A
    full disk stays exit 3 (the environment's), anything else is the path's (exit 2)."""
    if isinstance(exc, UserError):
        why = str(exc).removeprefix(f"{out}: ")
    else:
        why = exc.strerror or str(exc)
    again = f"--resume {journal} writes it (with --out FILE)"
    if is_disk_full(exc):
        return ToolchainError(f"{out}: {why}; the search is kept: free space, then {again}")
    return UserError(f"{out}: result file not written ({why}); the search is kept: {again}")


def check_commit_target(registry: Path) -> None:
    """Before searching: --commit must have a branch to commit to (not a detached HEAD,
    not outside git), so an hours-long search never ends in a refused commit."""
    from ctune.registry.git import GitRegistry

    with GitRegistry(Path(registry)) as repo:
        repo.target_ref()


def commit_artifact(
    registry: Path,
    artifact: Artifact,
    cache_dir: Path | None = None,
    journal: Found | None = None,
) -> tuple[Path, str | None]:
    """Write into the registry and commit, with the controls files the search stored in
    ``cache_dir`` that its members are built with and the copy of its search's ``journal``
    (``journals.find``); returns (path, commit sha)."""
    from ctune.controls.store import StoreChain
    from ctune.registry.service import publish_artifact

    chain = StoreChain.of_run(cache_dir, Path(registry))
    published = publish_artifact(Path(registry), artifact, controls=chain, journal=journal)
    commit = published.commit.commit if published.commit is not None else None
    return Path(published.path), commit


@dataclass(frozen=True)
class ResultPublisher:
    """What ``run_search`` does with a finished result: write the result file, maybe commit.

    ``out`` defaults to ``<cache_dir>/results/<kernel>-<problem>.json``. With
    ``commit``, :meth:`check` runs before the search so that an hours-long
    search never ends in a refused commit (a detached HEAD, no git).
    """

    registry: Path
    cache_dir: Path
    out: Path | None = None
    commit: bool = False

    def check(self) -> None:
        if self.commit:
            check_commit_target(self.registry)

    def __call__(
        self, spec: KernelSpec, objective: ObjectiveSpec, result: SearchResult
    ) -> SearchResult:
        """Write the result file (and the controls files and journal copy beside it), then
        with ``commit`` commit it, unless the registry's branch has it from the same
        search journal already (a resume after a Ctrl-C that came just after the commit):
        then a note names that commit."""
        from ctune.registry.service import committed_before

        if result.baseline is None or result.record is None:
            return result
        problem = spec.problem(result.problem)
        artifact = build_artifact(spec, problem, objective, result)
        out = self.out or self.cache_dir / "results" / f"{spec.name}-{problem.name}.json"
        try:
            path = write_artifact(artifact, out)
        except (OSError, UserError) as exc:
            raise _unwritten_result(exc, out, result.journal) from None
        result = self._controls_beside(artifact, path, result)
        journal = find(artifact, [result.journal])  # read and packed once, for both copies
        result = self._journal_beside(journal, path, result)
        if not self.commit:
            return dataclasses.replace(result, artifact_path=path)
        if result.inconclusive:
            note = (
                "not committed: nothing the constraints allow beats the default build (see the "
                f"report); {path} keeps the evidence"
            )
            return dataclasses.replace(result, artifact_path=path, notes=(*result.notes, note))
        earlier = committed_before(self.registry, artifact)
        if earlier is not None:  # resumed after its commit: the same result, not again
            note = f"not committed again: commit {earlier[:12]} has this search's result"
            return dataclasses.replace(
                result,
                artifact_path=path,
                commit=earlier,
                committed_before=True,
                notes=(*result.notes, note),
            )
        _, commit = commit_artifact(self.registry, artifact, self.cache_dir, journal)
        return dataclasses.replace(result, artifact_path=path, commit=commit)

    def _controls_beside(
        self, artifact: Artifact, path: Path, result: SearchResult
    ) -> SearchResult:
        """The result file's controls files written beside it (``controls/``), so that it
        can be imported where this search's cache is not; one note if one cannot be."""
        from ctune.controls.store import StoreChain
        from ctune.errors import RegistryError
        from ctune.registry.controls import write_beside_result

        if not path.is_file():  # --out /dev/stdout: nothing beside it
            return result
        try:
            chain = StoreChain.of_run(self.cache_dir, Path(self.registry))
            write_beside_result(artifact, path, chain)
        except (RegistryError, OSError) as exc:
            note = f"controls files not written beside {path}: {exc}"
            return dataclasses.replace(result, notes=(*result.notes, note))
        return result

    @staticmethod
    def _journal_beside(found: Found, path: Path, result: SearchResult) -> SearchResult:
        """The copy of the search's journal beside the result file, which ``ctune registry
        import`` keeps beside the artifact; one note if it cannot be written."""
        from ctune.search.journal_copy import copy_path
        from ctune.writes import write_atomic

        if path.suffix != ".json" or not path.is_file():  # --out elsewhere.txt, /dev/stdout
            return result
        try:
            if found.data is None:
                raise OSError(found.note)
            write_atomic(copy_path(path), found.data)
        except (OSError, UserError) as exc:
            note = f"journal not copied beside {path}: {exc}"
            return dataclasses.replace(result, notes=(*result.notes, note))
        return result


__all__ = [
    "ResultPublisher",
    "build_artifact",
    "check_commit_target",
    "commit_artifact",
    "front_member",
    "summarize",
    "write_artifact",
]
