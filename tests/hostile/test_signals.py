"""Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGTERM mid-command.

Each command is caught in the middle of its work: a compile (a wrapper in front of nvcc
waits), a rebuild in ``check``, ``gate --build-only`` and ``registry refresh``, a git step
of ``registry import`` (a wrapper in front of git waits), a search while it measures and
while it confirms (the analytic stand-in, NOT A GPU, takes its time), a read that blocks.
Every one ends with exit 130 and one line saying what was kept; the registry is as it was
or has the whole new commit, never part of one; a search's journal keeps every line it
had written, each complete.
"""

from __future__ import annotations

import json
import signal
from typing import Any

from hostile_harness import RESULT, Case, Outcome, Project, Signal, case, tier
from hostile_setups import (
    chain,
    edit_source,
    fifo,
    journal_edit,
    path_with_bin,
    slow_git,
    slow_nvcc,
)

CASES: list[Case] = []
INT, TERM = signal.SIGINT, signal.SIGTERM
SLOW_NVCC = {"CTUNE_NVCC": "{bin}/nvcc"}
SLOW_GIT = {"PATH": path_with_bin()}
#: how long a git step of an import's commit takes: ctune finishes the step it is in before
#: it stops (``interrupts.deferred``), so the case lasts as long as the step; the signal is
#: sent when the step starts, well inside it
COMMIT_STEP_S = 2.0


def _sig(sig: int, marker: str, **kw: Any) -> Signal:
    return Signal(sig, marker=marker, group=sig == INT, **kw)


def _journal_kept(p: Project, o: Outcome) -> list[str]:
    """The interrupted search's journal: there, its lines complete JSON, its trials kept."""
    found = sorted(p.path(".ctune/journals").glob("*.jsonl"))
    if len(found) != 1:
        return [f"{len(found)} journals in .ctune/journals, expected 1"]
    data = found[0].read_bytes()
    if not data.endswith(b"\n"):
        return [f"{found[0].name}: its last line is torn"]
    try:
        kinds = [json.loads(line)["kind"] for line in data.splitlines()]
    except (ValueError, KeyError) as exc:
        return [f"{found[0].name}: a line is not a journal record ({exc})"]
    if kinds[:1] != ["header"] or "trial" not in kinds:
        return [f"{found[0].name}: no header and trials ({kinds[:5]})"]
    return []


def _new_commit_whole(p: Project, o: Outcome) -> list[str]:
    """After an interrupted import: no stray temporary file in the registry, and the file
    in the working tree either absent or exactly what HEAD holds (no half commit)."""
    rel = "registry/saxpy/n1m/sm00-stand-in-not-a-gpu.json"
    found = [f"left {t.name}" for t in p.path("registry").rglob(".*tmp*")]
    path = p.path(rel)
    committed = bool(p.git("ls-tree", "HEAD", "--", rel).strip())
    if path.exists() and not committed:
        found.append(f"{rel} written but not committed")
    if committed and not path.exists():
        found.append(f"{rel} committed but missing from the working tree")
    return found


def _first_confirmation_round_only(lines: list[str]) -> list[str]:
    return [ln for ln in lines if json.loads(ln).get("round", 1) == 1]


def _compile_cases(sig: int, tag: str) -> list[Case]:
    marker = "markers/nvcc-*"
    return [
        case(
            f"{tag}-compile",
            "signals",
            ["compile", "kernels/saxpy.cu", "--set", "BLOCK=64"],
            130,
            setup=slow_nvcc(),
            env=SLOW_NVCC,
            signal=_sig(sig, marker),
            timeout_s=30,
        ),
        case(
            f"{tag}-check-rebuild",
            "signals",
            ["check", "--no-gpu"],
            130,
            setup=chain(slow_nvcc(), edit_source),
            env=SLOW_NVCC,
            signal=_sig(sig, marker),
            progress=True,
            keeps=("registry",),
            timeout_s=30,
        ),
        case(
            f"{tag}-gate-build-only",
            "signals",
            ["gate", "--build-only"],
            130,
            setup=slow_nvcc(),
            env=SLOW_NVCC,
            signal=_sig(sig, marker),
            progress=True,
            keeps=("registry",),
            timeout_s=30,
        ),
        case(
            f"{tag}-refresh-rebuild",
            "signals",
            ["registry", "refresh"],
            130,
            setup=chain(slow_nvcc(), edit_source),
            env=SLOW_NVCC,
            signal=_sig(sig, marker),
            progress=True,
            keeps=("registry",),
            timeout_s=30,
        ),
        case(
            f"{tag}-bench-compile",
            "signals",
            ["bench", "kernels/saxpy.cu", "-n", "20"],
            130,
            setup=slow_nvcc(),
            env=SLOW_NVCC,
            signal=_sig(sig, marker),
            patches=("fakegpu",),
            progress=True,
            timeout_s=30,
        ),
    ]


