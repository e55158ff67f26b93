"""The entry grammar: a kernel named as its author wrote it (a C++ name, a template
instantiation, one of several overloads), and the names its template arguments may use.

A spec's ``entry`` may be an ``extern "C"`` or mangled symbol, or the name as the source
spells it: ``vadd``, ``ns::scale``, ``gemm_kernel<128, 64>``, ``gemm_kernel<BLOCK_M,
BLOCK_N>`` (compiled genes and problem defines feed the template arguments) or
``vadd(float*, float const*, float*, int)`` to pick one overload. This module splits and
compares such names and checks, when a spec loads, that a template argument names
something nvcc will see. Finding the named kernel in a cubin is the compiler's
(``ctune.compile.entry``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ctune.files import MAX_SOURCE_BYTES, InputFileError, read_text_capped
from ctune.records import GeneValue

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUALIFIED = re.compile(r"^(::)?[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$")
_ALLOWED_CHARS = re.compile(r"^[A-Za-z0-9_:<>(),*&\s.+\-\[\]]+$")
_INT_SUFFIX = re.compile(r"^(-?\d+)(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU])$")
_CAST = re.compile(r"^\((?:[A-Za-z_][A-Za-z0-9_ ]*)\)(-?\d+)$")


@dataclass(frozen=True, slots=True)
class EntryName:
    """A kernel name split into its parts; ``None`` parts were not given."""

    text: str  # as written (or as demangled)
    name: str  # qualified name without template arguments: "ns::scale"
    template_args: tuple[str, ...] | None = None
    params: tuple[str, ...] | None = None

    @property
    def is_template(self) -> bool:
        return self.template_args is not None

    def display(self) -> str:
        """The name as a reader knows it: no return type, arguments spaced as demangled."""
        out = self.name
        if self.template_args is not None:
            out += f"<{', '.join(self.template_args)}>"
        if self.params is not None:
            out += f"({', '.join(self.params)})"
        return out

    def genes_used(self) -> set[str]:
        """Identifiers in the template arguments (macros a gene or a problem define may set)."""
        return {a for a in self.template_args or () if _IDENT.match(a)}


# --- splitting C++ names ----------------------------------------------------------------


def split_top(text: str) -> tuple[str, ...]:
    """Split C++ text on the commas outside (), <>, [] and {}; an empty text is no items."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    if last or items:
        items.append(last)
    return tuple(items)


def _closing_group(text: str, close: str, open_: str) -> int:
    """Index of the ``open_`` that matches the ``close`` ending ``text``; -1 if none."""
    if not text.endswith(close):
        return -1
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch in ">)]":
            depth += 1
        elif ch in "<([":
            depth -= 1
            if depth == 0:
                return i if ch == open_ else -1
    return -1


def split_name(text: str) -> EntryName:
    """``[ret ]name[<targs>][(params)]`` -> parts; ValueError when it is not a C++ name."""
    # a kernel in an anonymous namespace is named by its own name
    source = " ".join(text.split()).replace("(anonymous namespace)::", "")
    head, params = source, None
    opened = _closing_group(head, ")", "(")
    if opened > 0:
        inner = head[opened + 1 : -1].strip()
        params = () if inner in ("", "void") else split_top(inner)
        head = head[:opened].rstrip()
    # a return type before a template's name ("void gemm<128>"): keep the last word
    depth, cut = 0, -1
    for i, ch in enumerate(head):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i
    head = head[cut + 1 :]
    targs = None
    opened = _closing_group(head, ">", "<")
    if opened > 0:
        targs = split_top(head[opened + 1 : -1])
        head = head[:opened].rstrip()
    if not _QUALIFIED.match(head):
        raise ValueError(f"{text!r} is not a C++ kernel name (like vadd, ns::k, k<128, 64>)")
    return EntryName(text, head.removeprefix("::"), targs, params)


def parse_entry(text: str) -> EntryName:
    """A spec's ``entry`` as written; ValueError (one line) when it cannot name a kernel."""
    if not isinstance(text, str) or not text.strip() or len(text) > 1024:
        raise ValueError(f"{text!r} is not a kernel name")
    if not _ALLOWED_CHARS.match(text):
        raise ValueError(f"{text!r} has characters no C++ kernel name has")
    if len(re.split(r"[<(]", text.strip(), maxsplit=1)[0].split()) != 1:
        raise ValueError(f"{text!r}: write the kernel's name alone (no return type)")
    return split_name(text)


# --- comparing names ---------------------------------------------------------------------


def _norm_space(text: str) -> str:
    """Spaces only where two words meet ("unsigned int"), none around punctuation."""
    return re.sub(r"\s+", " ", re.sub(r"\s*([^\w\s])\s*", r"\1", text)).strip()


def _norm_targ(arg: str) -> str:
    arg = _norm_space(arg).removeprefix("::")  # ::Config, qualified as written, is Config
    cast = _CAST.match(arg)
    if cast:
        arg = cast.group(1)
    literal = _INT_SUFFIX.match(arg)
    return literal.group(1) if literal else {"true": "1", "false": "0"}.get(arg, arg)


def _norm_param(param: str) -> str:
    """``const float*`` and ``float const*`` are one type; demanglers write the second.
    A top-level const (``const int n``, ``float* const p``) is no part of the signature."""
    words = _norm_space(param)
    if words.startswith("const "):
        rest = words[len("const ") :]
        match = re.match(r"^((?:unsigned |signed |long |short )*[\w:]+(?:<.*>)?)", rest)
        if match:
            words = f"{match.group(1)} const{rest[match.end() :]}"
    words = words.replace(" *", "*").replace(" &", "&")
    return re.sub(r"(?:(?<=[*&])| )const$", "", words)


