"""`ctune search` through the real Typer app, with the GPU/toolchain boundary replaced.

Only the three factories of ``ctune.cli.search`` are patched (load_kernel,
make_compiler, make_measurer) to return stand-ins; everything else (option
parsing, settings, the service, the renderer, exit codes) is real.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ctune.cli.search as search_cli
from ctune.cli.options import parse_duration
from ctune.exchange.t4 import read_t4
from ctune.spec import load_spec
from ctune.testing.cli_app import ctune_main
from ctune.testing.journal_holder import held_elsewhere
from ctune.testing.standins import StandInCompiler, StandInMeasurer, write_standin_kernel


class Boundary:
    """What the patched factories hand out, so tests can look at them afterwards."""

    def __init__(self) -> None:
        self.measurer: Any = StandInMeasurer(samples=40)
        self.compilers: list[StandInCompiler] = []


@pytest.fixture
def boundary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Boundary:
    monkeypatch.chdir(tmp_path)
    for name in ("CTUNE_CACHE_DIR", "CTUNE_JOBS", "CTUNE_L2", "CTUNE_DEBUG", "CTUNE_REGISTRY"):
        monkeypatch.delenv(name, raising=False)
    write_standin_kernel(tmp_path / "k")
    b = Boundary()

    def compiler(spec: Any, toolchain: Any, cfg: Any) -> StandInCompiler:
        made = StandInCompiler(spec)
        b.compilers.append(made)
        return made

    monkeypatch.setattr(search_cli, "load_kernel", lambda kernel, cfg: (load_spec(kernel), None))
    monkeypatch.setattr(search_cli, "make_compiler", compiler)
    monkeypatch.setattr(search_cli, "make_measurer", lambda cfg: b.measurer)
    return b


Run = Callable[..., Any]


@pytest.fixture
def run(boundary: Boundary) -> Run:
    def invoke(*args: str) -> Any:
        return CliRunner().invoke(
            ctune_main, ["search", "k/standin.cu", *args], env={"COLUMNS": "200"}
        )

    return invoke


def test_a_pareto_search_reports_and_writes_a_result(run: Run, tmp_path: Path) -> None:
    result = run(
        "--objective",
        "p99",
        "--objective",
        "energy",
        "--constraint",
        "regs<=160",
        "--budget",
        "30",
        "--seed",
        "2",
        "--option",
        "population_size=8",
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "on the front" in out and "pinned:" in out and "baseline: the default build" in out
    assert re.search(r"re-measured in [345] fresh processes", out) and "GPU busy" in out
    assert re.search(r"confirmation [345] of at most 5 processes, \d+ measurements", out)
    assert re.search(r"\d+ candidates -> \d+ distinct binaries measured", out)
    assert "failures" in out and "compile_error" in out
    artifact = json.loads((tmp_path / ".ctune" / "results" / "standin-small.json").read_text())
    assert isinstance(artifact["extensions"]["search"]["baseline_feasible"], bool)  # plot's
    assert "journal:" in result.stderr and "--resume" in result.stderr  # printed at start


def test_json_output_is_machine_readable(run: Run, tmp_path: Path) -> None:
    result = run(
        "--objective",
        "0.5*p50 + 0.5*p99",
        "--budget",
        "20",
        "--json",
        "--out",
        "res.json",
        "--confirm-processes",
        "2",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["objectives"][0]["text"] == "0.5*p50 + 0.5*p99"
    assert data["strategy"] == "staged" and data["evaluations"] == 20 and data["front"]
    assert data["confirm_processes"] == 2 and data["pinned"] == data["front"][0]["key"]
    assert data["artifact"] == "res.json" and (tmp_path / "res.json").is_file()
    # no live display with --json; stderr not a terminal: a progress line per generation
    assert all(ln.startswith("generation ") for ln in result.stderr.splitlines())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--objective", "p98"], "unknown term 'p98' (allowed: p50, p95, p99"),
        (["--objective", "p50", "--constraint", "power<=400V"], "unit 'V' does not fit power"),
        (
            ["--objective", "p50", "--constraint", "p99>=2ms", "--constraint", "p99<=1ms"],
            "contradict each other",
        ),
        (["--objective", "p50", "--option", "popsize=3"], "unknown option 'popsize' for staged"),
        (["--objective", "p50", "--time", "soon"], "--time 'soon': expected a duration"),
        (["--objective", "p50", "--time", "nan"], "--time 'nan': expected a finite duration"),
        (["--objective", "p50", "--time", "inf"], "--time 'inf': expected a finite duration"),
        (["--objective", "p50", "--time", "0"], "--time must be positive, got 0 s"),
        (["--objective", "p50", "--time", f"{'9' * 400}h"], "expected a finite duration"),
        (["--objective", "p50", "--time", "-5"], "--time must be positive, got -5 s"),
        (
            ["--objective", "p50", "--problem-set", "all", "--step-time", "xx"],
            "--step-time 'xx': expected a duration",
        ),
        (
            ["--objective", "p50", "--problem-set", "all", "--step-time", "-5"],
            "--step-time must be positive, got -5 s",
        ),
        (
            ["--objective", "p50", "--problem-set", "all", "--step-time", "0"],
            "--step-time must be positive, got 0 s",
        ),
        (["--objective", "p50", "--strategy", "cmaes"], "unknown strategy 'cmaes'"),
        (["--objective", "p50", "--problem", "huge"], "no problem 'huge'"),
        (["--objective", "p50", "--l2-policy", "warm"], "--l2-policy=warm: expected one of"),
        (["--objective", "p50", "--l2", "warm"], "--l2-policy=warm: expected one of"),
        (["--objective", "p50", "--resume", "nope.jsonl"], "nope.jsonl: no such journal"),
        (["--objective", "p50", "--cost-model", "yes"], "--cost-model takes on or off, got 'yes'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    run: Run, boundary: Boundary, args: list[str], message: str
) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0]
    assert all(c.calls == 0 for c in boundary.compilers)  # nothing was compiled


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategy", "gaa"], "unknown strategy 'gaa' (allowed: auto"),
        (["--option", "foo=1"], "unknown option 'foo' for staged"),
        (["--problem", "nope"], "no problem 'nope'"),
    ],
)
def test_without_a_gpu_a_typo_is_still_exit_2(
    run: Run, boundary: Boundary, args: list[str], message: str
) -> None:
    """p99 needs a GPU, but the typo is what a laptop must report: the GPU would not fix it."""

    class NoGpu(StandInMeasurer):
        capabilities = frozenset()

    boundary.measurer = NoGpu()
    result = run("--objective", "p99", *args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0]
    assert all(c.calls == 0 for c in boundary.compilers)
    assert run("--objective", "p99").exit_code == 3  # no typo: the missing GPU is the answer


def test_energy_without_nvml_fails_before_compiling(run: Run, boundary: Boundary) -> None:
    class NoNvml(StandInMeasurer):
        capabilities = frozenset({"gpu"})

    boundary.measurer = NoNvml()
    result = run("--objective", "p99", "--objective", "energy")
    assert result.exit_code == 3
    assert "energy needs NVML energy readings" in result.stderr
    assert all(c.calls == 0 for c in boundary.compilers)


def test_resume_continues_the_recorded_search(run: Run, boundary: Boundary) -> None:
    """--budget 8, options and seed are in the journal: a bare --resume reproduces them."""
    boundary.measurer = StandInMeasurer(samples=40, interrupt_at=4)  # Ctrl-C mid-search
    flags = ("--strategy", "ga", "--option", "population_size=6", "--seed", "5")
    first = run("--objective", "p50", "--budget", "8", *flags, "--confirm-processes", "0")
    assert first.exit_code == 130, first.output
    journal = next(Path(".ctune/journals").glob("*.jsonl"))
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["search"] == {
        "strategy": "ga",
        "options": {"population_size": "6"},
        "seed": 5,
        "budget": 8,
        "time_s": None,
        "patience": None,
        "fill": True,
    }
    boundary.measurer = StandInMeasurer(samples=40)
    second = run(
        "--objective", "p50", "--json", "--resume", str(journal), "--confirm-processes", "0"
    )
    assert second.exit_code == 0, second.output
    data = json.loads(second.stdout)
    assert data["evaluations"] == 8 and data["budget"] == 8 and data["journal"] == str(journal)
    assert data["plan"] == header["search"] and data["seed"] == 5 and data["strategy"] == "ga"
    assert len(boundary.measurer.calls) <= 5  # only what the interrupted run had not measured


@pytest.mark.parametrize(
    ("flags", "shown"),
    [
        (("--budget", "20"), "--budget 20: the journal's search ran with --budget 8"),
        (("--seed", "6"), "--seed 6: the journal's search ran with --seed 5"),
        (("--strategy", "random"), "--strategy random: the journal's search ran with "
         "--strategy ga"),
        (("--option", "population_size=8"), "--option population_size=8: the journal's search "
         "ran with --option population_size=6"),
        (("--no-fill",), "--no-fill: the journal's search ran with --fill"),
    ],
)  # fmt: skip
def test_a_flag_that_differs_on_resume_is_one_line_exit_2(
    run: Run, flags: tuple[str, ...], shown: str
) -> None:
    base = ("--objective", "p50", "--confirm-processes", "0")
    recorded = ("--budget", "8", "--seed", "5", "--option", "population_size=6")
    first = run(*base, *recorded, "--strategy", "ga", "--json")
    assert first.exit_code == 0, first.output
    journal = json.loads(first.stdout)["journal"]
    again = run(*base, "--resume", journal, *flags)
    assert again.exit_code == 2
    errors = [ln for ln in again.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and shown in errors[0] and "leave the flag out" in errors[0]
    same = run(*base, "--resume", journal, *recorded, "--json")  # the recorded values agree
    assert same.exit_code == 0, same.output


def test_ctrl_c_exits_130_and_says_how_to_resume(run: Run, boundary: Boundary) -> None:
    boundary.measurer = StandInMeasurer(samples=40, interrupt_at=5)
    result = run("--objective", "p50", "--budget", "30")
    assert result.exit_code == 130
    said = [ln for ln in result.stderr.splitlines() if ln.startswith("interrupted:")]
    assert len(said) == 1 and "keeps 4 trial(s); continue with --resume" in said[0], said
    assert result.stderr.splitlines()[-1] == said[0]  # the last word, after the report


def test_plot_without_matplotlib_refuses_before_searching(
    run: Run, no_matplotlib: None, tmp_path: Path
) -> None:
    result = run(
        "--objective", "p50", "--budget", "8", "--plot", "front.png", "--confirm-processes", "0"
    )
    assert result.exit_code == 3, result.output  # the extra is missing: toolchain, not input
    assert result.stderr.strip().splitlines() == [
        "error: --plot needs matplotlib, which is not installed: pip install 'ctune[plot]'"
    ]
    assert not (tmp_path / ".ctune" / "journals").exists()  # nothing was searched


def test_plot_writes_the_front_of_the_journal(run: Run, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = run(
        "--objective",
        "p50",
        "--objective",
        "p99",
        "--budget",
        "12",
        "--plot",
        "front.png",
        "--confirm-processes",
        "0",
    )
    assert result.exit_code == 0, result.output
    png = tmp_path / "front.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "plot front.png" in result.stdout


def test_help_documents_syntax_terms_and_options() -> None:
    from ctune.cli import _register_commands, app

    _register_commands()
    result = CliRunner().invoke(app, ["search", "--help"], env={"COLUMNS": "240"})
    assert result.exit_code == 0
    # the help is a boxed table: read its words across the folded lines
    text = " ".join(re.sub("[\u2500-\u257f]", " ", result.stdout).split())
    for needle in (
        "0.7*p50 + 0.3*p99",
        "power<=400W",
        "terms: docs/search.md",
        "units: docs/search.md",
        "options: docs/search.md",
        "--resume",
        "--commit",
        "--confirm-processes",
        "--no-fill",
    ):
        assert needle in text, needle
    # --strategy names every strategy and what auto resolves to (it once said "ga" after
    # auto had become staged, and left out staged and tpe)
    from ctune.search import STRATEGIES, resolve_name

    strategy_help = text[text.index("--strategy") : text.index("--option")]
    assert f"auto ({resolve_name('auto', 1)} for one objective, " in strategy_help
    assert f"{resolve_name('auto', 2)} for several)" in strategy_help
    for name in STRATEGIES:
        assert re.search(rf"[ ,(]{name}[ ,)]", strategy_help), name
    assert "tpe (needs optuna)" in strategy_help


def test_search_docs_list_every_term_unit_alias_and_strategy_option() -> None:
    """The help sends the reader to docs/search.md for these lists: they must be there."""
    from ctune.objective.terms import ALIASES, TERMS, UNIT_TABLES
    from ctune.search import STRATEGIES, option_table

    doc = (Path(__file__).resolve().parents[3] / "docs" / "search.md").read_text()
    terms = doc[doc.index("## Objectives and constraints") : doc.index("## Energy objectives")]
    rows = {line.split("|")[1].strip(" `"): line for line in terms.splitlines() if "| `" in line}
    for term in TERMS.values():
        row = rows[term.name]
        assert f"| {term.direction} | {term.unit} |" in row, row
        for unit in UNIT_TABLES.get(term.unit, {}):
            assert unit in row, (term.name, unit)
    for alias, target in ALIASES.items():
        assert f"`{alias}`" in rows[target], alias
    options = doc[doc.index("## Strategy options") : doc.index("## Confirmation in proportion")]
    for name in STRATEGIES:
        for key, (_desc, default) in option_table(name).items():
            assert f"| `{name}` | `{key}` | `{default}` |" in options, (name, key)


def test_no_fill_reaches_the_search(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctune.search import driver

    fill: list[bool] = []
    real = driver.run_session

    def spy(session: Any, *args: Any, **kwargs: Any) -> Any:
        fill.append(session.options.fill)
        return real(session, *args, **kwargs)

    monkeypatch.setattr(driver, "run_session", spy)
    for flag in ("--no-fill", "--fill"):
        result = run(
            "--objective", "p50", "--budget", "6", "--json", "--confirm-processes", "0", flag
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["fillers"] == 0  # the stand-in kernel has no runtime genes
    assert fill == [False, True]


def test_cost_model_reaches_the_search(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctune.search import driver

    asked: list[bool | None] = []
    real = driver.run_session

    def spy(session: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(session.options.cost_model)
        return real(session, *args, **kwargs)

    monkeypatch.setattr(driver, "run_session", spy)
    for given in ((), ("--cost-model", "off"), ("--cost-model", "on")):
        result = run("--objective", "p50", "--budget", "6", "--confirm-processes", "0", *given)
        assert result.exit_code == 0, result.output
    assert asked == [None, False, True]
    # six measurements are too few for the model to rule anything out: it says so
    assert "cost model: skipped 0 of" in result.output


def test_durations() -> None:
    assert parse_duration("30m") == 1800.0
    assert parse_duration("1h30m") == 5400.0
    assert parse_duration("90s") == 90.0
    assert parse_duration("2.5h") == 9000.0
    assert parse_duration("600") == 600.0
    assert parse_duration("8m", "--step-time") == 480.0


def test_plot_writes_a_png_of_the_front(run: Run, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "front.png"
    result = run("--objective", "p50", "--objective", "regs", "--budget", "12", "--plot", str(png))
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--plot", "front.txt"], "--plot front.txt: .txt is not an image format ctune writes"),
        (["--plot", "."], "--plot .: a folder; give a file path in it"),
        (["--out", "."], "--out .: a folder; give a file path in it"),
        (["--out", "k/standin.cu/r.json"], "k/standin.cu is not a folder"),
        (["--out", "nobody.fifo"], "nobody.fifo: a FIFO that nobody reads"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_searching(
    run: Run, boundary: Boundary, tmp_path: Path, args: list[str], message: str
) -> None:
    pytest.importorskip("matplotlib")
    os.mkfifo(tmp_path / "nobody.fifo")
    result = run("--objective", "p50", "--budget", "8", "--confirm-processes", "0", *args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], lines
    assert all(c.calls == 0 for c in boundary.compilers)
    assert not (tmp_path / ".ctune" / "journals").exists()  # nothing was searched


@pytest.mark.parametrize(("errno_name", "code"), [("EISDIR", 2), ("ENOSPC", 3)])
def test_a_result_file_not_written_at_the_end_says_resume_writes_it(
    run: Run, monkeypatch: pytest.MonkeyPatch, errno_name: str, code: int
) -> None:
    """The path was fine when the search started (the write fails only now): one line
    naming it and the journal, whose --resume writes the result; a full disk stays exit 3."""
    import errno

    from ctune.registry import store

    def refused(path: Any, data: Any, **kwargs: Any) -> None:
        number = getattr(errno, errno_name)
        raise OSError(number, os.strerror(number), str(path))

    with monkeypatch.context() as patched:
        patched.setattr(store, "write_atomic", refused)
        result = run("--objective", "p50", "--budget", "8", "--confirm-processes", "0",
                     "--out", "res.json")  # fmt: skip
    assert result.exit_code == code, result.output
    last = result.stderr.strip().splitlines()[-1]
    journal = re.search(r"--resume (\S+\.jsonl)\)", result.stderr)
    assert journal is not None and last.startswith("error: res.json: ")
    assert f"--resume {journal.group(1)} writes it" in last and not Path("res.json").exists()
    again = run("--objective", "p50", "--confirm-processes", "0", "--resume", journal.group(1),
                "--out", "again.json")  # fmt: skip
    assert again.exit_code == 0, again.output
    assert Path("again.json").is_file()


@pytest.mark.parametrize(("name", "magic"), [("front.svg", b"<?xml"), ("front.pdf", b"%PDF")])
def test_plot_writes_the_format_of_its_suffix(
    run: Run, tmp_path: Path, name: str, magic: bytes
) -> None:
    pytest.importorskip("matplotlib")
    result = run("--objective", "p50", "--budget", "8", "--confirm-processes", "0",
                 "--plot", name)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (tmp_path / name).read_bytes().startswith(magic)


def _drain(fd: int, got: list[bytes], seconds: float = 30.0) -> threading.Thread:
    """Read the FIFO ``fd`` (opened non-blocking) in a thread until its writer closes it."""

    def read_all() -> None:
        data, seen_writer, end = b"", False, time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:  # a writer holds it open, with nothing to read yet
                seen_writer = True
                time.sleep(0.005)
                continue
            data += chunk
            seen_writer = seen_writer or bool(chunk)
            if not chunk:
                if seen_writer:
                    break  # the writer closed it: the end of the stream
                time.sleep(0.005)  # no writer yet
        got.append(data)

    thread = threading.Thread(target=read_all)
    thread.start()
    return thread


def test_out_into_a_fifo_is_written_into_it_never_over_it(run: Run, tmp_path: Path) -> None:
    """``--out FIFO`` (as ``--out /dev/stdout`` or ``>(jq .)``): its reader gets the result
    file, and the FIFO is still a FIFO (it was replaced by a regular file)."""
    fifo = tmp_path / "result.fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    got: list[bytes] = []
    reader = _drain(fd, got)
    try:
        result = run("--objective", "p50", "--budget", "8", "--confirm-processes", "0",
                     "--out", str(fifo))  # fmt: skip
    finally:
        reader.join(timeout=40)
        os.close(fd)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and json.loads(got[0])["kernel"] == "standin"
    assert not (tmp_path / "controls").exists() and not list(tmp_path.glob("result.fifo*.gz"))


def _first_search_as_t4(run: Run, tmp_path: Path) -> Path:
    """A 12-candidate search's journal exported as a T4 file (a warm start for the next)."""
    first = run("--objective", "p50", "--budget", "12", "--json", "--confirm-processes", "0")
    assert first.exit_code == 0, first.output
    t4 = tmp_path / "first-t4.json"
    done = CliRunner().invoke(ctune_main, ["export", json.loads(first.stdout)["journal"],
                                           "--out", str(t4)])  # fmt: skip
    assert done.exit_code == 0, done.output
    return t4


