"""Kernel buffers from a spec: seeded random inputs (never zeros), poisoned outputs.

Every function takes ``xp`` (numpy or cupy) so the same code runs in CPU
tests and in the worker. bfloat16 buffers are raw 16-bit words (uint16) on the
device: fp32 -> bf16 is round-to-nearest-even on the bit pattern, bf16 -> fp32
is a 16-bit left shift. The same seed gives the same inputs on the same
backend; numpy and cupy draw different (but each deterministic) streams.

A vector element (``float2``) is stored as its components on a last axis (float32
``(*shape, 2)``); a struct element as its bytes (uint8 ``(*shape, itemsize)``), each field
at its C offset (``ctune.spec.elements``): CuPy has no structured arrays. Given data
(``init: {npy: ...}``) comes from ``ctune.measure.given``; constants are kept apart from the
parameter list, for the launch to copy into their module symbols.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from ctune.errors import SpecError
from ctune.measure.bf16 import bf16_bits_to_float32, float32_to_bf16_bits
from ctune.measure.given import given_storage
from ctune.spec.elements import element
from ctune.spec.model import ArgValueError, GivenData, scalar_number
from ctune.spec.model import arg_shape as spec_arg_shape

if TYPE_CHECKING:
    from ctune.records import GeneValue
    from ctune.spec import ArgSpec, KernelSpec, Problem

#: spec dtype -> storage dtype on the device (bfloat16 travels as raw bits)
STORAGE_DTYPES: dict[str, str] = {
    "float16": "float16",
    "bfloat16": "uint16",
    "float32": "float32",
    "float64": "float64",
    "int8": "int8",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
}
FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})
#: what replaces an exact zero: a power of two, exact in every float format we store
NONZERO = 2.0**-8
#: poison byte: 0xFF.. is a NaN in float16, bfloat16, float32 and float64 alike
POISON_BYTE = 0xFF

_BITS_VIEW = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


def storage_dtype(dtype: str) -> str:
    """The device storage of a scalar dtype (a vector's components, a struct's bytes: see
    :func:`buffer_storage`)."""
    try:
        return STORAGE_DTYPES[dtype]
    except KeyError:
        raise SpecError(f"unsupported dtype {dtype!r}") from None


def buffer_storage(dtype: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    """(storage dtype, storage shape) of a buffer of ``shape`` elements of ``dtype``."""
    el = element(dtype)
    if el.kind == "scalar":
        return storage_dtype(dtype), shape
    if el.kind == "vector":
        return storage_dtype(el.fields[0].scalar), (*shape, el.fields[0].lanes)
    return "uint8", (*shape, el.itemsize)


def struct_field(xp: ModuleType, array: Any, dtype: str, name: str) -> Any:
    """One field of a struct buffer, in its storage dtype: ``shape`` or ``(*shape, lanes)``."""
    field_ = next(f for f in element(dtype).fields if f.name == name)
    raw = xp.ascontiguousarray(array[..., field_.offset : field_.offset + field_.nbytes])
    values = raw.view(storage_dtype(field_.scalar))
    return values[..., 0] if field_.lanes == 1 else values


def float32_values(xp: ModuleType, array: Any, dtype: str) -> Any:
    """What the reference sees of a buffer: float32 values (a vector's components on a last
    axis), or for a struct a dict of its fields as float32 arrays."""
    el = element(dtype)
    if el.kind == "struct":
        return {
            f.name: to_float32(xp, struct_field(xp, array, dtype, f.name), f.scalar)
            for f in el.fields
        }
    return to_float32(xp, array, el.fields[0].scalar)


def to_float32(xp: ModuleType, array: Any, dtype: str) -> Any:
    """A device buffer of spec dtype ``dtype`` as float32 values (a new array)."""
    if dtype == "bfloat16":
        return bf16_bits_to_float32(xp, array)
    return xp.asarray(array).astype(xp.float32)


def from_float32(xp: ModuleType, values: Any, dtype: str) -> Any:
    """float32 values -> storage array of spec dtype ``dtype`` (ints are rounded, clipped)."""
    if dtype == "bfloat16":
        return float32_to_bf16_bits(xp, values)
    store = storage_dtype(dtype)
    if dtype in FLOAT_DTYPES:
        return xp.asarray(values).astype(store)
    info = np.iinfo(store)
    return xp.clip(xp.rint(values), info.min, info.max).astype(store)


def bits_view(xp: ModuleType, array: Any) -> Any:
    """The raw bit patterns of a buffer, for bitwise comparisons (NaN == NaN here)."""
    arr = xp.ascontiguousarray(array)
    return arr.view(_BITS_VIEW[arr.dtype.itemsize])


# --- generation ---------------------------------------------------------------


def arg_seed(seed: int, index: int) -> int:
    """A distinct, stable seed per argument so two inputs never share a stream."""
    return (seed * 1_000_003 + index * 7_919 + 12_345) % (2**31 - 1)


def _uniform01(xp: ModuleType, seed: int, shape: tuple[int, ...]) -> Any:
    if xp is np:
        return np.random.default_rng(seed).random(shape, dtype=np.float32)
    return xp.random.RandomState(seed).random_sample(shape, dtype=xp.float32)


def _normal(xp: ModuleType, seed: int, shape: tuple[int, ...]) -> Any:
    if xp is np:
        return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    return xp.random.RandomState(seed).standard_normal(shape, dtype=xp.float32)


def random_values(
    xp: ModuleType, init: tuple[str, float, float], shape: tuple[int, ...], seed: int
) -> Any:
    """float32 draws: ("normal", mean, std) or ("uniform", lo, hi)."""
    dist, a, b = init
    if dist == "normal":
        return _normal(xp, seed, shape) * xp.float32(b) + xp.float32(a)
    if dist == "uniform":
        return _uniform01(xp, seed, shape) * xp.float32(b - a) + xp.float32(a)
    raise SpecError(f"unknown input distribution {dist!r}")


def generate_input(
    xp: ModuleType, dtype: str, shape: tuple[int, ...], init: tuple[str, float, float], seed: int
) -> Any:
    """A seeded random input buffer in storage dtype, with no exact zeros.

    Zeros are replaced after rounding to the storage type (a tiny normal draw
    can round to 0 in float16), because timing on zeros flatters kernels
    (rule M6) and a zero hides wrong indexing from the check. A vector's components and a
    struct's fields are drawn alike, each field from its own stream.
    """
    el = element(dtype)
    if el.kind == "vector":
        field_ = el.fields[0]
        return generate_input(xp, field_.scalar, (*shape, field_.lanes), init, seed)
    if el.kind == "struct":
        out = xp.zeros((*shape, el.itemsize), dtype=xp.uint8)
        for index, f in enumerate(el.fields):
            values = generate_input(xp, f.scalar, (*shape, f.lanes), init, arg_seed(seed, index))
            out[..., f.offset : f.offset + f.nbytes] = values.view(xp.uint8).reshape(
                (*shape, f.nbytes)
            )
        return out
    storage_dtype(dtype)
    values = random_values(xp, init, shape, seed)
    if dtype not in FLOAT_DTYPES:
        stored = from_float32(xp, values, dtype)
        return xp.where(stored == 0, stored.dtype.type(1), stored)
    values = xp.where(values == 0, xp.float32(NONZERO), values)
    stored = from_float32(xp, values, dtype)
    zeros = to_float32(xp, stored, dtype) == 0
    if bool(zeros.any()):
        stored = from_float32(xp, xp.where(zeros, xp.float32(NONZERO), values), dtype)
    return stored


def poison(xp: ModuleType, array: Any) -> None:
    """Fill a buffer with 0xFF bytes: NaN in every float format, -1/max in integers."""
    array.view(xp.uint8).fill(POISON_BYTE)


def scalar_value(dtype: str, value: Any, name: str = "") -> Any:
    """A scalar argument as a numpy scalar of its storage type (bf16 as raw bits), by the
    spec's rule for what a dtype holds (:func:`ctune.spec.model.scalar_number`)."""
    try:
        number = scalar_number(dtype, value)
    except ArgValueError as exc:
        raise SpecError(f"scalar {name}: {exc}") from None
    if dtype == "bfloat16":
        return np.uint16(float32_to_bf16_bits(np, np.asarray([number], dtype=np.float32))[0])
    return np.dtype(storage_dtype(dtype)).type(number)


