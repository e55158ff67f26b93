"""What a kernel's own index arithmetic says about its launch and its buffers. Pure, text.

``ctune init`` reads the expressions a kernel indexes with, as its author wrote them:
``blockIdx.y * TILE + threadIdx.y`` steps the grid's y by ``TILE``; ``row * K + col`` with
``row < M`` reads an M x K row-major buffer; ``x + blockIdx.x * cols`` gives each block a
row; a loop ``for (j = 0; j < TILE; j += ROWS)`` or a division ``TILE / ROWS`` needs
``TILE % ROWS == 0``; ``__shared__ float s[TILE][TILE + 1]`` is static shared memory.
Each answer is a guess the draft marks; None where the text does not say.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

_IDENT = re.compile(r"[A-Za-z_]\w*")
_CAST = re.compile(
    r"^\(\s*(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:long\s+long|long|int|size_t|"
    r"int64_t|uint64_t|int32_t|unsigned|ptrdiff_t)\s*\)\s*"
)
_BUILTIN = re.compile(r"\b(blockIdx|blockDim|threadIdx|gridDim)\s*\.\s*([xyz])\b")
_COMPARE = r"(<=|<|>=|>)"
#: what follows an element that is stored into: ``=``, ``+=``, ``<<=``, ``++``, ``--``
_STORE = re.compile(r"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|\s*(?:\+\+|--)")
MAX_DEPTH = 4
#: ``p += k;``: the pointer moves to where the thread works; nothing is stored through it
_MOVE = re.compile(r"\s*[-+]=\s*[^;]*;")
#: characters around a blockIdx read its factors are looked for in; the longest index
#: expression and the most terms of one that are read: past them the text says nothing
WINDOW = 200
MAX_INDEX_CHARS = 400
MAX_TERMS = 8
#: indexings of one buffer looked at, at most
MAX_USES = 16


def _plain(expr: str) -> str:
    """``expr`` without outer parentheses, casts and spaces around ``.``."""
    expr = _BUILTIN.sub(lambda m: f"{m.group(1)}.{m.group(2)}", expr.strip())
    while True:
        before = expr
        expr = _CAST.sub("", expr).strip()
        if expr.startswith("static_cast<"):
            close = expr.find(">")
            expr = expr[close + 1 :].strip()
        if expr.startswith("(") and _closing(expr, 0) == len(expr) - 1:
            expr = expr[1:-1].strip()
        if expr == before:
            return expr


def _closing(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] in "([":
            depth += 1
        elif text[i] in ")]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split(expr: str, op: str) -> list[str]:
    """Top-level operands of ``op`` (``+`` or ``*``) in ``expr``; a ``-`` joins a term."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == op and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return [p.strip() for p in parts if p.strip()]


def statement_at(body: str, pos: int) -> str:
    """The statement around ``pos``: from the previous ``;``, ``{`` or ``}`` to the next ``;``."""
    start = max(body.rfind(c, 0, pos) for c in ";{}") + 1
    end = body.find(";", pos)
    return body[start : end if end >= 0 else len(body)]


