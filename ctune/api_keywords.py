"""Kernel Tuner's ``tune_kernel`` keywords as the spec ``ctune.tune`` writes says them.

A spec is YAML that ``ctune search`` resumes from the command line, so what Kernel Tuner
takes as Python objects becomes spec text and files beside it: a callable restriction
becomes the expression it computes (checked against the callable on the space), ``answer``
a reference that returns the expected arrays, and ``cmem_args`` constant-memory args.
"""

from __future__ import annotations

import ast
import builtins
import dis
import inspect
import itertools
import random
import textwrap
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctune.errors import UserError
from ctune.expr import ExprError, parse_python
from ctune.expr import parse as parse_expr

#: combinations a translated restriction is compared with its callable on, at most
CHECKED_COMBINATIONS = 4096


def restriction_text(restriction: Any, tune_params: Mapping[str, Sequence[Any]]) -> str:
    """A restriction as a spec expression: a string as it is; a callable (``lambda p:
    p["bx"] * p["by"] <= 1024``, or one taking the parameters by name) as the expression
    it returns, once it agrees with the callable on the space."""
    if isinstance(restriction, str):
        return restriction
    if not callable(restriction):
        raise UserError(
            f"restrictions: {restriction!r} is neither an expression string nor a function"
        )
    function = _function_node(restriction)
    params = [a.arg for a in function.args.args]
    body = function.body
    if isinstance(body, list):  # a def: one return statement
        returns = [s for s in body if isinstance(s, ast.Return)]
        if len(body) != 1 or len(returns) != 1 or returns[0].value is None:
            raise _untranslatable(restriction, "its body is more than one return statement")
        body = returns[0].value
    by_name = len(params) != 1 or params[0] in tune_params
    if not by_name:
        body = _ParamsAsNames(params[0]).visit(body)
    text = ast.unparse(body)
    try:
        expr = parse_expr(text)
    except ExprError as exc:
        raise _untranslatable(restriction, str(exc)) from None
    unknown = sorted(expr.names - set(tune_params))
    if unknown:
        raise _untranslatable(restriction, f"it reads {', '.join(unknown)}, not a tune_params name")
    _check_agrees(restriction, expr, tune_params, by_name)
    return text


