"""Turn a kernel's names and defaults into genes, dtypes and a launch rule: the guesses
``ctune init`` writes, each marked in the draft so the author can check it. Pure.

The conventions are the ones kernels are written with: ``BLOCK_SIZE``, ``block_size_x``
(Kernel Tuner's names), ``BLOCK_X``/``BLOCK_DIM_Y`` and ``__launch_bounds__`` arguments
size thread blocks, ``BLOCK_ROWS`` its y; ``TILE``/``TILE_WIDTH`` is a square block;
``UNROLL``, ``ITEMS``, ``*_PER_THREAD`` and Kernel Tuner's ``tile_size_x`` are work per
thread; ``USE_*`` switches, and every name an ``#if`` tests, are 0/1; a name ``#ifdef``
(``#ifndef``, ``defined()``) tests is an ``ifdef`` switch, left undefined when 0. A literal
``__launch_bounds__(256)`` caps the block: a bigger one cannot launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ctune.spec.elements import C_SCALAR_TYPES

BLOCK_X_VALUES = (32, 64, 128, 256, 512, 1024)
BLOCK_YZ_VALUES = (1, 2, 4, 8, 16, 32)
TILE_VALUES = (8, 16, 32, 64)
WORK_VALUES = (1, 2, 4, 8, 16)
SWITCH_VALUES = (0, 1)

_BLOCK_AXIS = [
    re.compile(p, re.I)
    for p in (
        r"^block_?(?:size|dim)?_?([xyz])$",
        r"^(?:threads|num_threads|nthreads|bs|tb)_?([xyz])$",
        r"^b(?:lk)?_?([xyz])$",
    )
]
#: rows of threads that sweep a tile (the transpose idiom): the block's y
_BLOCK_ROWS = re.compile(r"^(?:block_?rows|rows_?per_?block)$", re.I)
_BLOCK_PLAIN = re.compile(
    r"^(?:block_?size|block_?dim|block|block_?threads|threads(?:_?per_?block)?|"
    r"n_?threads|num_?threads|tpb|bs|wg_?size)$",
    re.I,
)
_TILE = re.compile(r"^tile(?:_?(?:width|dim|size))?$", re.I)
_WORK = re.compile(
    r"(?:unroll|items|vec|work|elems?|_per_thread$|per_?thread|^tile_size_[xyz]$|"
    r"coarsen|^ipt$)",
    re.I,
)
_WORK_AXIS = re.compile(r"^tile_size_([xyz])$|_([xyz])$", re.I)
_SWITCH = re.compile(r"^(?:use|enable|has|with|do)_", re.I)

#: C value types -> spec dtypes for a draft: the spec's own table, and bool as a byte
#: (a draft's guess, marked for the user to check)
CTYPE_DTYPES = {**C_SCALAR_TYPES, "bool": "uint8"}
INTEGER_DTYPES = frozenset({"int32", "uint32", "int64"})


def block_axis(name: str) -> str | None:
    """The block dimension a name sizes (x, y or z), or None."""
    for pattern in _BLOCK_AXIS:
        match = pattern.match(name)
        if match:
            return match.group(1).lower()
    if _BLOCK_ROWS.match(name):
        return "y"
    return "x" if _BLOCK_PLAIN.match(name) else None


def is_tile(name: str) -> bool:
    """A square block's side (``TILE_WIDTH``): the block is TILE x TILE."""
    return bool(_TILE.match(name))


def work_axis(name: str) -> str | None:
    """The axis a work-per-thread name multiplies (x unless it says y or z), or None.
    A switch's name is never work (``USE_VEC`` is on or off, not a vector width)."""
    if not _WORK.search(name) or block_axis(name) is not None or _SWITCH.match(name):
        return None
    match = _WORK_AXIS.search(name)
    if match:
        return (match.group(1) or match.group(2)).lower()
    return "x"


def default_for(name: str) -> int:
    """A value for a name the source uses but never defines, so that the file compiles."""
    axis = block_axis(name)
    if axis == "x":
        return 256
    if axis is not None:
        return 1
    if is_tile(name):
        return 16
    if _SWITCH.match(name):
        return 0
    return 1


