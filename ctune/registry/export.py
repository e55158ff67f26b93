"""Give a build what it needs from one artifact member: pure text renderers.

Four forms of the same facts (compile flags, ``-D`` defines, the launch configuration,
the runtime genes the caller passes at launch): ``flags``, ``header``, ``cmake`` and
``json``; what each writes, ``bare=True`` and the prefixed names are in docs/registry.md
("Exports"). A member built with an advanced-controls file takes ``controls``, {digest:
PATH as this export names the file}. Values were allowlisted when the artifact was read
(:mod:`schema`); shell quoting is applied anyway (docs/security.md).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from ctune.compile.command import without_harness_flags
from ctune.controls.store import APPLY_OPTION, applied_digest
from ctune.errors import UserError
from ctune.quoting import define_flag
from ctune.registry.controls import NEEDS, ControlsRef, member_controls
from ctune.registry.schema import Artifact, FrontMember
from ctune.spec.includes import INCLUDE_TOKENS, include_token_dir

FORMATS = ("flags", "header", "cmake", "json")
# nvcc options whose value is the next argv item; CMake must keep the pair
# together (target_compile_options de-duplicates repeated items).
_PAIRED = frozenset(
    {
        "-Xptxas",
        "-Xcompiler",
        "-Xnvlink",
        "-Xlinker",
        "-maxrregcount",
        "--ptxas-options",
        "--compiler-options",
        "--linker-options",
    }
)


def resolve_member(artifact: Artifact, member: str | None) -> FrontMember:
    """The member a KEY names: a candidate key, 'baseline', or (default) 'pinned'."""
    if member == "baseline":
        return artifact.baseline
    if member in (None, "pinned"):
        pinned = artifact.pinned_member()
        if pinned is None:
            keys = ", ".join(m.key for m in artifact.front)
            raise UserError(
                f"{artifact.kernel}/{artifact.problem}/{artifact.device_class} has no pinned "
                f"member; name one with @KEY (front: {keys})"
            )
        return pinned
    return artifact.member(member)


def macro_prefix(kernel: str) -> str:
    return "CTUNE_" + re.sub(r"[^A-Z0-9]", "_", kernel.upper())


def _own_names(prefix: str, m: FrontMember) -> set[str]:
    """Macros ctune itself writes besides the tunables (a tunable must not take one)."""
    names = {f"{prefix}_CANDIDATE", f"{prefix}_NVCC_FLAGS", f"{prefix}_BARE_NAMES"}
    for ref in member_controls(m):
        name = _controls_macro(prefix, ref)
        names.update((name, f"{name}_OPTION", f"{name}_SHA256", f"{name}_NEEDS"))
    names.update(f"{prefix}_{name}" for name, _ in _launch_dims(m))
    names.update(f"{prefix}_RUNTIME_{k}" for k in m.runtime)
    return names


def tunable_names(a: Artifact, m: FrontMember, bare: bool) -> dict[str, str]:
    """The name each define is exported under: ``CTUNE_<KERNEL>_<NAME>`` or, bare, its own."""
    prefix = macro_prefix(a.kernel)
    if bare:
        return {k: k for k in sorted(m.defines)}
    names = {k: f"{prefix}_{k}" for k in sorted(m.defines)}
    taken = _own_names(prefix, m) & set(names.values())
    if taken:
        raise UserError(
            f"{a.kernel}: a tunable would export as {sorted(taken)[0]}, a name ctune's "
            "launch or identity macros use; export with --bare for the kernel's own names"
        )
    return names


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return repr(v) if isinstance(v, float) else str(v)


# How ctune itself built the candidate, not what a user's build needs.
_OUTPUT_MODE = frozenset({"-cubin", "--cubin", "-ptx", "--ptx", "-fatbin", "--fatbin", "-c"})


#: {digest: the path an export names a controls file by}
Controls = Mapping[str, str]


def include_dirs(a: Artifact) -> list[str]:
    """The folders of the include_dirs tokens (``@cutlass``) whose headers the build
    read, as this machine resolves them: a user's build needs them as ctune's did (the
    artifact records no machine paths, only the token in its closure's labels)."""
    labels = a.inputs.get("closure") or {}
    out = []
    for token in INCLUDE_TOKENS:
        if any(label.startswith(f"{token}/") for label in labels):
            found = include_token_dir(token)
            if found is None:
                raise UserError(
                    f"{a.kernel}: its build reads headers under {token}, which does not "
                    "resolve here; install the nvidia-cutlass wheel (pip install "
                    "nvidia-cutlass) so the export can name the folder"
                )
            out.append(str(found))
    return out


def build_flags(
    m: FrontMember, controls: Controls | None = None, includes: Sequence[str] = ()
) -> list[str]:
    """The member's nvcc/ptxas flags for a build: ``-I`` for ``includes``, then the
    recorded flags without ctune's own output mode (a cubin, a host library for its
    harness) or resource report; -D comes from ``defines`` (the authority); a controls
    file is named by ``controls``'s path for it (default: as the artifact names it,
    ``controls/<sha256>.acf`` from the registry's root)."""
    out = [f"-I{d}" for d in includes]
    for f in without_harness_flags(m.nvcc_flags):
        if f.startswith("-D") or f in _OUTPUT_MODE:
            continue
        digest = applied_digest(f)
        if digest is not None and controls is not None:
            f = f"{APPLY_OPTION}={controls[digest]}"
        out.append(f)
    return out


def flags_line(
    m: FrontMember, controls: Controls | None = None, includes: Sequence[str] = ()
) -> str:
    """The nvcc flags, defines written as ctune's own builds write them (``define_flag``)."""
    items = [
        *build_flags(m, controls, includes),
        *(define_flag(k, v) for k, v in sorted(m.defines.items())),
    ]
    return " ".join(shlex.quote(i) for i in items)


def controls_option(ref: ControlsRef, path: str) -> list[str]:
    """The argv items that apply ``ref``'s file at ``path`` (ptxas's through nvcc)."""
    option = f"{APPLY_OPTION}={path}"
    return ["-Xptxas", option] if ref.compiler == "ptxas" else [option]


def needs_line(m: FrontMember) -> str:
    """Which toolchain the member's controls files need ("" when it has none)."""
    refs = member_controls(m)
    needs = [NEEDS[c] for c in dict.fromkeys(r.compiler for r in refs)]
    return f"controls files applied: build with {' and '.join(needs)}" if needs else ""


def _controls_macro(prefix: str, ref: ControlsRef) -> str:
    return f"{prefix}_CONTROLS_{ref.compiler.upper()}"


def _path_of(ref: ControlsRef, controls: Controls | None) -> str:
    return controls[ref.digest] if controls is not None else ref.relpath


def _launch_dims(m: FrontMember) -> list[tuple[str, Any]]:
    dims: list[tuple[str, Any]] = []
    for kind in ("grid", "block"):
        for axis, v in zip("XYZ", m.launch.get(kind, ()), strict=False):
            dims.append((f"{kind.upper()}_{axis}", v))
    if "dynamic_smem_bytes" in m.launch:
        dims.append(("DYNAMIC_SMEM_BYTES", m.launch["dynamic_smem_bytes"]))
    return dims


def _origin(a: Artifact, m: FrontMember) -> str:
    return f"{a.kernel}/{a.problem}/{a.device_class}@{m.key} (artifact digest sha256:{a.digest()})"


def c_header(
    a: Artifact, m: FrontMember, bare: bool = False, controls: Controls | None = None
) -> str:
    prefix = macro_prefix(a.kernel)
    includes = include_dirs(a)
    guard = re.sub(r"[^A-Z0-9]", "_", f"{prefix}_{a.problem}_{a.device_class}_H".upper())
    lines = [
        f"/* Generated by ctune from {_origin(a, m)}. Do not edit. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        f'#define {prefix}_CANDIDATE "{m.key}"',
        f'#define {prefix}_NVCC_FLAGS "{" ".join(build_flags(m, controls, includes))}"',
    ]
    refs = member_controls(m)
    if refs:
        lines += ["", f"/* {needs_line(m)}; each file goes on the compile line as its option */"]
        for ref in refs:
            name, path = _controls_macro(prefix, ref), _path_of(ref, controls)
            lines += [
                f'#define {name} "{path}"',
                f'#define {name}_OPTION "{" ".join(controls_option(ref, path))}"',
                f'#define {name}_SHA256 "{ref.digest}"',
                f'#define {name}_NEEDS "{NEEDS[ref.compiler]}"',
            ]
    if m.defines:
        names = tunable_names(a, m, bare)
        if bare:
            lines += [
                "",
                f"/* tunables (-D defines / template arguments) as {a.kernel} reads them */",
            ]
        else:
            lines += [
                "",
                "/* tunables (-D defines / template arguments), prefixed so that several",
                f"   kernels' headers can be included together; {a.kernel} reads them without",
                f"   the prefix: define {prefix}_BARE_NAMES before including this header",
                "   where its source is compiled (or export with --bare) */",
            ]
        lines += [f"#define {names[k]} {_value(v)}" for k, v in sorted(m.defines.items())]
        if not bare:
            lines += [f"#ifdef {prefix}_BARE_NAMES"]
            lines += [f"#define {k} {names[k]}" for k in sorted(m.defines)]
            lines += [f"#endif /* {prefix}_BARE_NAMES */"]
    dims = _launch_dims(m)
    if dims:
        lines += ["", "/* launch configuration */"]
        lines += [f"#define {prefix}_{name} ({v})" for name, v in dims]
    if m.runtime:
        lines += ["", "/* runtime values: set at launch (grid, block, arguments), not compiled */"]
        lines += [
            f"#define {prefix}_RUNTIME_{k} ({_value(v)})" for k, v in sorted(m.runtime.items())
        ]
    if m.device:
        d = device_export(m)
        lines += [
            "",
            "/* device setting it was tuned under (part of the build to ship; needs root):",
        ]
        lines += [f"   {d['nvidia_smi']}", f"   afterwards: {d['restore']} */"]
        lines += [f"#define {prefix}_DEVICE_{k.upper()} ({v})" for k, v in sorted(m.device.items())]
    lines += ["", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _cmake_flags(flags: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(flags):
        if flags[i] in _PAIRED and i + 1 < len(flags):
            out.append(f"SHELL:{flags[i]} {flags[i + 1]}")
            i += 2
        else:
            out.append(flags[i])
            i += 1
    return out


def cmake(a: Artifact, m: FrontMember, bare: bool = False, controls: Controls | None = None) -> str:
    prefix = macro_prefix(a.kernel)

    def cset(name: str, items: list[str]) -> str:
        return f"set({prefix}_{name}" + "".join(f' "{i}"' for i in items) + ")"

    dims = dict(_launch_dims(m))
    names = tunable_names(a, m, bare)
    definitions = [f"{names[k]}={_value(v)}" for k, v in sorted(m.defines.items())]
    lines = [
        f"# Generated by ctune from {_origin(a, m)}. Do not edit.",
        cset("CANDIDATE", [m.key]),
        cset("FLAGS", _cmake_flags(build_flags(m, controls))),
        cset("DEFINITIONS", definitions),
    ]
    includes = include_dirs(a)
    if includes:
        lines.append(cset("INCLUDE_DIRS", includes))
    refs = member_controls(m)
    if refs:
        lines.append(f"# {needs_line(m)} (FLAGS applies them)")
    for ref in refs:
        lines.append(cset(f"CONTROLS_{ref.compiler.upper()}", [_path_of(ref, controls)]))
    for kind in ("GRID", "BLOCK"):
        values = [str(v) for k, v in dims.items() if k.startswith(kind + "_")]
        if values:
            lines.append(cset(kind, values))
    if "DYNAMIC_SMEM_BYTES" in dims:
        lines.append(cset("DYNAMIC_SMEM_BYTES", [str(dims["DYNAMIC_SMEM_BYTES"])]))
    for k, v in sorted(m.runtime.items()):  # passed at launch: never a flag or a definition
        lines.append(cset(f"RUNTIME_{k}", [_value(v)]))
    cuda_only = f"$<$<COMPILE_LANGUAGE:CUDA>:${{{prefix}_FLAGS}}>"
    lines.append(f"# target_compile_options(<target> PRIVATE {cuda_only})")
    lines.append(f"# target_compile_definitions(<target> PRIVATE ${{{prefix}_DEFINITIONS}})")
    if includes:
        lines.append(f"# target_include_directories(<target> PRIVATE ${{{prefix}_INCLUDE_DIRS}})")
    if not bare and m.defines:
        lines.append(
            f"# {a.kernel} reads the definitions without the {prefix}_ prefix: for the target "
            "that compiles it, export with --bare"
        )
    lines.append("")
    return "\n".join(lines)


def json_export(a: Artifact, m: FrontMember, controls: Controls | None = None) -> str:
    includes = include_dirs(a)
    data: dict[str, Any] = {
        "kernel": a.kernel,
        "problem": a.problem,
        "device_class": a.device_class,
        "candidate": m.key,
        "artifact_digest": a.digest(),
        "arch": a.fingerprint.get("arch", ""),
        "nvcc_flags": build_flags(m, controls, includes),
        "defines": dict(m.defines),
        "launch": {k: list(v) if isinstance(v, tuple) else v for k, v in m.launch.items()},
        "runtime": dict(m.runtime),
        "flags_line": flags_line(m, controls, includes),
        "prefix": macro_prefix(a.kernel),
        "sass_sha256": m.sass_sha256,
    }
    if m.device:  # only a member tuned with device genes: older exports keep their bytes
        data["device"] = device_export(m)
    refs = member_controls(m)
    if refs:  # likewise: only a member built with controls files
        data["controls"] = [
            {
                "compiler": ref.compiler,
                "sha256": ref.digest,
                "path": _path_of(ref, controls),
                "option": controls_option(ref, _path_of(ref, controls)),
                "needs": NEEDS[ref.compiler],
            }
            for ref in refs
        ]
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def device_export(m: FrontMember) -> dict[str, Any]:
    """The device setting a member ships with, and how to apply it (it needs root)."""
    from ctune.measure.device_settings import DeviceSetting

    setting = DeviceSetting.from_values(m.device)
    return {
        **m.device,
        "nvidia_smi": setting.nvidia_smi(),
        "nvml": setting.nvml_calls(),
        "restore": setting.restore_line(),
    }


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r} (allowed: {', '.join(FORMATS)})")
    return fmt


def render(
    a: Artifact,
    member: str | None,
    fmt: str,
    bare: bool = False,
    controls: Controls | None = None,
) -> str:
    """The export text for ``fmt`` (one of :data:`FORMATS`); ``bare``: the tunables
    under the names the kernel reads (header, CMake), not ``CTUNE_<KERNEL>_<NAME>``;
    ``controls``: where the export put each controls file the member is built with."""
    m = resolve_member(a, member)
    check_format(fmt)
    if fmt == "flags":
        return flags_line(m, controls, include_dirs(a)) + "\n"
    if fmt == "header":
        return c_header(a, m, bare, controls)
    if fmt == "cmake":
        return cmake(a, m, bare, controls)
    return json_export(a, m, controls)
