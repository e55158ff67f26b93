"""The spec's ``args``: roles, element types (scalars, vectors, structs), shapes, how inputs
are filled (random, or data given in a file), constant memory and its limit, and the
scalar values and runtime genes a launch reads (docs/spec-format.md)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ctune.expr import Expr, ExprError, parse
from ctune.files import MAX_SOURCE_BYTES, InputFileError, read_text_capped
from ctune.spec.declarations import c_extent_expression, int_defines, static_shared
from ctune.spec.elements import ElementError, allowed_text, element, struct_element
from ctune.spec.entry import parse_entry
from ctune.spec.load_context import IDENT_RE, LoadContext
from ctune.spec.model import (
    DTYPES,
    ROLES,
    ArgSpec,
    ArgValueError,
    GivenData,
    Init,
    LaunchRule,
    Problem,
    arg_scalar,
    arg_shape,
)
from ctune.spec.space.params import Gene


def parse_args(
    ctx: LoadContext, folder: Path, data: Any, dims: set[str], genes: tuple[Gene, ...]
) -> tuple[ArgSpec, ...]:
    if not isinstance(data, list) or not data:
        raise ctx.fail("args", "expected a non-empty list")
    args, seen = [], set()
    for i, body in enumerate(data):
        key = f"args[{i}]"
        allowed = {"name", "role", "dtype", "shape", "init", "value"}
        if not isinstance(body, dict) or set(body) - allowed:
            raise ctx.fail(key, f"expected a mapping with keys from {', '.join(sorted(allowed))}")
        name = body.get("name")
        if not isinstance(name, str) or not IDENT_RE.match(name) or name in seen:
            raise ctx.fail(f"{key}.name", f"{name!r} must be a unique identifier")
        seen.add(name)
        key = f"args.{name}"
        role = body.get("role")
        if role not in ROLES:
            raise ctx.fail(f"{key}.role", f"{role!r} (allowed: {', '.join(ROLES)})")
        if role == "scalar":
            dtype = body.get("dtype")
            if dtype not in DTYPES:
                raise ctx.fail(
                    f"{key}.dtype",
                    f"{dtype!r} (a scalar is one of {', '.join(DTYPES)}; vectors and structs "
                    "are for buffers)",
                )
            if "value" not in body:
                raise ctx.fail(f"{key}.value", "a scalar needs a value expression")
            value = scalar_value(ctx, f"{key}.value", body["value"], dims, genes)
            args.append(ArgSpec(name, role, dtype, value=value))
            continue
        dtype = buffer_dtype(ctx, f"{key}.dtype", body.get("dtype"))
        shape = body.get("shape")
        if not isinstance(shape, list) or not shape:
            raise ctx.fail(f"{key}.shape", "expected a list of dimension expressions")
        exprs = tuple(ctx.expr_over(f"{key}.shape[{j}]", s, dims) for j, s in enumerate(shape))
        init = parse_init(ctx, folder, f"{key}.init", body.get("init"))
        if isinstance(init, GivenData) and role not in ("input", "inout", "constant"):
            raise ctx.fail(
                f"{key}.init",
                f"a {role} buffer is not read by the kernel; "
                "given data is for roles input, inout and constant",
            )
        args.append(ArgSpec(name, role, dtype, exprs, init))
    return tuple(args)


def buffer_dtype(ctx: LoadContext, key: str, value: Any) -> str:
    """A buffer's element type: a scalar dtype, a vector type (``float2``) or
    ``{struct: [[x, float32], [y, float32]]}``, carried as its text (ctune.spec.elements)."""
    try:
        if isinstance(value, dict):
            fields = value.get("struct")
            if (
                set(value) != {"struct"}
                or not isinstance(fields, list)
                or not all(
                    isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f)
                    for f in fields
                )
            ):
                raise ElementError("expected {struct: [[FIELD, DTYPE], ...]}")
            return struct_element([(f[0], f[1]) for f in fields]).dtype
        if isinstance(value, str) and not value.startswith("struct"):
            return element(value).dtype
    except ElementError as exc:
        raise ctx.fail(key, str(exc)) from None
    raise ctx.fail(key, f"{value!r} (allowed: {allowed_text()})")


#: bytes of constant memory a module may hold (every __constant__ symbol together)
CONSTANT_BYTES = 64 * 1024


def check_constants(
    ctx: LoadContext, kind: str, args: tuple[ArgSpec, ...], problems: tuple[Problem, ...]
) -> None:
    """Constants are module symbols ctune fills: a launcher fills its own, and together they
    must fit the 64 KiB of constant memory on every problem."""
    constants = [a for a in args if a.role == "constant"]
    if not constants:
        return
    if kind == "launcher":
        raise ctx.fail(
            f"args.{constants[0].name}.role",
            "constant is for entry kind kernel (a launcher library fills its own "
            "__constant__ memory)",
        )
    for problem in problems:
        total, sizes = 0, []
        for arg in constants:
            nbytes = math.prod(buffer_shape(ctx, arg, problem)) * element(arg.dtype).itemsize
            total += nbytes
            sizes.append(f"{arg.name} {nbytes} B")
        if total > CONSTANT_BYTES:
            raise ctx.fail(
                f"args.{constants[0].name}" if len(constants) == 1 else "args",
                f"constant memory holds {CONSTANT_BYTES} B, but problem {problem.name} needs "
                f"{total} B ({', '.join(sizes)}); make it an input buffer (role: input)",
            )


def check_arg_values(
    ctx: LoadContext,
    args: tuple[ArgSpec, ...],
    problems: tuple[Problem, ...],
    genes: tuple[Gene, ...],
) -> None:
    """Every buffer's shape and every scalar's value on every problem, the runtime genes at
    their defaults, by the rules the worker makes its buffers with (``ctune.spec.model``): a
    division by zero, a negative size or an int8 of 1000 is one line when the spec loads,
    not a failure on the GPU."""
    runtime = {g.name: g.default for g in genes if not g.compiled}
    for problem in problems:
        for arg in args:
            if arg.value is None:
                buffer_shape(ctx, arg, problem)
                continue
            try:
                arg_scalar(arg, arg.dtype_for(problem), {**problem.dims, **runtime})
            except ArgValueError as exc:
                at = ", runtime genes at their defaults" if arg.value.names & set(runtime) else ""
                raise ctx.fail(
                    f"args.{arg.name}.value", f"{exc} (problem {problem.name}{at})"
                ) from None


def buffer_shape(ctx: LoadContext, arg: ArgSpec, problem: Problem) -> tuple[int, ...]:
    """``arg``'s shape on ``problem``, or one line naming the arg, the entry and the problem."""
    try:
        return arg_shape(arg, problem.dims)
    except ArgValueError as exc:
        raise ctx.fail(f"args.{arg.name}.shape", f"{exc} (problem {problem.name})") from None