def parse_int(text: str) -> int | None:
    """An integer literal as a macro's value (``256``, ``(64)``, ``0x40``, ``8u``), or None."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    match = re.fullmatch(r"(-?(?:0[xX][0-9a-fA-F]+|\d+))[uUlL]*", text)
    return int(match.group(1), 0) if match else None


@dataclass(frozen=True, slots=True)
class GeneGuess:
    name: str
    values: tuple[int, ...]
    default: int
    why: str  # where it came from, for the draft's comment
    #: the grid axis it multiplies work per thread on: the grid there is divided by it
    work: str | None = None
    ifdef: bool = False  # tested by being defined: 0 must leave it undefined (spec ifdef: true)

    def with_default(self, default: int) -> GeneGuess:
        values = self.values if default in self.values else tuple(sorted({*self.values, default}))
        return replace(self, values=values, default=default)

    def at_most(self, bound: int) -> GeneGuess:
        """The values a kernel with ``__launch_bounds__(bound)`` can launch with: a block of
        more threads fails to launch, so a default over the bound becomes the largest."""
        values = tuple(v for v in self.values if v <= bound) or (bound,)
        return replace(self, values=values).with_default(min(self.default, values[-1]))


def gene_values(name: str, default: int) -> tuple[int, ...]:
    """The values a gene is searched over, around its default."""
    axis = block_axis(name)
    if axis == "x":
        values: tuple[int, ...] = BLOCK_X_VALUES
    elif axis is not None:
        values = BLOCK_YZ_VALUES
    elif is_tile(name):
        values = TILE_VALUES
    elif _SWITCH.match(name) or default == 0:
        values = SWITCH_VALUES
    elif work_axis(name) is not None:
        values = WORK_VALUES
    elif default > 1 and default & (default - 1) == 0:
        values = tuple(v for v in (default // 4, default // 2, default, default * 2, default * 4))
        values = tuple(v for v in values if v >= 1)
    else:
        values = tuple(sorted({max(1, default // 2), default, default * 2}))
    return values if default in values else tuple(sorted({*values, default}))


def gene(name: str, default: int, why: str) -> GeneGuess:
    values = gene_values(name, default)
    # a value of 0 is off, not a count: as a grid divisor it would divide by zero
    work = work_axis(name) if 0 not in values else None
    return GeneGuess(name, values, default, why, work)


def switch(name: str, why: str, *, ifdef: bool = False) -> GeneGuess:
    """A name ``#if NAME`` or ``#ifdef NAME`` tests: 0/1 whatever it is called (``#if
    USE_VEC`` is on or off), never a size or work per thread. ``ifdef``: the source asks
    whether it is defined, so off must not define it (``-DNAME=0`` would be on)."""
    return GeneGuess(name, SWITCH_VALUES, 0, why, ifdef=ifdef)


def selector(guess: GeneGuess, compared: set[int]) -> GeneGuess:
    """A name a condition compares with values (``#if ALGO == 2``) picks a variant: its
    values run from 0 to the largest compared, so every branch is a candidate."""
    top = max(compared)
    values = set(range(0, top + 1)) if top <= 16 else {0, *compared}
    values |= {guess.default}
    return replace(
        guess,
        values=tuple(sorted(values)),
        why=f"{guess.why}; compared with {', '.join(str(v) for v in sorted(compared))}",
        work=None,
    )


_X_DIMS = ("nx", "width", "w", "cols", "ncols", "n", "size", "len", "length", "count")
_Y_DIMS = ("ny", "height", "h", "rows", "nrows", "m")
_Z_DIMS = ("nz", "depth", "d", "k")


def dim_for_axis(axis: str, dims: list[str], taken: set[str]) -> str | None:
    """The problem dimension an axis of the grid most likely covers (by its name)."""
    names = {"x": _X_DIMS, "y": _Y_DIMS, "z": _Z_DIMS}[axis]
    free = [d for d in dims if d not in taken]
    for wanted in names:
        for dim in free:
            if size_word(dim) == wanted:
                return dim
    return free[0] if free else None


def size_word(name: str) -> str:
    """The word of a name that says which size it is: ``image_width`` -> ``width``."""
    return name.lower().rsplit("_", 1)[-1]


#: the size a row-major buffer's rows are counted by, from its row length's word
_PARTNERS = {"width": "height", "nx": "ny", "cols": "rows", "ncols": "nrows", "w": "h", "n": "m"}


def row_partner(row_length: str, dims: list[str]) -> str | None:
    """The dimension that counts the rows of rows ``row_length`` long (``WIDTH`` ->
    ``HEIGHT``, ``image_width`` -> ``image_height``), among ``dims``."""
    wanted = _PARTNERS.get(size_word(row_length))
    if wanted is None:
        return None
    prefix = row_length[: len(row_length) - len(size_word(row_length))]
    for dim in dims:
        if size_word(dim) == wanted and dim.lower().startswith(prefix.lower()):
            return dim
    return None


__all__ = [
    "CTYPE_DTYPES",
    "INTEGER_DTYPES",
    "GeneGuess",
    "block_axis",
    "default_for",
    "dim_for_axis",
    "gene",
    "gene_values",
    "is_tile",
    "parse_int",
    "row_partner",
    "selector",
    "size_word",
    "switch",
    "work_axis",
]
