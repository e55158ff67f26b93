"""What decides a candidate is correct, as the spec gives it: the reference function,
an optional verify function that replaces the tolerance compare, and the tolerances; and
the vendor call the kernel is compared with, checked by the same rules."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from ctune.expr import parse_python
from ctune.files import MAX_SOURCE_BYTES, InputFileError, read_text_capped
from ctune.spec.load_context import IDENT_RE, LoadContext
from ctune.spec.model import Tolerance


def parse_reference(ctx: LoadContext, folder: Path, data: Any) -> tuple[Path, str]:
    """``reference: {python: FILE.py:FUNCTION}``: by the rule of ``verify`` and ``vendor``
    (:func:`function_in_folder`), so a missing function is refused here, not by the worker
    on a GPU, and the code that decides correctness lies beside the spec."""
    if not isinstance(data, dict) or set(data) != {"python"}:
        raise ctx.fail("reference", "expected {python: FILE.py:FUNCTION}")
    return function_in_folder(ctx, folder, "reference", data["python"])


def parse_verify(ctx: LoadContext, folder: Path, data: Any) -> tuple[Path | None, str]:
    """``verify: {python: FILE.py:FUNCTION}``: a file inside the spec's folder that defines
    FUNCTION at its top level (read, not run: the worker imports it when it checks)."""
    if data is None:
        return None, ""
    if not isinstance(data, dict) or set(data) != {"python"}:
        raise ctx.fail("verify", "expected {python: FILE.py:FUNCTION}")
    return function_in_folder(ctx, folder, "verify", data["python"])


#: the longest vendor name the report prints
VENDOR_NAME_MAX = 60


def parse_vendor(ctx: LoadContext, folder: Path, data: Any) -> tuple[Path | None, str, str]:
    """``vendor: {python: FILE.py:FUNCTION, name: TEXT}``: the library call the kernel
    would replace (cuBLAS, SDPA), timed beside what a search confirms; (path, function,
    name), or (None, "", "") where the spec has none."""
    if data is None:
        return None, "", ""
    if not isinstance(data, dict) or set(data) != {"python", "name"}:
        raise ctx.fail("vendor", "expected {python: FILE.py:FUNCTION, name: TEXT}")
    name = data["name"]
    if not isinstance(name, str) or not name.strip() or len(name) > VENDOR_NAME_MAX:
        raise ctx.fail(
            "vendor.name", f"give the vendor call a name of 1 to {VENDOR_NAME_MAX} characters"
        )
    path, function = function_in_folder(ctx, folder, "vendor", data["python"])
    return path, function, name.strip()


def function_in_folder(ctx: LoadContext, folder: Path, key: str, text: Any) -> tuple[Path, str]:
    """``FILE.py:FUNCTION`` of spec key ``key``: a file inside the spec's folder that defines
    FUNCTION at its top level (read, not run: the worker imports it when it needs it)."""
    where = f"{key}.python"
    if not isinstance(text, str):
        raise ctx.fail(where, "expected FILE.py:FUNCTION")
    file_part, _, func = text.partition(":")
    if not func or not IDENT_RE.match(func) or not file_part.endswith(".py"):
        raise ctx.fail(where, f"{text!r} is not FILE.py:FUNCTION")
    path = (folder / file_part).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise ctx.fail(where, f"{file_part} resolves outside the spec's folder")
    if not path.is_file():
        raise ctx.fail(where, f"{file_part} is not a file in the spec's folder")
    try:
        tree = parse_python(read_text_capped(path, MAX_SOURCE_BYTES, f"{key} file"))
    except InputFileError as exc:
        raise ctx.fail(where, str(exc)) from None
    except SyntaxError as exc:
        raise ctx.fail(where, f"{file_part} line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # a NUL byte; nesting too deep to parse
        raise ctx.fail(where, f"{file_part} is not Python source: {exc}") from None
    if not isinstance(tree, ast.Module) or func not in top_level_names(tree):
        raise ctx.fail(
            where,
            f"{file_part} defines no function '{func}' at its top level; "
            "def it there, or name the function it defines",
        )
    return path, func


def top_level_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (defs, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def parse_tolerance(
    ctx: LoadContext, data: Any, outputs: list[str] | None, key: str = "tolerance"
) -> dict[str, Tolerance]:
    """The spec's tolerance (``outputs`` given: every output covered), or a problem's own
    (``outputs`` None: its names are checked once the args are read)."""
    if outputs is not None:
        data = data or {"default": {"rel_l2": 1e-2, "max_abs": 1e-1}}
    if not isinstance(data, dict) or not data:
        raise ctx.fail(key, "expected {default: {rel_l2, max_abs}, OUTPUT: {...}}")
    out = {}
    for name, body in data.items():
        if outputs is not None and name != "default" and name not in outputs:
            raise ctx.fail(f"{key}.{name}", f"not an output (outputs: {', '.join(outputs)})")
        if not isinstance(body, dict) or set(body) != {"rel_l2", "max_abs"}:
            raise ctx.fail(f"{key}.{name}", "expected {rel_l2: number, max_abs: number}")
        try:
            rel_l2, max_abs = float(body["rel_l2"]), float(body["max_abs"])
        except (TypeError, ValueError):
            raise ctx.fail(f"{key}.{name}", "rel_l2 and max_abs must be numbers") from None
        if not (rel_l2 > 0 and max_abs > 0):
            raise ctx.fail(f"{key}.{name}", "tolerances must be positive")
        out[name] = Tolerance(rel_l2, max_abs)
    if outputs is None:
        return out
    if "default" not in out and set(outputs) - set(out):
        raise ctx.fail(key, "give a default or one entry per output")
    if "default" not in out:
        out["default"] = next(iter(out.values()))
    return out


__all__ = [
    "VENDOR_NAME_MAX",
    "function_in_folder",
    "parse_reference",
    "parse_tolerance",
    "parse_vendor",
    "parse_verify",
    "top_level_names",
]
