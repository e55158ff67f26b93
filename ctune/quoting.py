"""What may go on nvcc's command line, and how a ``-D`` value is written there.

nvcc runs its steps through ``/bin/sh``, writing ``-D``/``-U`` values, ``-I`` folders and
file paths inside double quotes (escaping only ``"``) and pass-through values bare, so a
``-D`` value ``$(cmd)`` would run ``cmd`` (rule X6). :func:`check_argv` applies one rule to
every argv item at the process boundary: where nvcc quotes it, none of ``$ ` \\ "`` and no
control character; elsewhere only plain characters. :func:`value_refusal` applies it to a
spec's values when it loads; :func:`define_flag` writes a comma as nvcc's ``\\,``. The rule
and why it is sufficient: docs/security.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctune.errors import UserError
from ctune.records import GeneValue

#: characters the shell acts on inside double quotes
SHELL_ACTIVE = frozenset('$`\\"')
#: an item nvcc writes bare: characters no shell treats specially anywhere
_BARE_SAFE = re.compile(r"[A-Za-z0-9_.,=+\-/:@%]*")
#: options whose value (the next item) nvcc writes in double quotes
_QUOTED_VALUE_OF = frozenset(
    {"-o", "--output-file", "-D", "--define-macro", "-U", "--undefine-macro", "-I"}
    | {"--include-path"}
)
#: pass-through options: nvcc writes their value (the next item) bare, whatever it is
_BARE_VALUE_OF = frozenset(
    {"-Xptxas", "-Xcompiler", "-Xlinker", "-Xnvlink", "-Xarchive"}
    | {"--ptxas-options", "--compiler-options", "--linker-options", "--nvlink-options"}
    | {"--archive-options"}
)
#: options whose value (joined: ``-DX=1``) nvcc writes in double quotes
_QUOTED_JOINED = ("-D", "-U", "-I")
_SHOWN = 120  # characters of an item a message shows
_COMMA_ESCAPE = "\\,"  # nvcc's: a comma inside one -D value


class CommandLineError(UserError):
    """A value or path that nvcc's sub-shell would interpret: nothing was run."""


def _is_control(ch: str) -> bool:
    return ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F


def value_refusal(text: str) -> str | None:
    """Why a gene or define value (or a path) cannot go on nvcc's command line; None when
    it can. The one rule for values, wherever they come from (a spec, an artifact)."""
    found = _quoted_refusal(text, comma_escape=False)
    return None if found is None else found[1]


def _quoted_refusal(
    text: str, *, comma_escape: bool, quote_escaped: bool = False
) -> tuple[int, str] | None:
    """(where, why) an item nvcc double-quotes cannot go on its command line; None when it
    can. ``comma_escape``: the item is as argv holds it, where ``\\,`` is nvcc's own escape
    (:func:`define_flag`); ``quote_escaped``: nvcc escapes a ``"`` in this item itself."""
    for i, ch in enumerate(text):
        if _is_control(ch):
            return i, f"contains the control character {ch!r}"
        if comma_escape and ch == "\\" and text[i + 1 : i + 2] == ",":
            continue
        if quote_escaped and ch == '"':
            continue
        if ch in SHELL_ACTIVE:
            return i, f"contains {ch!r}, which the shell nvcc runs its steps through would act on"
    return None


def bare_refusal(text: str) -> str | None:
    """Why ``text`` cannot be an item nvcc writes bare (an option, a pass-through value)."""
    found = _bare_refusal(text)
    return None if found is None else found[1]


def _bare_refusal(text: str) -> tuple[int, str] | None:
    if _BARE_SAFE.fullmatch(text):
        return None
    at = next(i for i, ch in enumerate(text) if not _BARE_SAFE.fullmatch(ch))
    return at, (
        f"contains {text[at]!r} where nvcc passes it bare to the shell it runs its steps "
        "through (only letters, digits and _ . , = + - / : @ % are safe there)"
    )


def _shown(item: str, at: int) -> str:
    """``item`` for a message: a long one shortened around ``at``, the refused character
    (the part of a long path that needs changing stays in view)."""
    if len(item) <= _SHOWN:
        return repr(item)
    start = max(0, min(at - _SHOWN // 2, len(item) - _SHOWN))
    head = "..." if start else ""
    tail = "..." if start + _SHOWN < len(item) else ""
    return repr(head + item[start : start + _SHOWN] + tail)


def check_argv(argv: Sequence[str], what: str) -> None:
    """Refuse, before it runs, an nvcc argv whose items break the rule of this module.

    ``what`` names the run (``"nvcc for gemm"``); the error is one line naming the item.
    The last item, when not an option or an option's value, is the input file: nvcc
    double-quotes it, escaping a ``"`` in it.
    """
    quoted_next = True  # the program itself: nvcc quotes the toolkit paths it derives
    bare_next = False
    last = len(argv) - 1
    for i, item in enumerate(argv):
        is_input = i == last and i > 0 and not (quoted_next or bare_next or item[:1] == "-")
        quoted = not bare_next and (quoted_next or item.startswith(_QUOTED_JOINED) or is_input)
        found = (
            _quoted_refusal(item, comma_escape=True, quote_escaped=is_input)
            if quoted
            else _bare_refusal(item)
        )
        if found is not None:
            at, why = found
            raise CommandLineError(
                f"{what}: the command-line item {_shown(item, at)} {why}; nothing was run "
                "(remove it from the value, or move the file to a path without it: "
                "docs/security.md)"
            )
        quoted_next = item in _QUOTED_VALUE_OF and not bare_next
        bare_next = item in _BARE_VALUE_OF and not bare_next


def define_flag(name: str, value: GeneValue) -> str:
    """``-DNAME=VALUE`` (a bool as 0/1): how a define reaches nvcc, for builds and ``-M``.

    A comma is written as nvcc's escape ``\\,`` (else nvcc splits the value there)."""
    if isinstance(value, bool):
        value = int(value)
    return f"-D{name}={str(value).replace(',', _COMMA_ESCAPE)}"


__all__ = [
    "SHELL_ACTIVE",
    "CommandLineError",
    "bare_refusal",
    "check_argv",
    "define_flag",
    "value_refusal",
]
