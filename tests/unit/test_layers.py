"""The layering of docs/design.md, checked: a module imports, at module level, only its own
layer and the layers below it. A lower layer that needs a piece from above (the identity
probes the toolchain) imports it inside the function that needs it, where it costs nothing
until it runs and cannot form an import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "ctune"

#: top-level module or package of ctune -> its layer (higher imports lower)
LAYERS: dict[str, int] = {
    **dict.fromkeys(
        (
            "errors",
            "records",
            "expr",
            "names",
            "strict_yaml",
            "arch",
            "files",
            "quoting",
            "writes",
            "interrupts",
        ),
        0,
    ),
    **dict.fromkeys(("objective", "space", "spec", "config", "l2policy"), 1),
    "evidence": 2,
    **dict.fromkeys(("measure", "compile", "controls"), 3),
    **dict.fromkeys(("search", "scale", "draft", "exchange", "plot"), 4),
    "registry": 5,
    **dict.fromkeys(("cli", "api", "doctor", "testing", "__init__", "__main__"), 6),
}


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "ctune" and len(parts) > 1 else None


def _module_level_imports(tree: ast.Module) -> list[str]:
    """What a module imports when it is imported: not inside functions, not under
    ``if TYPE_CHECKING``."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(ast.Module(body=child.orelse, type_ignores=[]))
                continue
            if isinstance(child, ast.Import):
                found.extend(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append(child.module)
            visit(child)

    visit(tree)
    return found


def _upward_imports(package: Path) -> list[str]:
    upward = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        layer = LAYERS[parts[0]]
        for module in _module_level_imports(ast.parse(path.read_text())):
            target = _top(module)
            if target is not None and target != parts[0] and LAYERS[target] > layer:
                upward.append(f"{'/'.join(parts)} ({layer}) imports {module} ({LAYERS[target]})")
    return upward


def test_every_module_has_a_layer() -> None:
    tops = {p.relative_to(PACKAGE).with_suffix("").parts[0] for p in PACKAGE.rglob("*.py")}
    assert tops == set(LAYERS), "place the new module in LAYERS and in docs/design.md"


def test_no_module_imports_a_layer_above_it() -> None:
    assert _upward_imports(PACKAGE) == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The identity once imported the registry's name rule at module level."""
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "identity.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from ctune.registry.layout import validate_name\n"
        "if TYPE_CHECKING:\n    from ctune.search import driver\n"
        "def probe():\n    from ctune.compile import nvcc\n"
    )
    assert _upward_imports(tmp_path) == ["evidence/identity (2) imports ctune.registry.layout (5)"]


@pytest.mark.parametrize("name", ["validate_name", "NAME_RE"])
def test_the_name_rule_has_one_home(name: str) -> None:
    homes = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if any(
            isinstance(node, (ast.FunctionDef, ast.Assign))
            and name
            in {getattr(t, "id", None) for t in getattr(node, "targets", [])}
            | {getattr(node, "name", None)}
            for node in ast.parse(p.read_text()).body
        )
    ]
    assert homes == ["names.py"]
