"""What a kernel, problem, device class or release may be called.

One rule for every name that becomes a file path or a git ref part (rules X1, X2, G13 of
docs/design.md): lowercase ASCII only, so case-insensitive filesystems and Unicode
normalisation cannot make two names collide, and nothing like ``..``, ``/``, NUL, newline
or ``.git`` can travel. It sits below every layer that names things: the spec loader, the
identity (a GPU's device class) and the registry.
"""

from __future__ import annotations

import re

from ctune.errors import UserError

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")

# Names git or common filesystems treat specially; refused even though the
# regex would let some through (Windows device names break checkouts there).
_RESERVED = frozenset(
    {"con", "prn", "aux", "nul", "git", "head"}
    | {f"com{i}" for i in range(10)}
    | {f"lpt{i}" for i in range(10)}
)


def validate_name(name: object, what: str = "name") -> str:
    """Return ``name`` if it is a safe registry name, else raise UserError.

    Beyond the regex, refuse what git refuses in a ref component (``..``, a
    trailing ``.`` or ``.lock``) so a valid name is always a valid tag part.
    """
    if not isinstance(name, str):
        raise UserError(f"{what} must be a string, got {type(name).__name__}")
    shown = ascii(name)[:80]
    if not NAME_RE.fullmatch(name):
        raise UserError(
            f"{what} {shown} is not allowed: use 1-64 of a-z 0-9 . _ - "
            "starting with a letter or digit"
        )
    if ".." in name or name.endswith((".", ".lock")) or name.split(".")[0] in _RESERVED:
        raise UserError(f"{what} {shown} is reserved or not valid in a git ref")
    return name
