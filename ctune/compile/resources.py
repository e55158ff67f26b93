"""Parse the ptxas resource report (``-Xptxas -v``) into Resources. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ctune.records import Resources

_FUNCTION = re.compile(r"Function properties for (\S+)")
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


def parse_ptxas_report(text: str) -> dict[str, Resources]:
    """Resources per entry function, keyed by the (possibly mangled) name."""
    out: dict[str, Resources] = {}
    current: str | None = None
    values: dict[str, int] = {}
    for line in text.splitlines():
        entry = _ENTRY.search(line) or _FUNCTION.search(line)
        if entry:
            if current is not None and entry.group(1) != current:
                out[current] = _make(values)
                values = {}
            current = entry.group(1)
            continue
        if current is None:
            continue
        stack = _STACK.search(line)
        if stack:
            values["stack"], values["st"], values["ld"] = (int(g) for g in stack.groups())
        used = _USED.search(line)
        if used:
            values["regs"] = int(used.group(1))
            smem = _SMEM.search(line)
            cmem = _CMEM.search(line)
            values["smem"] = int(smem.group(1)) if smem else 0
            if cmem:
                values["cmem"] = int(cmem.group(1))
    if current is not None:
        out[current] = _make(values)
    return out


def _make(values: dict[str, int]) -> Resources:
    return Resources(
        regs=values.get("regs"),
        spills_store_bytes=values.get("st"),
        spills_load_bytes=values.get("ld"),
        smem_bytes=values.get("smem"),
        stack_bytes=values.get("stack"),
        cmem_bytes=values.get("cmem"),
    )


def entry_resources(
    text: str, symbol: str, launched: Iterable[str] = (), defined: Iterable[str] = ()
) -> Resources:
    """The entry kernel's resources. A launcher's are the heaviest of the kernels it runs:
    those its source launches by name (``launched``) and a library's, which its source
    does not define (``defined``: its own ``__global__`` functions) and reaches through the
    library's code (a CUTLASS operator); its own kernels it never launches are left out.
    Neither known: the heaviest kernel of the build."""
    report = parse_ptxas_report(text)
    if symbol in report:
        return report[symbol]
    names, own = set(launched), set(defined)
    chosen = {
        k: r for k, r in report.items() if _is_named(k, names) or (own and not _is_named(k, own))
    }
    kernels = [r for r in (chosen or report).values() if r.regs is not None]
    if not kernels:
        return Resources()
    return max(kernels, key=lambda r: (r.regs or 0, r.smem_bytes or 0))


def _is_named(mangled: str, names: set[str]) -> bool:
    """Is ``mangled`` (an Itanium-mangled or extern "C" name) a function of one of ``names``?"""
    return mangled in names or any(
        re.search(rf"(?<![0-9]){len(n)}{re.escape(n)}", mangled) for n in names
    )