@dataclass
class Reader:
    """Index arithmetic of one kernel: ``body`` its code, ``dims`` the names (parameters or
    macros) that stand for problem dimensions, mapped to the dimension's name."""

    body: str
    dims: Mapping[str, str]
    #: the dimension counting the rows of a row length, where no bound says it
    partner: Callable[[str, list[str]], str | None] = lambda row, dims: None
    _bounds: dict[tuple[str, str], str | None] = field(default_factory=dict, repr=False)
    _definitions: dict[str, str | None] = field(default_factory=dict, repr=False)

    def definition(self, name: str) -> str | None:
        """The expression a local variable is first given (``int i = a * n + b;``)."""
        if name not in self._definitions:
            self._definitions[name] = self._definition(name)
        return self._definitions[name]

    def _definition(self, name: str) -> str | None:
        match = re.search(
            rf"(?<![\w.])(?:[A-Za-z_][\w:]*[\s*&]+)+{re.escape(name)}\s*=\s*([^;=][^;]*);",
            self.body,
        )
        return match.group(1).strip() if match else None

    def bound(self, var: str, near: str = "") -> str | None:
        """The dimension a variable is compared with (``row < M``, ``x >= nx - 1``),
        looking first in ``near`` (the statement that uses it), then the whole body."""
        if (var, near) not in self._bounds:
            self._bounds[var, near] = self._bound(var, near)
        return self._bounds[var, near]

    def _bound(self, var: str, near: str) -> str | None:
        pattern = re.compile(
            rf"(?<![\w.])({re.escape(var)})\s*(?:[+-]\s*\w+\s*)?{_COMPARE}\s*\(?\s*([A-Za-z_]\w*)"
            rf"|([A-Za-z_]\w*)\s*(?:[+-]\s*\w+\s*)?{_COMPARE}\s*{re.escape(var)}(?![\w.])"
        )
        for text in (near, self.body):
            for match in pattern.finditer(text):
                other = match.group(3) or match.group(4)
                if other in self.dims:
                    return self.dims[other]
        return None

    def shape(self, expr: str, near: str = "", depth: int = 0) -> list[str] | None:
        """The row-major shape an index expression walks, outermost first, or None."""
        expr = _plain(expr)
        if depth > MAX_DEPTH or not expr or len(expr) > MAX_INDEX_CHARS:
            return None
        if _IDENT.fullmatch(expr):
            found = self.bound(expr, near)
            if found is not None:
                return [found]
            defined = self.definition(expr)
            return self.shape(defined, near, depth + 1) if defined else None
        terms = _split(expr, "+")[:MAX_TERMS]
        for term in terms:
            factors = _split(term, "*")
            if len(factors) < 2:
                continue
            last = _plain(factors[-1])
            if last in self.dims:
                row = self.dims[last]
                inner = self.shape(" * ".join(factors[:-1]), near, depth + 1)
                if inner is None and depth == 0:
                    partner = self.partner(row, list(self.dims.values()))
                    inner = [partner] if partner is not None and partner != row else None
                if inner is not None:
                    return [*inner, row]
        if len(terms) > 1 and depth > 0:  # a row's index: (y + j) * WIDTH, y < HEIGHT
            for term in terms:
                part = self.shape(term, near, depth + 1)
                if part is not None and len(part) == 1:
                    return part
        return None

    def buffer_shape(self, pointer: str) -> list[str] | None:
        """The shape a pointer parameter is indexed as, from its first index whose
        arithmetic says (``A[row * K + k]``), or through a pointer into it
        (``const float* row = x + blockIdx.x * cols``: one row per block)."""
        uses = re.finditer(rf"(?<![\w.]){re.escape(pointer)}\s*\[", self.body)
        for match in itertools.islice(uses, MAX_USES):
            close = _closing(self.body, match.end() - 1)
            if close < 0:
                continue
            near = statement_at(self.body, match.start())
            found = self.shape(self.body[match.end() : close], near)
            if found is not None:
                return found
        for match in re.finditer(
            rf"(?<![\w.]){re.escape(pointer)}\s*\+\s*([^;,]+)[;,]",
            self.body,
        ):
            rows = self.rows_per_block(match.group(1))
            if rows is not None:
                return list(rows)
        return None

    def rows_per_block(self, offset: str) -> tuple[str, str] | None:
        """``blockIdx.x * cols`` as a pointer offset: (the rows dimension, the row's)."""
        factors = [_plain(f) for f in _split(_plain(offset), "*")]
        if len(factors) == 2:
            a, b = factors
            if a.startswith("blockIdx.") and b in self.dims:
                return (row_dim(a[-1]), self.dims[b])
            if b.startswith("blockIdx.") and a in self.dims:
                return (row_dim(b[-1]), self.dims[a])
        return None

    def block_steps(self, axis: str) -> list[str] | None:
        """What ``blockIdx.<axis>`` is multiplied by where it indexes, outermost product
        included (``(blockIdx.z * bz + threadIdx.z) * tz`` -> ``[bz, tz]``), or None."""
        text = _BUILTIN.sub(lambda m: f"{m.group(1)}.{m.group(2)}", self.body)
        for match in re.finditer(rf"blockIdx\.{axis}\b", text):
            start = match.start()
            # blockIdx.a * A * B, or A * blockIdx.a
            after = re.match(r"\s*((?:\*\s*[\w.]+\s*)+)", text[match.end() : match.end() + WINDOW])
            before = re.search(r"((?:[\w.]+\s*\*\s*)+)$", text[max(0, start - WINDOW) : start])
            factors: list[str] = []
            if after:
                factors += [f.strip() for f in after.group(1).split("*") if f.strip()]
            if before:
                factors += [f.strip() for f in before.group(1).split("*") if f.strip()]
            factors = [f for f in factors if not _CAST.match(f"({f})")]
            if not factors:
                continue
            # (blockIdx.a * S + threadIdx.a) * T: the parenthesis's own multiplier
            open_ = text.rfind("(", 0, start)
            if open_ >= 0 and not text[open_ - 1 : open_].strip().isidentifier():
                close = _closing(text, open_)
                if close > match.end() and f"threadIdx.{axis}" in text[open_:close]:
                    tail = re.match(r"\s*((?:\*\s*[\w.]+\s*)+)", text[close + 1 : close + WINDOW])
                    if tail:
                        factors += [f.strip() for f in tail.group(1).split("*") if f.strip()]
            return factors
        return None

    def axis_variable(self, axis: str) -> str | None:
        """The variable a kernel first computes from ``blockIdx.<axis>`` and
        ``threadIdx.<axis>`` (its global index on that axis)."""
        text = _BUILTIN.sub(lambda m: f"{m.group(1)}.{m.group(2)}", self.body)
        for match in re.finditer(r"(?<![\w.])([A-Za-z_]\w*)\s*=\s*([^;=][^;]*);", text):
            value = match.group(2)
            if f"blockIdx.{axis}" in value and f"threadIdx.{axis}" in value:
                return match.group(1)
        return None

    def _before(self, pos: int) -> str:
        return self.body[max(0, pos - WINDOW) : pos]

    def _after(self, pos: int) -> str:
        return self.body[pos : pos + WINDOW]

    def alias(self, pos: int) -> str | None:
        """The pointer a declaration at ``pos`` makes into a buffer (``float* out = y +
        off;`` at ``y``), or None."""
        match = re.search(r"\*\s*([A-Za-z_]\w*)\s*=\s*$", self._before(pos))
        return match.group(1) if match else None

    def written_only(self, pointer: str, depth: int = 0) -> bool:
        """Does the kernel only store into ``pointer`` (``p[i] = ...``, never read or
        handed on)?"""
        uses = list(re.finditer(rf"(?<![\w.]){re.escape(pointer)}(?!\w)", self.body))
        if not uses:
            return False
        for use in uses:
            alias = self.alias(use.start())
            if alias is not None:
                if depth < MAX_DEPTH and self.written_only(alias, depth + 1):
                    continue
                return False
            rest = self._after(use.end())
            if _MOVE.match(rest):
                continue
            declared = re.search(r"\*\s*$", self._before(use.start()))
            if depth and declared and re.match(r"\s*=(?!=)", rest):
                continue  # the alias's own declaration
            if not rest.lstrip().startswith("["):
                return False
            open_ = use.end() + rest.index("[")
            close = _closing(self.body, open_)
            if close < 0 or not re.match(r"\s*=(?!=)", self._after(close + 1)):
                return False
        return True

    def read_only(self, pointer: str, depth: int = 0) -> bool:
        """Does the kernel only read ``pointer`` (``p[i]`` or ``p->f`` never stored into,
        never handed on; a pointer made from it read only too), or not use it at all?
        Moving the pointer (``p += k``) stores nothing."""
        for use in re.finditer(rf"(?<![\w.]){re.escape(pointer)}(?!\w)", self.body):
            rest = self._after(use.end())
            if _MOVE.match(rest):
                continue
            alias = self.alias(use.start())
            if alias is not None:
                if depth < MAX_DEPTH and self.read_only(alias, depth + 1):
                    continue
                return False
            declared = re.search(r"\w\s*\*\s*$", self._before(use.start()))  # not *p = v
            if depth and declared and re.match(r"\s*=(?!=)", rest):
                continue  # the alias's own declaration
            member = re.match(r"\s*->\s*\w+", rest)
            if member is not None:
                if _STORE.match(self._after(use.end() + member.end())):
                    return False
                continue
            if not rest.lstrip().startswith("["):
                return False
            close = _closing(self.body, use.end() + rest.index("["))
            if close < 0 or _STORE.match(self._after(close + 1)):
                return False
            if re.search(r"(?:\+\+|--)\s*$", self._before(use.start())):
                return False
        return True

    def one_element(self, pointer: str) -> bool:
        """Is ``pointer`` only ever its first element (``*out``, ``out[0]``,
        ``atomicAdd(out, v)``)?"""
        uses = list(re.finditer(rf"(?<![\w.]){re.escape(pointer)}(?!\w)", self.body))
        if not uses:
            return False
        for use in uses:
            before = self._before(use.start()).rstrip()
            after = self._after(use.end()).lstrip()
            if after.startswith("[") and re.match(r"\[\s*0\s*\]", after):
                continue
            if before.endswith("*") and not re.search(r"[\w)\]]\s*\*$", before):
                continue
            if re.search(r"\batomic\w+\s*\(\s*$", before) and after.startswith(","):
                continue
            return False
        return True

    def accumulates_atomically(self, pointer: str) -> bool:
        """Does the kernel add into ``pointer`` with atomics (a sum in any order)?"""
        return re.search(rf"\batomicAdd\s*\(\s*&?\s*{re.escape(pointer)}\b", self.body) is not None

    def skips_a_border(self) -> bool:
        """Does the kernel leave a border unwritten (``x < 1 || x >= nx - 1``)? An output
        it does not fully write must be inout, so the reference sees the border."""
        for match in re.finditer(r"\bif\s*\(([^;{]*)\)\s*(?:return|continue)\s*;", self.body):
            if re.search(r"-\s*[1-9]\b|<\s*[1-9]\b", match.group(1)):
                return True
        return False


