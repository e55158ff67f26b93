"""The allowlisted grammar for fixed flags a spec may add (rule I5).

Output paths, host-compiler plugins and anything that runs a program are
ctune's business, not a spec's: ``-o /etc/x``, ``--run``,
``-Xcompiler -fplugin=...`` and friends are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ctune.errors import UserError

_ALLOWED = [
    re.compile(p)
    for p in (
        r"^-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?$",
        r"^-U[A-Za-z_][A-Za-z0-9_]*$",
        r"^--expt-relaxed-constexpr$",
        r"^--expt-extended-lambda$",
        r"^-(-)?extended-lambda$",
        r"^-lineinfo$",
        r"^--use_fast_math$",
        r"^--(ftz|prec-div|prec-sqrt|fmad)=(true|false)$",
        r"^-maxrregcount=\d{1,3}$",
        r"^--extra-device-vectorization$",
        r"^--restrict$",
        r"^-w$",
        r"^--diag-suppress=[0-9,]+$",
        r"^-Xptxas=?(-O[0-3]|-dlcm=(ca|cg)|-dscm=(wb|cg|cs|wt)|--register-usage-level=\d+"
        r"|--allow-expensive-optimizations=(true|false)|--Ofast-compile=(0|min|mid|max))$",
    )
]
# flags that take their value as the next argv item
_PAIRED = {"-Xptxas"}


def check_flags(flags: Iterable[str]) -> None:
    """Raise UserError naming the first flag outside the allowlist."""
    items = list(flags)
    i = 0
    while i < len(items):
        flag = items[i]
        if flag in _PAIRED and i + 1 < len(items):
            flag = f"{flag}={items[i + 1]}"
            i += 1
        if not any(p.match(flag) for p in _ALLOWED):
            raise UserError(f"flag {items[i]!r} is not allowed (ctune owns outputs and host tools)")
        i += 1
