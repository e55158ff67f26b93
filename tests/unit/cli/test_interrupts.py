"""Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGTERM (to the
process, as a CI runner cancelling a job sends it) end `ctune compile`, `ctune check` and
a search that is confirming with exit 130 and one line saying what was kept.

Real processes throughout: `python -m ctune`, real nvcc, and for the search the numpy
stand-in GPU (tests/unit/measure/fakegpu) in real worker processes. Registry imports are
tests/unit/registry/test_registry_interrupt.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctune.search.journal import read

ROOT = Path(__file__).parents[3]
KERNELS = ROOT / "tests" / "data" / "kernels"
FAKE_GPU = ROOT / "tests" / "unit" / "measure" / "fakegpu"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
}
COMPILER_PROCESSES = ("nvcc", "cicc", "ptxas", "cudafe++", "fatbinary")

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc"),
    pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc"),
]


# --- running ctune and finding its children ------------------------------------------------


def _env(tmp_path: Path, *, fake_gpu: bool = False) -> dict[str, str]:
    path = [str(FAKE_GPU)] if fake_gpu else []
    env = {
        **os.environ,
        **GIT_IDENTITY,
        "PYTHONPATH": os.pathsep.join([*path, str(ROOT)]),
        "CTUNE_CACHE_DIR": str(tmp_path / "cache"),
        "COLUMNS": "200",
    }
    env.pop("CTUNE_DEBUG", None)
    return env


class Ctune:
    """`python -m ctune ARGS` in a session of its own, its output read as it comes."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ctune", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line)

    def descendants(self) -> Iterator[tuple[int, str]]:
        todo = [self.proc.pid]
        while todo:
            pid = todo.pop()
            try:  # a child (a compiler step) may end between two reads of /proc
                tasks = list(Path(f"/proc/{pid}/task").iterdir())
            except OSError:
                continue
            for task in tasks:
                try:
                    children = (task / "children").read_text().split()
                except OSError:
                    continue
                for child in map(int, children):
                    try:
                        name = Path(f"/proc/{child}/comm").read_text().strip()
                    except OSError:
                        continue
                    yield child, name
                    todo.append(child)

    def wait_for(self, *, child: tuple[str, ...] = (), text: str = "", timeout_s: float = 240):
        """Until a descendant of one of these names runs, or ``text`` was printed."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "ctune ended first: " + "".join(self.err)
            if child and any(name in child for _, name in self.descendants()):
                return
            if text and any(text in line for line in self.out + self.err):
                return
            time.sleep(0.01)
        raise AssertionError(f"waited {timeout_s} s for {child or text}")

    def stop(self, sig: signal.Signals) -> None:
        """SIGINT as a terminal sends it (the foreground group), SIGTERM to the process."""
        if sig == signal.SIGINT:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)

    def finish(self, timeout_s: float = 240) -> int:
        code = self.proc.wait(timeout=timeout_s)
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def interrupted_lines(self) -> list[str]:
        return [ln.strip() for ln in self.err if ln.startswith("interrupted:")]


def _compilers_left(folder: Path) -> list[str]:
    """Compiler processes still running on files under ``folder``."""
    left = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            name = (proc / "comm").read_text().strip()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if name in COMPILER_PROCESSES and str(folder).encode() in cmdline:
            left.append(f"{proc.name} {name}")
    return left


def _cache_entries(tmp_path: Path) -> list[str]:
    builds = tmp_path / "cache" / "builds"
    return sorted(p.name for p in builds.iterdir()) if builds.is_dir() else []


# --- compile ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_compile(sig: signal.Signals, tmp_path: Path) -> None:
    ctune = Ctune(["compile", str(KERNELS / "saxpy.cu")], tmp_path, _env(tmp_path))
    ctune.wait_for(child=("cicc", "ptxas"))
    ctune.stop(sig)
    assert ctune.finish() == 130, "".join(ctune.out + ctune.err)
    assert [ln.strip() for ln in ctune.err if ln.strip()] == ["interrupted: nothing written"]
    time.sleep(0.2)
    assert _compilers_left(tmp_path) == []  # nvcc and its children were stopped
    assert _cache_entries(tmp_path) == []  # no entry, no half-made folder


# --- a search on the stand-in GPU, stopped while it confirms --------------------------------


def _search(tmp_path: Path, journal: Path, *extra: str) -> list[str]:
    return [
        "search",
        str(KERNELS / "saxpy.cu"),
        "--problem",
        "n1m",
        "--objective",
        "p50",
        "--budget",
        "4",
        "--seed",
        "3",
        "--confirm-processes",
        "6",
        "--journal",
        str(journal),
        *extra,
    ]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_search_stopped_while_confirming_keeps_its_rounds(
    sig: signal.Signals, tmp_path: Path
) -> None:
    journal = tmp_path / "search.jsonl"
    env = _env(tmp_path, fake_gpu=True)
    ctune = Ctune(_search(tmp_path, journal), tmp_path, env)
    ctune.wait_for(text="confirming")
    time.sleep(0.5)  # the first round's fresh process is at work
    ctune.stop(sig)
    assert ctune.finish() == 130, "".join(ctune.out + ctune.err)

    replay, _ = read(journal)
    rounds = replay.rounds
    assert rounds and [r.round for r in rounds] == list(range(1, len(rounds) + 1))
    assert all(r.trials == len(replay.trials) == 4 and r.runs for r in rounds)
    assert all(m.outcome.is_ok for r in rounds for m in r.runs.values())
    assert ctune.interrupted_lines() == [
        f"interrupted: journal {journal} keeps 4 trial(s) and {len(rounds)} confirmation "
        f"round(s); continue with --resume {journal}"
    ]
    assert ctune.err[-1].startswith("interrupted:")  # the last word, after the report
    assert not (tmp_path / "cache" / "results").exists()  # nothing unconfirmed published
    if sig != signal.SIGINT:
        return

    before = journal.read_text().splitlines()
    again = Ctune([*_search(tmp_path, journal), "--resume", str(journal), "--json"], tmp_path, env)
    assert again.finish() == 0, "".join(again.out + again.err)
    result = json.loads("".join(again.out))
    after = journal.read_text().splitlines()
    assert after[: len(before)] == before  # the resume appended, and measured no trial again
    resumed = read(journal)[0]
    assert len(resumed.trials) == 4
    assert [r.round for r in resumed.rounds] == list(
        range(1, result["confirmation"]["processes"] + 1)
    )
    assert result["stop_reason"] == "budget" and result["confirmation"]["stopped"] != "interrupted"


# --- check, rebuilding after a source edit ----------------------------------------------


@pytest.fixture(scope="module")
def edited_registry(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(kernels folder, registry, repository): saxpy searched on the stand-in GPU, its
    result imported, then its source edited so that `check` rebuilds the members."""
    tmp_path = tmp_path_factory.mktemp("edited")
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(KERNELS / name, kernels / name)
    env = _env(tmp_path, fake_gpu=True)
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "search", str(kernels / "saxpy.cu"), "--problem", "n1m",
         "--objective", "p50", "--budget", "3", "--confirm-processes", "3",
         "--out", str(tmp_path / "result.json")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    repo = tmp_path / "project"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "registry", "import", str(tmp_path / "result.json"),
         "--registry", str(repo / "registry")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    with (kernels / "saxpy.cu").open("a") as fh:
        fh.write("\n// edited: check rebuilds the members to compare their SASS\n")
    return kernels, repo / "registry", repo


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_check(sig: signal.Signals, tmp_path: Path, edited_registry: tuple[Path, Path, Path]):
    kernels, registry, repo = edited_registry  # checked with an empty build cache: nvcc runs
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True).stdout
    args = ["check", "--no-gpu", "--kernels", str(kernels), "--registry", str(registry)]
    ctune = Ctune(args, tmp_path, _env(tmp_path))
    ctune.wait_for(child=("cicc", "ptxas"))
    ctune.stop(sig)
    assert ctune.finish() == 130, "".join(ctune.out + ctune.err)
    assert [ln.strip() for ln in ctune.err if ln.strip()] == ["interrupted: nothing written"]
    time.sleep(0.2)
    assert _compilers_left(tmp_path) == []
    assert not [p for p in (tmp_path / "cache" / "builds").glob(".*") if p.is_dir()]
    assert (
        subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True).stdout == head
    )
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True)
    assert status.stdout == b""
