"""The allowlisted grammar for fixed flags a spec may add (rule I5).

Output paths, host-compiler plugins and anything that runs a program are
ctune's business, not a spec's: ``-o /etc/x``, ``--run``,
``-Xcompiler -fplugin=...`` and friends are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from ctune.errors import UserError

#: nvcc's flag that compiles a file of another suffix (a ``.cuh``, a ``.h``) as CUDA: the
#: builds of such a source carry it (:func:`language_flags`), and a spec may write it
CUDA_LANGUAGE = ("-x", "cu")

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
        rf"^{CUDA_LANGUAGE[0]}={CUDA_LANGUAGE[1]}$",
        r"^-Xptxas=?(-O[0-3]|-dlcm=(ca|cg)|-dscm=(wb|cg|cs|wt)|--register-usage-level=\d+"
        r"|--allow-expensive-optimizations=(true|false)|--Ofast-compile=(0|min|mid|max))$",
    )
]
# flags that take their value as the next argv item
_PAIRED = {"-Xptxas", CUDA_LANGUAGE[0]}


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


def language_flags(source: Path, flags: Iterable[str] = ()) -> list[str]:
    """What tells nvcc that ``source`` is CUDA: nothing for a ``.cu`` (nor where ``flags``
    already say it), ``-x cu`` for a header or any other suffix."""
    items = list(flags)
    given = any(items[i : i + 2] == list(CUDA_LANGUAGE) for i in range(len(items)))
    return [] if source.suffix == ".cu" or given else list(CUDA_LANGUAGE)
