"""Element types of a buffer: a scalar dtype, a CUDA vector type or a user struct. Pure.

A buffer's ``dtype`` names one element: ``float32``, ``float2`` (CUDA's vector types, laid
out and aligned as ``vector_types.h`` declares them) or a struct written as its fields,
``{struct: [[x, float32], [y, float32]]}``, laid out by C's rules (each field at the next
multiple of its alignment, the size a multiple of the largest). Shapes count elements.
The spec carries a struct as its canonical text (``struct{x:float32,y:float32}``), so every
layer passes dtypes as strings; :func:`element` reads any of them back into its layout.
The C type table (:data:`C_TYPES`) says which spec dtype a kernel's parameter type is, for
the check of ``args`` against the kernel's parameters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

#: bytes of one scalar value (what a scalar argument occupies in the parameter list)
SCALAR_BYTES = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "int8": 1,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
}
FLOAT_SCALARS = frozenset({"float16", "bfloat16", "float32", "float64"})
#: CUDA vector type -> (component dtype, lanes, alignment in bytes), as vector_types.h has it
VECTOR_TYPES = {
    "half2": ("float16", 2, 4),
    "float2": ("float32", 2, 8),
    "float3": ("float32", 3, 4),
    "float4": ("float32", 4, 16),
    "double2": ("float64", 2, 16),
    "int2": ("int32", 2, 8),
    "int3": ("int32", 3, 4),
    "int4": ("int32", 4, 16),
    "uint2": ("uint32", 2, 8),
    "uint4": ("uint32", 4, 16),
}
#: C scalar value types -> spec dtypes (sizes agree; a spec has no unsigned 64-bit or
#: 16-bit signed dtype, so those take the dtype of the same size)
C_SCALAR_TYPES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "__half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "int": "int32",
    "signed": "int32",
    "signed int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long long": "int64",
    "long long int": "int64",
    "long": "int64",
    "int64_t": "int64",
    "size_t": "int64",
    "uint64_t": "int64",
    "unsigned long": "int64",
    "unsigned long long": "int64",
    "ptrdiff_t": "int64",
    "short": "uint16",
    "unsigned short": "uint16",
    "uint16_t": "uint16",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
}
#: C value types a kernel's parameters are written with -> spec dtypes
C_TYPES = {
    **C_SCALAR_TYPES,
    "__half2": "half2",
    **{name: name for name in VECTOR_TYPES},
}
#: fields one struct may have
MAX_FIELDS = 256
_STRUCT_TEXT = re.compile(r"^struct\{(.*)\}$")
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class ElementError(ValueError):
    """A dtype that names no element type; the message says what is allowed."""


@dataclass(frozen=True, slots=True)
class Field:
    """One field of an element: ``lanes`` values of ``scalar`` at byte ``offset``."""

    name: str  # "" for a scalar or a vector element
    scalar: str
    lanes: int
    offset: int

    @property
    def nbytes(self) -> int:
        return SCALAR_BYTES[self.scalar] * self.lanes


@dataclass(frozen=True, slots=True)
class Element:
    """The layout of one buffer element; ``kind`` is scalar, vector or struct."""

    dtype: str  # as the spec carries it
    kind: str
    fields: tuple[Field, ...]
    itemsize: int
    align: int

    @property
    def is_float(self) -> bool:
        return all(f.scalar in FLOAT_SCALARS for f in self.fields)


def allowed_text() -> str:
    """What a buffer's dtype may be, for error messages."""
    scalars = ", ".join(SCALAR_BYTES)
    vectors = ", ".join(VECTOR_TYPES)
    return f"{scalars}; vectors {vectors}; or {{struct: [[FIELD, DTYPE], ...]}}"


@lru_cache(maxsize=256)
def element(dtype: str) -> Element:
    """The layout of a spec dtype (scalar, vector, or a struct's canonical text)."""
    if dtype in SCALAR_BYTES:
        size = SCALAR_BYTES[dtype]
        return Element(dtype, "scalar", (Field("", dtype, 1, 0),), size, size)
    if dtype in VECTOR_TYPES:
        scalar, lanes, align = VECTOR_TYPES[dtype]
        size = SCALAR_BYTES[scalar] * lanes
        return Element(dtype, "vector", (Field("", scalar, lanes, 0),), size, align)
    match = _STRUCT_TEXT.match(dtype)
    if match is None:
        raise ElementError(f"{dtype!r} (allowed: {allowed_text()})")
    pairs = [item.split(":", 1) for item in match.group(1).split(",")]
    if not all(len(p) == 2 for p in pairs):
        raise ElementError(f"{dtype!r} is not a struct's text (struct{{x:float32,y:float32}})")
    return struct_element([(name, field) for name, field in pairs])


