"""Draft a constant argument (role ``constant``) for each ``__constant__`` array a kernel
file declares. Pure, text only.

A kernel that reads ``__constant__`` memory runs on zeros unless ctune fills it; the draft
names each symbol as an argument, its element type from the C type and its shape from the
extents, with the macros of the file and its headers put in. What cannot be read (a
struct, an extent that is not a number) is left for the author, said in a ``# check:``
line.
"""

from __future__ import annotations

from collections.abc import Mapping

from ctune.expr import ExprError, parse
from ctune.spec.declarations import c_extent_expression, declarations, int_defines
from ctune.spec.elements import C_TYPES


def constant_lines(
    text: str, checks: list[str], macros: Mapping[str, str] | None = None
) -> list[str]:
    """The ``args`` lines for the file's ``__constant__`` arrays; what needs the author's
    eye is appended to ``checks``. ``macros`` are the other macros an extent may name
    (``KERNEL_LENGTH`` from a header the file includes: ``(2 * KERNEL_RADIUS + 1)``)."""
    defines = {**(macros or {}), **int_defines(text)}
    lines = []
    for decl in declarations(text):
        if decl.kind != "constant" or decl.extern:
            continue
        dtype = C_TYPES.get(decl.ctype)
        extents = [_number(c_extent_expression(e, defines)) for e in decl.extents]
        if dtype is None or None in extents:
            checks.append(
                f"__constant__ {decl.name} ({decl.ctype}): add it to args with role: constant "
                "(its type or size is not one ctune reads)"
            )
            continue
        shape = ", ".join(str(e) for e in extents) or "1"
        lines.append(
            f"  - {{name: {decl.name}, role: constant, dtype: {dtype}, shape: [{shape}]}}"
            "  # check: __constant__, filled with random values; give its data "
            "(init: {npy: FILE.npy})"
        )
        checks.append(f"args.{decl.name}: __constant__ memory drafted with random values")
    return lines


def _number(expression: str | None) -> int | None:
    """An extent's value when it names no gene or unknown macro; None otherwise."""
    if expression is None:
        return None
    try:
        expr = parse(expression)
        value = expr.evaluate({}) if not expr.names else None
    except ExprError:
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


__all__ = ["constant_lines"]
