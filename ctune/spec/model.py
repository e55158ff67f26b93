"""KernelSpec: what a kernel's YAML sidecar says, as loaded (``ctune.spec.loader``).

The sidecar (``kernels/<name>.yaml`` next to ``kernels/<name>.cu``) says how to build,
launch, feed, check and tune the kernel; docs/spec-format.md is the reference. This module
is the model every layer reads: the spec, its problems, arguments, tolerances and launch
rule, and the vocabulary they are written in (dtypes, roles, entry kinds). The launch
rule's one evaluation (:func:`launch_geometry`) lives here too: the measurer launches with
it, an artifact records it and the device limits screen candidates with it. Pure: no GPU.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ctune import l2policy
from ctune.errors import SpecError, UserError
from ctune.expr import Expr, ExprError
from ctune.records import Candidate, GeneValue, canonical_json, sha256_hex
from ctune.spec.elements import SCALAR_BYTES
from ctune.spec.space.nvcc import ACF, ACF_GENES, acf_gene
from ctune.spec.space.params import Gene, Space

#: scalar dtypes: what a scalar argument may be, and a buffer's simplest element
DTYPES = tuple(SCALAR_BYTES)
#: bytes of one value: what a scalar argument occupies in the kernel's parameter list
DTYPE_BYTES = SCALAR_BYTES
#: ``constant`` is a ``__constant__`` symbol of the module, filled before the kernel runs
ROLES = ("input", "output", "inout", "scratch", "scalar", "constant")
ENTRY_KINDS = ("kernel", "launcher")
#: device gene kinds a spec (``device_genes``) or --device-genes may name -> the gene each adds
DEVICE_GENES = {"clocks": "sm_clock_mhz", "power_limit": "power_limit_w"}


@dataclass(frozen=True)
class Tolerance:
    rel_l2: float
    max_abs: float


@dataclass(frozen=True)
class Problem:
    name: str
    dims: dict[str, int]
    defines: dict[str, GeneValue] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    #: this problem's own tolerance, ahead of the spec's: an output's size grows with the
    #: problem (a long reduction's values reach where a 16-bit type's rounding step is larger)
    tolerance: dict[str, Tolerance] = field(default_factory=dict)

    def key(self) -> str:
        return self.name


@dataclass(frozen=True)
class GivenData:
    """An input's values as given: a ``.npy`` file, a member of a ``.npz`` file, or what
    ``function(dims, seed)`` of a Python file returns (``ctune.measure.given`` reads them)."""

    kind: str  # "npy", "npz" or "python"
    path: Path
    member: str = ""  # the .npz member or the Python function

    def describe(self) -> str:
        return f"{self.path.name}:{self.member}" if self.member else self.path.name


#: (dist, a, b): N(a, b) or U[a, b]; or the data given for it
Init = tuple[str, float, float] | GivenData


@dataclass(frozen=True)
class ArgSpec:
    name: str
    role: str
    dtype: str  # a scalar dtype, a vector type or a struct's text (ctune.spec.elements)
    shape: tuple[Expr, ...] = ()
    init: Init = ("normal", 0.0, 1.0)
    value: Expr | None = None  # scalars

    @property
    def is_parameter(self) -> bool:
        """Passed in the kernel's parameter list (a constant is a module symbol instead)."""
        return self.role != "constant"

    def dtype_for(self, problem: Problem) -> str:
        return problem.dtypes.get(self.name, self.dtype)


@dataclass(frozen=True)
class LaunchRule:
    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    dynamic_smem_bytes: Expr
    #: the kernel's static shared memory as its source declares it, over the compiled genes
    #: (``ctune.spec.loader.static_smem_estimate``); None when it declares none ctune reads
    static_smem_bytes: Expr | None = None


# --- an arg's shape and a scalar's value on one problem ----------------------------------

#: the values of each integer scalar dtype
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
#: the largest finite value of each float scalar dtype
FLOAT_MAX = {
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
    "float32": 3.4028234663852886e38,
    "float64": sys.float_info.max,
}


