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
from dataclasses import dataclass, field
from pathlib import Path

from ctune.draft.constants import constant_lines
from ctune.draft.guess import (
    BLOCK_X_VALUES,
    BLOCK_YZ_VALUES,
    CTYPE_DTYPES,
    INTEGER_DTYPES,
    GeneGuess,
    block_axis,
    default_for,
    dim_for_axis,
    gene,
    is_tile,
    parse_int,
    switch,
)
from ctune.draft.source import Kernel, Param, Source
from ctune.draft.undefined import Probe
from ctune.errors import UserError
from ctune.names import NAME_RE
from ctune.spec import load_spec
from ctune.spec.declarations import struct_dtypes
from ctune.spec.elements import C_TYPES, element, yaml_dtype
from ctune.spec.entry import parse_entry, same_params

AXES = ("x", "y", "z")
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
    block: list[str] = []
    runtime: list[GeneGuess] = []
    checks: list[str] = []
    for axis in AXES:
        if axis in by_axis:
            block.append(by_axis[axis])
        elif f"blockDim.{axis}" in source.reads:
            name = f"BLOCK_{axis.upper()}"
            while name in names:
                name += "_"
            values, default = (BLOCK_X_VALUES, 256) if axis == "x" else (BLOCK_YZ_VALUES, 1)
            default = default if bound is None else min(default, bound)
            runtime.append(GeneGuess(name, values, default, f"the kernel reads blockDim.{axis}"))
            block.append(name)
        elif axis == "x":
            threads = 256 if bound is None else min(256, bound)
            block.append(str(threads))
            checks.append(f"launch.block: {threads} threads is a guess (no gene, no blockDim read)")
        else:
            block.append("1")
    while len(block) > 1 and block[-1] == "1":
        block.pop()
    return block, runtime, checks


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
) -> Draft:
    """The YAML draft and the reference stub for one kernel of ``source``."""
    kernel = pick_kernel(source, entry, source_name)
    genes = _genes(source, kernel, probe)
    bound = _launch_bound(source, kernel)
    block, runtime, checks = _block(source, kernel, genes, bound)
    restrictions: list[str] = []
    sized = [b for b in block if b in {g.name for g in genes + runtime}]
    if bound is not None and sized:
        capped, restrictions = _cap_block(genes + runtime, sized, bound, checks)
        genes, runtime = capped[: len(genes)], capped[len(genes) :]
    all_genes = genes + runtime
    gene_names = {g.name for g in all_genes}
    structs = struct_dtypes(source.text)  # a pointer to one of them is a struct buffer

    # problem dimensions: the integer scalar parameters, else size-like macros
    dims: dict[str, str] = {}  # dim -> the parameter (or macro) it stands for
    for param in kernel.params:
        dtype = _dtype(param, kernel, source_name, structs)
        if not param.pointer and dtype in INTEGER_DTYPES:
            dim = param.name.upper()
            while dim in gene_names or dim in dims:
                dim += "_DIM"
            dims[dim] = param.name
    macro_dims: dict[str, int] = {}
    if not dims:
        for name, value in source.defines.items():
            number = parse_int(value)
            if number is not None and name not in gene_names and name.lower() in _SIZE_NAMES:
                macro_dims[name] = number
        if not macro_dims:
            macro_dims["N"] = SIZES[1]
            checks.append("problems: no size in the signature or macros; N is a placeholder")
        dims = {name: name for name in macro_dims}

    # the grid: one axis per blockIdx the kernel reads, over the dimension it most likely spans
    axes = [a for a in AXES if f"blockIdx.{a}" in source.reads]
    taken: set[str] = set()
    grid: list[str] = []
    covered: list[str] = []
    for axis in AXES:
        if axis not in axes:
            grid.append("1")
            continue
        spans = dim_for_axis(axis, list(dims), taken)
        size = block[AXES.index(axis)] if AXES.index(axis) < len(block) else "1"
        per = [g.name for g in genes if g.work == axis]
        step = " * ".join([size, *per]) if size != "1" or per else "1"
        if spans is None:
            grid.append("1")
            checks.append(f"launch.grid: no dimension for axis {axis}")
            continue
        taken.add(spans)
        covered.append(spans)
        grid.append(f"ceil_div({spans}, {step})" if step != "1" else spans)
    while len(grid) > 1 and grid[-1] == "1":
        grid.pop()
    if axes:
        checks.append("launch.grid: one thread per element is a guess; check it")

    sizes = SIZES[min(len(covered), 3)]
    dim_values = {dim: macro_dims.get(dim, sizes) for dim in dims}
    shape = list(reversed(covered)) or list(dims)
    launch_names = {b for b in block if b in gene_names}
    launch_names |= {g.name for g in genes if g.work is not None}

    # args, in the kernel's order
    arg_lines: list[str] = []
    outputs: list[str] = []
    inputs: list[str] = []
    metrics: list[str] = []
    for param in kernel.params:
        dtype = _dtype(param, kernel, source_name, structs)
        if param.pointer:
            role = "input" if param.const_pointee else "inout"
            (inputs if role == "input" else outputs).append(param.name)
            note = "" if role == "input" else "  # check: output if the kernel only writes it"
            arg_lines.append(
                f"  - {{name: {param.name}, role: {role}, dtype: {yaml_dtype(dtype)}, "
                f"shape: [{', '.join(shape)}]}}{note}"
            )
            metrics.append(f"{element(dtype).itemsize} * {' * '.join(shape)}")
        elif dtype in INTEGER_DTYPES and param.name in dims.values():
            dim = next(d for d, p in dims.items() if p == param.name)
            arg_lines.append(
                f"  - {{name: {param.name}, role: scalar, dtype: {dtype}, value: {dim}}}"
            )
        else:
            value = "1.0" if dtype.startswith(("float", "bfloat")) else "1"
            arg_lines.append(
                f"  - {{name: {param.name}, role: scalar, dtype: {dtype}, value: {value}}}"
                "  # check: the value"
            )
    if not outputs:
        raise UserError(
            f"{source_name}: {kernel.name} has no pointer parameter that is not const: "
            "nothing to check against a reference"
        )

    # the entry: a template's value parameters are its genes, its types float; an
    # overload's parameter list picks it (with the template's types filled in)
    targs = parse_entry(entry).template_args if entry else None
    entry_text = kernel.name
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

    name = stem.lower() if NAME_RE.match(stem.lower()) else "kernel"
    function = kernel.name if kernel.name.isidentifier() else "reference"
    reference_file = f"{stem}_ref.py"
    lines = [
        f"# ctune sidecar drafted by `ctune init {source_name}`: check each '# check:' line,",
        f"# write the reference in {reference_file}, then `ctune space {source_name}`.",
        f"name: {name}",
        f"entry: {json.dumps(entry_text) if not entry_text.isidentifier() else entry_text}",
    ]
    if source_name != f"{stem}.cu":  # a spec's source defaults to <stem>.cu (a .cuh, a .cu.h)
        lines.append(f"source: {json.dumps(source_name)}")
    if all_genes:
        lines.append("genes:")
        for g in all_genes:
            family = _family(g, runtime, launch_names)
            values = ", ".join(str(v) for v in g.values)
            ifdef = ", ifdef: true" if g.ifdef else ""
            lines.append(
                f"  {g.name}: {{values: [{values}], default: {g.default}, family: {family}"
                f"{ifdef}}}  # {g.why}"
            )
    if restrictions:
        lines.append(f"restrictions:  # __launch_bounds__({bound})")
        lines += [f'  - "{r}"' for r in restrictions]
    lines.append("launch:")
    lines.append(f"  grid: [{', '.join(_quote(g) for g in grid)}]")
    lines.append(f"  block: [{', '.join(block)}]")
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
    lines += constant_lines(source.text, checks)
    lines.append("reference:")
    lines.append(f"  python: {reference_file}:{function}")
    lines.append("metrics:")
    lines.append(f'  bytes: "{" + ".join(metrics)}"  # check: bytes moved per call')
    checks = [*checks, f"{reference_file}: write the reference of {kernel.name}"]
    return Draft(
        kernel=kernel,
        entry=entry_text,
        yaml="\n".join(lines) + "\n",
        reference=_reference_stub(kernel.name, function, inputs, outputs, list(dims)),
        reference_file=reference_file,
        genes=all_genes,
        checks=checks,
    )


def check_loads(draft: Draft, kernel: Path, nvcc_help: str | None = None) -> None:
    """Load the draft as ``ctune space`` would, from a scratch folder beside a copy of the
    kernel: a draft that does not load is refused in one line before any file is written
    (written, it would stand in the way of the next ``ctune init`` until ``--force``)."""
    with tempfile.TemporaryDirectory(prefix="ctune-init-") as scratch:
        folder = Path(scratch)
        shutil.copyfile(kernel, folder / kernel.name)
        (folder / kernel.with_suffix(".yaml").name).write_text(draft.yaml)
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


def _dtype(param: Param, kernel: Kernel, where: str, structs: dict[str, str]) -> str:
    base = param.base
    if base in {p.name for p in kernel.template if p.kind == "type"}:
        return "float32"  # the template is instantiated with float (the entry says so)
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