def struct_element(fields: list[tuple[str, str]]) -> Element:
    """A struct of ``(name, dtype)`` fields (scalars or vectors), laid out as C lays it out."""
    if not fields:
        raise ElementError("a struct needs at least one field")
    if len(fields) > MAX_FIELDS:
        raise ElementError(f"{len(fields)} struct fields; at most {MAX_FIELDS}")
    names = [name for name, _ in fields]
    for name in names:
        if not _FIELD_NAME.match(name):
            raise ElementError(f"struct field name {name!r} is not an identifier")
    if len(set(names)) != len(names):
        raise ElementError("a struct field name is repeated")
    laid: list[Field] = []
    offset = align = 0
    for name, dtype in fields:
        if dtype not in SCALAR_BYTES and dtype not in VECTOR_TYPES:
            raise ElementError(
                f"struct field {name}: {dtype!r} (allowed: {', '.join(SCALAR_BYTES)}, "
                f"{', '.join(VECTOR_TYPES)})"
            )
        inner = element(dtype)
        offset = -(-offset // inner.align) * inner.align
        laid.append(Field(name, inner.fields[0].scalar, inner.fields[0].lanes, offset))
        offset += inner.itemsize
        align = max(align, inner.align)
    size = -(-offset // align) * align
    text = "struct{" + ",".join(f"{n}:{d}" for n, d in fields) + "}"
    return Element(text, "struct", tuple(laid), size, align)


def yaml_dtype(dtype: str) -> str:
    """A dtype as a spec writes it in a flow mapping: a struct as ``{struct: [[x, float32],
    ...]}`` (what the loader reads back into the same text), any other as it is."""
    el = element(dtype)
    if el.kind != "struct":
        return dtype
    pairs = _STRUCT_TEXT.match(dtype).group(1).split(",")  # type: ignore[union-attr]
    return "{struct: [" + ", ".join(f"[{p.replace(':', ', ')}]" for p in pairs) + "]}"


def element_of_c_type(ctype: str, structs: Mapping[str, str] | None = None) -> Element | None:
    """The element a C value type names (``const float2``; a struct of ``structs``, C name
    -> spec dtype), or None when neither knows the type (a template parameter, a struct
    the source does not spell out): nothing to compare against then."""
    words = [w for w in ctype.replace("*", " ").split() if w not in _C_QUALIFIERS]
    name = " ".join(words).removeprefix("::")
    found = C_TYPES.get(name) or (structs or {}).get(name)
    return element(found) if found else None


_C_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "struct"}


def c_type_mismatch(dtype: str, ctype: str, structs: Mapping[str, str] | None = None) -> bool:
    """Does a buffer of ``dtype`` disagree with a kernel parameter pointing at ``ctype``?

    They disagree when the element sizes differ or one holds floats and the other integers
    (field by field, at the same offsets, for a struct); a signedness difference
    (``unsigned*`` for int32) and field names are not checked. An unknown C type (a
    template parameter, a struct ``structs`` lacks) and ``void*`` are never refused.
    """
    theirs = element_of_c_type(ctype, structs)
    if theirs is None:
        return False
    return _shape_of(element(dtype)) != _shape_of(theirs)


def _shape_of(el: Element) -> tuple[int, tuple[tuple[int, int, bool], ...]]:
    """What a layout check compares: the size and each field's offset, bytes and kind."""
    return el.itemsize, tuple((f.offset, f.nbytes, f.scalar in FLOAT_SCALARS) for f in el.fields)


__all__ = [
    "C_SCALAR_TYPES",
    "C_TYPES",
    "FLOAT_SCALARS",
    "MAX_FIELDS",
    "SCALAR_BYTES",
    "VECTOR_TYPES",
    "Element",
    "ElementError",
    "Field",
    "allowed_text",
    "c_type_mismatch",
    "element",
    "element_of_c_type",
    "struct_element",
    "yaml_dtype",
]
