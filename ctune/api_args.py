"""Kernel Tuner's argument types, as ``ctune.tune`` and ``ctune.write_spec`` take them.

Kernel Tuner users pass numpy scalars and arrays, tuples, and a single string where a list
is expected. Each such argument is brought to plain Python values here, before anything is
written or searched; what cannot be taken is one :class:`UserError` naming the argument
and what to give instead, never a TypeError from deep inside.
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Sequence
from typing import Any

from ctune.errors import UserError


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (``np.int64(64)`` -> ``64``), so that
    the spec, the journal and the checks see ints, floats, bools and strs; anything else
    as it is. (Without numpy loaded, no value can be a numpy scalar.)"""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.generic):
        return value.item()
    return value


def items(value: Any) -> list[Any] | None:
    """A list, tuple, range or 1-D numpy array as a list of plain values; None for anything
    else (a string, a mapping, a set, a scalar), which the caller refuses in its own words."""
    if isinstance(value, (str, bytes)):
        return None
    if hasattr(value, "tolist") and getattr(value, "ndim", None) == 1:
        return list(value.tolist())
    if isinstance(value, (list, tuple, range)):
        return [plain(v) for v in value]
    return None


def shown(value: Any) -> str:
    """``value`` for a one-line message: its repr, cut short (an array can be long)."""
    return reprlib.repr(value)


def string_list(value: Any, where: str, *, optional: bool = False) -> list[str]:
    """A string or a sequence of strings as a list. A bare string is one item, never its
    characters: Kernel Tuner takes ``grid_div_x="block_size_x"`` and ctune's docs show
    ``constraints="power<=400W"``. None is no items where the argument is ``optional``."""
    if value is None and optional:
        return []
    if isinstance(value, str):
        return [value]
    listed = items(value)
    if listed is None or not all(isinstance(v, str) for v in listed):
        raise UserError(f"{where}: expected a string or a list of strings, got {shown(value)}")
    return listed


def block_size_names(value: Any, defaults: Sequence[str]) -> list[str]:
    """Kernel Tuner's ``block_size_names``: up to 3 C identifiers, the thread block's x, y
    and z in order (a bare string is the x name), each one not given its default name;
    the three must differ, else two axes would read one parameter."""
    from ctune.spec.load_context import IDENT_RE

    names = string_list(value, "block_size_names", optional=True)
    if len(names) > 3 or not all(IDENT_RE.match(n) for n in names):
        raise UserError(
            f"block_size_names: 1 to 3 C identifiers (the block's x, y, z), got {shown(value)}"
        )
    names += defaults[len(names) :]
    if len(set(names)) != len(names):
        raise UserError(
            f"block_size_names: {', '.join(names)} names an axis twice (an axis not given "
            "takes its default name); give each axis its own name"
        )
    return names


__all__ = ["block_size_names", "items", "plain", "shown", "string_list"]