def test_warm_start_takes_a_t4_file(run: Run, boundary: Boundary, tmp_path: Path) -> None:
    t4 = _first_search_as_t4(run, tmp_path)
    boundary.measurer = StandInMeasurer(samples=40)
    second = run(
        "--objective", "p50", "--budget", "12", "--json", "--confirm-processes", "0",
        "--warm-start", str(t4),
    )  # fmt: skip
    assert second.exit_code == 0, second.output
    notes = json.loads(second.stdout)["notes"]
    assert any(n.startswith(f"warm start from {t4}: 3 of ") for n in notes)
    missing = run("--objective", "p50", "--warm-start", str(tmp_path / "nope.json"))
    assert missing.exit_code == 2 and "not a T4 results file (no such file)" in missing.stderr
    damaged = tmp_path / "damaged.json"  # once an AttributeError: exit 70
    damaged.write_text('{"results": [{"configuration": {"TILE_M": 32}, "measurements": [1]}]}')
    refused = run("--objective", "p50", "--warm-start", str(damaged))
    lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert refused.exit_code == 2 and len(lines) == 1, refused.output
    assert f"{damaged}: not a T4 results file (results[0].measurements[0]: " in lines[0]
    # another kernel's file: no parameter is a gene here; refused, GPU or not
    other = tmp_path / "gemm.t4.json"
    results = [{"configuration": {"BLOCK_M": m}, "invalidity": "correct"} for m in (64, 128)]
    other.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    wrong = run("--objective", "regs", "--warm-start", str(other))
    lines = [ln for ln in wrong.stderr.splitlines() if ln.strip()]
    assert wrong.exit_code == 2 and len(lines) == 1, wrong.output
    assert "no parameter of its configurations (BLOCK_M) is a gene of standin" in lines[0]


