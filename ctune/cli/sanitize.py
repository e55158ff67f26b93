"""Make any text safe to show: no terminal control, no encoding error, bounded length.

Paths, option values, file contents and exception messages reach the
terminal; a user (or a file) can put anything in them. What is shown keeps
the text readable and unambiguous: control characters (escape sequences,
newlines, carriage returns), bidirectional overrides and bytes that are not
UTF-8 (Python decodes them from argv as lone surrogates) are written as
Python-style escapes, and a very long message keeps its start and end.
Rich markup is never interpreted: the CLI's consoles have markup off and
styled parts are :class:`rich.text.Text` spans.
"""

from __future__ import annotations

import re

#: longest single message shown; longer ones keep their start and their end
MAX_LINE = 1000

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)
_UNSAFE_BLOCK = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
    "\ud800-\udfff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shorten(text: str, limit: int = MAX_LINE) -> str:
    """``text`` if it fits, else its start and end around a count of what was left out."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 4
    return f"{text[:head]} ...({len(text) - head - tail} characters)... {text[-tail:]}"


def one_line(text: object, limit: int = MAX_LINE) -> str:
    """``str(text)`` on one line: every control or non-UTF-8 character escaped, bounded."""
    return shorten(_UNSAFE.sub(_escape, str(text)), limit)


def block(text: object) -> str:
    """Multi-line text (a compiler log): lines and tabs kept, every other control escaped."""
    return _UNSAFE_BLOCK.sub(_escape, str(text))


__all__ = ["MAX_LINE", "block", "one_line", "shorten"]
