"""What every part of the spec loader shares: the file an error names, and the expressions
it reads (ctune.expr), checked against the names a key may use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ctune.errors import SpecError
from ctune.expr import Expr, ExprError, parse

#: an argument, member or function name
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class LoadContext:
    """Carries the file name so every error names file and key."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, message: str) -> SpecError:
        return SpecError(f"{self.path}: {key}: {message}")

    def expr(self, key: str, source: Any) -> Expr:
        if isinstance(source, bool) or not isinstance(source, (str, int, float)):
            raise self.fail(key, f"expected an expression, got {type(source).__name__}")
        try:
            return parse(source)
        except ExprError as exc:
            raise self.fail(key, str(exc)) from None

    def expr_over(self, key: str, source: Any, known: set[str]) -> Expr:
        """An expression over ``known`` names only; another name is one line naming it."""
        expr = self.expr(key, source)
        unknown = sorted(expr.names - known)
        if unknown:
            names = ", ".join(sorted(known))
            raise self.fail(key, f"unknown name '{unknown[0]}' in '{expr.source}' (known: {names})")
        return expr


__all__ = ["IDENT_RE", "LoadContext"]
