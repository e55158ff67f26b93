"""Every command and option against values a user (or a file name) can hold.

A corpus of hostile values (rich markup, emoji codes, terminal escapes and other
control characters, bytes that are not UTF-8, bidirectional overrides, very long
names, shell and format metacharacters, odd numbers) goes through ``ctune.cli.main``
in every argument position there is. Each run must end with a documented exit code;
a failure is exactly one line on stderr starting ``error:``; nothing prints a
traceback, a raw control character or a lone surrogate (which a real stdout cannot
even encode).

Every template is run with every value in the corpus; the toolchain probe is
cached (one ``nvcc --version`` for the module) and nothing can reach a GPU here.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctune.errors import (
    EXIT_GATE_FAILED,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_REMOTE,
    EXIT_TOOLCHAIN,
    EXIT_USER_ERROR,
)

ROOT = Path(__file__).parents[3]
SAXPY = str(ROOT / "tests" / "data" / "kernels" / "saxpy.cu")
JOURNAL = str(ROOT / "tests" / "data" / "journals" / "saxpy-n1m-replay.jsonl")
KEY = "gemm/sq4096/sm90-nvidia-h200"
DOCUMENTED = {EXIT_OK, EXIT_GATE_FAILED, EXIT_USER_ERROR, EXIT_TOOLCHAIN, EXIT_INCONCLUSIVE}
DOCUMENTED |= {EXIT_REMOTE}

MARKUP = [
    "[/x]",
    "kernels/[/x].cu",
    "[bold]x",
    "[red]red[/red]",
    "[/]",
    "[@click=quit]",
    "[link=https://example.com]x[/link]",
    "[",
    "]",
    "[[",
    "x[/bold]y",
    "\\[x]",
    "[b]]",
    "ctune[plot]",
    "[#ff0000]x",
]
EMOJI = [":smile:", ":thumbs_up:", ":x::x:", "a:b:c"]
CONTROL = [
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "\x1b[2J\x1b[H",
    "a\nb",
    "a\r\nb",
    "line\r",
    "tab\there",
    "\x07bell",
    "\x08\x08back",
    "\x7f",
    "\x9b31m",
    "\x0b\x0c",
    "\x1b",
    "\u0085next",
]
NOT_UTF8 = [
    "\udcff\udcfe",
    "caf\udce9.cu",
    "\udc80",
    "kernels/\udcc3\udc28.cu",
    "\udced\udca0\udc80",
]
UNICODE = [
    "ünïcødé",
    "💥.cu",
    "\u202eevil.cu",
    "a\u200bb",
    "ＡＢＣ",
    "𝕏𝕐",
    "\ufeffbom",
    "\u2028sep",
    "日本語/カーネル.cu",
    "é" * 300,
    "e\u0301",
]
LONG = ["a" * 5000, "x/" * 2100, "[" * 3000, "\x1b" * 2000, "😀" * 1500]
SHELL = [
    "$(id)",
    "`id`",
    "; rm -rf /",
    "| cat",
    "&& true",
    "'",
    '"',
    "\\",
    "%s%s%n",
    "{0}",
    "{{}}",
    "%(x)s",
    "${HOME}",
    "*",
    "?",
    "~",
    "#",
]
PATHS = ["", " ", ".", "..", "/", "//", "/etc/passwd", "../../etc/passwd", "/dev/null", "-"]
NUMBERS = [
    "-1",
    "0",
    "1e309",
    "nan",
    "inf",
    "-inf",
    "99999999999999999999999",
    "0x10",
    "1_000",
    "１２３",
    "٣",
    "1.5",
    "-0",
    "+7",
    "1e-400",
]
STRUCTURED = [
    "{a: b}",
    "[1, 2]",
    "!!python/object:os.system",
    "&a *a",
    '{"a": 1}',
    "null",
    "=",
    "==",
    "BLOCK=",
    "=128",
    "BLOCK==128",
    "BLOCK=[/x]",
    "[/x]=1",
    "BLOCK=\x1b[31m",
    "p99; rm",
    "0.7*p50 + ",
    "1e999*p50",
    "p50/0",
    "p50**p50",
    "power<=[/x]W",
    "power<=1e999W",
    "power<=nanW",
    "power<==4",
    "a/b/c/d",
    "@",
    "HEAD~1:",
    ":",
    f"{KEY}@[/x]",
    f"[/x]:{KEY}",
    "x" * 64 + "/y/z",
]
CORPUS = MARKUP + EMOJI + CONTROL + NOT_UTF8 + UNICODE + LONG + SHELL + PATHS + NUMBERS
CORPUS += STRUCTURED

# Where a value goes: "{}" is the value; commands that would write somewhere get it
# inside out/ under the test's own folder.
TEMPLATES: dict[str, list[str]] = {
    "compile KERNEL": ["compile", "{}"],
    "compile --set": ["compile", SAXPY, "--set", "{}"],
    "compile --problem": ["compile", SAXPY, "--problem", "{}"],
    "compile --arch": ["compile", SAXPY, "--arch", "{}", "--set", "BLOCK=nope"],
    "compile --nvcc": ["compile", SAXPY, "--nvcc", "{}", "--set", "BLOCK=nope"],
    "compile --ptxas": ["compile", SAXPY, "--ptxas", "{}", "--set", "BLOCK=nope"],
    "space KERNEL": ["space", "{}"],
    "space --problem": ["space", SAXPY, "--problem", "{}"],
    "space --samples": ["space", SAXPY, "--samples", "{}", "--problem", "nope"],
    "space --seed": ["space", SAXPY, "--seed", "{}", "--problem", "nope"],
    "bench KERNEL": ["bench", "{}"],
    "bench --set": ["bench", SAXPY, "--set", "{}"],
    "bench --quantile": ["bench", SAXPY, "--quantile", "{}"],
    "bench --l2-policy": ["bench", SAXPY, "--l2-policy", "{}"],
    "bench --samples": ["bench", SAXPY, "-n", "{}"],
    "bench --device": ["bench", SAXPY, "--device", "{}"],
    "search KERNEL": ["search", "{}", "-O", "p99"],
    "search --objective": ["search", SAXPY, "-O", "{}"],
    "search --constraint": ["search", SAXPY, "-O", "p99", "-C", "{}"],
    "search --strategy": ["search", SAXPY, "-O", "p99", "--strategy", "{}"],
    "search --option": ["search", SAXPY, "-O", "p99", "--option", "{}"],
    "search --budget": ["search", SAXPY, "-O", "p99", "--budget", "{}"],
    "search --time": ["search", SAXPY, "-O", "p99", "--time", "{}"],
    "search --resume": ["search", SAXPY, "-O", "p99", "--resume", "{}"],
    "search --problem": ["search", SAXPY, "-O", "p99", "--problem", "{}"],
    "search --l2-policy": ["search", SAXPY, "-O", "p99", "--l2-policy", "{}"],
    "search --l2": ["search", SAXPY, "-O", "p99", "--l2", "{}"],  # the old name
    "search --journal": ["search", SAXPY, "-O", "p99", "--journal", "out/{}"],
    "plot SOURCE": ["plot", "{}", "--as", "csv"],
    "plot --figure": ["plot", JOURNAL, "--figure", "{}", "--out", "out"],
    "plot --as": ["plot", JOURNAL, "--as", "{}"],
    "check --registry": ["check", "--registry", "{}", "--no-gpu"],
    "gate KEY": ["gate", "{}"],
    "gate --processes": ["gate", "--processes", "{}"],
    "registry show": ["registry", "show", "{}"],
    "registry show --release": ["registry", "show", KEY, "--release", "{}"],
    "registry show --as": ["registry", "show", KEY, "--as", "{}"],
    "registry list --as": ["registry", "list", "--as", "{}"],
    "registry diff": ["registry", "diff", "{}", KEY],
    "registry export --as": ["registry", "export", KEY, "--as", "{}"],
    "registry export KEY": ["registry", "export", "{}", "--bare"],
    "registry import": ["registry", "import", "{}", "--no-commit"],
    "registry pin --release": ["registry", "pin", "nope/x/y", "--release", "{}"],
    "registry retune KEY": ["registry", "retune", "{}"],
    "registry status --remote": ["registry", "status", "--remote", "{}", "--ref", "{}"],
    "registry pull --remote": ["registry", "pull", "--remote", "{}"],
    "registry verify --ref": ["registry", "verify", "--ref", "{}", "--no-fsck"],
    "registry migrate --ref": ["registry", "migrate", "--ref", "{}", "--dry-run"],
    "registry doctor --older-than": ["registry", "doctor", "--older-than", "{}"],
    "registry list --registry": ["registry", "list", "--registry", "{}"],
    "search --patience": ["search", SAXPY, "-O", "p99", "--patience", "{}"],
    "search --jobs": ["search", SAXPY, "-O", "p99", "--jobs", "{}"],
    "search --confirm-processes": ["search", SAXPY, "-O", "p99", "--confirm-processes", "{}"],
    "gate --floor": ["gate", "--floor", "{}"],
    "bench --timeout": ["bench", SAXPY, "--timeout", "{}"],
}


def test_the_corpus_is_large_and_distinct() -> None:
    assert len(CORPUS) >= 100 and len(set(CORPUS)) == len(CORPUS)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch copy of the committed registry in a git repository of its own."""
    import shutil
    import subprocess

    folder = tmp_path_factory.mktemp("hostile") / "project"  # ".." is ours too
    shutil.copytree(ROOT / "registry", folder / "registry")
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (
        ["init", "-q", "-b", "main"],
        ["-c", "user.name=t", "-c", "user.email=t@e", "add", "."],
        ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "registry"],
    ):
        subprocess.run(["git", *args], cwd=folder, check=True, env=env)
    yield folder


