"""Damaged search journals, resumed, plotted and exported.

A journal is evidence: a line that cannot be read is refused in one line (exit 2), never
an internal error, never guessed past; the one exception is a torn last line (what a
crash mid-write leaves), which is dropped with one warning and the search goes on. Its
size is capped before it is read, so a 4 GiB line costs nothing (the file here is sparse).
Whatever happens, every complete line the journal had is still there afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hostile_harness import JOURNAL, Case, Project, case, tier
from hostile_setups import header_edit, journal_edit, trial_edit

CASES: list[Case] = []
RESUME = ["search", "kernels/saxpy.cu", "-O", "p99", "--resume", JOURNAL, "--no-commit"]


def _genes(**changes: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        genes = data["trial"]["candidate"]["genes"]
        for name, value in changes.items():
            if value is None:
                genes.pop(name, None)
            else:
                genes[name] = value

    return edit


def _trial(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["trial"].update(fields)


def _measurement(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["trial"]["measurement"].update(fields)


def _search(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        data["search"].update(fields)
        data["info"].update({k: v for k, v in fields.items() if k in data["info"]})

    return edit


def _append(raw: bytes) -> Callable[[Project], None]:
    def setup(p: Project) -> None:
        with p.path(JOURNAL).open("ab") as fh:
            fh.write(raw)

    return setup


def _insert(index: int, raw: str | bytes) -> Callable[[Project], None]:
    """``raw`` as a line of its own before line ``index`` (a damaged line in the middle,
    where no crash can have left it)."""

    def setup(p: Project) -> None:
        path = p.path(JOURNAL)
        lines = path.read_bytes().split(b"\n")
        lines.insert(index, raw.encode() if isinstance(raw, str) else raw)
        path.write_bytes(b"\n".join(lines))

    return setup


def _sparse_line(size: int) -> Callable[[Project], None]:
    """A line of ``size`` NUL bytes after the journal's lines: a hole, no disk."""

    def setup(p: Project) -> None:
        with p.path(JOURNAL).open("r+b") as fh:
            fh.seek(0, 2)
            fh.seek(fh.tell() + size)
            fh.write(b"\n")

    return setup


DAMAGE: dict[str, tuple[Callable[[Project], None], int | tuple[int, ...]]] = {
    "gene-outside-space": (trial_edit(0, _genes(BLOCK=3)), 2),
    "gene-unknown": (trial_edit(0, _genes(EVIL=1)), 2),
    "gene-string-for-int": (trial_edit(1, _genes(GROUP="2")), 2),
    "gene-missing": (trial_edit(1, _genes(UNROLL=None)), 2),
    "values-a-string": (trial_edit(0, _trial(values="fast")), 2),
    "values-empty": (trial_edit(0, _trial(values=[])), 2),
    "outcome-unknown": (trial_edit(0, _trial(outcome="great")), 2),
    "samples-a-string": (trial_edit(0, _measurement(samples_ms="many")), 2),
    "seed-a-string": (header_edit(_search(seed="zero")), 2),
    "budget-negative": (header_edit(_search(budget=-5)), 2),
    "strategy-unknown": (header_edit(_search(strategy="nope")), 2),
    "patience-negative": (header_edit(_search(patience=-1)), 2),
    "header-space-edited": (header_edit(lambda d: d["space"]["genes"][0].update(values=[1])), 2),
    "no-header": (journal_edit(lambda lines: lines[1:]), 2),
    "generation-state-a-string": (
        journal_edit(
            lambda ls: [*ls[:-1], json.dumps({"kind": "generation", "generation": 1, "state": "x"})]
        ),
        2,
    ),
    "line-nested-100k": (_insert(2, "[" * 100_000 + "]" * 100_000), 2),
    "line-huge-int": (_insert(2, '{"kind": "trial", "n": ' + "9" * 5000 + "}"), 2),
    "torn-middle-line": (journal_edit(lambda ls: [*ls[:2], ls[2][: len(ls[2]) // 2], *ls[3:]]), 2),
    "garbage-line": (_insert(3, b"\x8f\x00\xffgarbage\x01\x02"), 2),
    "not-utf8-line": (_insert(3, b'{"kind": "trial", "x": "\xff\xfe"}'), 2),
    "empty-file": (journal_edit(lambda lines: []), 2),
    "4gib-line-sparse": (_sparse_line(4 << 30), 2),
}
for name, (setup, exits) in DAMAGE.items():
    CASES.append(
        case(
            f"{name}-resume",
            "journals",
            RESUME,
            exits,
            setup=setup,
            patches=("standin-gpu",),
            writes=("journals",),
            keeps=("journal",),
            progress=True,
            timeout_s=30,
        )
    )

# a torn last line is what a crash mid-write leaves: dropped, warned about once, resumed
for name, raw in {
    "torn-last-line": b'{"kind": "trial", "trial": {"cand',
    "torn-last-line-garbage": b"\x8f\x00\xff",
}.items():
    CASES.append(
        case(
            f"{name}-resume",
            "journals",
            RESUME,
            0,
            setup=_append(raw),
            patches=("standin-gpu",),
            writes=("journals",),
            keeps=("journal",),
            progress=True,
            warnings=1,
            timeout_s=60,
        )
    )

# plot and export read journals without a spec: the same damage, the same one line
for name in ("values-a-string", "garbage-line", "4gib-line-sparse", "line-nested-100k"):
    setup = DAMAGE[name][0]
    CASES += [
        case(
            f"{name}-plot",
            "journals",
            ["plot", JOURNAL, "--as", "csv"],
            2,
            setup=setup,
            keeps=("journal",),
        ),
        case(
            f"{name}-export",
            "journals",
            ["export", JOURNAL, "--as", "csv"],
            2,
            setup=setup,
            keeps=("journal",),
        ),
    ]

test_journals = tier(CASES)
