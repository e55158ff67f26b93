"""A damaged journal is one line and exit 2 (file, line, field, and what to do), or a torn
last line dropped with one warning; never exit 70, never a hang, never a 4 GiB line read.

The journal is written by a real (stand-in) search, then damaged as a crash, an editor
or a careless copy would; `ctune export JOURNAL` reads it through the real entry point,
`--resume` checks it against the spec's space.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctune.errors import UserError
from ctune.search import journal as journal_mod
from ctune.search.events import Note
from ctune.testing.standins import StandInMeasurer

FIX = "delete the line or start a new search"


@pytest.fixture
def journal(search, tmp_path: Path) -> Path:
    """A finished search's journal: header, 6 trials, generation states."""
    done, _, _, _ = search(budget=6, seed=2, confirm_processes=0)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(done.journal.read_bytes())
    return copy


def export(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``ctune export PATH`` through ``ctune.cli.main``: (exit code, stderr)."""
    from ctune.cli import main

    try:
        main(["export", str(path)])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _first_trial(records: list[dict[str, Any]]) -> int:
    return next(i for i, r in enumerate(records) if r["kind"] == "trial" and i > 1)


def _edit_trial(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], int]:
    """Damage the second trial's record (the first is the baseline); its line number."""

    def damage(path: Path) -> int:
        records = _records(path)
        index = _first_trial(records)
        edit(records[index])
        _write(path, records)
        return index + 1

    return damage


def _edit_header(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], int]:
    def damage(path: Path) -> int:
        records = _records(path)
        edit(records[0])
        _write(path, records)
        return 1

    return damage


def _raw_line(text: bytes, *, last: bool = False) -> Callable[[Path], int]:
    """Put ``text`` (with a newline) in the middle of the file, or at its end."""

    def damage(path: Path) -> int:
        lines = path.read_bytes().splitlines(keepends=True)
        at = len(lines) if last else 3
        lines.insert(at, text + b"\n")
        path.write_bytes(b"".join(lines))
        return at + 1

    return damage


