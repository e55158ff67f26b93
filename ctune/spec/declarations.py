"""A kernel file's ``__constant__`` and static ``__shared__`` arrays, as written. Pure, text.

``ctune init`` drafts a constant argument for each ``__constant__`` symbol, and the loader
estimates a kernel's static shared memory from its ``__shared__`` arrays (their C type
times their extents, with the genes' values put in) so that a candidate over the 48 KiB
that static shared memory may use is screened out before it is compiled, rather than
refused by ptxas. A declaration whose type or extents cannot be read is left out: the
estimate only ever falls short, so it screens nothing that would have built.
The launched kernels of a launcher (``kernel<<<...>>>``) are read here too, for the
resources ``ctune compile`` reports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctune.spec.elements import C_TYPES, ElementError, element_of_c_type, struct_element

#: static shared memory a block may declare (above it only dynamic shared memory, opted in)
STATIC_SMEM_BYTES = 48 * 1024

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DECLARATION = re.compile(r"\b(__constant__|__shared__)\b([^;={}]*)[;=]")
_QUALIFIER = re.compile(
    r"\b(?:const|static|volatile|__device__|extern)\b|\b__align__\s*\(\s*\d+\s*\)"
)
_NAMED = re.compile(
    r"^(?P<ctype>[A-Za-z_][\w:]*(?:\s+[A-Za-z_]\w*)*?)\s+(?P<name>[A-Za-z_]\w*)\s*"
    r"(?P<extents>(?:\[[^\[\]]*\]\s*)*)$"
)
_EXTENT = re.compile(r"\[([^\[\]]*)\]")
_C_ARITHMETIC = re.compile(r"^[A-Za-z0-9_+\-*/%()\s]+$")
_INT_LITERAL = re.compile(r"\b(\d+)[uUlL]*\b")
_LAUNCH = re.compile(r"\b([A-Za-z_][\w:]*)\s*(?:<[^;{}]*?>)?\s*<<<")
_GLOBAL = re.compile(r"\b__global__\b")
_BOUNDS = re.compile(r"__launch_bounds__\s*\([^()]*\)")
_DEFINED_NAME = re.compile(r"[^(;{}]*?\b([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True, slots=True)
class Declaration:
    """``__shared__ float tile[TILE][TILE + 1]`` -> kind shared, ctype float, extents."""

    kind: str  # "constant" or "shared"
    ctype: str
    name: str
    extents: tuple[str, ...]  # as written, outermost first; () for a single value
    position: int  # where it starts in the text
    extern: bool = False

    @property
    def element_bytes(self) -> int | None:
        found = element_of_c_type(self.ctype)
        return found.itemsize if found else None


def declarations(text: str) -> list[Declaration]:
    """The ``__constant__`` and ``__shared__`` variables of ``text`` (comments ignored)."""
    code = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found = []
    for match in _DECLARATION.finditer(code):
        start = code.rfind("\n", 0, match.start()) + 1
        before = code[start : match.start()]
        body = match.group(2)
        extern = re.search(r"\bextern\b", before + body) is not None
        named = _NAMED.match(" ".join(_QUALIFIER.sub(" ", body).split()))
        if named is None:
            continue
        extents = tuple(e.strip() for e in _EXTENT.findall(named.group("extents")))
        kind = "constant" if match.group(1) == "__constant__" else "shared"
        found.append(
            Declaration(
                kind, named.group("ctype"), named.group("name"), extents, match.start(), extern
            )
        )
    return found


_INT_DEFINE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?(\d+)[uUlL]*\)?[ \t]*$", re.M
)


def int_defines(text: str) -> dict[str, str]:
    """The file's ``#define NAME <integer>`` macros (the last one of each name)."""
    code = _COMMENT.sub(" ", text)
    return {m.group(1): m.group(2) for m in _INT_DEFINE.finditer(code)}