def same_params(wanted: Sequence[str], found: Sequence[str]) -> bool:
    """Do two parameter lists (as written, or as demangled) name one overload?"""
    if len(wanted) != len(found):
        return False
    return [_norm_param(p) for p in wanted] == [_norm_param(p) for p in found]


def _targs_match(wanted: Sequence[str], found: Sequence[str], loose: bool) -> bool:
    if len(wanted) != len(found):
        return False
    for w, f in zip(wanted, found, strict=True):
        w, f = _norm_targ(w), _norm_targ(f)
        if w != f and not (loose and _IDENT.match(w)):
            return False
    return True


def matches(wanted: EntryName, found: EntryName, loose: bool) -> bool:
    if found.name != wanted.name and not found.name.endswith(f"::{wanted.name}"):
        return False
    if wanted.template_args is not None and (
        found.template_args is None
        or not _targs_match(wanted.template_args, found.template_args, loose)
    ):
        return False
    if wanted.params is not None:
        return found.params is not None and same_params(wanted.params, found.params)
    return True


def substitute(entry: EntryName, values: Mapping[str, GeneValue]) -> EntryName:
    """The entry with gene and problem-define values in its template arguments.

    The generated instantiation source names the macros themselves (nvcc's ``-D`` sets
    them); matching the cubin's demangled names needs the values.
    """
    if entry.template_args is None:
        return entry
    args = []
    for arg in entry.template_args:
        value = values.get(arg) if _IDENT.match(arg) else None
        if isinstance(value, bool):
            value = int(value)
        args.append(arg if value is None else str(value))
    return replace(entry, template_args=tuple(args))


# --- names a kernel's files declare ----------------------------------------------------


_TEMPLATE = re.compile(r"\btemplate\s*<")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def template_parameters(source: str) -> set[str]:
    """Names the source declares as template parameters (``template <int BM, typename T>``).

    A gene of that name must not reach the file as a macro: ``-DBM=128`` would turn
    ``template <int BM>`` into ``template <int 128>``.
    """
    text = _COMMENTS.sub(" ", source)
    names: set[str] = set()
    for match in _TEMPLATE.finditer(text):
        depth, start = 1, match.end()
        end = start
        while end < len(text) and depth:
            depth += {"<": 1, ">": -1}.get(text[end], 0)
            end += 1
        for param in split_top(text[start : end - 1]):
            declared = param.split("=", 1)[0].split()
            if len(declared) >= 2 and _IDENT.match(declared[-1].lstrip("*&.")):
                names.add(declared[-1].lstrip("*&."))
    return names


#: bare template arguments that mean something before any file of the kernel is read:
#: C++ literals and built-in types, and the number and vector types of the CUDA headers
_BUILTIN_ARG = re.compile(
    r"^(?:true|false|nullptr|bool|char(?:8|16|32)?(?:_t)?|wchar_t|short|int|long|signed"
    r"|unsigned|float|double|void|u?int(?:8|16|32|64|ptr)_t|size_t|ptrdiff_t|dim3"
    r"|(?:__)?half2?|(?:__)?nv_bfloat162?|__nv_fp\d+(?:x\d)?_\w+"
    r"|(?:u?(?:char|short|int|long|longlong)|float|double)[1-4])$"
)
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
#: how many files of the kernel's folder :func:`declared_names` reads at most
_MAX_FILES = 64


def declared_names(source: Path) -> set[str]:
    """The identifiers of ``source`` and of the headers it includes from its own folder
    (``#include "tile.cuh"``): its types, constants and macros, which a template argument
    may name. Template parameters are left out: where the entry is instantiated they
    mean nothing."""
    root = source.parent.resolve()
    todo = [source.resolve()]
    seen: set[Path] = set()
    words: set[str] = set()
    parameters: set[str] = set()
    while todo and len(seen) < _MAX_FILES:
        path = todo.pop()
        if path in seen or not path.is_relative_to(root) or not path.is_file():
            continue
        seen.add(path)
        try:
            text = read_text_capped(path, MAX_SOURCE_BYTES, "source file", errors="replace")
        except InputFileError:
            continue
        text = _COMMENTS.sub(" ", text)
        words |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
        parameters |= template_parameters(text)
        todo += [(path.parent / name).resolve() for name in _INCLUDE.findall(text)]
    return words - parameters


def undeclared_arguments(entry: EntryName, known: Iterable[str], source: Path) -> list[str]:
    """The bare names among ``entry``'s template arguments that nothing defines.

    Defined are ``known`` (the macros nvcc gets: compiled genes, problem defines, ``-D``
    flags), literals and built-in types, and :func:`declared_names` of the kernel's file.
    Anything else is a typo that nvcc would report far from it: ``tmm<TILE, UNROLLK>``
    for the gene ``UNROLL_K`` left ``-DUNROLL_K=1`` to turn the file's
    ``template <int TILE, int UNROLL_K>`` into ``template <int TILE, int 1>``.
    """
    names = set(known)
    bare = [a for a in entry.genes_used() if a not in names and not _BUILTIN_ARG.match(a)]
    if not bare:
        return []
    declared = declared_names(source)
    return [a for a in entry.template_args or () if a in bare and a not in declared]


__all__ = [
    "EntryName",
    "declared_names",
    "matches",
    "parse_entry",
    "same_params",
    "split_name",
    "split_top",
    "substitute",
    "template_parameters",
    "undeclared_arguments",
]
