"""Assemble the sidecar draft and the reference stub from what the source says. Pure,
but for ``check_loads``.

Every value ``ctune init`` had to guess carries a ``# check:`` comment saying what
it guessed from; what it could read (the entry, parameter types, macro defaults) does
not. The draft loads as it is (``ctune space`` runs on it), so the author edits a
working spec rather than filling in a blank one; ``check_loads`` makes sure of it before
anything is written.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ctune.errors import UserError
from ctune.expr import ExprError
from ctune.expr import parse as parse_expr
from ctune.names import NAME_RE
from ctune.spec.declarations import (
    STATIC_SMEM_BYTES,
    c_extent_expression,
    int_defines,
    static_shared,
    struct_dtypes,
)
from ctune.spec.draft.constants import constant_lines
from ctune.spec.draft.guess import (
    BLOCK_X_VALUES,
    BLOCK_YZ_VALUES,
    CTYPE_DTYPES,
    INTEGER_DTYPES,
    TILE_VALUES,
    WORK_VALUES,
    GeneGuess,
    block_axis,
    default_for,
    dim_for_axis,
    gene,
    is_tile,
    parse_int,
    row_partner,
    selector,
    size_word,
    switch,
)
from ctune.spec.draft.indexing import (
    Reader,
    accumulates,
    block_stride,
    grid_stride,
    row_dim,
    zero_steps,
)
from ctune.spec.draft.source import Kernel, Param, Source, resolve_type
from ctune.spec.draft.undefined import Probe
from ctune.spec.elements import C_TYPES, element, yaml_dtype
from ctune.spec.entry import parse_entry, same_params
from ctune.spec.loader import load_spec

AXES = ("x", "y", "z")
#: a restriction the draft proposes, and why (its ``# check:``)
Rule = tuple[str, str]
#: blocks in a grid a block-stride loop covers the data with, whatever its size
GRID_VALUES = (32, 64, 128, 256, 512, 1024)
#: problem sizes by how many grid axes the data spans: about 16 MiB per float buffer
SIZES = {0: 1 << 22, 1: 1 << 22, 2: 2048, 3: 256}
_IDENT = re.compile(r"[A-Za-z_]\w*")
_SIZE_NAMES = ("n", "m", "k", "size", "width", "height", "depth", "nx", "ny", "nz", "len")


@dataclass
class Draft:
    """The files ``ctune init`` writes, and what it would have the author check."""

    kernel: Kernel
    entry: str
    yaml: str
    reference: str
    reference_file: str
    genes: list[GeneGuess] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)  # relative to the kernel's folder


def pick_kernel(source: Source, entry: str | None, where: str) -> Kernel:
    """The kernel to tune: the only one, or the one ``entry`` names as a spec's ``entry:``
    would (an overload by its parameter list); else one line that lists them."""
    kernels = source.kernels
    if not kernels:
        raise UserError(f"{where}: no __global__ function found; is this a CUDA kernel file?")
    if entry is not None:
        try:
            wanted = parse_entry(entry)
        except ValueError as exc:
            raise UserError(f"{where}: --entry {exc}") from None
        kernels = [
            k
            for k in kernels
            if k.name == wanted.name
            and (wanted.params is None or same_params(wanted.params, k.types))
        ]
        if not kernels:
            listed = ", ".join(_shown(source, k) for k in source.kernels)
            raise UserError(f"{where}: no kernel '{entry}' (kernels: {listed})")
    if len(kernels) > 1:
        listed = ", ".join(_shown(source, k) for k in kernels)
        overload = next((k for k in kernels if _overloaded(source, k)), None)
        how = (
            ""
            if overload is None
            else f' (an overload by its parameters: --entry "{overload.signature()}")'
        )
        raise UserError(
            f"{where}: {len(kernels)} kernels ({listed}); pick one with --entry NAME{how}"
        )
    return kernels[0]


def _overloaded(source: Source, kernel: Kernel) -> bool:
    return sum(k.name == kernel.name for k in source.kernels) > 1


def _shown(source: Source, kernel: Kernel) -> str:
    """A kernel as a listing names it: by its name, an overload with its parameters."""
    return kernel.signature() if _overloaded(source, kernel) else kernel.name


def _genes(source: Source, kernel: Kernel, probe: Probe | None) -> list[GeneGuess]:
    genes: dict[str, GeneGuess] = {}
    for param in kernel.template:
        if param.kind != "value":
            continue
        default = parse_int(param.default or "")
        default = default if default is not None else default_for(param.name)
        genes[param.name] = gene(param.name, default, "template parameter")
    for name, value in source.guarded.items():
        default = parse_int(value)
        if default is not None and name not in genes:
            genes[name] = gene(name, default, f"#ifndef {name}, default {default}")
    for name in sorted(source.conditions | source.ifdefs):
        if name not in genes:
            ifdef = name in source.ifdefs  # off undefined also reads as 0 in an #if
            how = "#ifdef" if ifdef else "#if"
            genes[name] = switch(name, f"{how} {name}, defined nowhere", ifdef=ifdef)
    for name, default in (probe.undefined if probe else {}).items():
        if name not in genes:
            genes[name] = gene(name, default, "used, defined nowhere")
    for name, compared in source.selectors.items():
        if name in genes and not genes[name].ifdef:
            genes[name] = selector(genes[name], compared)
    return list(genes.values())


@dataclass
class _Launch:
    block: list[str]
    grid: list[str]
    runtime: list[GeneGuess]
    checks: list[str]
    launch_genes: set[str]


def _launch_bound(source: Source, kernel: Kernel) -> int | None:
    """The threads per block ``__launch_bounds__`` fixes: a literal, or a ``#define`` no
    build sets (a guarded name is a gene, and sizes the block itself)."""
    written = kernel.launch_bounds or ""
    if written in source.defines and written not in source.guarded:
        written = source.defines[written]
    return parse_int(written)


def _block(
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
    square = by_axis.get("x") in _square_shared(source, kernel)  # As[BLOCK][BLOCK]: a tile
    if square and "y" not in by_axis and "threadIdx.y" in source.reads:
        by_axis["y"] = by_axis["x"]
    block: list[str] = []
    runtime: list[GeneGuess] = []
    checks: list[str] = []
    for axis in AXES:
        if axis in by_axis and axis != "x" and not _reads_axis(source, axis):
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
        elif axis == "x" and (fixed := _fixed_step(source, kernel)) is not None:
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


def _plain_defines(source: Source) -> dict[str, int]:
    """The file's integer ``#define``s no build sets (a guarded one is a gene)."""
    values = {n: parse_int(v) for n, v in source.defines.items() if n not in source.guarded}
    return {n: v for n, v in values.items() if v is not None}