def test_warm_start_share_measures_the_whole_file(
    run: Run, boundary: Boundary, tmp_path: Path
) -> None:
    """--warm-start-share 1 measures every configuration of the file first (a re-tune from
    a pool); the default share measures a quarter of the budget; outside (0, 1]: exit 2."""
    t4 = _first_search_as_t4(run, tmp_path)
    given = len(read_t4(t4))
    assert given > 3
    boundary.measurer = StandInMeasurer(samples=40)
    whole = run(
        "--objective", "p50", "--budget", "12", "--json", "--confirm-processes", "0",
        "--warm-start", str(t4), "--warm-start-share", "1",
    )  # fmt: skip
    assert whole.exit_code == 0, whole.output
    [note] = [n for n in json.loads(whole.stdout)["notes"] if n.startswith("warm start")]
    assert "over the warm start's limit" not in note, note
    # every configuration measured, but the default build (the baseline, already tried)
    assert note.startswith(f"warm start from {t4}: {given - 1} of {given}"), note
    boundary.measurer = StandInMeasurer(samples=40)
    quarter = run(
        "--objective", "p50", "--budget", "12", "--json", "--confirm-processes", "0",
        "--warm-start", str(t4),
    )  # fmt: skip
    [note] = [n for n in json.loads(quarter.stdout)["notes"] if n.startswith("warm start")]
    assert note.startswith(f"warm start from {t4}: 3 of {given}"), note
    assert "over the warm start's limit of 3" in note
    for bad in ("0", "1.5"):
        refused = run("--objective", "p50", "--warm-start", str(t4), "--warm-start-share", bad)
        lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
        assert refused.exit_code == 2 and len(lines) == 1, refused.output
        assert "--warm-start-share" in lines[0] and "(0, 1]" in lines[0]