def _import_cases(sig: int, tag: str) -> list[Case]:
    return [
        case(
            f"{tag}-import-at-{step}",
            "signals",
            ["registry", "import", RESULT],
            130,
            setup=slow_git(step, COMMIT_STEP_S),
            env=SLOW_GIT,
            signal=_sig(sig, "markers/git-*"),
            writes=("registry",),
            commits=True,
            keeps=("registry",),
            check=_new_commit_whole,
            timeout_s=30,
        )
        for step in ("hash-object", "commit-tree", "update-ref")
    ]


def _search_cases(sig: int, tag: str) -> list[Case]:
    search = ["search", "kernels/saxpy.cu", "-O", "p99", "--budget", "8", "--no-commit"]
    return [
        case(
            f"{tag}-search-measuring",
            "signals",
            search,
            130,
            patches=("standin-gpu-slow-measure",),
            signal=_sig(sig, "markers/measure-3"),
            progress=True,
            check=_journal_kept,
            timeout_s=60,
        ),
        case(
            f"{tag}-search-confirming",
            "signals",
            search,
            130,
            patches=("standin-gpu-slow-confirm",),
            signal=_sig(sig, "markers/remeasure-*"),
            progress=True,
            check=_journal_kept,
            timeout_s=60,
        ),
    ]


CASES += _compile_cases(INT, "sigint") + _import_cases(INT, "sigint") + _search_cases(INT, "sigint")
# SIGTERM (a CI job cancelled, `kill PID`) to the ctune process alone: the same outcome
CASES += [
    c for c in _compile_cases(TERM, "sigterm") if "bench" not in c.id and "refresh" not in c.id
]
CASES += [c for c in _import_cases(TERM, "sigterm") if "update-ref" in c.id]
CASES += _search_cases(TERM, "sigterm")

CASES += [
    case(  # the second Ctrl-C stops now (the first asks the search to finish the candidate)
        "sigint-twice-search-measuring",
        "signals",
        ["search", "kernels/saxpy.cu", "-O", "p99", "--budget", "8", "--no-commit"],
        130,
        patches=("standin-gpu-slow-measure",),
        signal=Signal(INT, marker="markers/measure-2", count=2, interval_s=0.1),
        progress=True,
        check=_journal_kept,
        timeout_s=60,
    ),
    case(
        "sigint-resume-confirming",
        "signals",
        [
            "search",
            "kernels/saxpy.cu",
            "-O",
            "p99",
            "--resume",
            "journals/saxpy.jsonl",
            "--no-commit",
        ],
        130,
        # as a search stopped after its first confirmation round left it: the rounds the
        # journal holds are taken back, not measured, so the template's (all three, and the
        # confirmation decided) would end the search before the signal's marker appears
        setup=journal_edit(_first_confirmation_round_only),
        patches=("standin-gpu-slow-confirm",),
        signal=_sig(INT, "markers/remeasure-*"),
        progress=True,
        writes=("journals",),
        keeps=("journal",),
        timeout_s=60,
    ),
    case(  # Ctrl-C is how a user answers a hang: a read that blocks must still end in 130
        "sigint-blocked-import-fifo",
        "signals",
        ["registry", "import", "incoming.json"],
        (2, 130),
        setup=fifo("incoming.json"),
        signal=Signal(INT, after_s=2.0, required=False),
        keeps=("registry",),
    ),
    case(
        "sigint-verify-fsck",
        "signals",
        ["registry", "verify"],
        130,
        setup=slow_git("fsck"),
        env=SLOW_GIT,
        signal=_sig(INT, "markers/git-*"),
        progress=True,
        keeps=("registry",),
        timeout_s=30,
    ),
    # a fresh interpreter (python -m ctune), not a forked one: the same outcome
    case(
        "sigint-compile-fresh-process",
        "signals",
        ["compile", "kernels/saxpy.cu", "--set", "BLOCK=64"],
        130,
        setup=slow_nvcc(),
        env=SLOW_NVCC,
        signal=_sig(INT, "markers/nvcc-*"),
        python=True,
        timeout_s=30,
    ),
    case(
        "sigint-import-fresh-process",
        "signals",
        ["registry", "import", RESULT],
        130,
        setup=slow_git("commit-tree", COMMIT_STEP_S),
        env=SLOW_GIT,
        signal=_sig(INT, "markers/git-*"),
        python=True,
        writes=("registry",),
        commits=True,
        keeps=("registry",),
        check=_new_commit_whole,
        timeout_s=30,
    ),
]

test_signals = tier(CASES)