def _fixed_step(source: Source, kernel: Kernel) -> int | None:
    """The threads per block a kernel assumes where it steps ``blockIdx.x`` by a plain
    ``#define`` alone (``blockIdx.x * MAX_THREADS_PER_BLOCK + threadIdx.x``)."""
    steps = Reader(kernel.body or source.text, {}, row_partner).block_steps("x")
    if not steps or len(steps) != 1:
        return None
    value = _plain_defines(source).get(steps[0])
    return value if value is not None and 0 < value <= 1024 else None


def _square_shared(source: Source, kernel: Kernel) -> set[str]:
    """Names that are both extents of a 2-D ``__shared__`` array of the kernel."""
    return {
        d.extents[0].strip()
        for d in static_shared(source.text, kernel.name)
        if len(d.extents) == 2 and d.extents[0].strip() == d.extents[1].strip()
    }


def _reads_axis(source: Source, axis: str) -> bool:
    return f"threadIdx.{axis}" in source.reads or f"blockDim.{axis}" in source.reads


def _cap_block(
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


def draft_sidecar(
    source: Source,
    *,
    stem: str,
    source_name: str,
    entry: str | None = None,
    probe: Probe | None = None,
    include_dirs: Sequence[str] = (),
) -> Draft:
    """The YAML draft and the reference stub for one kernel of ``source`` (``include_dirs``:
    the folders the author gave for its includes, relative to the kernel's folder)."""
    kernel = pick_kernel(source, entry, source_name)
    genes = _genes(source, kernel, probe)
    bound = _launch_bound(source, kernel)
    block, runtime, checks = _block(source, kernel, genes, bound)
    genes = [_square_tile(_unused_axis(source, g), block) for g in genes]
    restrictions: list[Rule] = []
    sized = [b for b in block if b in {g.name for g in genes + runtime}]
    if bound is not None and sized:
        capped, capping = _cap_block(genes + runtime, sized, bound, checks)
        genes, runtime = capped[: len(genes)], capped[len(genes) :]
        restrictions += [(r, f"__launch_bounds__({bound})") for r in capping]
    body = kernel.body or source.text
    structs = struct_dtypes(source.text)  # a pointer to one of them is a struct buffer
    gene_names = {g.name for g in genes + runtime}
    dims, macro_dims = _dims(source, kernel, gene_names, source_name, structs, checks)
    reader = Reader(body, {param: dim for dim, param in dims.items()}, row_partner)
    blocks_gene = _blocks_gene(gene_names) if block_stride(body) else None
    if blocks_gene is not None:
        runtime.append(blocks_gene)
    elif grid_stride(body):
        runtime.append(_items_gene(gene_names))
    all_genes = genes + runtime
    gene_names = {g.name for g in all_genes}

    # the grid: one axis per blockIdx the kernel reads, stepped as its index arithmetic says
    grid, grid_why, covered, rows = _grid(source, reader, dims, block, genes, runtime, checks)
    if blocks_gene is not None:  # each block loops over the data: the grid is the gene
        grid, grid_why = [blocks_gene.name, *grid[1:]], blocks_gene.why
    for row in rows:  # one block per row: a dimension the signature does not name
        dims = {row: row, **dims}
    if macro_dims:  # a #define the grid and the buffers do not use is not a problem size
        used = {n for text in [*grid, *shapes_read(reader, kernel)] for n in _IDENT.findall(text)}
        if used & set(macro_dims):
            dims = {d: p for d, p in dims.items() if d in used or d not in macro_dims}
            covered = [c for c in covered if c in dims]
    fallback = list(reversed(covered)) or list(dims)
    launch_names = {b for b in block if b in gene_names}
    launch_names |= {g.name for g in genes if g.work is not None}
    launch_names |= {n for expr in grid for n in _IDENT.findall(expr) if n in gene_names}

    # args, in the kernel's order
    arg_lines: list[str] = []
    outputs: list[str] = []
    inputs: list[str] = []
    traffic: list[tuple[int, list[str]]] = []
    atomics = any(
        p.pointer
        and reader.accumulates_atomically(p.name)
        and _dtype(p, kernel, source_name, structs, source.type_names).startswith("float")
        for p in kernel.params
    )
    for param in kernel.params:
        dtype = _dtype(param, kernel, source_name, structs, source.type_names)
        if param.pointer:
            role, note = _role(reader, param)
            init = ""
            if atomics and role == "input":  # a sum of values around 0 has no relative error
                init, note = ", init: {uniform: [0, 1]}", f"  # check: {POSITIVE_NOTE}"
            (inputs if role == "input" else outputs).append(param.name)
            shape = reader.buffer_shape(param.name)
            if reader.one_element(param.name):
                shape = ["1"]
                if reader.accumulates_atomically(param.name):
                    role, note = "inout", "  # check: one element the kernel adds into"
                else:
                    note = note or "  # check: one element (only *p, p[0] or atomics)"
            elif shape is None:
                shape = fallback
                note = note or "  # check: the shape"
            arg_lines.append(
                f"  - {{name: {param.name}, role: {role}, dtype: {yaml_dtype(dtype)}, "
                f"shape: [{', '.join(shape)}]{init}}}{note}"
            )
            if shape != ["1"]:
                traffic.append((element(dtype).itemsize, shape))
        elif dtype in INTEGER_DTYPES and param.name in dims.values():
            dim = next(d for d, p in dims.items() if p == param.name)
            scaled = _scaled(body, param.name)
            note = f"  # check: the kernel reads {scaled}: the value in its units" if scaled else ""
            arg_lines.append(
                f"  - {{name: {param.name}, role: scalar, dtype: {dtype}, value: {dim}}}{note}"
            )
        else:
            value = "1.0" if dtype.startswith(("float", "bfloat")) else "1"
            arg_lines.append(
                f"  - {{name: {param.name}, role: scalar, dtype: {dtype}, value: {value}}}"
                "  # check: the value"
            )
    ndim = max((len(shape) for _, shape in traffic), default=len(covered))
    sizes = SIZES[min(max(ndim, len(covered)), 3)]
    dim_values = {dim: macro_dims.get(dim, sizes) for dim in dims}
    if not outputs:
        raise UserError(
            f"{source_name}: {kernel.name} has no pointer parameter that is not const: "
            "nothing to check against a reference"
        )
    restrictions += _step_restrictions(body, all_genes)
    restrictions += _shared_restrictions(source, kernel, all_genes)
    all_genes = _defaults_within(all_genes, [r for r, _ in restrictions], checks)

    entry_text = _entry_text(source, kernel, entry, checks)
    name = _spec_name(kernel, stem)
    function = kernel.name if kernel.name.isidentifier() else "reference"
    reference_file = f"{stem}_ref.py"
    lines = [
        f"# ctune sidecar drafted by `ctune init {source_name}`: check each '# check:' line,",
        f"# write the reference in {reference_file}, then `ctune space {source_name}`.",
        f"name: {name}",
        f"entry: {entry_text if _PLAIN_ENTRY.match(entry_text) else json.dumps(entry_text)}",
    ]
    if source_name != f"{stem}.cu":  # a spec's source defaults to <stem>.cu (a .cuh, a .cu.h)
        lines.append(f"source: {json.dumps(source_name)}")
    if include_dirs:
        shown = [d if _PLAIN_PATH.fullmatch(d) else json.dumps(d) for d in include_dirs]
        lines.append(f"include_dirs: [{', '.join(shown)}]")
    lines += _function_flags(probe, checks)
    lines.append(f"flags: [{', '.join(DRAFT_FLAGS)}]  # check: {FLAGS_NOTE}")
    if all_genes:
        lines.append("genes:")
        for g in all_genes:
            family = _family(g, runtime, launch_names)
            values = ", ".join(str(v) for v in g.values)
            ifdef = ", ifdef: true" if g.ifdef else ""
            lines.append(
                f"  {g.name}: {{values: [{values}], default: {g.default}, family: {family}"
                f"{ifdef}}}  # check: values ({g.why})"
            )
    if restrictions:
        lines.append("restrictions:")
        lines += [f'  - "{r}"  # check: {why}' for r, why in restrictions]
    lines.append("launch:")
    lines += _wrapped("  grid: [", [_quote(g) for g in grid], f"]  # check: {grid_why}")
    lines.append(f"  block: [{', '.join(block)}]  # check: {_block_why(block, gene_names)}")
    if source.dynamic_shared:
        threads = " * ".join(block)
        lines.append(
            f'  dynamic_smem_bytes: "4 * {threads}"  # check: extern __shared__ bytes per block'
        )
        checks.append("launch.dynamic_smem_bytes: one float per thread is a guess")
    lines.append("problems:")
    dims_text = ", ".join(f"{d}: {v}" for d, v in dim_values.items())
    lines.append(f"  - {{name: default, dims: {{{dims_text}}}}}  # check: the sizes to tune for")
    lines.append("args:  # in the kernel's order")
    lines += arg_lines
    lines += constant_lines(source.text, checks, {**source.header_defines, **source.defines})
    lines.append(
        f"reference: {{python: {reference_file}:{function}}}  # check: write it in {reference_file}"
    )
    if accumulates(body):
        lines.append(f"tolerance: {SUM_TOLERANCE}  # check: {SUM_NOTE}")
    else:
        lines.append(f"tolerance: {DRAFT_TOLERANCE}  # check: {TOLERANCE_NOTE}")
    if atomics:
        lines.append("deterministic: false  # check: atomics add in any order")
    lines.append(f"metrics:  # check: {METRICS_NOTE}")
    lines.append(f'  bytes: "{_bytes(traffic, list(dims))}"  # check: bytes moved per call')
    checks = [*checks, f"{reference_file}: write the reference of {kernel.name}"]
    return Draft(
        kernel=kernel,
        entry=entry_text,
        yaml="\n".join(lines) + "\n",
        reference=_reference_stub(kernel.name, function, inputs, outputs, list(dims)),
        reference_file=reference_file,
        genes=all_genes,
        checks=checks,
        include_dirs=list(include_dirs),
    )


def _scaled(body: str, name: str) -> str | None:
    """``optN / 2`` where the kernel divides or multiplies a size parameter: the size may
    count other units than the buffers' elements (a float2 holds two values)."""
    found = re.search(
        rf"(?<![\w.]){re.escape(name)}\s*[/*]\s*\w+|\w+\s*[/*]\s*{re.escape(name)}(?!\w)", body
    )
    return " ".join(found.group(0).split()) if found else None


def _function_flags(probe: Probe | None, checks: list[str]) -> list[str]:
    """``extra_flags`` for the functions the file calls but nothing defines: a runtime
    function CUDA removed mapped to its successor, any other left for the author."""
    functions = probe.functions if probe else {}
    if not functions:
        return []
    mapped = [f"-D{n}={m}" for n, m in functions.items() if m is not None]
    unknown = [n for n, m in functions.items() if m is None]
    why = [f"{n} is gone from this CUDA: mapped to {m}" for n, m in functions.items() if m]
    if unknown:
        why.append(f"{', '.join(unknown)}: called, defined nowhere; map each with -DNAME=...")
    checks.append(f"extra_flags: {'; '.join(why)}")
    flags = ", ".join(json.dumps(f) for f in mapped)
    return [f"extra_flags: [{flags}]  # check: {'; '.join(why)}"]


def _defaults_within(
    genes: list[GeneGuess], rules: list[str], checks: list[str]
) -> list[GeneGuess]:
    """The genes with defaults that keep every proposed restriction: a default that breaks
    one is lowered to the largest of its values that keeps them all (the others' at
    their defaults), so that the draft's default candidate is one the space holds."""
    parsed = []
    for rule in rules:
        try:
            parsed.append(parse_expr(rule))
        except ExprError:
            continue
    by_name = {g.name: g for g in genes}

    def kept(values: dict[str, int]) -> bool:
        try:
            return all(bool(rule.evaluate(values)) for rule in parsed)
        except (ExprError, ZeroDivisionError):
            return False

    defaults = {g.name: g.default for g in genes}
    for expr in parsed:
        if kept(defaults):
            break
        for name in sorted(expr.names & by_name.keys()):
            fits = [v for v in by_name[name].values if kept({**defaults, name: v})]
            if fits:
                smaller = [v for v in fits if v <= defaults[name]]
                chosen = max(smaller) if smaller else min(fits)
                checks.append(
                    f"{name}: default {defaults[name]} breaks a proposed restriction; "
                    f"{chosen} instead"
                )
                defaults[name] = chosen
                break
    return [g.with_default(defaults[g.name]) if defaults[g.name] != g.default else g for g in genes]


#: catalogue flags that keep results as they are (fast_math is for the author to add)
DRAFT_FLAGS = ("ptxas_opt", "maxrregcount", "dlcm")
FLAGS_NOTE = "nvcc/ptxas flags to tune; add fast_math if its results may differ"
#: tight enough for element-wise float32 work; a reduction's order needs more
DRAFT_TOLERANCE = "{default: {rel_l2: 1.0e-6, max_abs: 1.0e-5}}"
TOLERANCE_NOTE = "loosen for sums and dot products (their order changes the rounding)"
#: a kernel that sums in a loop rounds in its own order
SUM_TOLERANCE = "{default: {rel_l2: 1.0e-4, max_abs: 1.0e-2}}"
SUM_NOTE = "the kernel sums in a loop: set max_abs for the size of its sums"
POSITIVE_NOTE = "inputs in [0, 1): a sum of values around 0 has no meaningful relative error"
METRICS_NOTE = 'add flops: "..." (operations per call) for a FLOP rate'
#: a draft line's length before a list wraps, as the project's YAML is written
LINE_WIDTH = 100


def _wrapped(head: str, items: list[str], tail: str) -> list[str]:
    """``head + items + tail`` on one line, or wrapped under the first item where the
    items alone pass :data:`LINE_WIDTH` (the comment in ``tail`` may run over)."""
    one = head + ", ".join(items)
    if len(one) + tail.index("]") + 1 <= LINE_WIDTH:
        return [one + tail]
    lines, current = [], head
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if current.strip() not in ("", head.strip()) and len(current) + 1 + len(piece) > LINE_WIDTH:
            lines.append(current.rstrip())
            current = " " * len(head)
        current += piece + " "
    return [*lines, current.rstrip() + tail]


def _square_tile(g: GeneGuess, block: list[str]) -> GeneGuess:
    """A tile that is both the block's x and y: its square is at most 1024 threads."""
    if block.count(g.name) < 2:
        return g
    values = tuple(v for v in g.values if v * v <= 1024)
    if len(values) < 2:  # values sized for a 1-D block: a tile's own instead
        values = tuple(v for v in TILE_VALUES if v * v <= 1024)
    return replace(g, values=values).with_default(min(g.default, values[-1]))


_PLAIN_PATH = re.compile(r"[\w.][\w./+-]*")
_PLAIN_ENTRY = re.compile(r"^[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*$")


def shapes_read(reader: Reader, kernel: Kernel) -> list[str]:
    """The shapes the kernel's index arithmetic gives its buffers, as text."""
    return [
        " ".join(shape)
        for p in kernel.params
        if p.pointer and (shape := reader.buffer_shape(p.name)) is not None
    ]


def _unused_axis(source: Source, g: GeneGuess) -> GeneGuess:
    """A gene that sizes a block axis the kernel never reads keeps one value, 1: more
    threads on it would repeat the same work."""
    axis = block_axis(g.name)
    if axis in ("y", "z") and not _reads_axis(source, axis):
        return GeneGuess(g.name, (1,), 1, f"the kernel never reads threadIdx.{axis}")
    return g


def _blocks_gene(taken: set[str]) -> GeneGuess:
    """Blocks of a loop that steps by ``gridDim.x`` alone: any grid covers the data."""
    name = "GRID_X"
    while name in taken:
        name += "_"
    return GeneGuess(name, GRID_VALUES, 128, "a loop steps over blocks by gridDim.x")


def _items_gene(taken: set[str]) -> GeneGuess:
    """Elements per thread of a grid-stride loop: the grid is the data over it."""
    name = "ITEMS"
    while name in taken:
        name += "_"
    return GeneGuess(name, WORK_VALUES, 1, "a grid-stride loop: elements per thread", "x")


def _dims(
    source: Source,
    kernel: Kernel,
    gene_names: set[str],
    source_name: str,
    structs: dict[str, str],
    checks: list[str],
) -> tuple[dict[str, str], dict[str, int]]:
    """Problem dimensions: the integer scalar parameters, else size-like macros.
    ({dim: the parameter or macro it stands for}, {macro dim: its value})."""
    dims: dict[str, str] = {}
    for param in kernel.params:
        dtype = _dtype(param, kernel, source_name, structs, source.type_names)
        if not param.pointer and dtype in INTEGER_DTYPES:
            dim = param.name.upper()
            while dim in gene_names or dim in dims:
                dim += "_DIM"
            dims[dim] = param.name
    macro_dims: dict[str, int] = {}
    if not dims:
        for name, value in source.defines.items():
            number = parse_int(value)
            if number is not None and name not in gene_names and size_word(name) in _SIZE_NAMES:
                macro_dims[name] = number
        if not macro_dims:
            macro_dims["N"] = SIZES[1]
            checks.append("problems: no size in the signature or macros; N is a placeholder")
        dims = {name: name for name in macro_dims}
    return dims, macro_dims


def _grid(
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
        step = _step(axis, steps, block, names, _plain_defines(source))
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


def _step(
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


def _role(reader: Reader, param: Param) -> tuple[str, str]:
    """(the role of a pointer parameter, the draft's note on it)."""
    if param.const_pointee:
        return "input", ""
    if reader.read_only(param.name):
        return "input", "  # check: the kernel never writes it (not const in the signature)"
    if reader.written_only(param.name):
        if reader.skips_a_border():
            return "inout", "  # check: inout: the kernel leaves a border unwritten"
        return "output", "  # check: inout if the kernel leaves elements unwritten"
    return "inout", "  # check: output if the kernel only writes it"


def _step_restrictions(body: str, genes: list[GeneGuess]) -> list[Rule]:
    """``A % B == 0`` where the kernel divides a gene by a gene or steps over one by one."""
    out = []
    for a, b in zero_steps(body, {g.name for g in genes if 0 not in g.values}):
        why = f"{a} / {b} must not be 0 (a step of 0 loops forever) and cover {a} whole"
        out.append((f"{a} % {b} == 0", why))
    return out


def _shared_restrictions(source: Source, kernel: Kernel, genes: list[GeneGuess]) -> list[Rule]:
    """The static shared memory limit, where genes size the kernel's ``__shared__`` arrays
    (read as the spec's screening reads them, ``ctune.spec.declarations``) so that their
    largest values would pass it: the author sees the rule the device limits apply."""
    by_name = {g.name: g for g in genes}
    defines = {k: v for k, v in int_defines(source.text).items() if k not in by_name}
    terms: list[str] = []
    for decl in static_shared(source.text, kernel.name):
        extents = [c_extent_expression(e, defines) for e in decl.extents]
        if decl.element_bytes is None or None in extents:
            return []  # an array this draft cannot size
        shown = [e if _IDENT.fullmatch(e) or e.isdigit() else f"({e})" for e in extents if e]
        terms.append(" * ".join([str(decl.element_bytes), *shown]))
    try:
        total = parse_expr(" + ".join(terms)) if terms else None
        if total is None or not total.names or not total.names <= set(by_name):
            return []
        largest = total.evaluate({n: max(by_name[n].values) for n in total.names})
    except ExprError:
        return []
    if largest <= STATIC_SMEM_BYTES:
        return []
    why = "static __shared__ bytes within 48 KiB (more needs an opt-in)"
    return [(f"{total.source} <= {STATIC_SMEM_BYTES}", why)]


def _entry_text(source: Source, kernel: Kernel, entry: str | None, checks: list[str]) -> str:
    """The entry: a template's value parameters are its genes, its types float; an
    overload's parameter list picks it (with the template's types filled in); a kernel in
    a namespace by its qualified name."""
    targs = parse_entry(entry).template_args if entry else None
    entry_text = kernel.name
    if kernel.namespace and not kernel.extern_c:
        entry_text = f"{kernel.namespace}::{entry_text}"
    if kernel.template:
        if targs is None:
            targs = tuple(p.name if p.kind == "value" else "float" for p in kernel.template)
            if any(p.kind == "type" for p in kernel.template):
                checks.append("entry: type template arguments are float; change them if not")
        entry_text += f"<{', '.join(targs)}>"
    if _overloaded(source, kernel):
        given = zip(kernel.template, targs or (), strict=False)  # defaults may be left out
        types = {p.name: a for p, a in given if p.kind == "type"}
        params = [_IDENT.sub(lambda m: types.get(m[0], m[0]), t) for t in kernel.types]
        entry_text += f"({', '.join(params)})"
    return entry_text


def _spec_name(kernel: Kernel, stem: str) -> str:
    """The kernel's name as a spec name (``matmul_tiled`` -> ``matmul-tiled``), else the
    file's stem's."""
    for candidate in (kernel.name.lower().replace("_", "-"), stem.lower()):
        if NAME_RE.match(candidate):
            return candidate
    return "kernel"


def _block_why(block: list[str], genes: set[str]) -> str:
    named = [b for b in block if b in genes]
    if named:
        return f"threads per block from {', '.join(dict.fromkeys(named))}"
    return "threads per block"


def _bytes(traffic: list[tuple[int, list[str]]], dims: list[str]) -> str:
    """Bytes the buffers hold, each once: ``12 * N`` where they share a shape (its dims in
    the problem's order), else ``4 * (M * K + K * N + M * N)``."""
    if not traffic:
        return "0"
    shapes = {tuple(sorted(shape)) for _, shape in traffic}  # [W, H] and [H, W]: as many
    if len(shapes) == 1:
        shape = traffic[0][1]
        ordered = sorted(shape, key=lambda d: dims.index(d) if d in dims else len(dims))
        return " * ".join([str(sum(size for size, _ in traffic)), *ordered])
    sizes = {size for size, _ in traffic}
    if len(sizes) == 1:
        products = " + ".join(" * ".join(shape) for _, shape in traffic)
        return f"{sizes.pop()} * ({products})"
    return " + ".join(" * ".join([str(size), *shape]) for size, shape in traffic)


def check_loads(draft: Draft, kernel: Path, nvcc_help: str | None = None) -> None:
    """Load the draft as ``ctune space`` would, from a scratch folder beside a copy of the
    kernel: a draft that does not load is refused in one line before any file is written
    (written, it would stand in the way of the next ``ctune init`` until ``--force``)."""
    with tempfile.TemporaryDirectory(prefix="ctune-init-") as scratch:
        folder = Path(scratch)
        shutil.copyfile(kernel, folder / kernel.name)
        yaml_text = draft.yaml
        if draft.include_dirs:  # the scratch copy finds the author's folders where they are
            here = [json.dumps(str((kernel.parent / d).resolve())) for d in draft.include_dirs]
            yaml_text = re.sub(
                r"^include_dirs: .*$", f"include_dirs: [{', '.join(here)}]", yaml_text, flags=re.M
            )
        (folder / kernel.with_suffix(".yaml").name).write_text(yaml_text)
        (folder / draft.reference_file).write_text(draft.reference)
        try:
            load_spec(folder / kernel.name, nvcc_help)
        except UserError as exc:
            reason = str(exc)
            for prefix in (f"{folder.resolve()}/", f"{folder}/"):
                reason = reason.replace(prefix, "")
            raise UserError(
                f"{kernel.name}: the draft would not load ({reason}); nothing written "
                "(a guess of ctune init is wrong: please report it with the kernel)"
            ) from None


def _family(g: GeneGuess, runtime: list[GeneGuess], launch_names: set[str]) -> str:
    if g.why == "template parameter":
        return "template"
    if g in runtime:
        return "runtime"
    return "launch" if g.name in launch_names else "define"


def _quote(expression: str) -> str:
    return expression if expression.isidentifier() or expression.isdigit() else f'"{expression}"'


def _dtype(
    param: Param,
    kernel: Kernel,
    where: str,
    structs: dict[str, str],
    type_names: dict[str, str] | None = None,
) -> str:
    """The dtype of a parameter, its type read through the file's typedefs and type macros
    (``DATA_TYPE*`` where ``#define DATA_TYPE float`` is a float32 buffer)."""
    if param.base in {p.name for p in kernel.template if p.kind == "type"}:
        return "float32"  # the template is instantiated with float (the entry says so)
    base = resolve_type(param.base, type_names or {})
    dtype = CTYPE_DTYPES.get(base) or (
        (C_TYPES.get(base) or structs.get(base.removeprefix("::"))) if param.pointer else None
    )
    if dtype is None:
        what = "buffers of" if param.pointer else "scalars of"
        raise UserError(
            f"{where}: parameter {param.name} of {kernel.name} has type {param.ctype}; ctune "
            f"passes {what} "
            + ", ".join(sorted(set(CTYPE_DTYPES)))
            + (
                ", the CUDA vector types (float2, int4, ...) or a struct given as "
                "dtype: {struct: [[FIELD, DTYPE], ...]}"
                if param.pointer
                else ""
            )
        )
    return dtype


def _reference_stub(
    kernel: str, function: str, inputs: list[str], outputs: list[str], dims: list[str]
) -> str:
    return f'''"""Reference for {kernel}: drafted by `ctune init`; write it before searching."""


def {function}(xp, inputs, dims):
    """The expected outputs of {kernel} for one problem, in float32 or better.

    xp is cupy on the GPU (numpy in CPU tests). inputs holds float32 copies of the
    input and inout buffers ({", ".join(inputs + outputs)}), inout ones as they were before
    the kernel ran; dims holds {", ".join(dims) or "the problem's sizes"}.
    Return {{{", ".join(f'"{o}": ...' for o in outputs)}}}.
    """
    raise NotImplementedError("write the reference of {kernel} in this file")
'''


__all__ = ["Draft", "check_loads", "draft_sidecar", "pick_kernel"]
