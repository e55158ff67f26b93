"""``ctune gate``'s procedure: staleness, rebuild, re-measure, decide, confirm.

The decisions are pure (:mod:`ctune.ci.gate`); this module does the I/O around them
through one seam, a :data:`Remeasurer`, so tests drive the whole procedure with synthetic
measurements and only the GPU boundary is replaced. The real one
(:class:`RebuildingRemeasurer`) rebuilds each member with the toolchain ``ctune check``
would use and measures it beside the canary in the same fresh processes. The steps per
artifact: docs/registry.md, "Staleness and the gate".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctune.ci.check import Current, check_artifact, load_kernel_spec, with_recorded_acf
from ctune.ci.check_toolchain import ToolchainFinder, ToolchainUse, controls_refusals
from ctune.ci.gate import (
    GateReport,
    Regression,
    Verdict,
    confirm,
    decide,
    decide_regression,
    failed_remeasurement,
)
from ctune.errors import CtuneError, GateInconclusive, ToolchainError
from ctune.evidence.compare import NoiseRule, SampleSet
from ctune.records import Build, Candidate, FieldChange, Measurement
from ctune.registry.layout import ArtifactKey
from ctune.registry.schema import Artifact, FrontMember


@dataclass(frozen=True, slots=True)
class Remeasured:
    """Per member key: one Measurement per process, and the rebuilt SASS digest."""

    measurements: dict[str, list[Measurement]]
    sass_sha256: dict[str, str | None] = field(default_factory=dict)
    #: the spec's vendor call, one Measurement per process of its own, and its name (where
    #: it was asked for and the spec names one)
    vendor: list[Measurement] = field(default_factory=list)
    vendor_name: str = ""


#: (artifact, members, processes) -> Remeasured
Remeasurer = Callable[[Artifact, Sequence[FrontMember], int], Remeasured]
#: every artifact's members to gate, handed over before the first is measured
BuildAhead = Callable[[Sequence[tuple[Artifact, Sequence[FrontMember]]]], None]


class RebuildingRemeasurer:
    """Rebuild with nvcc and measure in fresh processes on this machine's GPU.

    One compiler per kernel and arch serves every artifact, so :meth:`build_ahead` can start
    the builds of all artifacts to gate together (``jobs`` at a time): a gate of many CUTLASS
    artifacts then waits for one compile wave, not one build per artifact.
    """

    def __init__(
        self,
        settings: Any,
        kernels_dir: Path,
        toolchains: ToolchainFinder | None = None,
        *,
        vendor: bool = False,
    ) -> None:
        self.settings = settings
        self.kernels_dir = kernels_dir
        self._toolchains = toolchains
        self.vendor = vendor  # also measure the spec's vendor call, in processes of its own
        #: (kernel, arch, nvcc, acf compilers) -> (spec, compiler)
        self._compilers: dict[tuple[str, str, str, tuple[str, ...]], tuple[Any, Any]] = {}
        self._specs: dict[tuple[str, str], Any] = {}

    def toolchain(self, artifact: Artifact) -> ToolchainUse:
        """The toolchain that rebuilds ``artifact`` (as ``ctune check`` chooses it)."""
        if self._toolchains is None:
            self._toolchains = ToolchainFinder.for_settings(self.settings)
        return self._toolchains.for_artifact(artifact)

    def refusals(self, artifact: Artifact, members: Sequence[FrontMember]) -> list[str]:
        """Members whose controls file the rebuilding toolchain does not take."""
        arch = artifact.fingerprint.get("arch") or self.settings.arch
        return controls_refusals(members, self.toolchain(artifact), arch)

    def _compiler(self, artifact: Artifact) -> tuple[Any, Any]:
        """(spec, compiler) for the arch the artifact was tuned for, with its toolchain,
        the spec widened to the controls genes its members record."""
        try:
            from ctune.compile.nvcc import NvccCompiler
            from ctune.compile.toolchain import probe_toolchain
        except ImportError as exc:
            raise ToolchainError(
                f"ctune gate needs the measuring harness, and {exc.name} is missing"
            ) from None
        arch = artifact.fingerprint.get("arch", self.settings.arch)
        nvcc = self.toolchain(artifact).nvcc
        if (artifact.kernel, nvcc) not in self._specs:
            self._specs[(artifact.kernel, nvcc)] = load_kernel_spec(
                self.kernels_dir, artifact.kernel, nvcc
            )
        spec = with_recorded_acf(self._specs[(artifact.kernel, nvcc)], artifact)
        key = (artifact.kernel, arch, nvcc, tuple(spec.acf))
        if key not in self._compilers:
            rebuild = dataclasses.replace(self.settings, arch=arch)
            compiler = NvccCompiler.from_settings(spec, probe_toolchain(nvcc), rebuild)
            self._compilers[key] = (spec, compiler)
        return self._compilers[key]

    def build_ahead(self, work: Sequence[tuple[Artifact, Sequence[FrontMember]]]) -> None:
        """Start every member's build in the background; :meth:`__call__` then finds each
        under way or cached. An artifact whose spec or members no longer load is skipped
        here: gating it reports why."""
        for artifact, members in work:
            try:
                if self.refusals(artifact, members):
                    continue  # not buildable with this toolchain: gating it says why
                spec, compiler = self._compiler(artifact)
                problem = spec.problem(artifact.problem)
                for m in members:
                    compiler.submit(spec.in_space(m.candidate), problem)
            except CtuneError:
                continue

    def build_members(
        self, artifact: Artifact, members: Sequence[FrontMember]
    ) -> list[tuple[FrontMember, Candidate, Build]]:
        """(member, candidate, Build) for each member, built as today's spec builds it: genes
        added since tuning take their defaults. Waits for builds started ahead."""
        spec, compiler = self._compiler(artifact)
        problem = spec.problem(artifact.problem)
        out: list[tuple[FrontMember, Candidate, Build]] = []
        for m in members:
            candidate = spec.in_space(m.candidate)
            out.append((m, candidate, compiler.build(candidate, problem)))
        return out

    def __call__(self, artifact: Artifact, members: Sequence[FrontMember], k: int) -> Remeasured:
        refuse_device_members(artifact, members)
        try:
            from ctune.measure.plan import plan_from_json
            from ctune.measure.session import remeasure as measure_interleaved
        except ImportError as exc:
            raise ToolchainError(
                f"ctune gate needs the measuring harness, and {exc.name} is missing"
            ) from None
        spec, _ = self._compiler(artifact)
        problem = spec.problem(artifact.problem)
        # the plan the artifact's numbers were taken with, so old and new compare like for like
        plan = plan_from_json(dict(artifact.protocol["plan"]))
        out = Remeasured({})
        built = []
        member_key: dict[str, str] = {}  # built candidate's key -> the member's recorded key
        for m, candidate, build in self.build_members(artifact, members):
            member_key[candidate.key()] = m.key
            out.sass_sha256[m.key] = build.sass_sha256
            if build.outcome.is_ok:
                built.append((candidate, build))
            else:
                failed = Measurement(m.key, problem.name, build.outcome, error=build.log_tail)
                out.measurements[m.key] = [failed]
        if built:
            measured = measure_interleaved(spec, built, problem, plan, k, settings=self.settings)
            out.measurements.update({member_key[key]: list(ms) for key, ms in measured.items()})
        if self.vendor and spec.vendor_path is not None:
            from ctune.measure.vendor import vendor_build, vendor_candidate

            item = (vendor_candidate(spec), vendor_build(spec))
            measured = measure_interleaved(spec, [item], problem, plan, k, settings=self.settings)
            out = dataclasses.replace(
                out, vendor=list(measured[item[0].key()]), vendor_name=spec.vendor_name
            )
        return out

    def close(self) -> None:
        for _, compiler in self._compilers.values():
            compiler.close()
        self._compilers.clear()

    def __enter__(self) -> RebuildingRemeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class Prebuilt:
    """What ``ctune gate --build-only`` did for one artifact: every member the gate would
    measure, built into the cache (or found there), its SASS compared with the recorded one."""

    key: str
    builds: int = 0  # members whose build is now in the cache
    #: "member: why" for a build that failed, or whose SASS differs from the recorded one
    problems: tuple[str, ...] = ()
    error: str = ""  # the spec or the members could not load

    @property
    def ok(self) -> bool:
        return not self.problems and not self.error


def prebuild_gate(
    artifacts: Iterable[tuple[ArtifactKey, Artifact]],
    builder: RebuildingRemeasurer,
    *,
    canary: bool = True,
    on_report: Callable[[Prebuilt], None] | None = None,
) -> list[Prebuilt]:
    """Build what a gate of these artifacts would measure, without a GPU: a CPU runner
    compiles, the build cache travels to the GPU runner, and the gate there measures at once.
    All builds start together (``builder``'s jobs at a time)."""
    artifacts = list(artifacts)
    builder.build_ahead([(a, gate_members(a, canary)) for _, a in artifacts])
    reports = []
    for key, artifact in artifacts:
        try:
            refused = builder.refusals(artifact, gate_members(artifact, canary))
            if refused:
                report = Prebuilt(str(key), problems=tuple(refused))
                reports.append(report)
                if on_report is not None:
                    on_report(report)
                continue
            results = builder.build_members(artifact, gate_members(artifact, canary))
        except ToolchainError:
            raise
        except CtuneError as exc:
            report = Prebuilt(str(key), error=str(exc))
        else:
            problems = []
            for m, _, build in results:
                if not build.outcome.is_ok:
                    problems.append(f"{m.key}: {build.outcome.value}")
                elif m.sass_sha256 and build.sass_sha256 != m.sass_sha256:
                    problems.append(f"{m.key}: SASS differs from the recorded build")
            built = sum(b.outcome.is_ok for _, _, b in results)
            report = Prebuilt(str(key), builds=built, problems=tuple(problems))
        reports.append(report)
        if on_report is not None:
            on_report(report)
    return reports


def gate_members(artifact: Artifact, canary: bool) -> list[FrontMember]:
    """What the gate re-measures: the pinned member, then the default build (the canary)
    when it differs and was measured; nothing when no member is pinned."""
    member = artifact.pinned_member()
    if member is None:
        return []
    members = [member]
    if canary and artifact.baseline.key != member.key and artifact.baseline.process_medians_ms:
        members.append(artifact.baseline)
    return members


def refuse_device_members(artifact: Artifact, members: Sequence[FrontMember]) -> None:
    """A member tuned under a device setting measures differently without it; the gate
    never changes clocks or power limits, so it cannot compare like for like."""
    tuned = [m for m in members if m.device]
    if not tuned:
        return
    from ctune.measure.device_settings import DeviceSetting

    setting = DeviceSetting.from_values(tuned[0].device)
    raise GateInconclusive(
        f"{artifact.kernel}/{artifact.problem}: member {tuned[0].key} was tuned with "
        f"{setting.text()}; the gate does not change the GPU's clocks or power limit, so it "
        f"cannot re-measure it like for like (measure it by hand after "
        f"`{setting.nvidia_smi()}`, or retune without --device-genes)"
    )


def _old(m: FrontMember) -> SampleSet:
    return SampleSet(m.process_medians_ms, m.samples_ms)


def _sass_changes(members: Sequence[FrontMember], r: Remeasured) -> list[FieldChange]:
    out = []
    for m in members:
        new = r.sass_sha256.get(m.key)
        if m.sass_sha256 and new and new != m.sass_sha256:
            out.append(FieldChange(f"sass_sha256[{m.key}]", m.sass_sha256, new, "hard"))
    return out


def gate_artifact(
    key: ArtifactKey,
    artifact: Artifact,
    current: Current,
    remeasure: Remeasurer,
    *,
    rule: NoiseRule,
    processes: int,
    canary: bool = True,
    confirm_failures: bool = True,
    strict: bool = False,
) -> GateReport:
    """The gate for one pinned artifact (see the module docstring for the steps)."""
    name = str(key.artifact)
    staleness = check_artifact(key, artifact, current)
    if staleness.error:  # genes the spec does not have: nothing of it is built or measured
        change = FieldChange("genes", "(recorded)", staleness.error, "hard")
        return GateReport(name, Verdict.STALE, staleness.error, (change,))
    changes, unchecked = list(staleness.changes), list(staleness.not_checked)
    stale = decide(name, changes, unchecked, None, strict=strict)
    if stale.verdict is Verdict.STALE:
        return stale
    members = gate_members(artifact, canary)
    if not members:
        return GateReport(name, Verdict.INCONCLUSIVE, "no pinned member", tuple(changes))
    if current.toolchain is not None:
        arch = artifact.fingerprint.get("arch", "")
        refused = controls_refusals(members, current.toolchain, arch)
        if refused:
            change = FieldChange("controls", "(recorded)", refused[0], "hard")
            return GateReport(name, Verdict.STALE, refused[0], (*changes, change))
    member = members[0]
    measured = remeasure(artifact, members, processes)
    sass = _sass_changes(members, measured)
    if sass:
        return decide(name, [*changes, *sass], unchecked, None, strict=strict)
    failure = failed_remeasurement(measured.measurements.get(member.key, []))
    if failure:
        bad = Regression(Verdict.REGRESSED, failure)
        return GateReport(name, Verdict.REGRESSED, failure, tuple(changes), tuple(unchecked), bad)
    result = decide_regression(_old(member), _new(measured, member), rule)
    if result.verdict is Verdict.REGRESSED and confirm_failures:
        again = remeasure(artifact, [member], processes)
        result = confirm(result, decide_regression(_old(member), _new(again, member), rule))
    canary_result = None
    if len(members) > 1 and not failed_remeasurement(measured.measurements.get(members[1].key, [])):
        canary_result = decide_regression(
            _old(artifact.baseline), _new(measured, artifact.baseline), rule
        )
    vendor = _against_vendor(measured, member, rule)
    if vendor is not None and vendor.verdict is Verdict.REGRESSED and confirm_failures:
        second = _against_vendor(remeasure(artifact, [member], processes), member, rule)
        unmeasured = Regression(Verdict.INCONCLUSIVE, "the vendor call was not re-measured")
        vendor = confirm(vendor, second or unmeasured)
    return decide(
        name,
        changes,
        unchecked,
        result,
        canary_result,
        strict=strict,
        vendor=vendor,
        vendor_name=measured.vendor_name,
    )


def _against_vendor(r: Remeasured, member: FrontMember, rule: NoiseRule) -> Regression | None:
    """The pinned member's new samples against the vendor call's, measured in the same run
    (None where the vendor call was not measured); a failed vendor call is INCONCLUSIVE."""
    if not r.vendor:
        return None
    failure = failed_remeasurement(r.vendor)
    if failure:
        return Regression(Verdict.INCONCLUSIVE, f"the vendor call's {failure}")
    return decide_regression(SampleSet.from_measurements(r.vendor), _new(r, member), rule)


def _new(r: Remeasured, m: FrontMember) -> SampleSet:
    return SampleSet.from_measurements(r.measurements.get(m.key, []))


def run_gate(
    artifacts: Iterable[tuple[ArtifactKey, Artifact]],
    current_for: Callable[[Artifact], Current],
    remeasure: Remeasurer,
    *,
    rule: NoiseRule,
    processes: int,
    canary: bool = True,
    confirm_failures: bool = True,
    strict: bool = False,
    on_report: Callable[[GateReport], None] | None = None,
    build_ahead: BuildAhead | None = None,
) -> list[GateReport]:
    """Gate each artifact's pinned member; an artifact whose spec cannot load, or whose
    members today's spec cannot build as recorded, is STALE. ``build_ahead``
    (:meth:`RebuildingRemeasurer.build_ahead`) is handed every artifact's members first.
    ``on_report`` hears each verdict as it lands (a gate of many artifacts takes minutes; a
    CI log shows them as they come)."""
    artifacts = list(artifacts)
    if build_ahead is not None:
        build_ahead([(a, gate_members(a, canary)) for _, a in artifacts])
    reports = []
    for key, artifact in artifacts:
        try:
            current = current_for(artifact)
            report = gate_artifact(
                key,
                artifact,
                current,
                remeasure,
                rule=rule,
                processes=processes,
                canary=canary,
                confirm_failures=confirm_failures,
                strict=strict,
            )
        except ToolchainError:
            raise
        except CtuneError as exc:
            change = FieldChange("kernel_spec", "(recorded)", str(exc), "hard")
            report = GateReport(str(key), Verdict.STALE, str(exc), (change,))
        reports.append(report)
        if on_report is not None:
            on_report(report)
    return reports


__all__ = [
    "Prebuilt",
    "RebuildingRemeasurer",
    "Remeasured",
    "Remeasurer",
    "gate_artifact",
    "gate_members",
    "prebuild_gate",
    "run_gate",
]