def accumulates(body: str) -> bool:
    """Does the kernel sum in a loop (``acc += a[k] * b[k]`` in a ``for`` body, not its
    step)? A sum's rounding depends on its order: the reference needs a looser tolerance."""
    pieces, pos = [], 0
    for match in re.finditer(r"\bfor\s*\(", body):
        close = _closing(body, match.end() - 1)
        if match.start() >= pos and close > 0:
            pieces.append(body[pos : match.end()])  # the loop's header, left out
            pos = close
    text = "".join([*pieces, body[pos:]])
    loops = "for" in text or "while" in text
    return loops and re.search(r"[\w\]]\s*\+=\s*[^;]*[\w\]\)]\s*;", text) is not None


def row_dim(axis: str) -> str:
    """The dimension a one-block-per-row kernel's grid axis covers."""
    return "ROWS" if axis == "x" else f"ROWS_{axis.upper()}"


def grid_stride(body: str) -> bool:
    """A grid-stride loop (``i += blockDim.x * gridDim.x``): any grid covers the data."""
    return re.search(r"\+=\s*[^;]*\bgridDim\s*\.\s*x\b", body) is not None


def block_stride(body: str) -> bool:
    """A loop over blocks (``vec += gridDim.x``, no blockDim in the step): each block
    takes one item at a time, and any grid covers the data."""
    return re.search(r"\+=\s*gridDim\s*\.\s*x\s*[;)]", body) is not None


def zero_steps(text: str, genes: Collection[str]) -> list[tuple[str, str]]:
    """(A, B) for each gene divided by a gene (``A / B``) or a loop over a gene stepping
    by a gene (``for (j = 0; j < A; j += B)``): both need ``A % B == 0``, or the quotient
    (a step, a count) can be 0, an infinite loop, and the tile is not covered whole."""
    found: dict[tuple[str, str], None] = {}
    names = "|".join(sorted((re.escape(g) for g in genes), key=len, reverse=True))
    if not names:
        return []
    for match in re.finditer(rf"(?<![\w.])({names})\s*/\s*\(?\s*({names})(?!\w)", text):
        if match.group(1) != match.group(2):
            found[(match.group(1), match.group(2))] = None
    loop = re.compile(
        rf"for\s*\([^;]*;\s*([A-Za-z_]\w*)\s*<\s*({names})\s*;\s*\1\s*\+=\s*({names})\s*\)"
    )
    for match in loop.finditer(text):
        if match.group(2) != match.group(3):
            found[(match.group(2), match.group(3))] = None
    return list(found)


__all__ = [
    "Reader",
    "accumulates",
    "block_stride",
    "grid_stride",
    "row_dim",
    "statement_at",
    "zero_steps",
]