def c_extent_expression(text: str, defines: dict[str, str]) -> str | None:
    """A C array extent as a spec expression (``/`` is C's integer division, ``//``), with
    the file's integer ``defines`` put in; None when it is more than plain arithmetic."""
    if not text or not _C_ARITHMETIC.match(text):
        return None
    text = _INT_LITERAL.sub(r"\1", text)
    for _ in range(8):  # a define that names another define
        replaced = re.sub(
            r"\b[A-Za-z_]\w*\b",
            lambda m: f"({defines[m[0]]})" if m[0] in defines else m[0],
            text,
        )
        if replaced == text:
            break
        text = replaced
    if not _C_ARITHMETIC.match(text):
        return None
    return re.sub(r"(?<!/)/(?!/)", "//", text)


def kernel_body(text: str, name: str) -> tuple[int, int] | None:
    """Where the body of ``__global__ ... name(...) {`` is in ``text`` (the last such
    definition); None when the file has none."""
    found = None
    for match in re.finditer(
        rf"\b__global__\b[^;{{}}]*?\b{re.escape(name)}\s*(?:<[^;{{}}]*>)?\s*\(", text
    ):
        brace = text.find("{", match.end())
        semi = text.find(";", match.end())
        if brace < 0 or (0 <= semi < brace and ")" not in text[match.end() : semi]):
            continue
        depth = 0
        for i in range(brace, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    found = (brace, i + 1)
                    break
    return found


def static_shared(text: str, kernel: str) -> list[Declaration]:
    """The static ``__shared__`` arrays the kernel ``kernel`` declares in its own body."""
    span = kernel_body(text, kernel)
    if span is None:
        return []
    return [
        d
        for d in declarations(text)
        if d.kind == "shared" and not d.extern and span[0] <= d.position < span[1]
    ]


_STRUCT = re.compile(
    r"\b(?:typedef\s+)?struct\s+(?P<tag>[A-Za-z_]\w*)?\s*\{(?P<body>[^{}]*)\}\s*(?P<alias>[A-Za-z_]\w*)?\s*;"
)
_MEMBER = re.compile(
    r"^(?P<ctype>[A-Za-z_]\w*(?:\s+[A-Za-z_]\w*)*?)\s+(?P<names>[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)$"
)


def struct_dtypes(text: str) -> dict[str, str]:
    """The file's plain structs as spec dtypes (``struct Point { float x, y; };`` ->
    ``Point: struct{x:float32,y:float32}``): only those whose members are all scalar or
    vector types, without arrays, bit fields, alignment attributes or methods."""
    code = _COMMENT.sub(" ", text)
    found: dict[str, str] = {}
    for match in _STRUCT.finditer(code):
        names = [match.group("tag")]
        if match.group(0).startswith("typedef"):
            names.append(match.group("alias"))
        fields = _struct_fields(match.group("body"))
        if not fields or "align" in match.group(0):
            continue
        try:
            dtype = struct_element(fields).dtype
        except ElementError:
            continue
        found |= {name: dtype for name in names if name}
    return found


def _struct_fields(body: str) -> list[tuple[str, str]] | None:
    fields: list[tuple[str, str]] = []
    for statement in body.split(";"):
        statement = " ".join(statement.split())
        if not statement:
            continue
        member = _MEMBER.match(statement)
        dtype = C_TYPES.get(member.group("ctype")) if member else None
        if member is None or dtype is None:
            return None
        fields += [(n.strip(), dtype) for n in member.group("names").split(",")]
    return fields


def launched_kernels(text: str) -> set[str]:
    """The names of the kernels ``text`` launches with ``<<<...>>>`` (namespace dropped)."""
    return {m.group(1).rsplit("::", 1)[-1] for m in _LAUNCH.finditer(text)}


def defined_kernels(text: str) -> set[str]:
    """The names of the ``__global__`` functions ``text`` itself declares (a library's
    kernels, reached through its headers, are not among them)."""
    names = set()
    for m in _GLOBAL.finditer(text):
        found = _DEFINED_NAME.match(_BOUNDS.sub(" ", text[m.end() : m.end() + 400]))
        if found:
            names.add(found.group(1))
    return names


__all__ = [
    "STATIC_SMEM_BYTES",
    "Declaration",
    "c_extent_expression",
    "declarations",
    "defined_kernels",
    "int_defines",
    "kernel_body",
    "launched_kernels",
    "static_shared",
    "struct_dtypes",
]