def _set(*keys: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(record: dict[str, Any]) -> None:
        target = record
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return edit


def _more_values(record: dict[str, Any]) -> None:
    record["trial"]["values"] = [*record["trial"]["values"], 1.0]


def _torn_middle(path: Path) -> int:
    """A crash mid-write, then a later session appended to the file anyway."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3][: len(lines[3]) // 2] + b"\n"
    path.write_bytes(b"".join(lines))
    return 4


def _duplicated_trial(path: Path) -> int:
    """A trial's line twice (a careless copy or merge): the copy's line number."""
    lines = path.read_bytes().splitlines(keepends=True)
    index = _first_trial([json.loads(line) for line in lines])
    lines.insert(index + 2, lines[index])
    path.write_bytes(b"".join(lines))
    return index + 3


#: case -> (damage, what the one line must say besides the file, line and the fix)
DAMAGED: dict[str, tuple[Callable[[Path], int], str]] = {
    "not JSON": (_raw_line(b"{garbage"), "not a journal record"),
    # ends in a newline, so written whole: damage, not a crash's torn tail
    "not JSON, the last line": (_raw_line(b"{garbage", last=True), "not a journal record"),
    "a blank last line": (_raw_line(b"", last=True), "not a journal record"),
    "a JSON list": (_raw_line(b"[1, 2]"), "not a journal record"),
    "torn middle line": (_torn_middle, "not a journal record"),
    "binary garbage line": (_raw_line(bytes(range(256)) * 4), "not a journal record"),
    "unknown kind": (_raw_line(b'{"kind": "bogus"}'), "kind: expected trial, generation"),
    # a search tries a candidate once: a second trial of it would be exported twice and
    # counted twice against a resumed search's budget
    "a duplicated trial": (_duplicated_trial, "trial.candidate: expected a candidate not in"),
    "values a string": (_edit_trial(_set("trial", "values", value="abc")), "trial.values"),
    "a value text": (_edit_trial(_set("trial", "values", value=["1.0"])), "trial.values[0]"),
    "values one too many": (_edit_trial(_more_values), "trial.values: expected 1 number(s)"),
    "values none at all": (
        _edit_trial(_set("trial", "values", value=[])),
        "trial.values: expected 1 number(s), one per objective",
    ),
    "number negative": (_edit_trial(_set("trial", "number", value=-3)), "trial.number"),
    "generation a float": (_edit_trial(_set("trial", "generation", value=1.5)), "generation"),
    "unknown outcome": (_edit_trial(_set("trial", "outcome", value="exploded")), "outcome"),
    "samples a string": (
        _edit_trial(_set("trial", "measurement", "samples_ms", value="1,2,3")),
        "trial.measurement.samples_ms",
    ),
    "a field no record has": (
        _edit_trial(_set("trial", "measurement", "evil", value=1)),
        "trial.measurement.evil",
    ),
    "a gene value a list": (
        _edit_trial(_set("trial", "candidate", "genes", "BLOCK_M", value=[64])),
        "trial.candidate.genes.BLOCK_M",
    ),
    "elapsed negative": (_edit_trial(_set("elapsed_s", value=-1)), "elapsed_s"),
    "filler a string": (_edit_trial(_set("filler", value="yes")), "filler"),
    "seed a string": (_edit_header(_set("search", "seed", value="seven")), "search.seed"),
    "budget negative": (_edit_header(_set("search", "budget", value=-5)), "search.budget"),
    "budget NaN time": (_edit_header(_set("search", "time_s", value=float("nan"))), "time_s"),
    "info budget zero": (_edit_header(_set("info", "budget", value=0)), "info.budget"),
    "kernel a number": (_edit_header(_set("kernel", value=7)), "kernel"),
    # valid JSON that float() overflows on; once an OverflowError, exit 70
    "compile_s 400 digits": (
        _edit_trial(_set("trial", "build", "compile_s", value=10**400)),
        "trial.build.compile_s: expected a number",
    ),
    "elapsed 400 digits": (_edit_trial(_set("elapsed_s", value=10**400)), "elapsed_s"),
    "time_s 400 digits": (_edit_header(_set("search", "time_s", value=10**400)), "time_s"),
    # once a TypeError, and a string read as the objectives "p", "5", "0"
    "objectives numbers": (
        _edit_header(_set("objectives", "objectives", value=[1])),
        "objectives.objectives: expected a list of objective texts",
    ),
    "objectives a string": (
        _edit_header(_set("objectives", "objectives", value="p50")),
        "objectives.objectives: expected a list of objective texts",
    ),
    "constraints a string": (
        _edit_header(_set("objectives", "constraints", value="regs<=90")),
        "objectives.constraints",
    ),
    "bad confirmation": (
        _raw_line(b'{"kind": "confirmation", "trials": 6, "round": 1, "runs": {"k": 5}}'),
        "runs.k",
    ),
    "round zero": (
        _raw_line(b'{"kind": "confirmation", "trials": 6, "round": 0, "runs": {}}'),
        "round",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_line_is_one_line_and_exit_2(
    case: str, journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage, says = DAMAGED[case]
    line = damage(journal)
    code, err = export(journal, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"journal {journal} line {line}:" in lines[0], lines[0]
    assert says in lines[0] and FIX in lines[0], lines[0]


#: whole-file damage -> what the one line says
NOT_A_JOURNAL: dict[str, tuple[bytes, str]] = {
    "empty file": (b"", "not a ctune journal"),
    "binary garbage": (os.urandom(4096).replace(b"\n", b"x"), "not a ctune journal"),
    "a trial first": (b'{"kind": "trial", "trial": {}}\n', "not a ctune journal"),
    "another format": (b'{"kind": "header", "format": 99}\n', "format 99"),
    "only a torn header": (b'{"kind": "header", "form', "not a ctune journal"),
}


@pytest.mark.parametrize("case", sorted(NOT_A_JOURNAL))
def test_not_a_journal_is_one_line_and_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, says = NOT_A_JOURNAL[case]
    path = tmp_path / "j.jsonl"
    path.write_bytes(data)
    code, err = export(path, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and says in err and str(path) in err, err


def test_a_fifo_is_refused_without_waiting_for_a_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "j.jsonl"
    os.mkfifo(path)
    got: list[tuple[int, str]] = []
    reader = threading.Thread(target=lambda: got.append(export(path, capsys)), daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert got, "reading a FIFO hung"
    code, err = got[0]
    assert code == 2 and "a FIFO, not a regular file" in err, err


def test_a_huge_file_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """4 GiB (sparse: no disk used) is refused on its size, before a byte is read."""
    path = tmp_path / "j.jsonl"
    with path.open("wb") as fh:
        fh.truncate(4 << 30)
    code, err = export(path, capsys)
    assert code == 2 and f"larger than the {journal_mod.MAX_JOURNAL_BYTES}-byte limit" in err


def test_a_huge_line_is_refused_without_reading_it_whole(
    journal: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line over the cap is refused once the cap is read: the reader never asks for more
    than MAX_LINE_BYTES + 1 bytes of one line (checked on the file object it reads)."""
    huge = b'{"kind": "generation", "generation": 1, "state": {"x": "' + b"a" * (
        journal_mod.MAX_LINE_BYTES + 10
    )
    _raw_line(huge + b'"}}')(journal)
    asked: list[int] = []
    real = os.fdopen

    def spy(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real(fd, mode, *args, **kwargs)
        readline = handle.readline

        class Spy:
            def __enter__(self) -> Spy:
                handle.__enter__()
                return self

            def __exit__(self, *exc: object) -> None:
                handle.__exit__(*exc)

            def readline(self, size: int = -1) -> bytes:
                asked.append(size)
                return readline(size)

        return Spy()

    monkeypatch.setattr(journal_mod.os, "fdopen", spy)
    code, err = export(journal, capsys)
    assert code == 2 and f"line 4: longer than {journal_mod.MAX_LINE_BYTES} bytes" in err, err
    assert asked and all(0 < size <= journal_mod.MAX_LINE_BYTES + 1 for size in asked)


def test_a_torn_last_line_is_dropped_with_one_warning(
    search, journal: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a crash mid-write leaves: the resume cuts it off, says so once, and goes on."""
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"kind": "trial", "trial": {"numb')
    replay, good_end = journal_mod.read(journal)
    assert replay.dropped_tail and good_end == len(whole)
    with caplog.at_level(logging.INFO):
        _, _, _, events = search(budget=6, seed=2, resume=journal, confirm_processes=0)
    said = [e for e in events if isinstance(e, Note) and "torn last line" in e.message]
    assert len(said) == 1 and said[0].level == "warning"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # not said again
    assert journal.read_bytes().startswith(whole)
    assert not journal_mod.read(journal)[0].dropped_tail


def test_a_whole_damaged_last_line_is_not_cut_off_by_a_resume(search, journal: Path) -> None:
    """A last line that ends in its newline was written whole (the writer writes a record
    and its newline at once): unreadable, it is damage, refused, and the file is kept."""
    damaged = journal.read_bytes() + b'{"kind": "trial", "trial": {"numb\n'
    journal.write_bytes(damaged)
    lines = damaged.count(b"\n")
    with pytest.raises(UserError, match=f"line {lines}: not a journal record"):
        search(budget=6, seed=2, resume=journal, confirm_processes=0)
    assert journal.read_bytes() == damaged


#: resume-only damage: gene values checked against the spec's space
GENES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a value outside the space": (
        _set("trial", "candidate", "genes", "TILE_M", value=7),
        "TILE_M=7 is not a value of TILE_M",
    ),
    "a gene the space lacks": (
        _set("trial", "candidate", "genes", "EVIL", value=1),
        "'EVIL' is not in the spec's space",
    ),
    "a value of the wrong type": (
        _set("trial", "candidate", "genes", "TILE_M", value="64"),
        "TILE_M='64' is not a value of TILE_M",
    ),
    "another kernel": (_set("trial", "candidate", "kernel", value="other"), "kernel 'other'"),
}


def _drop_gene(record: dict[str, Any]) -> None:
    del record["trial"]["candidate"]["genes"]["TILE_M"]


GENES["a gene left out"] = (_drop_gene, "gene TILE_M has no value")


@pytest.mark.parametrize("case", sorted(GENES))
def test_resume_checks_genes_against_the_space(search, journal: Path, case: str) -> None:
    edit, says = GENES[case]
    line = _edit_trial(edit)(journal)
    measurer = StandInMeasurer(samples=30)
    with pytest.raises(UserError) as err:
        search(budget=6, seed=2, resume=journal, measurer=measurer, confirm_processes=0)
    text = str(err.value)
    assert err.value.exit_code == 2 and "\n" not in text
    assert text.startswith(f"journal {journal} line {line}:") and says in text and FIX in text
    assert measurer.calls == []  # refused before anything was measured


@pytest.mark.parametrize(
    "case", ["values a string", "values none at all", "samples a string", "a duplicated trial"]
)
def test_a_resumed_journal_is_checked_whole_with_the_request(
    spec, journal: Path, case: str
) -> None:
    """``check_request`` runs before anything is compiled (the baseline's build and the
    fingerprint's ``nvcc -M`` start right after it): a damaged record is refused there."""
    from ctune.objective.spec import parse_objective_spec
    from ctune.search.driver import SearchOptions, check_request

    damage, says = DAMAGED[case]
    line = damage(journal)
    objective = parse_objective_spec(["p50"], [], spec.metrics)
    with pytest.raises(UserError, match=f"line {line}: .*{re.escape(says)}"):
        check_request(spec, objective, SearchOptions(resume=journal), None)