def arg_shape(arg: ArgSpec, dims: Mapping[str, int]) -> tuple[int, ...]:
    """A buffer's shape on one problem, by the spec's rule (:func:`ctune.spec.model.arg_shape`)."""
    try:
        return spec_arg_shape(arg, dims)
    except ArgValueError as exc:
        raise SpecError(f"arg {arg.name}: {exc}") from None


@dataclass
class Buffers:
    """One set of kernel arguments: device buffers (storage dtype) and scalars, in the
    parameter list's ``order``, and the constants filled into module symbols of their name."""

    order: tuple[str, ...]
    roles: dict[str, str]
    dtypes: dict[str, str]  # spec dtype per arg, after the problem's overrides
    arrays: dict[str, Any] = field(default_factory=dict)
    scalars: dict[str, Any] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)

    def args(self) -> tuple[Any, ...]:
        return tuple(self.arrays[n] if n in self.arrays else self.scalars[n] for n in self.order)

    def names(self, *roles: str) -> list[str]:
        return [n for n in self.order if self.roles[n] in roles]

    def reference_inputs(self, xp: ModuleType) -> dict[str, Any]:
        """float32 copies of what the kernel reads (inputs, inouts and constants), for the
        reference (:func:`float32_values`)."""
        read = {n: self.arrays[n] for n in self.names("input", "inout")} | self.constants
        return {n: float32_values(xp, a, self.dtypes[n]) for n, a in read.items()}

    def snapshot(self, xp: ModuleType, names: list[str]) -> dict[str, Any]:
        return {n: self.arrays[n].copy() for n in names}

    def restore(self, xp: ModuleType, saved: Mapping[str, Any]) -> None:
        for name, values in saved.items():
            xp.copyto(self.arrays[name], values)

    def poison_outputs(self, xp: ModuleType) -> None:
        for name in self.names("output"):
            poison(xp, self.arrays[name])

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.arrays.values()))


