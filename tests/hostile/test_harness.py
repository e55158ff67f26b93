"""The harness detects what it exists to detect, and the tier covers every class.

Each self-test runs a case whose child does the forbidden thing on purpose (through a
patch applied before ``main`` runs) and asserts that :func:`problems` names it: a canary
created, a traceback, a wrong exit code, a file written outside, a hang, a process left
behind, a raw control character, a registry file lost, HEAD moved, a signal never sent,
two error lines. A benign case shows no problem at all.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hostile_harness import ARTIFACT, PATCHES, Case, Project, Signal, case, problems

pytestmark = pytest.mark.nvcc  # the template project holds an artifact nvcc built

HERE = Path(__file__).parent


def _with_patch(monkeypatch: pytest.MonkeyPatch, name: str, patch: Any) -> tuple[str, ...]:
    monkeypatch.setitem(PATCHES, name, patch)
    return (name,)


def _main_does(monkeypatch: pytest.MonkeyPatch, action: Any) -> tuple[str, ...]:
    """A patch: ``main`` first does ``action(project)``, then runs as usual."""

    def patch(p: Project) -> None:
        import ctune.cli

        real = ctune.cli.main

        def main(argv: list[str] | None = None, environ: Any = None) -> None:
            action(p)
            real(argv, environ)

        ctune.cli.main = main  # type: ignore[assignment]

    return _with_patch(monkeypatch, "self-test", patch)


def _found(c: Case, project: Project) -> list[str]:
    return problems(c, project)[0]


def test_a_benign_case_shows_no_problem(project: Project) -> None:
    c = case("benign", "self", ["registry", "list"], 0, keeps=("registry",))
    assert _found(c, project) == []


def test_a_created_canary_is_caught(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    patches = _main_does(monkeypatch, lambda p: os.system(f"touch {p.canary}"))
    found = _found(case("canary", "self", ["--version"], 0, patches=patches), project)
    assert found == ["a command ran: CANARY"]


def test_a_traceback_and_a_wrong_exit_are_caught(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(p: Project) -> None:
        raise RuntimeError("a bug")

    patches = _main_does(monkeypatch, boom)
    found = _found(case("traceback", "self", ["--version"], 0, patches=patches), project)
    assert "exit 1, expected 0" in found and "a traceback" in found


def test_an_undocumented_exit_is_caught(project: Project) -> None:
    found = _found(case("exit", "self", ["--version"], 2), project)
    assert found[0] == "exit 0, expected 2"


def test_an_error_that_is_not_one_line_is_caught(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    patches = _main_does(monkeypatch, lambda p: print("error: first", file=sys.stderr))
    found = _found(
        case("two", "self", ["registry", "show", "no/such/key"], 2, patches=patches), project
    )
    assert any("2 error lines" in f for f in found), found


def test_a_file_written_outside_is_caught(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    patches = _main_does(monkeypatch, lambda p: (p.outside / "written.txt").write_text("x"))
    found = _found(case("outside", "self", ["--version"], 0, patches=patches), project)
    assert found == ["wrote outside the intended place: +outside/written.txt"]


def test_a_file_written_in_the_project_is_caught(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    patches = _main_does(monkeypatch, lambda p: p.write("kernels/new.txt", "x"))
    found = _found(case("project", "self", ["--version"], 0, patches=patches), project)
    assert found == ["wrote outside the intended place: +project/kernels/new.txt"]


def test_a_hang_is_caught_and_killed(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    patches = _main_does(monkeypatch, lambda p: time.sleep(60))
    start = time.monotonic()
    found = _found(case("hang", "self", ["--version"], 0, patches=patches, timeout_s=1), project)
    assert found == ["hang: still running after 1 s (killed)"]
    assert time.monotonic() - start < 20


def test_a_process_left_behind_is_caught(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    patches = _main_does(monkeypatch, lambda p: subprocess.Popen(["sleep", "30"]))
    found = _found(case("leftover", "self", ["--version"], 0, patches=patches), project)
    assert found == ["processes of its group still running after it exited"]


def test_a_raw_control_character_is_caught(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    patches = _main_does(monkeypatch, lambda p: print("\x1b[2J"))
    found = _found(case("raw", "self", ["--version"], 0, patches=patches), project)
    assert found == ["a raw control character in the output: '\\x1b'"]


def test_a_lost_artifact_is_caught(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    patches = _main_does(monkeypatch, lambda p: p.path(ARTIFACT).unlink())
    c = case(
        "lost", "self", ["--version"], 0, patches=patches, writes=("registry",), keeps=("registry",)
    )
    found = _found(c, project)
    assert f"{ARTIFACT} went missing" in found


def test_a_commit_is_caught(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    patches = _main_does(monkeypatch, lambda p: p.git("commit", "-q", "--allow-empty", "-m", "x"))
    found = _found(case("commit", "self", ["--version"], 0, patches=patches), project)
    assert "HEAD moved" in found


def test_a_signal_whose_marker_never_appears_is_caught(project: Project) -> None:
    c = case(
        "signal", "self", ["--version"], 0, signal=Signal(signal.SIGINT, marker="markers/none")
    )
    assert _found(c, project) == ["the signal was never sent (its marker never appeared)"]


def test_a_signal_reaches_the_command(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    def wait(p: Project) -> None:
        p.markers.mkdir()
        (p.markers / "go").touch()
        time.sleep(30)

    patches = _main_does(monkeypatch, wait)
    c = case(
        "sigint",
        "self",
        ["--version"],
        1,
        patches=patches,
        signal=Signal(signal.SIGINT, marker="markers/go"),
    )
    found, o = problems(c, project)
    # the KeyboardInterrupt is raised in the patch, outside ctune's handling: a traceback
    assert o.signalled and o.wall_s < 10 and "a traceback" in found
    assert "KeyboardInterrupt" in o.stderr


# --- the tier as a whole -------------------------------------------------------------------
#: the classes of the issue, each with the least number of cases it must keep
CLASSES = {
    "genes": 40,
    "artifacts": 40,
    "signals": 20,
    "files": 40,
    "specs": 40,
    "settings": 40,
    "git": 15,
    "journals": 30,
    "paths": 15,
}


def all_cases() -> list[Case]:
    """Every case of every module of the tier (the modules define, they run nothing)."""
    found: list[Case] = []
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        spec = importlib.util.spec_from_file_location(f"hostile_cases_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found += module.CASES
    return found


def test_the_tier_covers_every_class() -> None:
    cases = all_cases()
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids), sorted(i for i, n in Counter(ids).items() if n > 1)
    per_class = Counter(c.cls for c in cases)
    assert set(per_class) == set(CLASSES), per_class
    short = {k: (per_class[k], n) for k, n in CLASSES.items() if per_class[k] < n}
    assert not short, short
    assert len(cases) >= 200, len(cases)
    assert all(c.exits and 70 not in c.exits for c in cases)
