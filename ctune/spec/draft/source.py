"""Read what a sidecar needs from a CUDA source as its author wrote it. Pure, text only.

``ctune init`` drafts a spec from the kernel: its ``__global__`` functions with their
parameters (names, C types, constness), template parameters, the macros the file
defines (``#define N 4096``), guards for the build to set (``#ifndef BLOCK`` /
``#define BLOCK 256``), names its preprocessor conditions test but nothing defines, by
value (``#if USE_LDG``) or by being defined (``#ifdef USE_LDG``), and whether it reads
``blockDim`` or ``blockIdx`` per axis or uses ``extern __shared__``. Identifiers the code
uses without defining anywhere are found by compiling (``undefined.py``): only the compiler
knows what a name is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ctune.spec.entry import same_params, split_top

_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*(.*)$", re.M)
_IFNDEF = re.compile(
    r"^[ \t]*#[ \t]*(?:ifndef[ \t]+([A-Za-z_]\w*)|if[ \t]+!\s*defined\s*\(?\s*([A-Za-z_]\w*))",
    re.M,
)
_CONDITION = re.compile(r"^[ \t]*#[ \t]*(?:if|elif)\b(.*)$", re.M)
_IFDEF = re.compile(r"^[ \t]*#[ \t]*(?:el)?ifn?def[ \t]+([A-Za-z_]\w*)", re.M)
_DEFINED = re.compile(r"\bdefined\s*\(?\s*([A-Za-z_]\w*)")
_TYPEDEF = re.compile(r"\btypedef\s+((?:[A-Za-z_]\w*\s+)*[A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*;")
#: a macro value that may name a type: words only (``float``, ``unsigned int``)
_TYPE_WORDS = re.compile(r"[A-Za-z_]\w*(?:\s+[A-Za-z_]\w*)*")
_GLOBAL = re.compile(r"\b__global__\b")
_NAMESPACE = re.compile(r"\bnamespace\s+((?:[A-Za-z_]\w*\s*::\s*)*[A-Za-z_]\w*)?\s*\{")
#: ``NAME == 3``, ``3 == NAME``: a value a preprocessor condition picks a variant by
_COMPARED = re.compile(r"\b([A-Za-z_]\w*)\s*[=!]=\s*(\d+)\b|\b(\d+)\s*[=!]=\s*([A-Za-z_]\w*)\b")
_QUALIFIERS = {
    "void",
    "static",
    "inline",
    "__forceinline__",
    "__noinline__",
    "extern",
    "__host__",
    "__device__",
    "__global__",
}
_PREPROCESSOR_WORDS = {"defined", "if", "elif", "ifdef", "ifndef", "true", "false"}


@dataclass(frozen=True, slots=True)
class Param:
    """One kernel parameter: ``const float* __restrict__ x`` -> ctype ``const float*``."""

    name: str
    ctype: str  # without the name and __restrict__

    @property
    def pointer(self) -> bool:
        return "*" in self.ctype

    @property
    def const_pointee(self) -> bool:
        """Is what the pointer points at const (an input)?"""
        if not self.pointer:
            return False
        return bool(re.search(r"\bconst\b", self.ctype.split("*", 1)[0]))

    @property
    def base(self) -> str:
        """The value type: ``const float*`` -> ``float``, ``unsigned int`` -> ``unsigned int``."""
        words = re.sub(r"[*&]", " ", self.ctype).split()
        kept = [w for w in words if w not in ("const", "volatile", "struct")]
        return " ".join(kept)


@dataclass(frozen=True, slots=True)
class TemplateParam:
    kind: str  # "type" or "value"
    name: str
    ctype: str  # "typename" or the value's type ("int", "unsigned")
    default: str | None = None


@dataclass(frozen=True, slots=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    template: tuple[TemplateParam, ...] = ()
    extern_c: bool = False
    launch_bounds: str | None = None  # the first __launch_bounds__ argument, as written
    body: str = ""  # the code between its braces (empty for a declaration)
    namespace: str = ""  # the named namespaces around it, ``a::b`` (anonymous ones left out)

    @property
    def types(self) -> list[str]:
        """The parameter types as written: what tells overloads apart."""
        return [p.ctype for p in self.params]

    def signature(self) -> str:
        """``add(float*, const float*, int)``: the name as ``--entry`` and ``entry:`` take
        it to pick one overload."""
        return f"{self.name}({', '.join(self.types)})"


@dataclass
class Source:
    """What a kernel file says about itself."""

    kernels: list[Kernel] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)  # every #define NAME value
    guarded: dict[str, str] = field(default_factory=dict)  # #ifndef NAME + #define NAME v
    conditions: set[str] = field(default_factory=set)  # names #if tests, defined nowhere
    #: names #ifdef, #ifndef or defined() tests, defined nowhere: on or off by being defined
    ifdefs: set[str] = field(default_factory=set)
    #: the values a preprocessor condition compares a name with (``#if ALGO == 2``)
    selectors: dict[str, set[int]] = field(default_factory=dict)
    reads: set[str] = field(default_factory=set)  # blockDim.x, blockIdx.y, ... as used
    dynamic_shared: bool = False  # extern __shared__
    text: str = ""  # without comments
    #: the macros of the local headers it includes, each with one value (not the file's own)
    header_defines: dict[str, str] = field(default_factory=dict)
    #: names a ``#define`` or ``typedef`` makes a type (``DATA_TYPE`` -> ``float``)
    type_names: dict[str, str] = field(default_factory=dict)

    def uses(self, name: str) -> bool:
        return re.search(rf"\b{re.escape(name)}\b", self.text) is not None

    def called(self, name: str) -> bool:
        """Does the code call ``name`` (``name(``): a function, not a value to tune?"""
        return re.search(rf"\b{re.escape(name)}\s*\(", self.text) is not None


def strip_comments(text: str) -> str:
    """The source without comments; strings are kept, newlines too (line numbers hold)."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    out, pos = [], 0
    for match in re.finditer(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', text, re.S):
        out.append(text[pos : match.start()])
        out.append(match.group(0) if match.group(0).startswith('"') else blank(match))
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def _balanced(text: str, start: int, open_: str, close: str) -> int:
    """Index just past the bracket that closes the one at ``start``; -1 if unbalanced."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _param(text: str, index: int) -> Param:
    text = re.sub(r"\b__restrict__\b|\b__restrict\b|\brestrict\b", " ", text)
    text = re.sub(r"\b__grid_constant__\b", " ", text).split("=", 1)[0].strip()
    array = re.search(r"\[\s*\]\s*$", text)
    if array:  # float x[] is float* x
        text = text[: array.start()].rstrip()
        text = re.sub(r"(\w+)$", r"* \1", text)
    words = re.findall(r"[A-Za-z_]\w*|[*&]|::|<[^>]*>", text)
    if len(words) >= 2 and _IDENT.fullmatch(words[-1]) and words[-2] not in ("::",):
        name, ctype_words = words[-1], words[:-1]
    else:
        name, ctype_words = f"arg{index}", words
    ctype = " ".join(ctype_words).replace(" *", "*").replace(" &", "&").replace(" :: ", "::")
    return Param(name, ctype)


def _template_before(text: str, pos: int) -> tuple[TemplateParam, ...]:
    """The ``template <...>`` right before position ``pos`` (the kernel's own), if any."""
    head = text[:pos].rstrip()
    tail = head[max(0, len(head) - 4000) :]
    found = list(re.finditer(r"\btemplate\s*<", tail))
    if not found:
        return ()
    match = found[-1]
    start = len(head) - len(tail) + match.end() - 1
    end = _balanced(text, start, "<", ">")
    between = text[end:pos] if end > 0 else ";"
    if end < 0 or re.search(r"[;{}]", between):
        return ()  # that template belongs to something before this kernel
    params = []
    for item in split_top(text[start + 1 : end - 1]):
        declared, _, default = item.partition("=")
        words = declared.split()
        if len(words) < 2:
            continue
        kind = "type" if words[0] in ("typename", "class") else "value"
        params.append(TemplateParam(kind, words[-1], " ".join(words[:-1]), default.strip() or None))
    return tuple(params)


def _namespace_at(text: str, pos: int) -> str:
    """The named namespaces whose braces hold position ``pos``, outermost first."""
    names = []
    for match in _NAMESPACE.finditer(text, 0, pos):
        end = _balanced(text, match.end() - 1, "{", "}")
        if match.group(1) and (end < 0 or end > pos):
            names.append(match.group(1).replace(" ", ""))
    return "::".join(names)


def _bounds_before(text: str, pos: int) -> str | None:
    """The first ``__launch_bounds__`` argument written in the declaration before ``pos``."""
    start = max(text.rfind(";", 0, pos), text.rfind("}", 0, pos), text.rfind("{", 0, pos))
    found = re.search(r"\b__launch_bounds__\s*\(", text[start + 1 : pos])
    if found is None:
        return None
    open_ = start + 1 + found.end() - 1
    close = _balanced(text, open_, "(", ")")
    return split_top(text[open_ + 1 : close - 1])[0] if close > 0 else None


def _kernels(text: str) -> list[Kernel]:
    """Each kernel once: overloads apart, a declaration and its definition as one."""
    found: list[Kernel] = []
    for match in _GLOBAL.finditer(text):
        # the name: the first identifier followed by "(" that is not a qualifier or attribute
        pos = match.end()
        bounds = None
        name = None
        while pos < len(text):
            word = re.compile(r"\s*([A-Za-z_]\w*)\s*").match(text, pos)
            if word is None:
                break
            after = word.end()
            if word.group(1) == "__launch_bounds__" and text[after : after + 1] == "(":
                close = _balanced(text, after, "(", ")")
                bounds = split_top(text[after + 1 : close - 1])[0] if close > 0 else None
                pos = close
                continue
            if text[after : after + 1] == "(" and word.group(1) not in _QUALIFIERS:
                name = word.group(1)
                pos = after
                break
            pos = after
        if name is None:
            continue
        if bounds is None:  # written before __global__: __launch_bounds__(128) __global__ f(
            bounds = _bounds_before(text, match.start())
        close = _balanced(text, pos, "(", ")")
        if close < 0:
            continue
        body = re.compile(r"\s*([{;])").match(text, close)
        inner = text[pos + 1 : close - 1].strip()
        params = (
            ()
            if inner in ("", "void")
            else tuple(_param(p, i) for i, p in enumerate(split_top(inner)))
        )
        line_start = text.rfind("\n", 0, match.start()) + 1
        extern_c = 'extern "C"' in text[max(0, line_start - 80) : match.start()]
        body_text = ""
        if body is not None and body.group(1) == "{":
            end = _balanced(text, body.end() - 1, "{", "}")
            body_text = text[body.end() : end - 1] if end > 0 else text[body.end() :]
        kernel = Kernel(
            name,
            params,
            _template_before(text, match.start()),
            extern_c,
            bounds,
            body_text,
            _namespace_at(text, match.start()),
        )
        same = [
            i for i, k in enumerate(found) if k.name == name and same_params(k.types, kernel.types)
        ]
        if not same:
            found.append(kernel)
        elif body is not None and body.group(1) == "{":
            found[same[0]] = kernel
    return found


def read_source(raw: str, headers: Sequence[str] = ()) -> Source:
    """Everything ``ctune init`` reads from a kernel file's text; ``headers`` are the local
    files it includes (``includes.py``), read for their macros and typedefs only."""
    text = strip_comments(raw)
    # kernels, reads and shared memory are code: a string that spells one is not
    code = _STRING.sub(lambda m: m.group(0) if m.group(0) == '"C"' else '""', text)
    source = Source(text=code)
    source.kernels = _kernels(code)
    for match in _DEFINE.finditer(text):
        source.defines[match.group(1)] = match.group(2).strip()
    source.header_defines = _header_defines(headers, set(source.defines))
    source.type_names = _type_names(
        [text, *map(strip_comments, headers)], {**source.header_defines, **source.defines}
    )
    for match in _IFNDEF.finditer(text):
        name = match.group(1) or match.group(2)
        if name in source.defines:
            source.guarded[name] = source.defines[name]

    def free(name: str) -> bool:  # __CUDA_ARCH__ and friends are the compiler's
        known = name in source.defines or name in _PREPROCESSOR_WORDS
        known = known or name in source.header_defines
        return not known and not name.startswith("__")

    for match in _CONDITION.finditer(text):
        expression = _STRING.sub(" ", match.group(1))
        source.ifdefs.update(filter(free, _DEFINED.findall(expression)))
        source.conditions.update(
            n for n in _IDENT.findall(_DEFINED.sub(" ", expression)) if free(n)
        )
        for compared in _COMPARED.finditer(expression):
            name = compared.group(1) or compared.group(4)
            value = compared.group(2) or compared.group(3)
            if not name.startswith("__") and name not in _PREPROCESSOR_WORDS:
                source.selectors.setdefault(name, set()).add(int(value))
    source.ifdefs.update(filter(free, _IFDEF.findall(text)))
    for match in re.finditer(r"\b(blockDim|blockIdx|threadIdx|gridDim)\s*\.\s*([xyz])\b", code):
        source.reads.add(f"{match.group(1)}.{match.group(2)}")
    source.dynamic_shared = re.search(r"\bextern\s+__shared__\b", code) is not None
    return source


def _header_defines(headers: Sequence[str], own: set[str]) -> dict[str, str]:
    """The headers' ``#define NAME value`` macros that have one value wherever they are
    defined (a size a ``#ifdef`` picks among several is not read), the file's own left out."""
    values: dict[str, set[str]] = {}
    for header in headers:
        for match in _DEFINE.finditer(strip_comments(header)):
            if match.group(1) not in own:
                values.setdefault(match.group(1), set()).add(match.group(2).strip())
    return {name: found.pop() for name, found in values.items() if len(found) == 1}


def _type_names(texts: list[str], defines: dict[str, str]) -> dict[str, str]:
    """Names that stand for a type: ``typedef float real;`` and ``#define DATA_TYPE float``
    (a macro whose value is type words only), each resolved to the type it ends at."""
    names: dict[str, str] = {}
    for text in texts:
        for match in _TYPEDEF.finditer(text):
            names.setdefault(match.group(2), " ".join(match.group(1).split()))
    for name, value in defines.items():
        if _TYPE_WORDS.fullmatch(value) and not value.isdigit():
            names.setdefault(name, " ".join(value.split()))
    for _ in range(4):  # a name for a name for a type
        names = {n: " ".join(names.get(w, w) for w in t.split()) for n, t in names.items()}
    return {n: t for n, t in names.items() if n != t}


def resolve_type(ctype: str, type_names: dict[str, str]) -> str:
    """``ctype`` with each word a typedef or type macro names replaced by its type."""
    return _IDENT.sub(lambda m: type_names.get(m[0], m[0]), ctype)


__all__ = [
    "Kernel",
    "Param",
    "Source",
    "TemplateParam",
    "read_source",
    "resolve_type",
    "strip_comments",
]