def input_values(
    xp: ModuleType,
    spec: KernelSpec,
    arg: ArgSpec,
    dtype: str,
    problem: Problem,
    seed: int,
    index: int,
) -> Any:
    """An input's (inout's, constant's) storage array: the data given for it, else drawn."""
    shape = arg_shape(arg, problem.dims)
    if isinstance(arg.init, GivenData):
        return xp.asarray(given_storage(spec, arg, dtype, shape, problem.dims, seed))
    return generate_input(xp, dtype, shape, arg.init, arg_seed(seed, index))


def make_buffers(
    xp: ModuleType,
    spec: KernelSpec,
    problem: Problem,
    seed: int,
    runtime: Mapping[str, GeneValue] | None = None,
) -> Buffers:
    """Inputs and inouts random (seeded), outputs poisoned, scratch zeroed, scalars evaluated
    over the problem's dims and the candidate's ``runtime`` genes."""
    dims: dict[str, Any] = {**problem.dims, **(runtime or {})}
    buffers = Buffers(
        order=tuple(a.name for a in spec.args if a.is_parameter),
        roles={a.name: a.role for a in spec.args},
        dtypes={a.name: a.dtype_for(problem) for a in spec.args},
    )
    for index, arg in enumerate(spec.args):
        dtype = buffers.dtypes[arg.name]
        if arg.role == "scalar":
            assert arg.value is not None
            buffers.scalars[arg.name] = scalar_value(dtype, arg.value.evaluate(dims), arg.name)
            continue
        store, shape = buffer_storage(dtype, arg_shape(arg, dims))
        if arg.role in ("input", "inout"):
            buffers.arrays[arg.name] = input_values(xp, spec, arg, dtype, problem, seed, index)
        elif arg.role == "constant":
            buffers.constants[arg.name] = input_values(xp, spec, arg, dtype, problem, seed, index)
        elif arg.role == "output":
            array = xp.empty(shape, dtype=store)
            poison(xp, array)
            buffers.arrays[arg.name] = array
        else:  # scratch: zeroed, as CUTLASS-style workspaces (semaphores) expect
            buffers.arrays[arg.name] = xp.zeros(shape, dtype=store)
    return buffers


def element_count(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


__all__ = [
    "FLOAT_DTYPES",
    "NONZERO",
    "STORAGE_DTYPES",
    "Buffers",
    "arg_seed",
    "arg_shape",
    "bf16_bits_to_float32",
    "bits_view",
    "buffer_storage",
    "float32_to_bf16_bits",
    "float32_values",
    "from_float32",
    "generate_input",
    "make_buffers",
    "poison",
    "random_values",
    "scalar_value",
    "storage_dtype",
    "struct_field",
    "to_float32",
]
