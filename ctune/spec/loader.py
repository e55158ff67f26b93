"""Load a kernel's YAML sidecar into a KernelSpec, validated in one pass.

Loading reports the first problem as one line naming the file, the key and what is
allowed, so a typo never surfaces later as a strange compile or launch failure. The rules
the loader applies are the spec's own: the entry grammar (``ctune.spec.entry``), the fixed
flags a spec may add (``ctune.spec.flags``), the include_dirs tokens
(``ctune.spec.includes``), what may go on nvcc's command line (``ctune.quoting``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from pathlib import Path
from typing import Any

from ctune import l2policy
from ctune.arch import check as check_arch
from ctune.errors import SpecError, UserError
from ctune.expr import Expr
from ctune.files import (
    MAX_CONTROLS_BYTES,
    MAX_SOURCE_BYTES,
    InputFileError,
    file_kind,
    read_capped,
)
from ctune.names import NAME_RE
from ctune.quoting import value_refusal
from ctune.records import GeneValue, sha256_hex
from ctune.spec.elements import element
from ctune.spec.entry import parse_entry, undeclared_arguments
from ctune.spec.flags import check_flags
from ctune.spec.includes import INCLUDE_TOKENS, include_token_dir
from ctune.spec.load_args import (
    check_arg_values,
    check_constants,
    check_runtime_used,
    parse_args,
    read_through_derived,
    static_smem_estimate,
)
from ctune.spec.load_context import IDENT_RE, LoadContext
from ctune.spec.load_correctness import (
    parse_reference,
    parse_tolerance,
    parse_vendor,
    parse_verify,
)
from ctune.spec.model import (
    DEVICE_GENES,
    DTYPES,
    ENTRY_KINDS,
    KernelSpec,
    LaunchConfigError,
    LaunchRule,
    Problem,
    launch_geometry,
)
from ctune.spec.space.nvcc import ACF, ACF_GENES, CATALOGUE, acf_gene
from ctune.spec.space.params import SPEC_FAMILIES, Gene
from ctune.strict_yaml import StrictYamlError, load_file

#: values one gene may take (``values``, ``pow2`` or ``range``)
MAX_GENE_VALUES = 4096
LAUNCHER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,1023}$")
_TOP_KEYS = {
    "name",
    "description",
    "source",
    "entry",
    "arch",
    "std",
    "include_dirs",
    "extra_flags",
    "flags",
    "acf",
    "acf_files",
    "genes",
    "derived",
    "restrictions",
    "launch",
    "problems",
    "problem_sets",
    "default_problem",
    "args",
    "reference",
    "verify",  # a function that decides correctness in place of the tolerance
    "vendor",  # the library call the kernel is compared with (cuBLAS, SDPA)
    "tolerance",
    "metrics",
    "deterministic",
    "l2_policy",  # also read as "l2" (ctune.l2policy.migrate)
    "timing",
    "device_genes",  # clocks, power_limit: what `ctune search` tunes on the GPU itself
    "default_budget",  # the budget of a search given neither --budget nor --time
}
_REQUIRED = ("entry", "problems", "args", "reference")
#: the optional sections that are a mapping or a list, and the form each takes: the one
#: place their type is checked (left out or blank, a section is empty)
_SECTION_FORMS: dict[str, tuple[type, str]] = {
    "genes": (dict, "a mapping NAME: {values: [...], default: ...}"),
    "derived": (dict, "a mapping NAME: expression"),
    "restrictions": (list, "a list of expressions"),
    "problem_sets": (dict, "a mapping SET: [problem names]"),
    "metrics": (dict, "a mapping NAME: expression over the problem dims"),
}


def sidecar_for(path: Path) -> tuple[Path, Path | None]:
    """Given a .cu or .yaml path, return (yaml path, .cu path if given)."""
    if path.suffix in (".yaml", ".yml"):
        return path, None
    for suffix in (".yaml", ".yml"):
        candidate = path.with_suffix(suffix)
        if candidate.exists():  # a FIFO or a device is then refused by name, unread
            return candidate, path
    raise UserError(
        f"{path}: no spec sidecar {path.with_suffix('.yaml').name} next to it "
        "(see docs/spec-format.md)"
    )


def load_spec(path: str | Path, nvcc_help: str | None = None) -> KernelSpec:
    """Load and validate ``kernels/<name>.yaml`` (or the .cu next to it).

    ``nvcc_help`` is ``nvcc --help`` text; flag genes that need an option this
    nvcc lacks (``--apply-controls``) are dropped from the space. None keeps only
    flags that need no such option.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: a folder; name the kernel's .cu (its .yaml sits beside it)")
    if not path.exists():
        raise UserError(f"{path}: no such file")
    yaml_path, cu_path = sidecar_for(path)
    ctx = LoadContext(yaml_path)
    try:
        data = load_file(yaml_path, "spec")
    except StrictYamlError as exc:
        raise SpecError(f"{yaml_path}: {exc}") from None
    except InputFileError as exc:  # not a regular file, too large, not UTF-8
        raise SpecError(str(exc)) from None
    if not isinstance(data, dict):
        raise SpecError(f"{yaml_path}: expected a mapping at the top level")
    try:
        data = l2policy.migrate(data)
    except ValueError as exc:
        raise ctx.fail(l2policy.NAME, str(exc)) from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ctx.fail(unknown[0], f"unknown key (allowed: {', '.join(sorted(_TOP_KEYS))})")
    for key in _REQUIRED:
        if key not in data:
            raise ctx.fail(key, "missing (required)")
    return _build(ctx, data, yaml_path, cu_path, nvcc_help or "")