def whole_number(value: Any) -> int | None:
    """``value`` as an int where it is a whole number (``4`` or ``4.0``; not ``True``, text,
    ``4.5``, NaN or infinity), else None: a size, a count, a launch dimension."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


class ArgValueError(ValueError):
    """A buffer's shape or a scalar's value that no buffer or parameter can take."""


def arg_shape(arg: ArgSpec, dims: Mapping[str, Any]) -> tuple[int, ...]:
    """A buffer's shape on one problem: every entry a whole number >= 0. The one rule: the
    loader checks every problem with it, the worker makes buffers with it."""
    shape = []
    for expr in arg.shape:
        try:
            value = expr.evaluate(dims)
        except ExprError as exc:
            raise ArgValueError(f"shape entry '{expr.source}': {exc}") from None
        size = whole_number(value)
        if size is None or size < 0:
            raise ArgValueError(
                f"shape entry '{expr.source}' = {value!r} is not a size (a whole number >= 0)"
            )
        shape.append(size)
    return tuple(shape)


def scalar_number(dtype: str, value: Any) -> int | float:
    """A scalar argument's value as ``dtype`` holds it: a whole number within an integer
    dtype's range, a finite number within a float dtype's (true and false are 1 and 0).
    The one rule: the loader checks every problem with it, the worker passes what it gives."""
    number = int(value) if isinstance(value, bool) else value
    if dtype in INT_RANGES:
        whole = whole_number(number)
        if whole is None:
            raise ArgValueError(f"{value!r} is not an integer, as {dtype} needs")
        low, high = INT_RANGES[dtype]
        if not low <= whole <= high:
            raise ArgValueError(f"{whole} does not fit {dtype} ({low}..{high})")
        return whole
    if not isinstance(number, (int, float)):
        raise ArgValueError(f"{value!r} is not a number, as {dtype} needs")
    if not abs(number) <= FLOAT_MAX[dtype]:  # NaN compares False; an int compares exactly
        raise ArgValueError(f"{value!r} does not fit {dtype} (at most {FLOAT_MAX[dtype]:g})")
    return float(number)


def arg_scalar(arg: ArgSpec, dtype: str, env: Mapping[str, Any]) -> int | float:
    """A scalar argument's value on one problem (``env``: its dims and the runtime genes), by
    :func:`scalar_number`."""
    assert arg.value is not None
    try:
        value = arg.value.evaluate(env)
    except ExprError as exc:
        raise ArgValueError(str(exc)) from None
    return scalar_number(dtype, value)


# --- the launch rule evaluated -------------------------------------------------------


class LaunchConfigError(Exception):
    """The launch rule gives no valid launch for this candidate: a LAUNCH_ERROR, not a bug.

    ``key`` is the spec key at fault (``launch.grid[0]``) where one is, and ``detail`` the
    message without it: the loader names the key its own way when it checks the rule."""

    def __init__(self, detail: str, key: str = "") -> None:
        super().__init__(f"{key}: {detail}" if key else detail)
        self.key = key
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Geometry:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


INT_MAX = 2**31 - 1
GRID_YZ_MAX = 65535


def _dimension(
    label: str, expr: Expr, env: Mapping[str, Any], minimum: int, maximum: int = INT_MAX
) -> int:
    key = f"launch.{label}"
    try:
        value = expr.evaluate(env)
    except ExprError as exc:
        raise LaunchConfigError(str(exc), key) from None
    whole = whole_number(value)
    if whole is None:
        raise LaunchConfigError(f"'{expr.source}' = {value!r} is not an integer", key)
    if not minimum <= whole <= maximum:
        raise LaunchConfigError(f"'{expr.source}' = {whole} (allowed: {minimum}..{maximum})", key)
    return whole


def launch_geometry(
    spec: KernelSpec, genes: Mapping[str, GeneValue], dims: Mapping[str, int]
) -> Geometry:
    """Evaluate the spec's launch rule for one candidate and problem."""
    if spec.launch is None:
        raise LaunchConfigError(f"{spec.name}: a launcher entry has no launch rule")
    try:
        env = spec.space.environment(genes, dims)
    except ExprError as exc:
        raise LaunchConfigError(f"launch rule: {exc}") from None
    grid = tuple(
        _dimension(f"grid[{i}]", e, env, 1, INT_MAX if i == 0 else GRID_YZ_MAX)
        for i, e in enumerate(spec.launch.grid)
    )
    block = tuple(_dimension(f"block[{i}]", e, env, 1) for i, e in enumerate(spec.launch.block))
    smem = _dimension("dynamic_smem_bytes", spec.launch.dynamic_smem_bytes, env, 0)
    return Geometry((grid[0], grid[1], grid[2]), (block[0], block[1], block[2]), smem)


