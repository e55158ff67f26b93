"""Staleness: is each artifact still what would be built and measured here, now?

``ctune check`` (and the gate's first step) runs this. The rule is the
identity model of :mod:`ctune.evidence.identity`:

- a *hard* change (measurement protocol, sampling plan, arch, this artifact's
  problem / args / entry / reference / tolerance / metrics, L2 policy, each
  member's launch geometry, a gene default the baseline was built with, the
  GPU model) makes the artifact STALE;
- a *build* change (toolchain, source closure, the spec's build settings, a
  member's nvcc flags as today's code renders its genes: the flag catalogue,
  its defaults and render rules) is decided by the binary: every member is
  rebuilt (nvcc, build cache) and
  its SASS digest compared with the recorded one. Identical SASS: fresh, with
  the changed inputs named (``ctune registry refresh`` records them);
  different SASS or a member that no longer builds: STALE, naming the changed
  inputs down to the file;
- a *soft* change (host compiler, driver, measuring-code digest, the rest of
  the spec) is a warning; ``--strict`` fails on soft and verified build changes.

The toolchain and the GPU are probed once per run, each kernel's spec and
source closure once per kernel. Without a GPU the GPU fields are reported
"not checked: no GPU" instead of being assumed equal.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ctune.errors import EXIT_GATE_FAILED, EXIT_OK, CtuneError, ToolchainError, UserError
from ctune.evidence import identity as fingerprint
from ctune.records import Candidate, FieldChange
from ctune.registry.layout import ArtifactKey
from ctune.registry.member_genes import hand_edits
from ctune.registry.schema import Artifact, FrontMember
from ctune.registry.store import ArtifactStore, Quarantined

FRESH, WARN, STALE = "fresh", "warn", "stale"
#: sampling-plan fields that come from settings (the rest follow from the objectives)
PLAN_SETTINGS = ("warmup_ms", "rep_ms", "energy_window_s")


@dataclass(frozen=True, slots=True)
class BinaryCheck:
    """Members rebuilt from the current inputs and their SASS compared with the recorded."""

    members: int
    differences: tuple[str, ...] = ()  # "member KEY: SASS abc.. -> def.." or why it failed

    @property
    def identical(self) -> bool:
        return not self.differences


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
    spec: Any = None  # the loaded KernelSpec, for launch geometry, defaults and rebuilds
    plan: dict[str, float] = field(default_factory=dict)  # PLAN_SETTINGS from settings
    #: fields whose value today's inputs also have in an older digest form, that form
    older: dict[str, str] = field(default_factory=dict)
    flags_of: FlagRenderer | None = None  # None: members' nvcc flags not compared


#: (artifact, spec) -> BinaryCheck: rebuild the members, compare SASS
Verifier = Callable[[Artifact, Any], BinaryCheck]


def current_candidate(spec: Any, candidate: Candidate) -> Candidate:
    """The member's candidate in today's space: genes it lacks take their defaults, genes
    the space no longer has are dropped (the SASS comparison then says if that mattered);
    a value the space does not have is refused (:func:`hand_edits` says so first)."""
    values = candidate.as_dict()
    kept = {k: v for k, v in values.items() if k in spec.space}
    spec.space.check_values(kept, f"member {candidate.key()}")
    return Candidate.of(candidate.kernel, spec.space.in_today(values))


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=list))


def launch_changes(artifact: Artifact, spec: Any) -> list[FieldChange]:
    """Members whose grid / block / shared memory the current launch rule computes otherwise."""
    if spec is None:
        return []
    problem = spec.problem(artifact.problem)
    out = []
    for m in _members(artifact):
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


def default_changes(artifact: Artifact, spec: Any) -> list[FieldChange]:
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
    for m in _members(artifact):
        name = f"{_FLAGS}{m.key}]"
        try:
            now = [_portable_flag(f) for f in flags_of(artifact, m)]
        except CtuneError as exc:
            out.append(
                FieldChange(name, "(as recorded)", f"not rendered: {exc}", fingerprint.BUILD)
            )
            continue
        old = [_portable_flag(f) for f in m.nvcc_flags]
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
    result = CheckResult(key, tuple(changes), unchecked, inputs_changed=tuple(inputs))
    hard = any(c.severity == fingerprint.HARD for c in changes)
    if result.build_changes and not hard and verify is not None:
        result = CheckResult(
            key,
            result.changes,
            unchecked,
            inputs_changed=result.inputs_changed,
            binaries=verify(artifact, current.spec),
        )
    return result


def _members(artifact: Artifact) -> list[FrontMember]:
    seen: dict[str, FrontMember] = {}
    for m in (*artifact.front, artifact.baseline):
        seen.setdefault(m.key, m)
    return list(seen.values())


def load_kernel_spec(kernels_dir: Path, kernel: str, nvcc: str = "nvcc") -> Any:
    """``<kernels_dir>/<kernel>.yaml`` loaded with this nvcc's options."""
    from ctune.compile.toolchain import probe_toolchain
    from ctune.kernelspec import load_spec

    path = Path(kernels_dir) / f"{kernel}.yaml"
    if not path.is_file():
        raise UserError(f"kernel spec {path} not found (use --kernels DIR)")
    return load_spec(path, probe_toolchain(nvcc).help_text)