@pytest.fixture
def run(project: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], tuple]:
    from ctune.cli import main
    from ctune.compile import toolchain

    monkeypatch.chdir(project)
    for name in ("CTUNE_DEBUG", "CTUNE_REGISTRY", "CTUNE_CACHE_DIR", "CTUNE_L2", "CTUNE_NVCC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    probed = toolchain.probe_toolchain("nvcc")  # the machine boundary: probed once
    monkeypatch.setattr(toolchain, "probe_toolchain", lambda *_a, **_k: probed)
    import ctune.search.session as session

    monkeypatch.setattr(session, "gpu_available", lambda index=0: False)  # never a GPU here

    def invoke(argv: list[str]) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        return code, out.getvalue(), err.getvalue()

    return invoke


RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


def _problems(argv: list[str], code: int, out: str, err: str) -> list[str]:
    found = []
    if code not in DOCUMENTED:
        found.append(f"exit {code}")
    if "Traceback" in out + err:
        found.append("a traceback")
    if RAW.search(out + err):
        found.append(f"a raw control character: {RAW.search(out + err)!r}")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if code != EXIT_OK:
        if len(lines) != 1 or not lines[0].startswith("error: "):
            found.append(f"stderr is not one error line: {err[:300]!r}")
        elif len(lines[0]) > 1100:
            found.append(f"an error line of {len(lines[0])} characters")
    elif any(not ln.startswith(("warning: ", "error: ")) for ln in lines):
        found.append(f"stray stderr output: {err[:300]!r}")
    return found


# one command per value (126): the default 60 s is one test's budget, and `registry migrate
# --dry-run` reads every committed artifact, ~0.47 s a call on a 2-core CI machine (~59 s
# for the corpus: it timed out there once at 60 s)
@pytest.mark.timeout(180)
@pytest.mark.parametrize("template", list(TEMPLATES))
def test_every_value_in_every_position(run: Callable, template: str) -> None:
    failures = []
    for value in CORPUS:
        argv = [part.replace("{}", value) for part in TEMPLATES[template]]
        code, out, err = run(argv)
        problems = _problems(argv, code, out, err)
        if problems:
            failures.append(f"{value[:40]!r}: {'; '.join(problems)}")
    assert not failures, f"{template}: {len(failures)} value(s)\n" + "\n".join(failures[:20])


def test_markup_in_a_path_is_shown_as_written(run: Callable) -> None:
    code, _, err = run(["compile", "kernels/[/x].cu"])
    assert code == EXIT_USER_ERROR
    assert err == "error: kernels/[/x].cu: no such file\n"


def test_control_characters_and_bytes_are_shown_escaped(run: Callable) -> None:
    code, _, err = run(["compile", "k\x1b[31m\n\udcff.cu"])
    assert code == EXIT_USER_ERROR
    assert err == "error: k\\x1b[31m\\n\\xff.cu: no such file\n"


def test_a_nul_byte_is_refused_in_one_line(run: Callable) -> None:
    code, _, err = run(["space", "a\x00b.cu"])
    assert code == EXIT_USER_ERROR and err.startswith("error: an argument contains a NUL byte")


def test_a_very_long_message_keeps_its_start_and_end(run: Callable) -> None:
    name = "a" * 3000 + "-END.cu"
    code, _, err = run(["compile", name])
    assert code == EXIT_USER_ERROR
    line = err.strip()
    assert len(line) < 1100 and line.startswith("error: aaaa") and "-END.cu" in line[-250:]
    assert "characters)..." in line  # and says how much it left out


def test_usage_errors_are_one_line_naming_the_help(run: Callable) -> None:
    code, _, err = run(["search", SAXPY, "-O", "p99", "--budget", "[/x]"])
    assert code == EXIT_USER_ERROR
    assert err.count("\n") == 1 and "--budget" in err and "`ctune search --help`" in err
    code, _, err = run(["frobnicate"])
    assert code == EXIT_USER_ERROR and "No such command 'frobnicate'" in err


def test_a_real_process_with_non_utf8_argv_and_a_pipe(tmp_path: Path) -> None:
    """argv bytes that are not UTF-8, output to a pipe: the real streams, not StringIO."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT), "LC_ALL": "C.UTF-8"}
    env.pop("CTUNE_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "space", b"k\xff\x1b[2J[/x].cu"],
        capture_output=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == EXIT_USER_ERROR
    assert done.stderr == b"error: k\\xff\\x1b[2J[/x].cu: no such file\n"


@pytest.mark.parametrize("argv", [[], ["registry"]])
def test_no_command_shows_the_help_and_no_error_line(run: Callable, argv: list[str]) -> None:
    code, out, err = run(argv)
    assert code == EXIT_USER_ERROR and "Usage: ctune" in out and err == ""


@pytest.mark.parametrize("argv", [["-h"], ["--help"], ["registry", "show", "-h"], ["plot", "-h"]])
def test_help_options(run: Callable, argv: list[str]) -> None:
    code, out, err = run(argv)
    assert code == EXIT_OK and "Usage: ctune" in out and err == ""
    assert "<bool>" not in out and "<str>" not in out and "list[str]" not in out


@pytest.mark.parametrize("argv", [["--version"], ["-V"]])
def test_version(run: Callable, argv: list[str]) -> None:
    from ctune import __version__

    assert run(argv) == (EXIT_OK, f"ctune {__version__}\n", "")