@dataclass(frozen=True)
class KernelSpec:
    name: str
    yaml_path: Path
    source_path: Path
    entry_symbol: str
    entry_kind: str
    arch: str
    std: str
    include_dirs: tuple[Path, ...]
    extra_flags: tuple[str, ...]
    flag_genes: tuple[Gene, ...]
    genes: tuple[Gene, ...]
    derived: tuple[tuple[str, Expr], ...]
    restrictions: tuple[Expr, ...]
    launch: LaunchRule | None
    problems: tuple[Problem, ...]
    problem_sets: dict[str, tuple[str, ...]]
    default_problem: str
    args: tuple[ArgSpec, ...]
    reference_path: Path
    reference_function: str
    tolerance: dict[str, Tolerance]
    metrics: dict[str, Expr]
    deterministic: bool
    l2_policy: str
    description: str
    raw: dict[str, Any] = field(repr=False, compare=False)
    timing: str = "auto"  # what a sample is: auto, events or graph (ctune.measure.plan)
    # device gene kinds a search of this kernel adds by default (--device-genes overrides;
    # their values come from the GPU at search time, ctune.measure.device_settings)
    device_genes: tuple[str, ...] = ()
    #: the compilers whose controls files the spec tunes (``acf: [ptxas]``): their ``acf``
    #: genes are among ``flag_genes`` until a search leaves out what its toolchain refuses
    acf: tuple[str, ...] = ()
    #: per compiler, the spec's own controls files (``acf_files``): (sha256, path) each
    acf_seeds: Mapping[str, tuple[tuple[str, Path], ...]] = field(default_factory=dict)
    #: the spec's ``verify: {python: FILE.py:FUNCTION}``: a function that decides whether
    #: the outputs are correct in place of the tolerance compare (None: the tolerance)
    verify_path: Path | None = None
    verify_function: str = ""
    #: the spec's ``vendor: {python: FILE.py:FUNCTION, name: TEXT}``: the library call the
    #: kernel would replace, timed beside a search's confirmation (None: no vendor call)
    vendor_path: Path | None = None
    vendor_function: str = ""
    vendor_name: str = ""
    #: the budget (as ``--budget``) of a search given neither ``--budget`` nor ``--time``
    #: (None: ctune's default); a kernel whose builds take a minute each says so here
    default_budget: int | None = None

    @cached_property
    def space(self) -> Space:
        return Space(self.flag_genes + self.genes, self.restrictions, self.derived)

    def with_genes(self, change: Callable[[Gene], Gene]) -> KernelSpec:
        """This spec with every gene (flag genes included) passed through ``change``: a
        space narrowed for a replay or a pinned subspace. The space is rebuilt from them."""
        return dataclasses.replace(
            self,
            flag_genes=tuple(change(g) for g in self.flag_genes),
            genes=tuple(change(g) for g in self.genes),
        )

    def with_acf(self, spaces: tuple[str, ...]) -> KernelSpec:
        """This spec with the ``acf`` genes of exactly ``spaces`` (``ptxas``, ``nvcc``), each
        seeded with the spec's own files for it: what a search offers (ctune.controls.offer)."""
        others = tuple(g for g in self.flag_genes if g.family != "acf")
        added = tuple(
            acf_gene(s, [d for d, _ in self.acf_seeds.get(s, ())]) for s in ACF if s in spaces
        )
        return dataclasses.replace(self, flag_genes=others + added, acf=spaces)

    def with_acf_of(self, values: Mapping[str, object]) -> KernelSpec:
        """This spec with the ``acf`` genes a recorded candidate names (an artifact searched
        with ``--acf`` while its spec names none): what rebuilding that candidate needs."""
        named = {ACF_GENES[n].space for n in values if n in ACF_GENES}
        if named <= set(self.acf):
            return self
        return self.with_acf(tuple(s for s in ACF if s in named or s in self.acf))

    @cached_property
    def runtime_names(self) -> frozenset[str]:
        """Genes of family runtime: never compiled in, so they never change a build."""
        return frozenset(g.name for g in self.genes if g.runtime)

    def runtime_values(self, candidate: Candidate) -> dict[str, GeneValue]:
        """The candidate's runtime genes: they reach the kernel at launch, never nvcc."""
        return {k: v for k, v in candidate.genes if k in self.runtime_names}

    @cached_property
    def spec_sha256(self) -> str:
        """Digest of the canonical spec content (not the YAML bytes or comments), taken on
        the L2 policy's old spelling so that either spelling digests the same."""
        return sha256_hex(canonical_json(l2policy.legacy_form(self.raw)))

    def problem(self, name: str | None = None) -> Problem:
        wanted = name or self.default_problem
        for problem in self.problems:
            if problem.name == wanted:
                return problem
        raise UserError(
            f"{self.yaml_path}: no problem '{wanted}' (known: {', '.join(self.problem_names())})"
        )

    def problem_names(self) -> list[str]:
        return [p.name for p in self.problems]

    def select_problems(self, name: str | None) -> list[Problem]:
        """A problem name or a problem-set name (default: the default problem)."""
        if name and name in self.problem_sets:
            return [self.problem(n) for n in self.problem_sets[name]]
        return [self.problem(name)]

    def default_candidate(self) -> Candidate:
        return Candidate.of(self.name, self.space.default_values())

    def candidate(self, values: Mapping[str, GeneValue]) -> Candidate:
        return Candidate.of(self.name, values)

    def in_space(self, recorded: Candidate) -> Candidate:
        """A recorded candidate (an artifact's member) in today's space: a gene added since it
        was recorded takes its default, which keeps the code it had (a rebuild's SASS digest
        against the recorded one checks that); a gene the space no longer has cannot be
        honoured, nor can a value the space does not have (a file is data: only the spec's
        own values are ever built)."""
        values = recorded.as_dict()
        gone = sorted(set(values) - set(self.space.names))
        if gone:
            raise UserError(
                f"{self.name}: recorded candidate {recorded.key()} sets {', '.join(gone)}, "
                f"which {self.yaml_path.name} no longer has; retune it (ctune registry retune)"
            )
        values = self.space.check_values(
            values, f"{self.name}: recorded candidate {recorded.key()}"
        )
        if len(values) == len(self.space.names):
            return recorded
        return self.candidate({**self.space.default_values(), **values})

    def launch_geometry(self, candidate: Candidate, problem: Problem) -> dict[str, Any]:
        """grid / block / dynamic shared memory of ``candidate`` on ``problem`` ({} for a
        launcher, which launches itself), as the artifact records it.

        The rule is evaluated by :func:`launch_geometry`, the one evaluation the measurer
        launches with; a rule that gives no valid launch is a UserError naming the spec,
        the candidate and the problem.
        """
        if self.launch is None:
            return {}
        try:
            g = launch_geometry(self, candidate.as_dict(), problem.dims)
        except LaunchConfigError as exc:
            raise UserError(
                f"{self.yaml_path}: launch rule for candidate {candidate.key()} on "
                f"{problem.name}: {exc}"
            ) from None
        return {"grid": g.grid, "block": g.block, "dynamic_smem_bytes": g.smem_bytes}

    def tolerance_for(self, output: str, problem: Problem | None = None) -> Tolerance:
        """The problem's own entry for this output or its default, else the spec's."""
        own = problem.tolerance if problem is not None else {}
        return (
            own.get(output)
            or own.get("default")
            or self.tolerance.get(output)
            or self.tolerance["default"]
        )

    def outputs(self) -> list[ArgSpec]:
        return [a for a in self.args if a.role in ("output", "inout")]

    def parameters(self) -> list[ArgSpec]:
        """The args the kernel's parameter list takes, in order (constants are symbols)."""
        return [a for a in self.args if a.is_parameter]

    def reference(self) -> Callable[..., dict[str, Any]]:
        """Import the reference function from its file (user code, like the kernel)."""
        return self.import_function("reference", self.reference_path, self.reference_function)

    def verify(self) -> Callable[..., Any] | None:
        """Import the verify function from its file, or None where the spec has none."""
        if self.verify_path is None:
            return None
        return self.import_function("verify", self.verify_path, self.verify_function)

    def vendor(self) -> Callable[..., Any] | None:
        """Import the vendor call's function from its file, or None where the spec has none."""
        if self.vendor_path is None:
            return None
        return self.import_function("vendor", self.vendor_path, self.vendor_function)

    def import_function(self, key: str, path: Path, function: str) -> Callable[..., Any]:
        """``function`` from the Python file ``path`` of spec key ``key`` (user code, like
        the kernel: the reference, a verify function, a given-data function)."""
        module_name = re.sub(r"\W", "_", f"ctune_{key}_{self.name}")
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise SpecError(f"{self.yaml_path}: {key}: cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise SpecError(
                f"{path}: importing the {key} failed: {type(exc).__name__}: {exc}"
            ) from None
        func = getattr(module, function, None)
        if not callable(func):
            raise SpecError(f"{self.yaml_path}: {key}: {path.name} has no function '{function}'")
        return func
