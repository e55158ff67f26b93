"""Kernel Tuner's argument types, as ``ctune.tune`` and ``ctune.write_spec`` take them.

Kernel Tuner users pass numpy scalars and arrays, tuples, and a single string where a list
is expected. Each such argument is brought to plain Python values here, before anything is
written or searched; what cannot be taken is one :class:`UserError` naming the argument
and what to give instead, never a TypeError from deep inside.
"""

from __future__ import annotations

import os
import reprlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
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


def kernel_name(value: Any) -> str:
    """The kernel's name as its source says it: a string that is not blank."""
    if not isinstance(value, str) or not value.strip():
        raise UserError(
            f"kernel_name: the kernel's name as its source says it (e.g. 'vector_add'), "
            f"got {shown(value)}"
        )
    return value


def problem_sizes(value: Any) -> list[int]:
    """Kernel Tuner's ``problem_size``: an int (a numpy one too) or up to 3 of them."""
    value = plain(value)
    listed = [value] if isinstance(value, int) else items(value)
    if (
        listed is None
        or not 1 <= len(listed) <= 3
        or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in listed)
    ):
        raise UserError(f"problem_size: 1 to 3 positive integers, got {shown(value)}")
    return listed


def argument_list(value: Any) -> list[Any]:
    """``arguments``: a list or tuple, the kernel's arguments in order, kept as they are
    (a numpy scalar's dtype is its argument's type)."""
    if not isinstance(value, (list, tuple)):
        raise UserError(
            f"arguments: a list of the kernel's arguments (arrays and scalars) in its order, "
            f"got {shown(value)}"
        )
    return list(value)


def tune_param_lists(value: Any) -> dict[str, list[Any]]:
    """Kernel Tuner's ``tune_params``: {C identifier: a non-empty list of values}, a tuple,
    range or numpy array of them taken as a list of plain values. A single value is
    refused, as Kernel Tuner refuses it: a search over one value is rarely what was meant."""
    from ctune.spec.load_context import IDENT_RE

    if not isinstance(value, Mapping):
        raise UserError(
            f"tune_params: expected a dict {{name: list of values}}, got {shown(value)}"
        )
    out: dict[str, list[Any]] = {}
    for name, values in value.items():
        if not isinstance(name, str) or not IDENT_RE.match(name):
            raise UserError(f"tune_params: {name!r} is not a C identifier (it becomes a -D macro)")
        listed = items(values)
        if not listed:
            hint = f"; write [{shown(values)}]" if isinstance(plain(values), (int, float)) else ""
            raise UserError(
                f"tune_params[{name!r}]: expected a non-empty list of values (the first is "
                f"the default), got {shown(values)}{hint}"
            )
        out[name] = listed
    return out


def tolerance_pair(value: Any) -> tuple[float, float] | None:
    """``tolerance``: None, or ``(rel_l2, max_abs)``, two numbers."""
    if value is None:
        return None
    listed = items(value)
    if (
        listed is None
        or len(listed) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in listed)
    ):
        raise UserError(f"tolerance: (rel_l2, max_abs), two numbers, got {shown(value)}")
    return float(listed[0]), float(listed[1])


def workdir(value: Any) -> Path | None:
    """``workdir``: None (a folder under the cache) or a folder's path, made if missing;
    an existing file there is refused before anything is written."""
    if value is None or value == "":
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise UserError(f"workdir: a folder's path, got {shown(value)}")
    folder = Path(value)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"workdir: {folder} is a file; name a folder (it is made if missing)")
    return folder


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


__all__ = [
    "argument_list",
    "block_size_names",
    "items",
    "kernel_name",
    "plain",
    "problem_sizes",
    "shown",
    "string_list",
    "tolerance_pair",
    "tune_param_lists",
    "workdir",
]