def _invoke(columns: int, *args: str) -> Any:
    return CliRunner().invoke(
        ctune_main, ["search", "k/standin.cu", *args], env={"COLUMNS": str(columns)}
    )


PARETO = ("-O", "p99", "-O", "energy", "--budget", "30", "--seed", "2")


def test_narrow_terminal_gives_each_member_its_own_lines(boundary: Boundary) -> None:
    data = json.loads(_invoke(40, *PARETO, "--json", "--journal", "a.jsonl").stdout)
    boundary.measurer = StandInMeasurer(samples=40)
    result = _invoke(80, *PARETO, "--journal", "b.jsonl")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert not any("┃" in ln or "│" in ln for ln in lines)  # no table squeezed into 80
    footer = next(i for i, ln in enumerate(lines) if ln.startswith("* pinned"))
    assert all(len(ln) <= 80 for ln in lines[:footer])
    for member in data["front"]:
        changed = " ".join(f"{k}={v}" for k, v in member["changed"].items())
        assert any(member["key"] in ln for ln in lines)
        label = changed or "baseline: the default build"  # on the front, listed once
        assert any(ln.strip() == label for ln in lines), changed


def test_wide_terminal_gets_the_table(boundary: Boundary) -> None:
    result = _invoke(200, *PARETO)
    assert result.exit_code == 0, result.output
    assert "changed vs default" in result.stdout and "┃" in result.stdout


