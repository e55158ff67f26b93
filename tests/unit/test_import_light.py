"""`import ctune` (and the CLI module) imports nothing heavy and probes nothing."""

import subprocess
import sys

HEAVY = {"cupy", "pynvml", "deap", "git", "numpy", "matplotlib", "cutlass_library"}


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_ctune_is_light():
    assert not HEAVY & _modules_after("import ctune")


def test_import_cli_is_light():
    # numpy is tolerated here: the registry commands' pure statistics use it
    assert not (HEAVY - {"numpy"}) & _modules_after("import ctune.cli, ctune.cli.commands")
