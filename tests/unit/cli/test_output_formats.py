"""One output convention on every command: ``--format table|json|csv``.

Every command of the click tree is run with ``--format json`` through ``ctune.cli.main``
in this process, on a scratch project (a git repository with a remote, a registry holding
one artifact that a stand-in search made and ``registry import`` committed). Only the
machine boundary is replaced, where a GPU would be needed: the search's compiler and
measurer and bench's measurer are ``ctune.testing.standins``; nvcc and git are real.
The output must be one JSON document on stdout, whatever the exit code; a failure is
still one ``error:`` line on stderr.

Then: CSV names each quantity once; output to a pipe has no padding and no hard wraps;
a search whose stderr is not a terminal prints one progress line per generation.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ctune.errors import EXIT_GATE_FAILED, EXIT_OK

ROOT = Path(__file__).parents[3]

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="compile, bench, init run nvcc"),
]

#: commands whose stdout is the export itself, in the format ``--as`` chooses (T4, CSV,
#: flags, header, CMake, JSON): what they print is what they export, not a report
EXPORTS = {"export", "registry export"}

ADD_CU = """\
#ifndef BLOCK
#define BLOCK 256
#endif
__global__ void add(float* out, const float* a, const float* b, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""


@dataclass
class Project:
    root: Path
    key: str  # the artifact the stand-in search made
    journal: str  # that search's journal
    result: str  # its result file
    generations: int  # how many generations it ran


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """``ctune ARGV`` in this process: (exit code, stdout, stderr)."""
    from ctune.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = EXIT_OK
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


class _StandInWorker:
    """``bench``'s measuring process, as the stand-in measurer (NOT A GPU)."""

    def __init__(self, device: int, cfg: object) -> None:
        pass

    def __enter__(self) -> Any:
        from ctune.testing.standins import StandInMeasurer

        return StandInMeasurer(samples=40)

    def __exit__(self, *exc: object) -> None:
        pass


def _stand_ins(mp: pytest.MonkeyPatch) -> None:
    """The GPU boundary of ``search`` and ``bench``."""
    import ctune.cli.search as search_cli
    import ctune.measure.session as session
    import ctune.search.session as search_session
    from ctune.spec import load_spec
    from ctune.testing.standins import StandInCompiler, StandInMeasurer

    mp.setattr(search_cli, "load_kernel", lambda kernel, cfg: (load_spec(kernel), None))
    mp.setattr(search_cli, "make_compiler", lambda spec, toolchain, cfg: StandInCompiler(spec))
    mp.setattr(search_cli, "make_measurer", lambda cfg: StandInMeasurer(samples=40))
    mp.setattr(search_session, "gpu_available", lambda index=0: True)
    mp.setattr(session, "WorkerMeasurer", _StandInWorker)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    from ctune.testing.standins import write_standin_kernel

    tmp = tmp_path_factory.mktemp("formats")
    home = tmp / "home"
    home.mkdir()
    root = tmp / "project"
    root.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        env = {"HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / ".gitconfig")}
        env.update(GIT_CONFIG_NOSYSTEM="1", CTUNE_CACHE_DIR=str(tmp / "cache"))
        for who in ("AUTHOR", "COMMITTER"):
            env.update({f"GIT_{who}_NAME": "Test", f"GIT_{who}_EMAIL": "test@example.com"})
        for name, value in env.items():
            mp.setenv(name, value)
        for name in ("CTUNE_REGISTRY", "CTUNE_DEBUG", "CTUNE_NVCC", "CTUNE_JOBS", "COLUMNS"):
            mp.delenv(name, raising=False)
        mp.chdir(root)
        _git(root, "init", "-q", "-b", "main")
        (root / "README").write_text("scratch project\n")
        _git(root, "add", ".")
        _git(root, "commit", "-q", "-m", "start")
        _git(tmp, "init", "-q", "--bare", "-b", "main", str(tmp / "remote.git"))
        _git(root, "remote", "add", "origin", str(tmp / "remote.git"))
        write_standin_kernel(root / "kernels")
        (root / "add.cu").write_text(ADD_CU)
        _stand_ins(mp)
        search = ["search", "kernels/standin.cu", "-O", "p99", "--budget", "16", "--seed", "1"]
        code, out, err = run_main([*search, "--format", "json", "--out", "result.json"])
        assert code == EXIT_OK, err
        found = json.loads(out)
        code, _, err = run_main(["registry", "import", "result.json"])
        assert code == EXIT_OK, err
        code, out, err = run_main(["registry", "list", "--format", "json"])
        assert code == EXIT_OK, err
        key = json.loads(out)["rows"][0]["key"]
        yield Project(root, key, found["journal"], "result.json", found["generations"])


Recipe = Callable[[Project], list[str]]

#: each command: its arguments (without --format), and the exit codes it may end with here
RECIPES: dict[str, tuple[Recipe, set[int]]] = {
    "search": (
        lambda p: [
            "search",
            "kernels/standin.cu",
            "-O",
            "p99",
            "--budget",
            "8",
            "--out",
            "r2.json",
        ],
        {EXIT_OK},
    ),
    "compile": (lambda p: ["compile", "kernels/standin.cu", "--set", "TILE_M=32"], {EXIT_OK}),
    "bench": (lambda p: ["bench", "kernels/standin.cu", "-n", "40"], {EXIT_OK}),
    "space": (lambda p: ["space", "kernels/standin.cu"], {EXIT_OK}),
    "doctor": (lambda p: ["doctor"], {EXIT_OK}),
    "init": (lambda p: ["init", "add.cu", "--force"], {EXIT_OK}),
    "plot": (lambda p: ["plot", p.journal, "--out", "figures"], {EXIT_OK}),
    # the stand-in's artifact was measured on no GPU and built by no nvcc: stale here
    "check": (lambda p: ["check", "--kernels", "kernels", "--no-gpu"], {EXIT_GATE_FAILED}),
    "gate": (lambda p: ["gate", "--build-only", "--kernels", "kernels"], {EXIT_GATE_FAILED}),
    "registry list": (lambda p: ["registry", "list"], {EXIT_OK}),
    "registry show": (lambda p: ["registry", "show", f"{p.key}@pinned"], {EXIT_OK}),
    "registry diff": (lambda p: ["registry", "diff", p.key, f"HEAD:{p.key}"], {EXIT_OK}),
    "registry pin": (lambda p: ["registry", "pin", p.key, "--release", "v1"], {EXIT_OK}),
    "registry import": (lambda p: ["registry", "import", p.result], {EXIT_OK}),
    "registry journal": (lambda p: ["registry", "journal", p.key, p.journal], {EXIT_OK}),
    "registry migrate": (lambda p: ["registry", "migrate", "--dry-run"], {EXIT_OK}),
    "registry refresh": (
        lambda p: ["registry", "refresh", "--kernels", "kernels", "--dry-run"],
        {EXIT_GATE_FAILED},
    ),
    "registry verify": (lambda p: ["registry", "verify", "--kernels", "kernels"], {EXIT_OK}),
    "registry doctor": (lambda p: ["registry", "doctor"], {EXIT_OK}),
    "registry push": (lambda p: ["registry", "push"], {EXIT_OK}),
    "registry pull": (lambda p: ["registry", "pull"], {EXIT_OK}),
    "registry status": (lambda p: ["registry", "status"], {EXIT_OK}),
    "registry retune": (lambda p: ["registry", "retune", p.key, "--kernels", "kernels"], {EXIT_OK}),
}


def _commands() -> dict[str, Any]:
    """Every command of the app, by its path (``registry show``)."""
    from ctune.cli import _command

    found: dict[str, Any] = {}

    def walk(group: Any, prefix: str) -> None:
        for name, command in group.commands.items():
            path = f"{prefix}{name}"
            if hasattr(command, "commands"):
                walk(command, f"{path} ")
            else:
                found[path] = command

    walk(_command(), "")
    return found


def _options(command: Any) -> dict[str, Any]:
    return {opt: param for param in command.params for opt in getattr(param, "opts", ())}


def test_every_command_takes_format_and_has_a_recipe() -> None:
    commands = _commands()
    assert set(RECIPES) | EXPORTS == set(commands)  # a new command needs a recipe here
    for path, command in commands.items():
        if path in EXPORTS:
            continue
        options = _options(command)
        assert "--format" in options, path
        choices = [str(c.value) for c in options["--format"].type_descriptor.annotation]
        assert choices[:2] == ["table", "json"] and set(choices) <= {"table", "json", "csv"}
        assert options["--json"].hidden, f"{path}: --json is the hidden alias"


@pytest.mark.parametrize("path", sorted(RECIPES))
def test_format_json_is_one_document(project: Project, path: str) -> None:
    recipe, codes = RECIPES[path]
    code, out, err = run_main([*recipe(project), "--format", "json"])
    assert code in codes, f"exit {code}: {err[-500:]}"
    assert isinstance(json.loads(out), dict)  # one document, nothing beside it
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(errors) == (0 if code == EXIT_OK else 1), err
    if errors:
        assert err.splitlines()[-1] == errors[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["doctor", "--json"],
        ["registry", "list", "--as", "json"],
        ["space", "kernels/standin.cu", "--json"],
    ],
)
def test_the_older_spellings_still_give_json(project: Project, argv: list[str]) -> None:
    code, out, err = run_main(argv)
    assert code == EXIT_OK, err
    assert isinstance(json.loads(out), dict)


def test_two_formats_that_disagree_are_bad_input(project: Project) -> None:
    code, out, err = run_main(["doctor", "--json", "--format", "csv"])
    assert code == 2 and out == ""
    assert err.startswith("error: --json and --format csv: give one of them")
    code, _, err = run_main(["compile", "kernels/standin.cu", "--format", "csv"])
    assert code == 2 and "'csv' is not one of 'table', 'json'" in err  # no rows to give


# --- CSV ---------------------------------------------------------------------------------

#: a quantity's bare name -> its column with the unit: a table holds one of the two
UNIT_COLUMNS = {
    "p50": "p50_ms",
    "p95": "p95_ms",
    "p99": "p99_ms",
    "mean": "mean_ms",
    "energy": "energy_j",
    "power": "avg_power_w",
    "spills": "spills_bytes",
    "smem": "smem_bytes",
    "compile_time": "compile_s",
}

CSV_COMMANDS: dict[str, Recipe] = {
    "export journal": lambda p: ["export", p.journal, "--as", "csv"],
    "export artifact": lambda p: ["export", p.key, "--as", "csv"],
    "plot --as csv": lambda p: ["plot", p.journal, "--as", "csv"],
    "registry show": lambda p: ["registry", "show", p.key, "--format", "csv"],
    "registry list": lambda p: ["registry", "list", "--format", "csv"],
    "space": lambda p: ["space", "kernels/standin.cu", "--format", "csv"],
    "doctor": lambda p: ["doctor", "--format", "csv"],
    "check": lambda p: ["check", "--kernels", "kernels", "--no-gpu", "--format", "csv"],
}


@pytest.mark.parametrize("name", sorted(CSV_COMMANDS))
def test_csv_names_each_quantity_once(project: Project, name: str) -> None:
    _, out, err = run_main(CSV_COMMANDS[name](project))
    header, *rows = list(csv.reader(io.StringIO(out)))
    assert rows and all(len(row) == len(header) for row in rows), err
    assert len(header) == len(set(header)), header
    twice = [(bare, unit) for bare, unit in UNIT_COLUMNS.items() if {bare, unit} <= set(header)]
    assert not twice, f"{name}: the same quantity in two columns: {twice}"


def test_the_p99_objective_is_the_p99_ms_column(project: Project) -> None:
    """The search's objective is p99: its values are in p99_ms, with the measured ones."""
    _, out, _ = run_main(["registry", "show", project.key, "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(out)))
    _, document, _ = run_main(["registry", "show", f"{project.key}@pinned", "--format", "json"])
    pinned = json.loads(document)
    assert "p99" not in rows[0]
    mine = next(r for r in rows if r["key"] == pinned["key"])
    assert float(mine["p99_ms"]) == pytest.approx(pinned["values"][0])


# --- output to a pipe --------------------------------------------------------------------


def _piped(project: Project, *argv: str, columns: str | None = None) -> str:
    """``python -m ctune ARGV`` with stdout a pipe (and no COLUMNS unless given)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "CTUNE_DEBUG")}
    env["PYTHONPATH"] = str(ROOT)
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [sys.executable, "-m", "ctune", *argv],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == EXIT_OK, done.stderr
    return done.stdout


def _whole_on_one_line(text: str, pieces: list[str]) -> list[str]:
    """The pieces that no single line of ``text`` holds whole (a hard wrap cut them)."""
    lines = text.splitlines()
    return [p for p in pieces if not any(p in ln for ln in lines)]


def test_piped_tables_have_no_padding_and_no_wraps(project: Project) -> None:
    shown = _piped(project, "registry", "show", project.key)
    assert not [ln for ln in shown.splitlines() if ln != ln.rstrip()]
    data = json.loads(_piped(project, "registry", "show", project.key, "--format", "json"))
    values = [str(v) for v in data["fingerprint"].values() if str(v).strip()]
    assert len(max(values, key=len)) > 60 and not _whole_on_one_line(shown, values)

    report = _piped(project, "doctor")
    assert not [ln for ln in report.splitlines() if ln != ln.rstrip()]
    checks = json.loads(_piped(project, "doctor", "--format", "json"))["checks"]
    details = [c["detail"] for c in checks if c["detail"]]
    assert max(len(d) for d in details) > 80 and not _whole_on_one_line(report, details)


@pytest.mark.parametrize("columns", [None, "40"])
def test_piped_sentences_are_never_hard_wrapped(project: Project, columns: str | None) -> None:
    """``init`` says each gene and check in one sentence: a narrow COLUMNS or none, a pipe
    keeps each on one line (a terminal folds it where it must)."""
    said = _piped(project, "init", "add.cu", "--force", columns=columns)
    draft = json.loads(_piped(project, "init", "add.cu", "--force", "--format", "json"))
    sentences = [f"check   {c}" for c in draft["checks"]]
    sentences += [f"gene    {g['name']} " for g in draft["genes"]]
    assert max(len(s) for s in sentences) > 40 and not _whole_on_one_line(said, sentences)
    assert not [ln for ln in said.splitlines() if ln != ln.rstrip()]


# --- progress of a search ----------------------------------------------------------------

GENERATION = re.compile(
    r"^generation (\d+): evaluations (\d+)/16, best p99 [0-9.]+, front \d+, elapsed \d+s$"
)


def test_a_search_in_a_log_says_each_generation(project: Project) -> None:
    argv = ["search", "kernels/standin.cu", "-O", "p99", "--budget", "16", "--seed", "1"]
    for fmt in ("table", "json"):
        code, _, err = run_main([*argv, "--format", fmt, "--out", f"again-{fmt}.json"])
        assert code == EXIT_OK, err
        said = [GENERATION.match(ln) for ln in err.splitlines() if ln.startswith("generation")]
        assert all(said), err
        numbers = [int(m.group(1)) for m in said if m]
        assert numbers == list(range(1, project.generations + 1)), err
        evaluations = [int(m.group(2)) for m in said if m]
        assert evaluations == sorted(evaluations) and evaluations[-1] == 16


def test_a_search_on_a_terminal_keeps_its_live_display(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    import ctune.cli.render_search as render_search

    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=120)
    monkeypatch.setattr(render_search, "err_console", terminal)
    argv = ["search", "kernels/standin.cu", "-O", "p99", "--budget", "16", "--out", "tty.json"]
    code, _, err = run_main(argv)
    assert code == EXIT_OK, err
    assert "generation" in screen.getvalue()  # the live block drew itself there
    assert not re.search(r"^generation \d+:", screen.getvalue() + err, re.MULTILINE)