class _ParamsAsNames(ast.NodeTransformer):
    """``p["name"]`` -> ``name``; any other use of ``p`` cannot be a spec expression."""

    def __init__(self, dict_name: str) -> None:
        self.dict_name = dict_name

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if (
            isinstance(node.value, ast.Name)
            and node.value.id == self.dict_name
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            return ast.copy_location(ast.Name(node.slice.value, ast.Load()), node)
        return self.generic_visit(node)


def _function_node(fn: Callable[..., Any]) -> ast.Lambda | ast.FunctionDef:
    """The lambda or def of ``fn`` in its source (a lambda may sit inside a call)."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        raise _untranslatable(fn, "its source cannot be read") from None
    arity = fn.__code__.co_argcount if hasattr(fn, "__code__") else -1
    if getattr(fn, "__name__", "") == "<lambda>":
        return _lambda_node(fn, "".join(lines), first, arity)
    try:
        tree = parse_python(textwrap.dedent("".join(lines)))
    except SyntaxError:
        raise _untranslatable(fn, "its source could not be read as one function") from None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef)
            and node.name == fn.__name__
            and len(node.args.args) == arity
        ):
            return node
    raise _untranslatable(fn, "its source could not be read as one function")


#: (line, column) where a node starts or ends in its file, the column in UTF-8 bytes
Place = tuple[int, int]


def _lambda_node(fn: Callable[..., Any], text: str, first: int, arity: int) -> ast.Lambda:
    """The lambda ``fn`` is, among those on its source lines: the one whose body holds
    where its code's instructions come from (``co_positions``). Two lambdas on one line
    share their lines: taking the first of them wrote another restriction's expression."""
    found: dict[tuple[Place, Place], ast.Lambda] = {}
    for node, (line, col) in _lambda_pieces(text):
        if isinstance(node, ast.Lambda) and len(node.args.args) == arity:
            found.setdefault(_span(node.body, line + first - 1, col), node)
    spans = _code_spans(fn.__code__)
    if spans:
        low, high = min(s for s, _ in spans), max(e for _, e in spans)
        holding = [span for span in found if span[0] <= low and high <= span[1]]
        if holding:  # the innermost (the latest start): a lambda in another's body is its own
            return found[max(holding)]
    elif len(found) == 1:  # no column information (python -X no_debug_ranges)
        return next(iter(found.values()))
    raise _untranslatable(
        fn, "it cannot be told apart from the other lambdas on its line; put each on its own line"
    )


def _code_spans(code: types.CodeType) -> list[tuple[Place, Place]]:
    """Where in its file each of ``code``'s instructions comes from; none without column
    information. An instruction of no source of its own (the start) has an empty span."""
    out = []
    for start_line, end_line, start_col, end_col in code.co_positions():
        if start_line is None or end_line is None or start_col is None or end_col is None:
            continue
        if (end_line, end_col) > (start_line, start_col):
            out.append(((start_line, start_col), (end_line, end_col)))
    return out


def _lambda_pieces(text: str) -> list[tuple[ast.AST, Place]]:
    """Each node parsed from a piece of ``text`` that starts at a ``lambda`` (cut where it
    parses; the lines around it need not), with where the piece starts: (line, column in
    bytes), counted from 1 and 0 in ``text``."""
    found: list[tuple[ast.AST, Place]] = []
    start = text.find("lambda")
    while start >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        place = (text.count("\n", 0, start) + 1, len(text[line_start:start].encode()))
        for end in range(len(text), start, -1):
            try:
                tree = parse_python(text[start:end], mode="eval")
            except SyntaxError:
                continue
            found.extend((node, place) for node in ast.walk(tree))
            break
        start = text.find("lambda", start + 1)
    return found


def _span(node: ast.expr, first_line: int, first_col: int) -> tuple[Place, Place]:
    """Where ``node`` of a piece starting at (``first_line``, ``first_col``) is in the file:
    the piece's first line is shifted right by where it starts, its later lines are not."""

    def place(line: int, col: int) -> Place:
        return (first_line + line - 1, col + first_col if line == 1 else col)

    return (
        place(node.lineno, node.col_offset),
        place(node.end_lineno or node.lineno, node.end_col_offset or node.col_offset),
    )


def _check_agrees(
    fn: Callable[..., Any], expr: Any, tune_params: Mapping[str, Sequence[Any]], by_name: bool
) -> None:
    names = list(tune_params)
    product = itertools.product(*(tune_params[n] for n in names))
    combos = list(itertools.islice(product, CHECKED_COMBINATIONS * 4))
    if len(combos) > CHECKED_COMBINATIONS:
        combos = random.Random(0).sample(combos, CHECKED_COMBINATIONS)
    parameters = inspect.signature(fn).parameters if by_name else {}
    for combo in combos:
        values = dict(zip(names, combo, strict=True))
        try:
            wanted = fn(**{k: values[k] for k in parameters}) if by_name else fn(values)
            got = expr.evaluate(values)
        except Exception as exc:  # the user's callable may raise anything
            raise _untranslatable(fn, f"at {values} it raised {type(exc).__name__}") from None
        if bool(wanted) != bool(got):
            raise _untranslatable(fn, f"'{expr.source}' disagrees with it at {values}")


def _untranslatable(fn: Any, why: str) -> UserError:
    name = getattr(fn, "__name__", type(fn).__name__)
    return UserError(
        f"restrictions: {name} cannot be written as a spec expression ({why}); "
        "pass it as an expression string, e.g. 'block_size_x * block_size_y <= 1024'"
    )


# --- verify: a function copied by its source ------------------------------------------

#: what a verify function that cannot be copied can be instead
_VERIFY_HOW = (
    "define it with def at a module's top level, using only its arguments and modules that "
    "module imports, or write a verify file and the spec key verify: {python: FILE.py:FUNCTION}"
)


def verify_module(verify: Any) -> tuple[str, str]:
    """(the text of ``verify.py``, the function's name): Kernel Tuner's ``verify`` copied by
    its source with the modules it uses, for the measuring worker imports it from a file.
    Only what is carried faithfully is taken: a module-level ``def`` whose free names are
    modules; anything else (a lambda, a closure, a method, other globals) is refused."""
    if not inspect.isfunction(verify):
        raise UserError(
            f"verify: expected a function (expected, got, atol=None) -> bool, got "
            f"{type(verify).__name__}; {_VERIFY_HOW}"
        )
    name = verify.__name__
    if name == "<lambda>":
        raise _uncopied("it is a lambda")
    owner = verify.__qualname__.rpartition(".")[0]
    if owner and not owner.endswith("<locals>"):
        raise _uncopied(f"{owner.split('.')[-1]}.{name} is defined in a class")
    if verify.__closure__ or owner:
        raise _uncopied(f"{name} is defined inside a function")
    try:
        inspect.signature(verify).bind({}, {})
    except TypeError:
        raise UserError(f"verify: {name} must take (expected, got, atol=None)") from None
    try:
        text = inspect.getsource(verify)
    except (OSError, TypeError):
        raise _uncopied(f"the source of {name} cannot be read") from None
    try:
        tree = parse_python(textwrap.dedent(text))
        node = next(iter(tree.body), None) if isinstance(tree, ast.Module) else None
    except SyntaxError:
        node = None
    if not isinstance(node, ast.FunctionDef) or node.name != name:
        raise _uncopied(f"the source of {name} is not one def")
    if node.decorator_list:
        raise _uncopied(f"{name} is decorated")
    defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    used = _global_names(verify.__code__) | {
        n.id for d in defaults for n in ast.walk(d) if isinstance(n, ast.Name)
    }
    imports = []
    for used_name in sorted(used - {name}):  # its own name: verify.py defines it too
        value = verify.__globals__.get(used_name)
        if isinstance(value, types.ModuleType) and value.__name__ != "__main__":
            module = value.__name__
            imports.append(
                f"import {module}" if module == used_name else f"import {module} as {used_name}"
            )
        elif used_name in verify.__globals__ or not hasattr(builtins, used_name):
            raise _uncopied(f"{name} uses {used_name}, which is not a module its file imports")
    header = (
        '"""The verify function passed to ctune.tune(), copied here for the measuring worker."""'
    )
    body = "\n".join(["from __future__ import annotations", "", *imports])
    return f"{header}\n\n{body}\n\n\n{textwrap.dedent(text)}", name


def _global_names(code: types.CodeType) -> set[str]:
    """The global names a function's code (and the code nested in it) reads."""
    names = {
        str(i.argval)
        for i in dis.get_instructions(code)
        if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _uncopied(what: str) -> UserError:
    return UserError(
        f"verify: cannot copy the function into the spec folder: {what}; {_VERIFY_HOW}"
    )


# --- given data: answer and cmem_args ---------------------------------------------------


def check_answer(answer: Sequence[Any], arguments: Sequence[Any], names: list[str]) -> list[str]:
    """The names of the arguments ``answer`` gives expected values for (Kernel Tuner's
    form: one entry per argument, None where it is not checked)."""
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
        raise UserError("answer: a list with one entry per argument (None where not checked)")
    if len(answer) != len(arguments):
        raise UserError(f"answer: {len(answer)} entries for {len(arguments)} arguments")
    checked = []
    for name, expected, given in zip(names, answer, arguments, strict=True):
        if expected is None:
            continue
        shape = getattr(given, "shape", None)
        if shape is None or len(shape) == 0:
            raise UserError(f"answer: {name} is a scalar argument; only buffers are checked")
        if tuple(getattr(expected, "shape", ())) != tuple(shape):
            raise UserError(
                f"answer: {name} has shape {tuple(getattr(expected, 'shape', ()))}, "
                f"its argument {tuple(shape)}"
            )
        checked.append(name)
    if not checked:
        raise UserError("answer: every entry is None; give the expected value of an output")
    return checked


def answer_reference(checked: list[str]) -> str:
    """A reference module that returns the expected arrays saved beside it."""
    names = ", ".join(f'"{n}"' for n in checked)
    return (
        '"""The answer passed to ctune.tune(): the expected outputs, saved beside this file."""\n'
        "\nfrom pathlib import Path\n\nimport numpy as np\n\n_HERE = Path(__file__).parent\n\n\n"
        "def answer(xp, inputs, dims):\n"
        f"    return {{n: xp.asarray(np.load(_HERE / f'answer_{{n}}.npy')) for n in ({names},)}}\n"
    )


def check_cmem_args(cmem_args: Mapping[str, Any], params: list[str]) -> None:
    """``cmem_args``: {the kernel's __constant__ symbol: its values}."""
    if not isinstance(cmem_args, Mapping):
        raise UserError("cmem_args: a dict {constant symbol name: array}")
    for name, values in cmem_args.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise UserError(f"cmem_args: {name!r} is not a C identifier")
        if name in params:
            raise UserError(f"cmem_args: {name} is a kernel parameter, not a constant symbol")
        if getattr(values, "shape", None) is None:
            raise UserError(f"cmem_args[{name!r}]: expected a numpy array")


__all__ = [
    "answer_reference",
    "check_answer",
    "check_cmem_args",
    "restriction_text",
    "verify_module",
]
