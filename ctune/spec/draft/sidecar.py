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
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ctune.arch import DEFAULT as DEFAULT_ARCH
from ctune.errors import UserError
from ctune.names import NAME_RE
from ctune.spec.declarations import (
    struct_dtypes,
)
from ctune.spec.draft.constants import constant_lines
from ctune.spec.draft.guess import (
    CTYPE_DTYPES,
    INTEGER_DTYPES,
    GeneGuess,
    default_for,
    gene,
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
)
from ctune.spec.draft.launch import (
    IDENT,
    block_why,
    blocks_gene,
    cap_block,
    guess_block,
    guess_grid,
    items_gene,
    launch_bound,
    shapes_read,
    square_tile,
    unused_axis,
)
from ctune.spec.draft.restrictions import (
    Rule,
    defaults_within,
    shared_restrictions,
    step_restrictions,
)
from ctune.spec.draft.source import Kernel, Param, Source, resolve_type
from ctune.spec.draft.undefined import Probe
from ctune.spec.elements import C_TYPES, element, yaml_dtype
from ctune.spec.entry import parse_entry, same_params
from ctune.spec.loader import load_spec

#: problem sizes by how many grid axes the data spans: about 16 MiB per float buffer
SIZES = {0: 1 << 22, 1: 1 << 22, 2: 2048, 3: 256}
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


def reference_name(stem: str) -> str:
    """The reference stub's file name beside the kernel ``<stem>.cu``."""
    return f"{stem}_ref.py"


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


def draft_sidecar(
    source: Source,
    *,
    stem: str,
    source_name: str,
    entry: str | None = None,
    probe: Probe | None = None,
    include_dirs: Sequence[str] = (),
    arch: str = DEFAULT_ARCH,
) -> Draft:
    """The YAML draft and the reference stub for one kernel of ``source`` (``include_dirs``:
    the folders the author gave for its includes, relative to the kernel's folder; ``arch``:
    the target it was drafted for, written where it is not a spec's default)."""
    kernel = pick_kernel(source, entry, source_name)
    genes = _genes(source, kernel, probe)
    bound = launch_bound(source, kernel)
    block, runtime, checks = guess_block(source, kernel, genes, bound)
    genes = [square_tile(unused_axis(source, g), block) for g in genes]
    restrictions: list[Rule] = []
    sized = [b for b in block if b in {g.name for g in genes + runtime}]
    if bound is not None and sized:
        capped, capping = cap_block(genes + runtime, sized, bound, checks)
        genes, runtime = capped[: len(genes)], capped[len(genes) :]
        restrictions += [(r, f"__launch_bounds__({bound})") for r in capping]
    body = kernel.body or source.text
    structs = struct_dtypes(source.text)  # a pointer to one of them is a struct buffer
    gene_names = {g.name for g in genes + runtime}
    dims, macro_dims = _dims(source, kernel, gene_names, source_name, structs, checks)
    reader = Reader(body, {param: dim for dim, param in dims.items()}, row_partner)
    block_loop = blocks_gene(gene_names) if block_stride(body) else None
    if block_loop is not None:
        runtime.append(block_loop)
    elif grid_stride(body):
        runtime.append(items_gene(gene_names))
    all_genes = genes + runtime
    gene_names = {g.name for g in all_genes}

    # the grid: one axis per blockIdx the kernel reads, stepped as its index arithmetic says
    grid, grid_why, covered, rows = guess_grid(source, reader, dims, block, genes, runtime, checks)
    if block_loop is not None:  # each block loops over the data: the grid is the gene
        grid, grid_why = [block_loop.name, *grid[1:]], block_loop.why
    for row in rows:  # one block per row: a dimension the signature does not name
        dims = {row: row, **dims}
    if macro_dims:  # a #define the grid and the buffers do not use is not a problem size
        used = {n for text in [*grid, *shapes_read(reader, kernel)] for n in IDENT.findall(text)}
        if used & set(macro_dims):
            dims = {d: p for d, p in dims.items() if d in used or d not in macro_dims}
            covered = [c for c in covered if c in dims]
    fallback = list(reversed(covered)) or list(dims)
    launch_names = {b for b in block if b in gene_names}
    launch_names |= {g.name for g in genes if g.work is not None}
    launch_names |= {n for expr in grid for n in IDENT.findall(expr) if n in gene_names}

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
    restrictions += step_restrictions(body, all_genes)
    restrictions += shared_restrictions(source, kernel, all_genes)
    all_genes = defaults_within(all_genes, [r for r, _ in restrictions], checks)

    entry_text = _entry_text(source, kernel, entry, checks)
    name = _spec_name(kernel, stem)
    function = kernel.name if kernel.name.isidentifier() else "reference"
    reference_file = reference_name(stem)
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
    if arch != DEFAULT_ARCH:  # what the draft was compiled for (sm_90a: its features)
        lines.append(f"arch: {arch}")
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
    lines.append(f"  block: [{', '.join(block)}]  # check: {block_why(block, gene_names)}")
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


_PLAIN_PATH = re.compile(r"[\w.][\w./+-]*")
_PLAIN_ENTRY = re.compile(r"^[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*$")


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
        params = [IDENT.sub(lambda m: types.get(m[0], m[0]), t) for t in kernel.types]
        entry_text += f"({', '.join(params)})"
    return entry_text


def _spec_name(kernel: Kernel, stem: str) -> str:
    """The kernel's name as a spec name (``matmul_tiled`` -> ``matmul-tiled``), else the
    file's stem's."""
    for candidate in (kernel.name.lower().replace("_", "-"), stem.lower()):
        if NAME_RE.match(candidate):
            return candidate
    return "kernel"


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