def static_smem_estimate(source: Path, symbol: str, genes: tuple[Gene, ...]) -> Expr | None:
    """The entry kernel's static shared memory as an expression over its integer compiled genes,
    from the ``__shared__`` arrays its body declares (``ctune.spec.declarations``); None
    when none can be read. Arrays whose type or extents it cannot read are left out."""
    try:
        text = read_text_capped(source, MAX_SOURCE_BYTES, "kernel source")
    except InputFileError:
        return None
    compiled = {g.name for g in genes if g.compiled}
    numbers = {g.name for g in genes if g.compiled and all(type(v) is int for v in g.values)}
    defines = {k: v for k, v in int_defines(text).items() if k not in compiled}
    terms = []
    for decl in static_shared(text, parse_entry(symbol).name.rsplit("::", 1)[-1]):
        extents = [c_extent_expression(e, defines) for e in decl.extents]
        if decl.element_bytes is None or None in extents:
            continue
        term = " * ".join([str(decl.element_bytes), *(f"({e})" for e in extents)])
        try:
            expr = parse(term)
        except ExprError:
            continue
        if expr.names <= numbers:
            terms.append(term)
    if not terms:
        return None
    return parse(" + ".join(terms))


def scalar_value(
    ctx: LoadContext, key: str, source: Any, dims: set[str], genes: tuple[Gene, ...]
) -> Expr:
    """A scalar's value: an expression over the problem's dims and the runtime genes.

    Runtime genes may be passed as scalar arguments (a split count, a raster order): they
    change what runs without a rebuild. A compiled gene may not: it is fixed when the
    binary is built, and the kernel reads its macro.
    """
    expr = ctx.expr(key, source)
    by_name = {g.name: g for g in genes}
    for name in sorted(expr.names):
        gene = by_name.get(name)
        if gene is not None and gene.compiled:
            raise ctx.fail(
                key,
                f"'{name}' cannot be a scalar's value (it is a {gene.family} gene, compiled "
                f"in: read the {name} macro in the kernel, or make it family runtime)",
            )
    runtime = {g.name for g in genes if not g.compiled}
    return ctx.expr_over(key, source, dims | runtime)


