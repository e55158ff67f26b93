"""The launch a draft proposes: the block from the kernel's thread indexing and its
``__launch_bounds__``, the grid from what steps over blocks, and the genes a launch
needs (a grid-stride loop's items, a block-stride loop's blocks), each guess with the
reason its ``# check:`` gives."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from ctune.spec.declarations import static_shared
from ctune.spec.draft.guess import (
    BLOCK_X_VALUES,
    BLOCK_YZ_VALUES,
    TILE_VALUES,
    WORK_VALUES,
    GeneGuess,
    block_axis,
    dim_for_axis,
    is_tile,
    parse_int,
    row_partner,
)
from ctune.spec.draft.indexing import Reader, row_dim
from ctune.spec.draft.source import Kernel, Source

AXES = ("x", "y", "z")
#: blocks in a grid a block-stride loop covers the data with, whatever its size
GRID_VALUES = (32, 64, 128, 256, 512, 1024)
#: a C identifier
IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass
class Launch:
    block: list[str]
    grid: list[str]
    runtime: list[GeneGuess]
    checks: list[str]
    launch_genes: set[str]


def launch_bound(source: Source, kernel: Kernel) -> int | None:
    """The threads per block ``__launch_bounds__`` fixes: a literal, or a ``#define`` no
    build sets (a guarded name is a gene, and sizes the block itself)."""
    written = kernel.launch_bounds or ""
    if written in source.defines and written not in source.guarded:
        written = source.defines[written]
    return parse_int(written)


def guess_block(
    source: Source, kernel: Kernel, genes: list[GeneGuess], bound: int | None
) -> tuple[list[str], list[GeneGuess], list[str]]:
    """Block dimensions: a gene that sizes each axis, else a runtime gene where the kernel
    reads blockDim (any block works), else 1 (256 for x, to check; at most ``bound``)."""
    names = {g.name for g in genes}
    by_axis: dict[str, str] = {}
    if kernel.launch_bounds in names:
        by_axis["x"] = kernel.launch_bounds
    for g in genes:
        axis = block_axis(g.name)
        if axis is not None and axis not in by_axis:
            by_axis[axis] = g.name
    tile = next((g.name for g in genes if is_tile(g.name)), None)
    if tile is not None and "x" not in by_axis:
        by_axis["x"] = tile
        if "y" not in by_axis and ("threadIdx.y" in source.reads or "blockIdx.y" in source.reads):
            by_axis["y"] = tile
    square = by_axis.get("x") in square_shared(source, kernel)  # As[BLOCK][BLOCK]: a tile
    if square and "y" not in by_axis and "threadIdx.y" in source.reads:
        by_axis["y"] = by_axis["x"]
    block: list[str] = []
    runtime: list[GeneGuess] = []
    checks: list[str] = []
    for axis in AXES:
        if axis in by_axis and axis != "x" and not reads_axis(source, axis):
            block.append("1")  # the kernel never reads threadIdx/blockDim on it: 1 thread
            checks.append(f"{by_axis[axis]}: the kernel never reads threadIdx.{axis}; block 1")
        elif axis in by_axis:
            block.append(by_axis[axis])
        elif f"blockDim.{axis}" in source.reads:
            name = f"BLOCK_{axis.upper()}"
            while name in names:
                name += "_"
            values, default = (BLOCK_X_VALUES, 256) if axis == "x" else (BLOCK_YZ_VALUES, 1)
            default = default if bound is None else min(default, bound)
            runtime.append(GeneGuess(name, values, default, f"the kernel reads blockDim.{axis}"))
            block.append(name)
        elif axis == "x" and (fixed := fixed_step(source, kernel)) is not None:
            block.append(str(fixed))  # blockIdx.x * MAX_THREADS: the block the kernel assumes
        elif axis == "x":
            threads = 256 if bound is None else min(256, bound)
            block.append(str(threads))
            checks.append(f"launch.block: {threads} threads is a guess (no gene, no blockDim read)")
        else:
            block.append("1")
    while len(block) > 1 and block[-1] == "1":
        block.pop()
    return block, runtime, checks


def plain_defines(source: Source) -> dict[str, int]:
    """The file's integer ``#define``s no build sets (a guarded one is a gene)."""
    values = {n: parse_int(v) for n, v in source.defines.items() if n not in source.guarded}
    return {n: v for n, v in values.items() if v is not None}


def fixed_step(source: Source, kernel: Kernel) -> int | None:
    """The threads per block a kernel assumes where it steps ``blockIdx.x`` by a plain
    ``#define`` alone (``blockIdx.x * MAX_THREADS_PER_BLOCK + threadIdx.x``)."""
    steps = Reader(kernel.body or source.text, {}, row_partner).block_steps("x")
    if not steps or len(steps) != 1:
        return None
    value = plain_defines(source).get(steps[0])
    return value if value is not None and 0 < value <= 1024 else None


def square_shared(source: Source, kernel: Kernel) -> set[str]:
    """Names that are both extents of a 2-D ``__shared__`` array of the kernel."""
    return {
        d.extents[0].strip()
        for d in static_shared(source.text, kernel.name)
        if len(d.extents) == 2 and d.extents[0].strip() == d.extents[1].strip()
    }


def reads_axis(source: Source, axis: str) -> bool:
    return f"threadIdx.{axis}" in source.reads or f"blockDim.{axis}" in source.reads