def _name(ctx: LoadContext, key: str, value: Any) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise ctx.fail(key, f"{value!r} must match {NAME_RE.pattern}")
    return value


def _section(ctx: LoadContext, data: dict[str, Any], key: str) -> Any:
    """Section ``key`` of ``_SECTION_FORMS``, empty where it is left out or blank; another
    type (``metrics: 5``, ``restrictions: "BLOCK > 0"``) is one line giving the form."""
    kind, form = _SECTION_FORMS[key]
    value = data.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ctx.fail(key, f"expected {form}, got {type(value).__name__} {value!r:.80}")
    return value


def _boolean(ctx: LoadContext, key: str, value: Any) -> bool:
    """A YAML boolean: ``"false"`` (text) or ``maybe`` is refused, where ``bool()`` would
    read either as true."""
    if not isinstance(value, bool):
        raise ctx.fail(key, f"expected true or false, got {value!r:.80}")
    return value


def _str_list(ctx: LoadContext, key: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ctx.fail(key, "expected a list of strings")
    return value


def _build(
    ctx: LoadContext, data: dict[str, Any], yaml_path: Path, cu_path: Path | None, nvcc_help: str
) -> KernelSpec:
    """One pass over the spec's sections in the order their errors are reported (a later
    section refers to names an earlier one defined); long because it is that list."""
    folder = yaml_path.parent
    name = _name(ctx, "name", data.get("name", yaml_path.stem))
    default_source = cu_path.name if cu_path is not None else f"{yaml_path.stem}.cu"
    source_path = _source(ctx, folder, data.get("source", default_source), cu_path)
    symbol, kind = _entry(ctx, data["entry"])
    try:
        arch = check_arch(str(data.get("arch", "sm_90")))
    except ValueError as exc:
        raise ctx.fail("arch", str(exc)) from None
    std = str(data.get("std", "c++17"))
    if std not in ("c++14", "c++17", "c++20"):
        raise ctx.fail("std", f"{std!r} (allowed: c++14, c++17, c++20)")
    include_dirs = tuple(
        _include_dir(ctx, folder, d)
        for d in _str_list(ctx, "include_dirs", data.get("include_dirs"))
    )
    extra_flags = tuple(_str_list(ctx, "extra_flags", data.get("extra_flags")))
    try:
        check_flags(extra_flags)
    except UserError as exc:
        raise ctx.fail("extra_flags", str(exc)) from None
    flag_genes = _flag_genes(ctx, data.get("flags"), nvcc_help)
    acf, acf_seeds = _acf(ctx, folder, data.get("acf"), data.get("acf_files"))
    flag_genes += tuple(acf_gene(s, [d for d, _ in acf_seeds.get(s, ())]) for s in acf)
    genes = _genes(ctx, _section(ctx, data, "genes"))
    gene_names = {g.name for g in genes}
    clash = gene_names & ({g.name for g in flag_genes} | set(ACF_GENES))
    if clash:
        raise ctx.fail(f"genes.{sorted(clash)[0]}", "clashes with a flag gene of the catalogue")
    problems = _problems(ctx, data["problems"])
    _check_problem_names(ctx, problems, gene_names | {g.name for g in flag_genes} | set(ACF_GENES))
    dim_names = set().union(*(p.dims for p in problems))
    _check_entry_args(ctx, symbol, kind, genes, problems, extra_flags, source_path)
    derived = _derived(ctx, _section(ctx, data, "derived"), gene_names | dim_names)
    known = gene_names | {g.name for g in flag_genes} | dim_names | {n for n, _ in derived}
    restrictions = tuple(
        ctx.expr_over(f"restrictions[{i}]", src, known)
        for i, src in enumerate(_section(ctx, data, "restrictions"))
    )
    launch = _launch(ctx, data.get("launch"), kind, known)
    if launch is not None:
        static = static_smem_estimate(source_path, symbol, genes)
        launch = dataclasses.replace(launch, static_smem_bytes=static)
    args = parse_args(ctx, folder, data["args"], dim_names, genes)
    check_runtime_used(ctx, genes, derived, launch, args)
    by_name = {a.name: a for a in args}
    for problem in problems:
        for arg_name in problem.dtypes:
            key = f"problems.{problem.name}.dtypes.{arg_name}"
            if arg_name not in by_name:
                raise ctx.fail(key, "no such arg")
            if element(by_name[arg_name].dtype).kind != "scalar":
                raise ctx.fail(
                    key,
                    f"{arg_name} is a {by_name[arg_name].dtype} buffer; only a "
                    "scalar dtype can be overridden",
                )
    check_arg_values(ctx, args, problems, genes)
    check_constants(ctx, kind, args, problems)
    problem_names = [p.name for p in problems]
    sets = _problem_sets(ctx, _section(ctx, data, "problem_sets"), problem_names)
    default_problem = data.get("default_problem", problem_names[0])
    if default_problem not in problem_names:
        raise ctx.fail("default_problem", f"{default_problem!r} is not a problem name")
    ref_path, ref_func = parse_reference(ctx, folder, data["reference"])
    verify_path, verify_func = parse_verify(ctx, folder, data.get("verify"))
    vendor_path, vendor_func, vendor_name = parse_vendor(ctx, folder, data.get("vendor"))
    outputs = [a.name for a in args if a.role in ("output", "inout")]
    if not outputs:
        raise ctx.fail("args", "no output arg (role: output or inout) to check")
    tolerance = parse_tolerance(ctx, data.get("tolerance"), outputs)
    for problem in problems:
        for name in set(problem.tolerance) - {"default", *outputs}:
            raise ctx.fail(
                f"problems.{problem.name}.tolerance.{name}",
                f"not an output (outputs: {', '.join(outputs)})",
            )
    metrics = _metrics(ctx, _section(ctx, data, "metrics"), dim_names)
    try:
        l2_policy = l2policy.check(data.get(l2policy.NAME, l2policy.DEFAULT))
    except ValueError as exc:
        raise ctx.fail(l2policy.NAME, str(exc)) from None
    timing = data.get("timing", "auto")
    if timing not in ("auto", "events", "graph"):
        raise ctx.fail("timing", f"{timing!r} (allowed: auto, events, graph)")
    device_genes = _device_genes(ctx, data.get("device_genes"))
    default_budget = data.get("default_budget")
    if default_budget is not None and (type(default_budget) is not int or default_budget < 1):
        raise ctx.fail("default_budget", f"{default_budget!r} is not a positive whole number")
    spec = KernelSpec(
        name=name,
        yaml_path=yaml_path.resolve(),
        source_path=source_path,
        entry_symbol=symbol,
        entry_kind=kind,
        arch=arch,
        std=std,
        include_dirs=include_dirs,
        extra_flags=extra_flags,
        flag_genes=flag_genes,
        genes=genes,
        derived=derived,
        restrictions=restrictions,
        launch=launch,
        problems=problems,
        problem_sets=sets,
        default_problem=default_problem,
        default_budget=default_budget,
        args=args,
        reference_path=ref_path,
        reference_function=ref_func,
        tolerance=tolerance,
        metrics=metrics,
        deterministic=_boolean(ctx, "deterministic", data.get("deterministic", True)),
        l2_policy=l2_policy,
        description=str(data.get("description", "")),
        raw=data,
        timing=timing,
        device_genes=device_genes,
        acf=acf,
        acf_seeds=acf_seeds,
        verify_path=verify_path,
        verify_function=verify_func,
        vendor_path=vendor_path,
        vendor_function=vendor_func,
        vendor_name=vendor_name,
    )
    _check_default(ctx, spec)
    return spec


def _metrics(ctx: LoadContext, data: dict[Any, Any], dims: set[str]) -> dict[str, Expr]:
    """``metrics: {flops: "2 * N"}``: work per run over the problem dims, by the name an
    objective gives it (``throughput:flops``)."""
    for name in data:
        if not isinstance(name, str) or not IDENT_RE.match(name):
            raise ctx.fail(f"metrics.{name}", "a metric's name is an identifier (flops, bytes)")
    return {k: ctx.expr_over(f"metrics.{k}", v, dims) for k, v in data.items()}


def _device_genes(ctx: LoadContext, value: Any) -> tuple[str, ...]:
    """``device_genes: [clocks, power_limit]``: the kinds, checked like --device-genes."""
    if value is None:
        return ()
    items = _str_list(ctx, "device_genes", value)
    unknown = [k for k in items if k not in DEVICE_GENES]
    if unknown or not items:
        raise ctx.fail(
            "device_genes",
            f"unknown {', '.join(unknown) or 'empty list'} (allowed: {', '.join(DEVICE_GENES)})",
        )
    return tuple(dict.fromkeys(items))


def _source(ctx: LoadContext, folder: Path, value: Any, cu_path: Path | None) -> Path:
    if not isinstance(value, str):
        raise ctx.fail("source", "expected a file name")
    path = (folder / value).resolve()
    if cu_path is not None and cu_path.resolve() != path:
        raise ctx.fail("source", f"names {value}, but {cu_path} was given")
    if path.exists() and not path.is_file():
        raise ctx.fail("source", f"{path} is {file_kind(path.stat().st_mode)}, not a file")
    if not path.is_file():
        raise ctx.fail("source", f"{path} does not exist")
    if not path.is_relative_to(folder.resolve()):
        raise ctx.fail("source", f"{value} resolves outside the spec's folder")
    if path.stat().st_size > MAX_SOURCE_BYTES:
        raise ctx.fail("source", f"{value} is larger than {MAX_SOURCE_BYTES} bytes")
    return path


def _entry(ctx: LoadContext, value: Any) -> tuple[str, str]:
    if isinstance(value, str):
        value = {"symbol": value}
    if not isinstance(value, dict) or set(value) - {"symbol", "kind"} or "symbol" not in value:
        raise ctx.fail("entry", "expected a symbol name or {symbol: NAME, kind: kernel|launcher}")
    symbol, kind = value["symbol"], value.get("kind", "kernel")
    if kind not in ENTRY_KINDS:
        raise ctx.fail("entry.kind", f"{kind!r} (allowed: {', '.join(ENTRY_KINDS)})")
    if kind == "launcher":
        if not isinstance(symbol, str) or not LAUNCHER_RE.match(symbol):
            raise ctx.fail(
                "entry.symbol", f'{symbol!r} is not a C identifier (a launcher is extern "C")'
            )
        return symbol, kind
    try:
        parse_entry(symbol)
    except ValueError as exc:
        raise ctx.fail("entry", str(exc)) from None
    return symbol, kind


def _check_entry_args(
    ctx: LoadContext,
    symbol: str,
    kind: str,
    genes: tuple[Gene, ...],
    problems: tuple[Problem, ...],
    extra_flags: tuple[str, ...],
    source: Path,
) -> None:
    """A template entry's bare arguments must reach nvcc: a compiled gene or problem
    define (both -D), a literal or type, or a name the kernel's file declares. A typo
    (``UNROLLK`` for the gene ``UNROLL_K``) is refused here, in the spec's words, not
    left for nvcc to report in the file's template header."""
    if kind != "kernel":
        return
    entry = parse_entry(symbol)
    runtime = {g.name for g in genes if not g.compiled}
    for name in sorted(entry.genes_used() & runtime):
        raise ctx.fail(
            "entry",
            f"'{name}' is a runtime gene: it never reaches nvcc, so it cannot be a template "
            "argument (make it family: template)",
        )
    for name in sorted(entry.genes_used() & {g.name for g in genes if g.ifdef}):
        raise ctx.fail(
            "entry",
            f"'{name}' is an #ifdef switch: off, it is not defined, so it cannot be a "
            "template argument (drop ifdef: true and test its value with #if)",
        )
    defines = set().union(*(p.defines for p in problems))
    flags = {f[2:].split("=", 1)[0] for f in extra_flags if f.startswith("-D")}
    compiled = sorted(g.name for g in genes if g.compiled)
    for name in undeclared_arguments(entry, {*compiled, *defines, *flags}, source):
        dims = set().union(*(p.dims for p in problems))
        fix = (
            "problem dims are not -D: add it to the problems' defines"
            if name in dims
            else f"fix the name, or qualify a type another folder declares (::{name})"
        )
        raise ctx.fail(
            "entry",
            f"'{name}' in {entry.display()} is neither a gene ({', '.join(compiled) or 'none'}), "
            f"a problem define nor a literal, and {source.name} does not declare it; {fix}",
        )


def _include_dir(ctx: LoadContext, folder: Path, value: str) -> Path:
    if value in INCLUDE_TOKENS:
        found = include_token_dir(value)
        if found is None:
            raise ctx.fail(
                "include_dirs",
                f"{value}: the nvidia-cutlass package is not installed or lacks that folder "
                "(pip install nvidia-cutlass)",
            )
        return found
    path = (folder / value).resolve()
    if not path.is_dir():
        raise ctx.fail("include_dirs", f"{value} is not a directory")
    return path


def _flag_genes(ctx: LoadContext, value: Any, nvcc_help: str) -> tuple[Gene, ...]:
    if value is None:
        return ()
    if value == "all":
        names = list(CATALOGUE)
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = value
    else:
        raise ctx.fail("flags", "expected 'all' or a list of catalogue flag names")
    genes, seen = [], set()
    for name in names:
        if name in seen:
            raise ctx.fail(f"flags.{name}", "named twice; name each flag gene once")
        seen.add(name)
        if name == "apply_controls":
            raise ctx.fail(
                "flags.apply_controls",
                "controls files are the acf genes now: write acf: [ptxas] (or [nvcc]) and "
                "name your files under acf_files (docs/spec-format.md)",
            )
        if name not in CATALOGUE:
            raise ctx.fail(f"flags.{name}", f"unknown flag gene (allowed: {', '.join(CATALOGUE)})")
        flag = CATALOGUE[name]
        if flag.requires_option and flag.requires_option not in nvcc_help:
            continue  # this nvcc does not offer it
        genes.append(flag.gene)
    return tuple(genes)


def _acf(
    ctx: LoadContext, folder: Path, value: Any, files: Any
) -> tuple[tuple[str, ...], dict[str, tuple[tuple[str, Path], ...]]]:
    """``acf: [ptxas, nvcc]`` and ``acf_files: {ptxas: [FILE, ...]}``: the compilers whose
    controls files are tuned, and the spec's own files for each (read now: a file is named
    by its sha256, the gene's value)."""
    spaces = tuple(_str_list(ctx, "acf", value))
    allowed = ", ".join(ACF)
    for space in spaces:
        if space not in ACF:
            raise ctx.fail("acf", f"{space!r} is not a compiler with controls files ({allowed})")
    if len(set(spaces)) != len(spaces):
        raise ctx.fail("acf", "names a compiler twice")
    if files is None:
        return spaces, {}
    if not isinstance(files, dict):
        raise ctx.fail(
            "acf_files", "expected a mapping from a compiler in acf to its files: {ptxas: [a.acf]}"
        )
    seeds: dict[str, tuple[tuple[str, Path], ...]] = {}
    for space, names in files.items():
        key = f"acf_files.{space}"
        if space not in spaces:
            raise ctx.fail(key, f"{space!r} is not in acf ({', '.join(spaces) or 'empty'})")
        found = []
        for name in _str_list(ctx, key, names):
            path = (folder / name).resolve()
            if not path.is_file() or not path.is_relative_to(folder.resolve()):
                raise ctx.fail(key, f"{name} is not a file inside the spec's folder")
            try:
                data = read_capped(path, MAX_CONTROLS_BYTES, "controls file")
            except InputFileError as exc:
                raise ctx.fail(key, str(exc)) from None
            if not data:
                raise ctx.fail(key, f"{name} is empty, which is not a controls file")
            found.append((sha256_hex(data), path))
        seeds[space] = tuple(dict(found).items())  # one entry per distinct file
    return spaces, seeds


_GENE_KEYS = {"values", "pow2", "range", "default", "family", "suggest", "description", "ifdef"}


def _genes(ctx: LoadContext, data: dict[Any, Any]) -> tuple[Gene, ...]:
    genes = []
    for name, body in data.items():
        key = f"genes.{name}"
        if not isinstance(name, str) or not IDENT_RE.match(name):
            raise ctx.fail(key, "gene names must be C identifiers (they become -D macros)")
        if not isinstance(body, dict):
            raise ctx.fail(key, "expected {values: [...], default: ...}")
        extra = sorted(set(body) - _GENE_KEYS)
        if extra:
            raise ctx.fail(
                f"{key}.{extra[0]}", f"unknown key (allowed: {', '.join(sorted(_GENE_KEYS))})"
            )
        values = _gene_values(ctx, key, body)
        default = _listed(ctx, f"{key}.default", body.get("default", values[0]), values)
        family = body.get("family", "define")
        if family not in SPEC_FAMILIES:
            raise ctx.fail(f"{key}.family", f"{family!r} (allowed: {', '.join(SPEC_FAMILIES)})")
        raw_suggest = body.get("suggest") or []
        if not isinstance(raw_suggest, list):
            raise ctx.fail(f"{key}.suggest", "expected a list of values")
        suggest = tuple(_listed(ctx, f"{key}.suggest", s, values) for s in raw_suggest)
        ifdef = _ifdef(ctx, key, body.get("ifdef", False), values, family)
        description = str(body.get("description", ""))
        genes.append(Gene(name, values, default, family, False, suggest, description, ifdef))
    return tuple(genes)


def _listed(ctx: LoadContext, key: str, value: Any, values: tuple[GeneValue, ...]) -> GeneValue:
    """The gene's own value equal to ``value``: ``true`` or ``1.0`` written for the value 1
    is that 1. The values are what reaches ``-D``, so a default or a suggestion stored as
    written would give a result file ``true`` where the build had ``-DNAME=1``."""
    for own in values:
        if own == value:
            return own
    shown = ", ".join(repr(v) for v in values[:12]) + (", ..." if len(values) > 12 else "")
    raise ctx.fail(key, f"{value!r} is not among the values [{shown}]")


def _ifdef(
    ctx: LoadContext, key: str, value: Any, values: tuple[GeneValue, ...], family: str
) -> bool:
    """``ifdef: true``: the source tests the macro with ``#ifdef``/``#ifndef``/``defined()``,
    so 1 passes ``-DNAME=1`` and 0 passes nothing (``-DNAME=0`` would be defined, hence on)."""
    value = _boolean(ctx, f"{key}.ifdef", value)
    if value and set(values) != {0, 1}:
        raise ctx.fail(f"{key}.ifdef", "an #ifdef switch is off or on: give it values: [0, 1]")
    if value and family != "define":
        raise ctx.fail(
            f"{key}.ifdef",
            f"an #ifdef switch is family define (not {family}): off, its macro is not defined",
        )
    return value


def _gene_values(ctx: LoadContext, key: str, body: dict[str, Any]) -> tuple[GeneValue, ...]:
    forms = [k for k in ("values", "pow2", "range") if k in body]
    if len(forms) != 1:
        raise ctx.fail(
            key, "give exactly one of values: [...], pow2: [lo, hi], range: [a, b, step]"
        )
    form, raw = forms[0], body[forms[0]]
    if form == "values":
        if not isinstance(raw, list) or not raw:
            raise ctx.fail(f"{key}.values", "expected a non-empty list")
        if not all(isinstance(v, (int, str)) for v in raw):
            raise ctx.fail(f"{key}.values", "values must be integers or strings")
        if len(raw) > MAX_GENE_VALUES:
            raise ctx.fail(f"{key}.values", f"{len(raw)} values; at most {MAX_GENE_VALUES}")
        if len(set(raw)) != len(raw):
            raise ctx.fail(f"{key}.values", "a value is repeated")
        for value in raw:
            _check_define_value(ctx, f"{key}.values", value)
        return tuple(raw)
    if not isinstance(raw, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in raw
    ):
        raise ctx.fail(f"{key}.{form}", "expected a list of integers")
    if form == "pow2":
        if len(raw) != 2 or raw[0] <= 0 or raw[1] < raw[0]:
            raise ctx.fail(f"{key}.pow2", "expected [lo, hi] with 0 < lo <= hi")
        values, v = [], 1
        while v <= raw[1]:
            if v >= raw[0]:
                values.append(v)
            v *= 2
        if not values:
            raise ctx.fail(f"{key}.pow2", "no power of two in the range")
        if len(values) > MAX_GENE_VALUES:
            raise ctx.fail(f"{key}.pow2", f"{len(values)} values; at most {MAX_GENE_VALUES}")
        return tuple(values)
    if len(raw) not in (2, 3) or (len(raw) == 3 and raw[2] <= 0) or raw[1] < raw[0]:
        raise ctx.fail(f"{key}.range", "expected [start, stop] or [start, stop, step>0], inclusive")
    step = raw[2] if len(raw) == 3 else 1
    count = (raw[1] - raw[0]) // step + 1  # counted, not built: [1, 1000000000000] is a line
    if count > MAX_GENE_VALUES:
        raise ctx.fail(
            f"{key}.range", f"{count} values; at most {MAX_GENE_VALUES} (a larger step gives fewer)"
        )
    return tuple(range(raw[0], raw[1] + 1, step))


def _check_define_value(ctx: LoadContext, key: str, value: Any) -> None:
    """A string value becomes ``-DNAME=VALUE`` on nvcc's command line: one nvcc's sub-shell
    would act on is refused here, naming the key (``quoting.py`` has the rule)."""
    why = value_refusal(value) if isinstance(value, str) else None
    if why is not None:
        raise ctx.fail(key, f"{value[:80]!r} {why}; write the value without it")


def _problems(ctx: LoadContext, data: Any) -> tuple[Problem, ...]:
    if not isinstance(data, list) or not data:
        raise ctx.fail("problems", "expected a non-empty list of {name, dims}")
    problems, seen = [], set()
    for i, body in enumerate(data):
        key = f"problems[{i}]"
        if not isinstance(body, dict) or set(body) - {
            "name",
            "dims",
            "defines",
            "dtypes",
            "tolerance",
        }:
            raise ctx.fail(key, "expected {name, dims, defines?, dtypes?, tolerance?}")
        name = _name(ctx, f"{key}.name", body.get("name"))
        if name in seen:
            raise ctx.fail(f"{key}.name", f"{name!r} appears twice")
        seen.add(name)
        dims = body.get("dims") or {}
        if not isinstance(dims, dict) or not all(
            isinstance(k, str)
            and IDENT_RE.match(k)
            and isinstance(v, int)
            and not isinstance(v, bool)
            for k, v in dims.items()
        ):
            raise ctx.fail(f"problems.{name}.dims", "expected NAME: integer pairs")
        for dim, size in dims.items():
            if size < 0:
                raise ctx.fail(f"problems.{name}.dims.{dim}", f"{size} is negative; a size is >= 0")
        defines = body.get("defines") or {}
        if not isinstance(defines, dict) or not all(
            isinstance(k, str) and IDENT_RE.match(k) and isinstance(v, (int, str))
            for k, v in defines.items()
        ):
            raise ctx.fail(f"problems.{name}.defines", "expected MACRO: integer-or-string pairs")
        for macro, value in defines.items():
            _check_define_value(ctx, f"problems.{name}.defines.{macro}", value)
        dtypes = body.get("dtypes") or {}
        if not isinstance(dtypes, dict) or not all(v in DTYPES for v in dtypes.values()):
            raise ctx.fail(f"problems.{name}.dtypes", f"expected ARG: dtype ({', '.join(DTYPES)})")
        own = body.get("tolerance") or {}  # an empty one, like dtypes: {}, changes nothing
        tolerance = parse_tolerance(ctx, own, None, f"problems.{name}.tolerance") if own else {}
        problems.append(Problem(name, dict(dims), dict(defines), dict(dtypes), tolerance))
    return tuple(problems)


def _check_problem_names(
    ctx: LoadContext, problems: tuple[Problem, ...], gene_names: set[str]
) -> None:
    """A problem's define or dim may not have a gene's name: the gene would override it
    unseen, its ``-D`` after the define on nvcc's line (``-DBLOCK=64 -DBLOCK=256``), its
    value in place of the dim in every expression."""
    taken = gene_names | set(DEVICE_GENES.values())
    for problem in problems:
        for part, names in (("defines", problem.defines), ("dims", problem.dims)):
            for name in sorted(set(names) & taken):
                raise ctx.fail(
                    f"problems.{problem.name}.{part}.{name}",
                    f"'{name}' is a gene, whose value would replace this one in every build; "
                    "rename one of them",
                )


def _derived(
    ctx: LoadContext, data: dict[Any, Any], known: set[str]
) -> tuple[tuple[str, Expr], ...]:
    out: list[tuple[str, Expr]] = []
    names = set(known)
    for name, source in data.items():
        if not isinstance(name, str) or not IDENT_RE.match(name):
            raise ctx.fail(f"derived.{name}", "names must be identifiers")
        if name in known:
            raise ctx.fail(f"derived.{name}", "clashes with a gene or problem dimension")
        out.append((name, ctx.expr_over(f"derived.{name}", source, names)))
        names.add(name)
    return tuple(out)


def _launch(ctx: LoadContext, data: Any, kind: str, known: set[str]) -> LaunchRule | None:
    if kind == "launcher":
        if data is not None:
            raise ctx.fail("launch", "a launcher entry chooses its own grid; remove 'launch'")
        return None
    if not isinstance(data, dict) or set(data) - {"grid", "block", "dynamic_smem_bytes"}:
        raise ctx.fail("launch", "expected {grid: [x, y, z], block: [x, y, z], dynamic_smem_bytes}")

    def triple(key: str) -> tuple[Expr, Expr, Expr]:
        raw = data.get(key)
        if not isinstance(raw, list) or not 1 <= len(raw) <= 3:
            raise ctx.fail(f"launch.{key}", "expected a list of 1 to 3 expressions")
        raw = [*raw, 1, 1][:3]
        a, b, c = (ctx.expr_over(f"launch.{key}[{i}]", s, known) for i, s in enumerate(raw))
        return a, b, c

    smem = ctx.expr_over("launch.dynamic_smem_bytes", data.get("dynamic_smem_bytes", 0), known)
    return LaunchRule(triple("grid"), triple("block"), smem)


def _problem_sets(
    ctx: LoadContext, data: dict[Any, Any], names: list[str]
) -> dict[str, tuple[str, ...]]:
    sets = {}
    for set_name, members in data.items():
        _name(ctx, f"problem_sets.{set_name}", set_name)
        if set_name in names:
            raise ctx.fail(f"problem_sets.{set_name}", "has the name of a problem")
        if not isinstance(members, list) or not members:
            raise ctx.fail(f"problem_sets.{set_name}", "expected a non-empty list of problem names")
        for i, member in enumerate(members):
            if member not in names:
                raise ctx.fail(f"problem_sets.{set_name}", f"{member!r} is not a problem name")
            if member in members[:i]:  # a shape searched twice: its two cells never agree
                raise ctx.fail(f"problem_sets.{set_name}", f"{member!r} is named twice")
        sets[set_name] = tuple(members)
    return sets


def _check_default(ctx: LoadContext, spec: KernelSpec) -> None:
    """The default build must be valid for every problem: it is the baseline."""
    space = spec.space
    defaults = space.default_values()
    for problem in spec.problems:
        for breach in space.breaches(defaults, problem.dims):
            if breach.error:  # it cannot be evaluated: name it and the error, not the genes
                key = (
                    f"derived.{breach.derived}"
                    if breach.derived
                    else f"restrictions[{breach.index}]"
                )
                raise ctx.fail(
                    key,
                    f"'{breach.source}' cannot be evaluated with the default genes for problem "
                    f"{problem.name}: {breach.error}",
                )
            raise ctx.fail(
                "genes",
                f"the default values break restriction '{breach.source}' for problem "
                f"{problem.name}",
            )
        _check_launch(ctx, spec, problem)


#: combinations of the genes the launch rule reads that are checked per problem at load
MAX_LAUNCH_CHECKS = 256


def _check_launch(ctx: LoadContext, spec: KernelSpec, problem: Problem) -> None:
    """The launch rule gives a launch (``launch_geometry``: every grid and block dimension
    at least 1, shared memory at least 0) on ``problem`` for the default build, and, where
    the genes it reads span at most ``MAX_LAUNCH_CHECKS`` combinations, for each of them
    that is valid with the other genes at their defaults: a rule that gives a block of 0
    or a grid of -1 is one line here, not a launch error on the GPU."""
    if spec.launch is None:
        return
    space, defaults = spec.space, spec.space.default_values()
    launch = spec.launch
    exprs = (*launch.grid, *launch.block, launch.dynamic_smem_bytes)
    read = read_through_derived(set().union(*(e.names for e in exprs)), spec.derived)
    genes = [space.gene(n) for n in space.names if n in read]
    combos: list[tuple[GeneValue, ...]] = [tuple(g.default for g in genes)]
    if math.prod(len(g.values) for g in genes) <= MAX_LAUNCH_CHECKS:
        combos += itertools.product(*(g.values for g in genes))
    for combo in combos:
        changed = {g.name: v for g, v in zip(genes, combo, strict=True) if v != g.default}
        values = {**defaults, **changed}
        if changed and not space.is_valid(values, problem.dims):
            continue
        try:
            launch_geometry(spec, values, problem.dims)
        except LaunchConfigError as exc:
            at = ", ".join(f"{k}={v}" for k, v in changed.items())
            where = (
                f"at {at}, a valid candidate (fix the rule, or add a restriction)"
                if changed
                else "with the default genes"
            )
            raise ctx.fail(
                exc.key or "launch", f"{exc.detail} for problem {problem.name} {where}"
            ) from None
