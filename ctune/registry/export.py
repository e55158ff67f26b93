"""Give a build what it needs from one artifact member: pure text renderers.

Four forms of the same facts (nvcc/ptxas flags, ``-D`` defines, which also
carry template arguments, the launch configuration, and the runtime genes,
which the caller passes at launch and which are never compile flags):

- ``flags``: one shell-quoted line for a Makefile or a script (compile
  flags only, so no runtime genes);
- ``header``: a C header of ``#define``s: the tunables as
  ``CTUNE_<KERNEL>_<NAME>``, ``CTUNE_<KERNEL>_GRID_X`` ... and
  ``CTUNE_<KERNEL>_RUNTIME_<GENE>``, so the headers of several kernels can be
  included together (two kernels' ``BLOCK_N`` would clash). The kernel reads
  the bare names: where its source is compiled, define
  ``CTUNE_<KERNEL>_BARE_NAMES`` before including the header, which then also
  defines each bare name as its prefixed one;
- ``cmake``: ``set(CTUNE_<KERNEL>_FLAGS ...)``, a definitions list for
  ``target_compile_definitions`` (prefixed likewise) and one
  ``CTUNE_<KERNEL>_RUNTIME_<GENE>`` variable per runtime gene;
- ``json``: everything above for other tools (``defines`` as the kernel reads
  them, ``prefix`` for the prefixed names).

``bare=True`` (``ctune registry export --bare``) writes the tunables under
the names the kernel reads, in the header and the CMake definitions, for a
build that compiles one kernel. The flags line always carries the bare
``-D`` names: it is the kernel's own compile line.

Values were allowlisted when the artifact was read (:mod:`schema`), so no
quote, ``$``, ``;``, newline or ``#`` can reach these outputs; shell
quoting is applied anyway.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from ctune.compile.quoting import define_flag
from ctune.errors import UserError
from ctune.registry.schema import Artifact, FrontMember

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


def build_flags(m: FrontMember) -> list[str]:
    """The member's nvcc/ptxas flags for a build: -D comes from ``defines`` (the authority)."""
    return [f for f in m.nvcc_flags if not f.startswith("-D") and f not in _OUTPUT_MODE]


def flags_line(m: FrontMember) -> str:
    """The nvcc flags, defines written as ctune's own builds write them (``define_flag``)."""
    items = [*build_flags(m), *(define_flag(k, v) for k, v in sorted(m.defines.items()))]
    return " ".join(shlex.quote(i) for i in items)


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


def c_header(a: Artifact, m: FrontMember, bare: bool = False) -> str:
    prefix = macro_prefix(a.kernel)
    guard = re.sub(r"[^A-Z0-9]", "_", f"{prefix}_{a.problem}_{a.device_class}_H".upper())
    lines = [
        f"/* Generated by ctune from {_origin(a, m)}. Do not edit. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        f'#define {prefix}_CANDIDATE "{m.key}"',
        f'#define {prefix}_NVCC_FLAGS "{" ".join(build_flags(m))}"',
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


def cmake(a: Artifact, m: FrontMember, bare: bool = False) -> str:
    prefix = macro_prefix(a.kernel)

    def cset(name: str, items: list[str]) -> str:
        return f"set({prefix}_{name}" + "".join(f' "{i}"' for i in items) + ")"

    dims = dict(_launch_dims(m))
    names = tunable_names(a, m, bare)
    definitions = [f"{names[k]}={_value(v)}" for k, v in sorted(m.defines.items())]
    lines = [
        f"# Generated by ctune from {_origin(a, m)}. Do not edit.",
        cset("CANDIDATE", [m.key]),
        cset("FLAGS", _cmake_flags(build_flags(m))),
        cset("DEFINITIONS", definitions),
    ]
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
    if not bare and m.defines:
        lines.append(
            f"# {a.kernel} reads the definitions without the {prefix}_ prefix: for the target "
            "that compiles it, export with --bare"
        )
    lines.append("")
    return "\n".join(lines)


def json_export(a: Artifact, m: FrontMember) -> str:
    data = {
        "kernel": a.kernel,
        "problem": a.problem,
        "device_class": a.device_class,
        "candidate": m.key,
        "artifact_digest": a.digest(),
        "arch": a.fingerprint.get("arch", ""),
        "nvcc_flags": build_flags(m),
        "defines": dict(m.defines),
        "launch": {k: list(v) if isinstance(v, tuple) else v for k, v in m.launch.items()},
        "runtime": dict(m.runtime),
        "flags_line": flags_line(m),
        "prefix": macro_prefix(a.kernel),
        "sass_sha256": m.sass_sha256,
    }
    if m.device:  # only a member tuned with device genes: older exports keep their bytes
        data["device"] = device_export(m)
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


def render(a: Artifact, member: str | None, fmt: str, bare: bool = False) -> str:
    """The export text for ``fmt`` (one of :data:`FORMATS`); ``bare``: the tunables
    under the names the kernel reads (header, CMake), not ``CTUNE_<KERNEL>_<NAME>``."""
    m = resolve_member(a, member)
    if fmt == "flags":
        return flags_line(m) + "\n"
    if fmt == "header":
        return c_header(a, m, bare)
    if fmt == "cmake":
        return cmake(a, m, bare)
    if fmt == "json":
        return json_export(a, m)
    raise UserError(f"unknown export format {fmt!r} (allowed: {', '.join(FORMATS)})")