def check_runtime_used(
    ctx: LoadContext,
    genes: tuple[Gene, ...],
    derived: tuple[tuple[str, Expr], ...],
    launch: LaunchRule | None,
    args: tuple[ArgSpec, ...],
) -> None:
    """A runtime gene reaches the kernel only through the launch rule or a scalar argument.

    One that neither names (directly or through a derived value) could never change
    what runs, so searching over it would only measure noise.
    """
    used: set[str] = set()
    if launch is not None:
        for expr in (*launch.grid, *launch.block, launch.dynamic_smem_bytes):
            used |= expr.names
    for arg in args:
        if arg.value is not None:
            used |= arg.value.names
    used = read_through_derived(used, derived)
    for gene in genes:
        if not gene.compiled and gene.name not in used:
            raise ctx.fail(
                f"genes.{gene.name}",
                "a runtime gene must be named by the launch rule (grid, block, "
                "dynamic_smem_bytes) or a scalar argument's value; this one is not, so it "
                "could never change anything",
            )


def read_through_derived(names: set[str], derived: tuple[tuple[str, Expr], ...]) -> set[str]:
    """``names`` and every name the derived values among them read, directly or through
    other derived values: what an expression over ``names`` depends on."""
    used = set(names)
    for name, expr in reversed(derived):  # a derived value may use earlier ones only
        if name in used:
            used |= expr.names
    return used


#: ``init`` keys that name data given in a file, and the suffix each file must have
_GIVEN = {"npy": ".npy", "npz": ".npz", "python": ".py"}


def parse_init(ctx: LoadContext, folder: Path, key: str, value: Any) -> Init:
    if value is None or value == "normal":
        return ("normal", 0.0, 1.0)
    if value == "uniform":
        return ("uniform", -1.0, 1.0)
    if isinstance(value, dict) and len(value) == 1:
        ((dist, params),) = value.items()
        if dist in _GIVEN:
            return given_data(ctx, folder, f"{key}.{dist}", dist, params)
        if dist in ("normal", "uniform") and isinstance(params, list) and len(params) == 2:
            try:
                a, b = (float(p) for p in params)
            except (TypeError, ValueError):
                raise ctx.fail(key, f"{dist}: {params} must be two numbers") from None
            if not (math.isfinite(a) and math.isfinite(b)):  # NaN passes lo < hi: it is never less
                raise ctx.fail(key, f"{dist}: {params} must be finite numbers")
            if dist == "normal" and (b < 0 or a == b == 0):
                raise ctx.fail(key, "normal: [mean, std] needs std >= 0 and not all zeros")
            if dist == "uniform" and a >= b:
                raise ctx.fail(key, "uniform: [lo, hi] needs lo < hi (inputs are never constant)")
            return (dist, a, b)
    raise ctx.fail(
        key,
        "expected normal, uniform, {normal: [mean, std]}, {uniform: [lo, hi]}, {npy: FILE.npy}, "
        "{npz: FILE.npz:MEMBER} or {python: FILE.py:FUNCTION}",
    )


def given_data(ctx: LoadContext, folder: Path, key: str, kind: str, value: Any) -> GivenData:
    """``{npy: a.npy}``, ``{npz: a.npz:MEMBER}`` or ``{python: gen.py:FUNCTION}``: a file
    inside the spec's folder (read when the buffers are made, ``ctune.measure.given``)."""
    suffix = _GIVEN[kind]
    form = {"npy": "FILE.npy", "npz": "FILE.npz:MEMBER", "python": "FILE.py:FUNCTION"}[kind]
    if not isinstance(value, str):
        raise ctx.fail(key, f"expected {form}")
    file_part, _, member = value.partition(":") if kind != "npy" else (value, "", "")
    if not file_part.endswith(suffix) or (kind != "npy" and not IDENT_RE.match(member)):
        raise ctx.fail(key, f"{value!r} is not {form}")
    path = (folder / file_part).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise ctx.fail(key, f"{file_part} resolves outside the spec's folder")
    if not path.is_file():
        raise ctx.fail(key, f"{file_part} is not a file in the spec's folder")
    return GivenData(kind, path, member)


__all__ = [
    "CONSTANT_BYTES",
    "buffer_dtype",
    "buffer_shape",
    "check_arg_values",
    "check_constants",
    "check_runtime_used",
    "given_data",
    "parse_args",
    "parse_init",
    "read_through_derived",
    "scalar_value",
    "static_smem_estimate",
]