def test_json_is_one_document_at_any_width(boundary: Boundary) -> None:
    for columns, journal in ((20, "c.jsonl"), (300, "d.jsonl")):
        boundary.measurer = StandInMeasurer(samples=40)
        result = _invoke(columns, *PARETO, "--json", "--journal", journal)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["front"]


def test_compile_only_search_is_titled_so(run: Run) -> None:
    result = run("--objective", "regs", "--budget", "8")
    assert result.exit_code == 0, result.output
    assert "compile-only (nothing ran on a GPU): 1 on the front" in result.stdout
    assert " on none" not in result.stdout
    # nothing was measured on a GPU: no gain, no comparison, no pruning, no GPU time
    for measured in ("gain", "p50", "pruned", "GPU busy", "measure ", "re-measured"):
        assert measured not in result.stdout, measured


def test_constraints_only_the_default_build_beats_exit_4(boundary: Boundary) -> None:
    from ctune.testing.standins import DefaultWinsMeasurer

    args = ("-O", "p99", "-O", "energy", "-C", "power<=480W", "--budget", "20", "--seed", "1")
    boundary.measurer = DefaultWinsMeasurer()
    result = _invoke(120, *args)
    assert result.exit_code == 4, result.output
    assert "inconclusive" in result.stdout and "Nothing pinned" in result.stdout
    assert "power<=480W: broken by" in result.stdout and "relaxing it to power<=" in result.stdout
    assert "* pinned:" not in result.stdout
    assert result.stderr.strip().splitlines()[-1] == (
        "error: search inconclusive: the default build beats every build the constraints "
        "allow; nothing pinned (report above)"
    )
    boundary.measurer = DefaultWinsMeasurer()
    as_json = _invoke(120, *args, "--json", "--journal", "j2.jsonl")
    assert as_json.exit_code == 4
    data = json.loads(as_json.stdout)
    assert data["verdict"] == "inconclusive" and data["pinned"] is None
    assert data["feasibility"]["dominated"] and not data["feasibility"]["baseline_feasible"]


