"""The layering of docs/design.md, checked on every import a module makes: at module level,
inside a function or under ``if TYPE_CHECKING``. A module imports only its own layer and
the layers below it; a piece a lower layer needs from above moves down (a pure rule) or the
code that needs it moves up. ``ALLOWLIST`` names the few upward imports kept, each with its
reason. The import graph (every import, as counted here) has no cycle."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "ctune"

#: top-level module or package of ctune (or a sub-package with a layer of its own, dotted)
#: -> its layer (higher imports lower)
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
            "locking",
        ),
        0,
    ),
    **dict.fromkeys(("objective", "spec", "config", "engine_settings", "l2policy"), 1),
    **dict.fromkeys(("evidence", "model"), 2),
    **dict.fromkeys(("measure", "compile", "controls", "identity_probe"), 3),
    **dict.fromkeys(("search", "scale", "spec.draft", "exchange"), 4),
    **dict.fromkeys(("registry", "plot", "sets"), 5),
    "ci": 6,
    **dict.fromkeys(
        ("cli", "api", "api_args", "api_keywords", "doctor", "testing", "__init__", "__main__"), 7
    ),
}

#: upward imports kept: (importer, imported module, why). Annotation-only imports name a
#: type from above without importing it at run time; a lazy import kept for start-up time
#: would be listed here the same way. Remove an entry when its import goes.
ALLOWLIST: dict[tuple[str, str], str] = {
    ("ctune.objective.spec", "ctune.measure"): (
        "annotation only: ObjectiveSpec.sampling_plan widens a measure.SamplingPlan"
    ),
    ("ctune.exchange.records", "ctune.registry.schema"): (
        "annotation only: from_artifact reads a registry Artifact it is handed"
    ),
}

#: import cycles not broken yet, each a set of modules (without the leading ``ctune.``).
#: This list must only shrink: a new cycle, or a listed one that grows or changes, fails.
#: import cycles tolerated for now: none (a new one fails the test)
KNOWN_CYCLES: list[frozenset[str]] = []


def _modules(package: Path) -> dict[str, Path]:
    """Dotted name (``ctune.search.driver``; a package by its own name) -> file."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = (package.name, *path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(
    module: str, path: Path, node: ast.Import | ast.ImportFrom, known: set[str]
) -> set[str]:
    """The modules of the package an import statement loads: each name resolved to the
    longest known module it starts with (``from ctune.spec import load_spec`` -> ctune.spec)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, *([node.module] if node.module else [])])
        names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
    found = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module and not module.startswith(name + "."):
            found.add(name)  # a package's own __init__ is plumbing, not a dependency
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules it imports anywhere in its file."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module] |= _targets(module, path, node, set(modules))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _top(module: str) -> str:
    """The LAYERS key a module belongs to: its sub-package's where that has a layer of its
    own (``ctune.spec.draft.guess`` -> spec.draft), else its top-level package's."""
    parts = module.split(".")
    if len(parts) > 2 and ".".join(parts[1:3]) in LAYERS:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else "__init__"


def upward_imports(package: Path) -> list[tuple[str, str]]:
    """(importer, imported) for every import of a higher layer."""
    return [
        (module, target)
        for module, targets in sorted(import_graph(package).items())
        for target in sorted(targets)
        if _top(target) != _top(module) and LAYERS[_top(target)] > LAYERS[_top(module)]
    ]


def _short(modules: frozenset[str]) -> frozenset[str]:
    return frozenset(m.removeprefix("ctune.") for m in modules)


def test_every_module_has_a_layer() -> None:
    tops = {_top(m) for m in _modules(PACKAGE)}
    assert tops == set(LAYERS), "place the new module in LAYERS and in docs/design.md"


def test_no_module_imports_a_layer_above_it() -> None:
    unlisted = [
        f"{a} ({LAYERS[_top(a)]}) imports {b} ({LAYERS[_top(b)]})"
        for a, b in upward_imports(PACKAGE)
        if (a, b) not in ALLOWLIST
    ]
    assert unlisted == []


def test_every_allowlisted_import_is_still_there() -> None:
    """A kept import that went away leaves its entry behind: the list only shrinks."""
    assert set(ALLOWLIST) <= set(upward_imports(PACKAGE))


def test_no_import_cycle_beyond_the_known_ones() -> None:
    found = {_short(c) for c in cycles(import_graph(PACKAGE))}
    assert found == set(KNOWN_CYCLES)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "ctune" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "ctune"


def test_the_check_sees_an_upward_import_wherever_it_is(tmp_path: Path) -> None:
    """The identity once imported the registry's name rule at module level, and probed the
    toolchain through a function-level import."""
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "registry/__init__.py": "",
            "registry/layout.py": "",
            "compile/__init__.py": "",
            "compile/nvcc.py": "",
            "search/__init__.py": "",
            "search/driver.py": "",
            "evidence/__init__.py": "",
            "evidence/stats.py": "",
            "evidence/identity.py": (
                "from typing import TYPE_CHECKING\n"
                "from ctune.registry.layout import validate_name\n"
                "from . import stats\n"
                "if TYPE_CHECKING:\n    from ctune.search import driver\n"
                "def probe():\n    from ctune.compile import nvcc\n"
            ),
        },
    )
    assert upward_imports(package) == [
        ("ctune.evidence.identity", "ctune.compile"),
        ("ctune.evidence.identity", "ctune.compile.nvcc"),
        ("ctune.evidence.identity", "ctune.registry.layout"),
        ("ctune.evidence.identity", "ctune.search"),
        ("ctune.evidence.identity", "ctune.search.driver"),
    ]


def test_the_check_sees_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "__init__.py": "",
            "search/__init__.py": "from ctune.search.report import pool\n",
            "search/report.py": "from ctune.search.result import Gain\n",
            "search/result.py": "def cost():\n    from ctune.search.confirm import Cost\n",
            "search/confirm.py": "def significance():\n    from .report import pool\n",
            "search/driver.py": "import ctune.search.report\n",
        },
    )
    assert cycles(import_graph(package)) == [
        frozenset({"ctune.search.confirm", "ctune.search.report", "ctune.search.result"})
    ]


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
