"""docs/own-kernel.md's overload example runs as written: `ctune init add.cu` on the file
the doc names (docs/examples/add.cu), in a copy of its folder, prints what the doc shows,
and `ctune compile` takes the draft as it is."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.nvcc

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "own-kernel.md"
EXAMPLE = ROOT / "docs" / "examples" / "add.cu"


def _transcripts(kernel: str) -> list[tuple[str, str]]:
    """(command, what the doc shows it print) for each ``$ ctune ... KERNEL`` in the doc."""
    out: list[tuple[str, str]] = []
    for line in DOC.read_text().splitlines():
        if line.startswith("$ "):
            command = line[2:].split("  #")[0].strip()
            out.append((command, ""))
        elif out and line.strip() and not line.startswith("```"):
            out[-1] = (out[-1][0], f"{out[-1][1]}{line}\n")
        elif out and not line.strip():
            out.append(("", ""))  # a blank line ends a command's output
    return [(c, shown) for c, shown in out if c.startswith("ctune ") and kernel in c]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_overload_example_runs_as_the_doc_shows(tmp_path: Path) -> None:
    assert f"]({EXAMPLE.relative_to(DOC.parent).as_posix()})" in DOC.read_text()
    shutil.copy(EXAMPLE, tmp_path / "add.cu")
    runs = _transcripts("add.cu")
    assert [shlex.split(c)[:3] for c, _ in runs] == [["ctune", "init", "add.cu"]] * 2
    for command, shown in runs:
        done = subprocess.run(
            [sys.executable, "-m", *shlex.split(command)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        printed = _words(done.stdout + done.stderr)
        assert done.returncode == (0 if "--entry" in command else 2), printed
        assert _words(shown) in printed, (command, shown, printed)
    draft = tmp_path / "add.yaml"
    assert re.search(r'entry: "add\(float\*, const float\*, int\)"', draft.read_text())
    built = subprocess.run(
        [sys.executable, "-m", "ctune", "compile", "add.yaml", "--set", "BLOCK_X=128"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "outcome      ok" in built.stdout