def test_a_journal_another_search_holds_is_refused_exit_2(run: Run) -> None:
    """A second search on a journal another process is writing, resumed or new with the
    same --journal, is one line naming the journal, exit 2; the journal is left as it was."""
    base = ("--objective", "p50", "--confirm-processes", "0", "--budget", "5")
    first = run(*base, "--json")
    assert first.exit_code == 0, first.output
    journal = json.loads(first.stdout)["journal"]
    before = Path(journal).read_bytes()
    said = (
        f"error: {journal}: another search holds this journal (it is running); wait for it "
        "to end, or give this search another --journal"
    )
    with held_elsewhere(Path(journal)):
        for again in (run(*base, "--resume", journal), run(*base, "--journal", journal)):
            assert again.exit_code == 2, again.output
            errors = [ln for ln in again.stderr.splitlines() if ln.startswith("error:")]
            assert errors == [said] and "Traceback" not in again.output, again.output
    assert Path(journal).read_bytes() == before


def test_the_way_results_md_gives_to_try_another_strategy_works(run: Run, tmp_path: Path) -> None:
    """docs/results.md tells a user whose search flattened early how to try another
    strategy: not `--resume` (a differing --strategy is refused), but a new search
    warm-started with the first one's export. Each step of it, as the page writes it."""
    page = " ".join(
        (Path(__file__).resolve().parents[3] / "docs" / "results.md").read_text().split()
    )
    export = "ctune export RESULT.json --as t4 --out found.t4.json"
    assert "one that flattened early" in page and "resumed with a different strategy" not in page
    assert f"`{export}`" in page and "`--warm-start found.t4.json`" in page
    base = ("--objective", "p50", "--confirm-processes", "0", "--budget", "8")
    first = run(*base, "--strategy", "ga", "--out", "r.json", "--json")
    assert first.exit_code == 0, first.output
    again = run(*base, "--resume", json.loads(first.stdout)["journal"], "--strategy", "random")
    assert again.exit_code == 2 and "cannot resume with --strategy random" in again.stderr
    made = CliRunner().invoke(ctune_main, export.replace("RESULT", "r").split()[1:])
    assert made.exit_code == 0, made.output
    other = run(*base, "--strategy", "random", "--warm-start", "found.t4.json")
    assert other.exit_code == 0, other.output
    assert "warm start from found.t4.json" in other.output
