"""A spec's ``args`` against the kernel's real parameter list, before anything runs.

A wrong argument count or size is otherwise found only on the GPU, if at all: the
launch packs whatever the spec lists. The kernel's parameters come from its PTX
``.entry`` declaration (documented by the PTX ISA: one ``.param`` per parameter, with
its type and, for aggregates, its byte array), so extern "C" kernels are checked as
well as C++ ones; for C++ kernels the demangled signature adds the C types, which
tells a pointer from a 64-bit scalar. Pure: the caller compiles the PTX.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctune.spec import DTYPE_BYTES
from ctune.spec.elements import c_type_mismatch

if TYPE_CHECKING:
    from ctune.spec import ArgSpec

POINTER_BYTES = 8
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$%.][\w$%.]*)\s*\(([^)]*)\)", re.S)
_TYPE = re.compile(r"^\.[busf](8|16|32|64)$")
_ARRAY = re.compile(r"\[(\d+)\]$")


@dataclass(frozen=True, slots=True)
class KernelParams:
    """A kernel's parameters: byte sizes in order, and C types when the name says them."""

    display: str  # the kernel as a reader knows it, for messages
    sizes: tuple[int, ...]
    ctypes: tuple[str, ...] | None = None


def ptx_param_sizes(ptx: str, symbol: str) -> tuple[int, ...] | None:
    """Byte size of each parameter of ``.entry symbol`` in ``ptx``; None if it is not there."""
    for match in _ENTRY.finditer(ptx):
        if match.group(1) != symbol:
            continue
        body = match.group(2).strip()
        if not body:
            return ()
        return tuple(_param_size(decl) for decl in body.split(","))
    return None


def _param_size(decl: str) -> int:
    words = decl.split()
    width = next((int(m.group(1)) for w in words if (m := _TYPE.match(w))), 0)
    count = _ARRAY.search(words[-1]) if words else None
    return width // 8 * (int(count.group(1)) if count else 1)


_TRAILING_QUALIFIER = re.compile(r"\s*\b(?:const|volatile|__restrict__)$")


def _is_pointer(ctype: str) -> bool:
    text, previous = ctype.strip(), ""
    while text != previous:  # "float* const" is still a pointer
        previous, text = text, _TRAILING_QUALIFIER.sub("", text)
    return text.endswith("*")


def arg_mismatch(
    args: Sequence[ArgSpec],
    params: KernelParams,
    dtypes: Mapping[str, str] | None = None,
    structs: Mapping[str, str] | None = None,
) -> str | None:
    """What is wrong with ``args`` for this kernel, in one line; None when they agree.

    Buffers are passed as device pointers (8 bytes), scalars by value (their dtype's
    size); a problem's dtype overrides (``dtypes``) change element types, never these
    sizes. Where the C types are known, a buffer's element type must agree with what the
    pointer points at (``ctune.spec.elements.c_type_mismatch``; ``structs`` are the
    source's own, C name -> dtype). Constants are module symbols, not parameters, and are
    left out.
    """
    args = [a for a in args if a.is_parameter]
    sizes = params.sizes
    if len(args) != len(sizes):
        listed = ", ".join(a.name for a in args)
        return (
            f"the kernel {params.display} takes {len(sizes)} parameter(s) "
            f"({', '.join(f'{s} B' for s in sizes) or 'none'}), but args lists {len(args)} "
            f"({listed}); list one arg per parameter, in the kernel's order"
        )
    for i, (arg, size) in enumerate(zip(args, sizes, strict=True)):
        ctype = params.ctypes[i] if params.ctypes is not None else None
        named = f"parameter {i + 1} of {params.display}" + (f" ({ctype})" if ctype else "")
        if arg.role == "scalar":
            want = DTYPE_BYTES[arg.dtype]
            if ctype is not None and _is_pointer(ctype):
                return f"args.{arg.name}: a scalar, but {named} is a pointer; give it a shape"
            if want != size:
                return (
                    f"args.{arg.name}: {arg.dtype} is {want} B, but {named} is {size} B; "
                    "change its dtype or the arg order"
                )
        else:
            if ctype is not None and not _is_pointer(ctype):
                return (
                    f"args.{arg.name}: a buffer (passed as a pointer), but {named} is not a "
                    "pointer; make it role: scalar"
                )
            if size != POINTER_BYTES:
                return (
                    f"args.{arg.name}: a buffer is passed as an {POINTER_BYTES} B pointer, "
                    f"but {named} is {size} B; make it role: scalar or fix the arg order"
                )
            dtype = (dtypes or {}).get(arg.name, arg.dtype)
            if ctype is not None and c_type_mismatch(dtype, ctype, structs):
                return (
                    f"args.{arg.name}: dtype {dtype}, but {named} points at another element "
                    "type; give the dtype the kernel reads (float2, {struct: ...}: "
                    "docs/spec-format.md)"
                )
    return None


__all__ = ["POINTER_BYTES", "KernelParams", "arg_mismatch", "ptx_param_sizes"]
