"""`import ctune`, the CLI module, `ctune --version` and `ctune --help` import nothing heavy
and probe nothing.

Heavy: the numerical stack (numpy, scipy), what only a command's work needs (yaml for
specs, git for the registry, deap and optuna for strategies, matplotlib for plots, dask for
the engine, cutlass_library for CUTLASS kernels) and the GPU libraries (cupy, pynvml),
which also probe the driver. `--version` prints one line, so it needs no rich either;
`--help` is drawn by typer with rich, so rich is part of it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

HEAVY = {
    "cupy",
    "pynvml",
    "deap",
    "optuna",
    "git",
    "numpy",
    "scipy",
    "yaml",
    "matplotlib",
    "dask",
    "distributed",
    "cutlass_library",
}
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| *(\S+)$")


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def _run_ctune(*args: str) -> tuple[str, set[str]]:
    """`python -m ctune ARGS` as a user runs it: its stdout and the top-level packages it
    imported (from ``-X importtime``, which lists every module a process imports)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ctune", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = {m.group(1) for ln in done.stderr.splitlines() if (m := _IMPORTED.match(ln))}
    assert "ctune" in names  # the listing was read: a test of nothing cannot pass
    return done.stdout, {name.split(".")[0] for name in names}


def test_import_ctune_is_light():
    assert not HEAVY & _modules_after("import ctune")


def test_import_ctune_loads_only_its_errors():
    """The program imports the package before it can take a Ctrl-C (ctune/__main__.py):
    its records load on first use, and the names still resolve."""
    assert {m for m in _modules_after("import ctune") if m.startswith("ctune")} == {
        "ctune",
        "ctune.errors",
    }
    import ctune
    from ctune.records import Trial

    assert ctune.Trial is Trial and "Trial" in dir(ctune)


def test_import_cli_is_light():
    assert not HEAVY & _modules_after("import ctune.cli, ctune.cli.commands")


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_imports_nothing_heavy_and_no_rich(flag: str):
    from ctune import __version__

    out, packages = _run_ctune(flag)
    assert out == f"ctune {__version__}\n"
    assert not (HEAVY | {"rich"}) & packages


@pytest.mark.parametrize("args", [["--help"], ["search", "--help"], ["registry", "--help"]])
def test_help_imports_nothing_heavy(args: list[str]):
    out, packages = _run_ctune(*args)
    assert "Usage: ctune" in out
    assert not HEAVY & packages


def test_dir_lists_the_lazy_api_without_loading_it():
    listed = _modules_after("import ctune; names = dir(ctune); print(' '.join(names))")
    assert {"tune", "load_artifact", "write_spec", "run_search", "TuneResult"} <= listed
    assert "ctune.api" not in listed and "ctune.search.driver" not in listed  # still lazy


def test_every_name_dir_lists_resolves():
    import ctune

    assert set(ctune.__all__) <= set(dir(ctune))
    for name in dir(ctune):
        getattr(ctune, name)  # a listed name that does not resolve raises AttributeError
