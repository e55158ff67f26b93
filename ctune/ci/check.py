"""Staleness: is each artifact still what would be built and measured here, now?

``ctune check`` (and the gate's first step) runs this, following the identity model of
:mod:`ctune.evidence.identity`: a hard change makes an artifact STALE, a build change is
decided by rebuilding every member and comparing SASS digests, a soft change is a warning
(docs/staleness.md). The toolchain and the GPU are probed once per run, each kernel's spec
and source closure once per kernel and toolchain; each artifact is checked with the
toolchain :mod:`ctune.ci.check_toolchain` chooses. Without a GPU the GPU fields are
"not checked", never assumed equal.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune import identity_probe
from ctune.ci.check_toolchain import ToolchainFinder, ToolchainUse, controls_refusals
from ctune.compile.command import without_harness_flags
from ctune.controls.store import ControlsError, StoreChain
from ctune.errors import EXIT_GATE_FAILED, EXIT_OK, CtuneError, ToolchainError, UserError
from ctune.evidence import identity as fingerprint
from ctune.records import Candidate, FieldChange
from ctune.registry.controls import distinct_members
from ctune.registry.layout import ArtifactKey
from ctune.registry.member_genes import hand_edits
from ctune.registry.schema import Artifact, FrontMember
from ctune.registry.store import ArtifactStore, Quarantined

if TYPE_CHECKING:
    from ctune.spec import KernelSpec

FRESH, WARN, STALE = "fresh", "warn", "stale"
#: sampling-plan fields that come from settings (the rest follow from the objectives)
PLAN_SETTINGS = ("warmup_ms", "rep_ms", "energy_window_s")


@dataclass(frozen=True, slots=True)
class BinaryCheck:
    """Members rebuilt from the current inputs and their SASS compared with the recorded."""

    members: int
    differences: tuple[str, ...] = ()  # "member KEY: SASS abc.. -> def.." or why it failed
    #: "member KEY: ptxas 13.0.88 does not take ...": members the toolchain cannot rebuild
    refused: tuple[str, ...] = ()

    @property
    def identical(self) -> bool:
        return not self.differences and not self.refused


@dataclass(frozen=True, slots=True)
class CheckResult:
    key: ArtifactKey
    changes: tuple[FieldChange, ...]
    not_checked: tuple[str, ...]
    error: str = ""  # the kernel spec could not be loaded: nothing to compare with
    inputs_changed: tuple[str, ...] = ()  # closure files: "gemm.cu (changed)", "x.h (added)"
    binaries: BinaryCheck | None = None  # set when build inputs changed and members were rebuilt
    #: measured on another GPU than the one probed here: its GPU fields were not compared
    other_gpu: bool = False
    #: which toolchain it was checked with (ToolchainUse.phrase); "" when not said
    toolchain: str = ""
    #: that toolchain in short (ToolchainUse.describe: ``nvcc 13.0.88 / ptxas 13.0.88``)
    checked_with: str = ""

    @property
    def build_changes(self) -> tuple[FieldChange, ...]:
        return tuple(c for c in self.changes if c.severity == fingerprint.BUILD)

    def verdict(self, strict: bool = False) -> str:
        if self.error or any(c.severity == fingerprint.HARD for c in self.changes):
            return STALE
        if self.build_changes and (self.binaries is None or not self.binaries.identical):
            return STALE
        if strict and self.changes:
            return STALE
        return WARN if self.changes else FRESH


@dataclass(frozen=True, slots=True)
class CheckReport:
    results: tuple[CheckResult, ...]
    quarantined: tuple[Quarantined, ...]
    gpu_probed: bool

    def exit_code(self, strict: bool = False) -> int:
        """1 when any artifact is stale (soft changes too under ``strict``), else 0.

        Unreadable artifacts are reported by the CLI as a registry error.
        """
        stale = any(r.verdict(strict) == STALE for r in self.results)
        return EXIT_GATE_FAILED if stale else EXIT_OK


#: (artifact, member) -> the member's nvcc flags as today's code renders them
FlagRenderer = Callable[[Artifact, FrontMember], tuple[str, ...]]


@dataclass(frozen=True)
class Current:
    """What this machine says now about one (kernel, problem)."""

    fields: dict[str, str]
    closure: dict[str, str] | None = None  # None: not computed (no comparison by file)
    spec: KernelSpec | None = None  # for launch geometry, defaults and rebuilds
    plan: dict[str, float] = field(default_factory=dict)  # PLAN_SETTINGS from settings
    #: fields whose value today's inputs also have in an older digest form, that form
    older: dict[str, str] = field(default_factory=dict)
    flags_of: FlagRenderer | None = None  # None: members' nvcc flags not compared
    #: the toolchain that checks (and rebuilds) it; None: the settings' own, not said
    toolchain: ToolchainUse | None = None


#: (artifact, current) -> BinaryCheck: rebuild the members (with ``current.spec`` and
#: ``current.toolchain``), compare SASS
Verifier = Callable[[Artifact, Current], BinaryCheck]


def current_candidate(spec: KernelSpec, candidate: Candidate) -> Candidate:
    """The member's candidate in today's space: genes it lacks take their defaults, genes
    the space no longer has are dropped (the SASS comparison then says if that mattered);
    a value the space does not have is refused (:func:`hand_edits` says so first)."""
    values = candidate.as_dict()
    kept = {k: v for k, v in values.items() if k in spec.space}
    spec.space.check_values(kept, f"member {candidate.key()}")
    return Candidate.of(candidate.kernel, spec.space.in_today(values))


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=list))


def launch_changes(artifact: Artifact, spec: KernelSpec | None) -> list[FieldChange]:
    """Members whose grid / block / shared memory the current launch rule computes otherwise."""
    if spec is None:
        return []
    problem = spec.problem(artifact.problem)
    out = []
    for m in distinct_members(artifact):
        if not m.launch:
            continue
        try:
            now = spec.launch_geometry(current_candidate(spec, m.candidate), problem)
        except CtuneError as exc:
            now = {"error": str(exc)[:120]}
        old, new = _plain(m.launch), _plain(now)
        if old != new:
            name = f"launch[{m.key}]"
            out.append(FieldChange(name, json.dumps(old), json.dumps(new), fingerprint.HARD))
    return out


def _value(value: Any) -> str:
    return json.dumps(value)


def default_changes(artifact: Artifact, spec: KernelSpec | None) -> list[FieldChange]:
    """Genes whose default today differs from the value the baseline was built with.

    The baseline is the default build (every search's, a problem set's shapes included):
    with another default it no longer is, and the gain over it measures something else.
    Genes the baseline never recorded (added since) are left to the rebuild of its flags.
    """
    if spec is None:
        return []
    recorded = artifact.baseline.candidate.as_dict()
    return [
        FieldChange(f"default[{name}]", _value(recorded[name]), _value(now), fingerprint.HARD)
        for name, now in sorted(spec.space.default_values().items())
        if name in recorded and recorded[name] != now
    ]


def _portable_flag(item: str) -> str:
    """A flag without the machine's paths: a controls file by its name (its content is a
    build input of its own)."""
    option = "--apply-controls="
    return option + Path(item[len(option) :]).name if item.startswith(option) else item


def _argv_difference(old: Sequence[str], new: Sequence[str]) -> tuple[str, str]:
    """(items only the recorded flags have, items only today's have), in argv order."""
    gone: list[str] = []
    came: list[str] = []
    matcher = difflib.SequenceMatcher(a=list(old), b=list(new), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            gone += old[i1:i2]
            came += new[j1:j2]
    return " ".join(gone) or "(none)", " ".join(came) or "(none)"


_FLAGS = "nvcc_flags["  # a member's flags change is named nvcc_flags[KEY]


def flags_member(change: FieldChange) -> str | None:
    """The member key of a change of a member's nvcc flags (:func:`argv_changes`), else None."""
    if change.name.startswith(_FLAGS) and change.name.endswith("]"):
        return change.name[len(_FLAGS) : -1]
    return None


def argv_changes(artifact: Artifact, flags_of: FlagRenderer | None) -> list[FieldChange]:
    """Members whose nvcc flags, rendered from their genes by today's code (the flag
    catalogue, its render rules, genes added since with their defaults), differ from the
    recorded ones: a build change, decided by rebuilding and comparing SASS."""
    if flags_of is None:
        return []
    out = []
    for m in distinct_members(artifact):
        name = f"{_FLAGS}{m.key}]"
        try:
            now = [_portable_flag(f) for f in flags_of(artifact, m)]
        except CtuneError as exc:
            out.append(
                FieldChange(name, "(as recorded)", f"not rendered: {exc}", fingerprint.BUILD)
            )
            continue
        old = [_portable_flag(f) for f in without_harness_flags(m.nvcc_flags)]
        if not old:
            out.append(FieldChange(name, "(not recorded)", " ".join(now), fingerprint.BUILD))
        elif old != now:
            out.append(FieldChange(name, *_argv_difference(old, now), fingerprint.BUILD))
    return out


def plan_changes(artifact: Artifact, plan: Mapping[str, float]) -> list[FieldChange]:
    """Sampling-plan settings (warm-up, timing budget, energy window) that differ now."""
    recorded = artifact.protocol.get("plan") or {}
    out = []
    for name in PLAN_SETTINGS:
        if name in plan and name in recorded and float(recorded[name]) != float(plan[name]):
            out.append(
                FieldChange(
                    f"plan.{name}", f"{recorded[name]:g}", f"{plan[name]:g}", fingerprint.HARD
                )
            )
    return out


def closure_changes(recorded: Mapping[str, str], now: Mapping[str, str] | None) -> list[str]:
    """Closure files that changed, appeared or went away, by label."""
    if now is None:
        return []
    if not recorded:
        return ["(the closure was not recorded file by file)"]
    out = [
        f"{label} (changed)"
        for label in sorted(now)
        if recorded.get(label, now[label]) != now[label]
    ]
    out += [f"{label} (added)" for label in sorted(set(now) - set(recorded))]
    out += [f"{label} (removed)" for label in sorted(set(recorded) - set(now))]
    return out


def check_artifact(
    key: ArtifactKey,
    artifact: Artifact,
    current: Current,
    verify: Verifier | None = None,
) -> CheckResult:
    """Compare ``artifact`` with ``current``; rebuild with ``verify`` when a build input changed.

    Without ``verify`` a build change stays unverified (STALE unless the caller
    verifies the binaries itself, as the gate does for the pinned member). Genes that
    are not the spec's values make it STALE before anything is compared or built.
    """
    edited = hand_edits(artifact, current.spec.space) if current.spec is not None else []
    if edited:
        more = f" (and {len(edited) - 1} more)" if len(edited) > 1 else ""
        return CheckResult(key, (), (), error=edited[0] + more)
    checked = set(current.fields)
    recorded = fingerprint.adopt_older_forms(artifact.fingerprint, current.fields, current.older)
    changes = fingerprint.diff(recorded, current.fields, checked)
    changes += default_changes(artifact, current.spec)
    changes += launch_changes(artifact, current.spec)
    changes += plan_changes(artifact, current.plan)
    changes += argv_changes(artifact, current.flags_of)
    unchecked = tuple(fingerprint.not_checked(recorded, current.fields, checked))
    inputs = closure_changes(artifact.inputs.get("closure") or {}, current.closure)
    use = current.toolchain
    result = CheckResult(
        key,
        tuple(changes),
        unchecked,
        inputs_changed=tuple(inputs),
        toolchain=use.phrase() if use is not None else "",
        checked_with=use.describe() if use is not None else "",
    )
    hard = any(c.severity == fingerprint.HARD for c in changes)
    if result.build_changes and not hard and verify is not None:
        result = replace(result, binaries=verify(artifact, current))
    return result


class SpecNotFound(UserError):
    """An artifact's kernel has no ``<kernels>/<kernel>.yaml``: where ctune looked is wrong
    (bad input), not the artifact stale."""

    def __init__(self, path: Path, kernel: str) -> None:
        super().__init__(f"kernel spec {path} not found (use --kernels DIR)")
        self.path = path
        self.kernel = kernel


def _missing_specs(missing: Sequence[SpecNotFound]) -> UserError:
    """One line for every artifact whose spec was not found, counted per kernel."""
    counts = Counter(exc.kernel for exc in missing)
    first = min(missing, key=lambda exc: exc.kernel)
    many = "s" * (counts[first.kernel] != 1)
    more = len(counts) - 1
    others = f" (and the specs of {more} more kernel{'s' * (more != 1)})" if more else ""
    return UserError(
        f"kernel spec {first.path} not found for {counts[first.kernel]} artifact{many} of "
        f"{first.kernel}{others}; set [tool.ctune] kernels or pass --kernels"
    )


def load_kernel_spec(kernels_dir: Path, kernel: str, nvcc: str = "nvcc") -> KernelSpec:
    """``<kernels_dir>/<kernel>.yaml`` loaded with this nvcc's options."""
    from ctune.compile.toolchain import probe_toolchain
    from ctune.spec import load_spec

    path = Path(kernels_dir) / f"{kernel}.yaml"
    if not path.is_file():
        raise SpecNotFound(path, kernel)
    return load_spec(path, probe_toolchain(nvcc).help_text)


def with_recorded_acf(spec: KernelSpec, artifact: Artifact) -> KernelSpec:
    """``spec`` with the ``acf`` genes the artifact's members record (a search run with
    ``--acf`` while the spec names none): what checking and rebuilding them needs."""
    values: dict[str, object] = {}
    for m in distinct_members(artifact):
        values.update(m.candidate.genes)
    return spec.with_acf_of(values)


def nvcc_verifier(settings: Any) -> Verifier:
    """Rebuild every member with nvcc (into the build cache, controls files found through
    the search's and the registry's stores) and compare SASS digests. The toolchain is the
    one that checks the artifact (``current.toolchain``), else the settings' own; a member
    whose controls file that toolchain refuses is named, not built."""

    def verify(artifact: Artifact, current: Current) -> BinaryCheck:
        import dataclasses

        from ctune.compile.nvcc import NvccCompiler
        from ctune.compile.select_toolchain import nvcc_for
        from ctune.compile.toolchain import probe_toolchain

        spec = current.spec
        assert spec is not None, "Checker.current loads the spec it verifies with"
        members = distinct_members(artifact)
        problem = spec.problem(artifact.problem)
        arch = artifact.fingerprint.get("arch") or settings.arch or spec.arch
        use = current.toolchain
        if use is not None:
            refused = controls_refusals(members, use, arch)
            if refused:
                return BinaryCheck(len(members), refused=tuple(refused))
        nvcc = use.nvcc if use is not None else nvcc_for(settings)
        rebuild = dataclasses.replace(settings, arch=arch)
        differences = []
        with NvccCompiler.from_settings(spec, probe_toolchain(nvcc), rebuild) as compiler:
            futures = [
                (m, compiler.submit(current_candidate(spec, m.candidate), problem)) for m in members
            ]
            for m, future in futures:
                try:
                    build = future.result()
                except ControlsError as exc:  # its file is in no store: it cannot be built
                    differences.append(f"member {m.key} cannot be built: {exc}")
                    continue
                if not build.outcome.is_ok:
                    tail = build.log_tail.strip().splitlines()[-1:] or [""]
                    differences.append(
                        f"member {m.key} does not build ({build.outcome.value}: {tail[0][:160]})"
                    )
                elif not m.sass_sha256:
                    differences.append(f"member {m.key} recorded no SASS digest")
                elif build.sass_sha256 != m.sass_sha256:
                    differences.append(
                        f"member {m.key}: SASS {m.sass_sha256[:12]} -> "
                        f"{(build.sass_sha256 or '?')[:12]}"
                    )
        return BinaryCheck(len(members), tuple(differences))

    return verify


class FingerprintProbe:
    """This machine's identity per (kernel, problem, toolchain), probing shared parts once.

    ``toolchains`` chooses the toolchain each artifact is checked with (default: always
    ``nvcc``, the selected one); ``controls`` finds the controls files members apply when
    their flags are rendered (default: none, so such a member renders as not rendered)."""

    def __init__(
        self,
        kernels_dir: Path,
        *,
        gpu: bool,
        nvcc: str = "nvcc",
        arch: str | None = None,
        l2_policy: str | None = None,
        plan: Mapping[str, float] | None = None,
        toolchains: ToolchainFinder | None = None,
        controls: StoreChain | None = None,
    ) -> None:
        self.kernels_dir = Path(kernels_dir)
        self.nvcc = nvcc
        self.arch = arch
        self.l2_policy = l2_policy
        self.plan = dict(plan or {})
        self.toolchain = identity_probe.probe_toolchain(nvcc)
        self.toolchains = toolchains or ToolchainFinder(nvcc)
        self.controls = controls
        self.gpu_fields = fingerprint.probe_gpu_machine() if gpu else None
        #: this GPU's registry device class (``sm90-nvidia-h200``); None without a GPU
        self.device_class = (
            fingerprint.gpu_id(self.gpu_fields) if self.gpu_fields is not None else None
        )
        self._specs: dict[tuple[str, str], Any] = {}
        self._toolchain_fields: dict[str, dict[str, str]] = {nvcc: self.toolchain}
        self._cache: dict[tuple[str, str, bool, str], Current] = {}
        self._renderers: dict[tuple[str, str, str, tuple[str, ...]], Any] = {}

    @property
    def gpu_probed(self) -> bool:
        return self.gpu_fields is not None

    def of_this_gpu(self, artifact: Artifact) -> bool:
        """Was ``artifact`` measured on a GPU of this one's class? Only then do its GPU
        fields mean anything here: an H100 artifact checked on an H200 is not stale, it is
        another GPU's (a registry holds artifacts of several)."""
        return self.gpu_fields is not None and artifact.device_class == self.device_class

    def spec(self, kernel: str, nvcc: str | None = None) -> KernelSpec:
        """The kernel's spec, loaded with the options ``nvcc`` (default: the selected) has."""
        nvcc = nvcc or self.nvcc
        if (kernel, nvcc) not in self._specs:
            self._specs[(kernel, nvcc)] = load_kernel_spec(self.kernels_dir, kernel, nvcc)
        return self._specs[(kernel, nvcc)]

    def _fields(self, nvcc: str) -> dict[str, str]:
        if nvcc not in self._toolchain_fields:
            self._toolchain_fields[nvcc] = identity_probe.probe_toolchain(nvcc)
        return self._toolchain_fields[nvcc]

    def current(
        self, kernel: str, problem: str, gpu: bool = True, nvcc: str | None = None
    ) -> Current:
        """``gpu``: compare the GPU fields (when a GPU was probed); ``nvcc``: the toolchain
        (default: the selected one)."""
        gpu = gpu and self.gpu_fields is not None
        nvcc = nvcc or self.nvcc
        if (kernel, problem, gpu, nvcc) not in self._cache:
            from ctune.compile.deps import source_closure

            spec = self.spec(kernel, nvcc)
            spec.problem(problem)  # a problem the spec no longer has: one line, STALE
            fields = identity_probe.current_fingerprint(
                spec,
                gpu,
                problem=problem,
                nvcc=nvcc,
                l2_policy=self.l2_policy,
                arch=self.arch,
                toolchain=self._fields(nvcc),
                gpu_fields=self.gpu_fields,
            )
            closure = source_closure(spec, nvcc, arch=self.arch or "")
            self._cache[(kernel, problem, gpu, nvcc)] = Current(
                fields,
                closure,
                spec,
                self.plan,
                older=fingerprint.older_forms(spec),
                flags_of=self.member_flags,
            )
        return self._cache[(kernel, problem, gpu, nvcc)]

    def member_flags(self, artifact: Artifact, member: FrontMember) -> tuple[str, ...]:
        """The member's nvcc flags as a build today renders them (the compiler's own argv,
        nothing compiled), with the toolchain that checks the artifact, for the arch it was
        tuned for: what its ``nvcc_flags`` recorded."""
        from ctune.compile.command import tuned_flags

        nvcc = self.toolchains.for_artifact(artifact).nvcc
        spec = with_recorded_acf(self.spec(artifact.kernel, nvcc), artifact)
        arch = artifact.fingerprint.get("arch") or self.arch or spec.arch
        key = (artifact.kernel, arch, nvcc, tuple(spec.acf))
        if key not in self._renderers:
            from ctune.compile.nvcc import NvccCompiler
            from ctune.compile.toolchain import probe_toolchain

            # the cache folder only names where builds would go: argv drops it
            self._renderers[key] = NvccCompiler(
                spec,
                probe_toolchain(nvcc),
                Path(".ctune-render"),
                arch=arch,
                controls=self.controls,
            )
        compiler = self._renderers[key]
        output = Path("kernel.so" if spec.entry_kind == "launcher" else "kernel.cubin")
        candidate = current_candidate(spec, member.candidate)
        return tuple(tuned_flags(compiler.argv(candidate, spec.problem(artifact.problem), output)))

    def for_artifact(self, artifact: Artifact) -> Current:
        """What this machine says about ``artifact``, with the toolchain that checks it and
        its spec widened to the controls genes its members record."""
        use = self.toolchains.for_artifact(artifact)
        current = self.current(
            artifact.kernel, artifact.problem, gpu=self.of_this_gpu(artifact), nvcc=use.nvcc
        )
        spec = with_recorded_acf(current.spec, artifact) if current.spec is not None else None
        return replace(current, spec=spec, toolchain=use)


def check_all(
    artifacts: Iterable[tuple[ArtifactKey, Artifact]],
    probe: FingerprintProbe,
    verify: Verifier | None = None,
) -> list[CheckResult]:
    """Each artifact checked; a kernel spec that is not found is bad input (one line naming
    it, before anything is rebuilt), no nvcc a toolchain error."""
    found: list[tuple[ArtifactKey, Artifact, Current | CtuneError]] = []
    missing: list[SpecNotFound] = []
    for key, artifact in artifacts:
        try:
            found.append((key, artifact, probe.for_artifact(artifact)))
        except ToolchainError:
            raise  # no nvcc: the whole check is meaningless, say so (exit 3)
        except SpecNotFound as exc:
            missing.append(exc)
        except CtuneError as exc:
            found.append((key, artifact, exc))
    if missing:
        raise _missing_specs(missing)
    results = []
    for key, artifact, current in found:
        if isinstance(current, CtuneError):
            results.append(CheckResult(key, (), (), error=str(current)))
            continue
        result = check_artifact(key, artifact, current, verify)
        if probe.gpu_probed and not probe.of_this_gpu(artifact):
            result = replace(result, other_gpu=True)
        results.append(result)
    return results


def check_registry(
    root: Path,
    probe: FingerprintProbe,
    *,
    pinned_only: bool = False,
    verify: Verifier | None = None,
) -> CheckReport:
    """Check every artifact (or only pinned ones) under ``root``."""
    listing = ArtifactStore(root).list()
    chosen = [(k, a) for k, a in listing.artifacts if a.pinned is not None or not pinned_only]
    return CheckReport(
        tuple(check_all(chosen, probe, verify)), listing.quarantined, probe.gpu_probed
    )