def nvcc_verifier(settings: Any) -> Verifier:
    """Rebuild every member with nvcc (into the build cache) and compare SASS digests."""

    def verify(artifact: Artifact, spec: Any) -> BinaryCheck:
        import dataclasses

        from ctune.compile.nvcc import NvccCompiler
        from ctune.compile.select_toolchain import toolchain_for

        members = _members(artifact)
        problem = spec.problem(artifact.problem)
        arch = artifact.fingerprint.get("arch") or settings.arch
        rebuild = dataclasses.replace(settings, arch=arch)
        differences = []
        with NvccCompiler.from_settings(spec, toolchain_for(settings), rebuild) as compiler:
            futures = [
                (m, compiler.submit(current_candidate(spec, m.candidate), problem)) for m in members
            ]
            for m, future in futures:
                build = future.result()
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
    """This machine's identity per (kernel, problem), probing shared parts once."""

    def __init__(
        self,
        kernels_dir: Path,
        *,
        gpu: bool,
        nvcc: str = "nvcc",
        arch: str | None = None,
        l2_policy: str | None = None,
        plan: Mapping[str, float] | None = None,
    ) -> None:
        self.kernels_dir = Path(kernels_dir)
        self.nvcc = nvcc
        self.arch = arch
        self.l2_policy = l2_policy
        self.plan = dict(plan or {})
        self.toolchain = fingerprint.probe_toolchain(nvcc)
        self.gpu_fields = fingerprint.probe_gpu_machine() if gpu else None
        #: this GPU's registry device class (``sm90-nvidia-h200``); None without a GPU
        self.device_class = (
            fingerprint.gpu_id(self.gpu_fields) if self.gpu_fields is not None else None
        )
        self._specs: dict[str, Any] = {}
        self._cache: dict[tuple[str, str, bool], Current] = {}
        self._renderers: dict[tuple[str, str], Any] = {}  # (kernel, arch) -> NvccCompiler

    @property
    def gpu_probed(self) -> bool:
        return self.gpu_fields is not None

    def of_this_gpu(self, artifact: Artifact) -> bool:
        """Was ``artifact`` measured on a GPU of this one's class? Only then do its GPU
        fields mean anything here: an H100 artifact checked on an H200 is not stale, it is
        another GPU's (a registry holds artifacts of several)."""
        return self.gpu_fields is not None and artifact.device_class == self.device_class

    def spec(self, kernel: str) -> Any:
        if kernel not in self._specs:
            self._specs[kernel] = load_kernel_spec(self.kernels_dir, kernel, self.nvcc)
        return self._specs[kernel]

    def current(self, kernel: str, problem: str, gpu: bool = True) -> Current:
        """``gpu``: compare the GPU fields (when a GPU was probed)."""
        gpu = gpu and self.gpu_fields is not None
        if (kernel, problem, gpu) not in self._cache:
            from ctune.compile.deps import source_closure

            spec = self.spec(kernel)
            spec.problem(problem)  # a problem the spec no longer has: one line, STALE
            fields = fingerprint.current_fingerprint(
                spec,
                gpu,
                problem=problem,
                nvcc=self.nvcc,
                l2_policy=self.l2_policy,
                arch=self.arch,
                toolchain=self.toolchain,
                gpu_fields=self.gpu_fields,
            )
            closure = source_closure(spec, self.nvcc, arch=self.arch or "")
            self._cache[(kernel, problem, gpu)] = Current(
                fields,
                closure,
                spec,
                self.plan,
                older=fingerprint.older_forms(spec),
                flags_of=self.member_flags,
            )
        return self._cache[(kernel, problem, gpu)]

    def member_flags(self, artifact: Artifact, member: FrontMember) -> tuple[str, ...]:
        """The member's nvcc flags as a build today renders them (the compiler's own argv,
        nothing compiled), for the arch it was tuned for: what its ``nvcc_flags`` recorded."""
        from ctune.compile.command import tuned_flags

        spec = self.spec(artifact.kernel)
        arch = artifact.fingerprint.get("arch") or self.arch or spec.arch
        if (artifact.kernel, arch) not in self._renderers:
            from ctune.compile.nvcc import NvccCompiler
            from ctune.compile.toolchain import probe_toolchain

            toolchain = probe_toolchain(self.nvcc)
            # the cache folder only names where builds would go: argv drops it
            self._renderers[(artifact.kernel, arch)] = NvccCompiler(
                spec, toolchain, Path(".ctune-render"), arch=arch
            )
        compiler = self._renderers[(artifact.kernel, arch)]
        output = Path("kernel.so" if spec.entry_kind == "launcher" else "kernel.cubin")
        candidate = current_candidate(spec, member.candidate)
        return tuple(tuned_flags(compiler.argv(candidate, spec.problem(artifact.problem), output)))

    def for_artifact(self, artifact: Artifact) -> Current:
        return self.current(artifact.kernel, artifact.problem, gpu=self.of_this_gpu(artifact))


def check_all(
    artifacts: Iterable[tuple[ArtifactKey, Artifact]],
    probe: FingerprintProbe,
    verify: Verifier | None = None,
) -> list[CheckResult]:
    results = []
    for key, artifact in artifacts:
        try:
            current = probe.for_artifact(artifact)
        except ToolchainError:
            raise  # no nvcc: the whole check is meaningless, say so (exit 3)
        except CtuneError as exc:
            results.append(CheckResult(key, (), (), error=str(exc)))
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