def cap_block(
    genes: list[GeneGuess], sized: list[str], bound: int, checks: list[str]
) -> tuple[list[GeneGuess], list[str]]:
    """The genes with those that size the block capped at ``__launch_bounds__(bound)``,
    and the restriction that holds their product to it where several size the block."""
    out = []
    for g in genes:
        capped = g.at_most(bound) if g.name in sized else g
        if capped.default != g.default:
            checks.append(
                f"{g.name}: default {g.default} is over __launch_bounds__({bound}); "
                f"{capped.default} instead"
            )
        out.append(capped)
    defaults = {g.name: g.default for g in out}
    if math.prod(defaults[b] for b in sized) > bound:
        checks.append(f"launch.block: the default block is over __launch_bounds__({bound})")
        return out, []
    return out, [f"{' * '.join(sized)} <= {bound}"] if len(sized) > 1 else []


def square_tile(g: GeneGuess, block: list[str]) -> GeneGuess:
    """A tile that is both the block's x and y: its square is at most 1024 threads."""
    if block.count(g.name) < 2:
        return g
    values = tuple(v for v in g.values if v * v <= 1024)
    if len(values) < 2:  # values sized for a 1-D block: a tile's own instead
        values = tuple(v for v in TILE_VALUES if v * v <= 1024)
    return replace(g, values=values).with_default(min(g.default, values[-1]))


def shapes_read(reader: Reader, kernel: Kernel) -> list[str]:
    """The shapes the kernel's index arithmetic gives its buffers, as text."""
    return [
        " ".join(shape)
        for p in kernel.params
        if p.pointer and (shape := reader.buffer_shape(p.name)) is not None
    ]


def unused_axis(source: Source, g: GeneGuess) -> GeneGuess:
    """A gene that sizes a block axis the kernel never reads keeps one value, 1: more
    threads on it would repeat the same work."""
    axis = block_axis(g.name)
    if axis in ("y", "z") and not reads_axis(source, axis):
        return GeneGuess(g.name, (1,), 1, f"the kernel never reads threadIdx.{axis}")
    return g


def blocks_gene(taken: set[str]) -> GeneGuess:
    """Blocks of a loop that steps by ``gridDim.x`` alone: any grid covers the data."""
    name = "GRID_X"
    while name in taken:
        name += "_"
    return GeneGuess(name, GRID_VALUES, 128, "a loop steps over blocks by gridDim.x")


def items_gene(taken: set[str]) -> GeneGuess:
    """Elements per thread of a grid-stride loop: the grid is the data over it."""
    name = "ITEMS"
    while name in taken:
        name += "_"
    return GeneGuess(name, WORK_VALUES, 1, "a grid-stride loop: elements per thread", "x")


def guess_grid(
    source: Source,
    reader: Reader,
    dims: dict[str, str],
    block: list[str],
    genes: list[GeneGuess],
    runtime: list[GeneGuess],
    checks: list[str],
) -> tuple[list[str], str, list[str], list[str]]:
    """(the grid, why, the dims its axes cover, new one-block-per-row dims)."""
    axes = [a for a in AXES if f"blockIdx.{a}" in source.reads]
    taken: set[str] = set()
    grid: list[str] = []
    covered: list[str] = []
    rows: list[str] = []
    derived = False
    names = {g.name for g in genes + runtime}
    for axis in AXES:
        if axis not in axes:
            grid.append("1")
            continue
        steps = reader.block_steps(axis)
        if steps and len(steps) == 1 and steps[0] in reader.dims:
            rows.append(row_dim(axis))  # x + blockIdx.x * cols: a block per row
            grid.append(row_dim(axis))
            derived = True
            continue
        variable = reader.axis_variable(axis)
        spans = reader.bound(variable) if variable else None
        if spans is None or spans in taken:
            spans = dim_for_axis(axis, list(dims), taken)
        else:
            derived = True
        if spans is None:
            grid.append("1")
            checks.append(f"launch.grid: no dimension for axis {axis}")
            continue
        taken.add(spans)
        covered.append(spans)
        step = grid_step(axis, steps, block, names, plain_defines(source))
        derived |= step is not None
        if step is None:
            size = block[AXES.index(axis)] if AXES.index(axis) < len(block) else "1"
            per = [g.name for g in genes if g.work == axis]
            step = [size, *per] if size != "1" or per else []
        step += [g.name for g in runtime if g.work == axis and g.name not in step]
        grid.append(f"ceil_div({spans}, {' * '.join(step)})" if step else spans)
    while len(grid) > 1 and grid[-1] == "1":
        grid.pop()
    if not axes:
        why = "the kernel reads no blockIdx: one block"
    elif derived:
        why = "from the kernel's index arithmetic"
    else:
        why = "one thread per element is a guess"
        checks.append("launch.grid: one thread per element is a guess; check it")
    return grid, why, covered, rows


def grid_step(
    axis: str,
    steps: list[str] | None,
    block: list[str],
    genes: set[str],
    fixed: dict[str, int] | None = None,
) -> list[str] | None:
    """What the grid divides a dimension by on ``axis``, from what multiplies blockIdx
    there (``blockDim.x`` is the block's x, a plain ``#define`` its value); None where a
    factor is none of those."""
    if not steps:
        return None
    out = []
    for factor in steps:
        if factor.startswith("blockDim."):
            index = AXES.index(factor[-1])
            size = block[index] if index < len(block) else "1"
            if size != "1":
                out.append(size)
        elif factor in genes or factor.isdigit():
            out.append(factor)
        elif factor in (fixed or {}):
            out.append(str((fixed or {})[factor]))
        else:
            return None
    return out


def block_why(block: list[str], genes: set[str]) -> str:
    named = [b for b in block if b in genes]
    if named:
        return f"threads per block from {', '.join(dict.fromkeys(named))}"
    return "threads per block"
