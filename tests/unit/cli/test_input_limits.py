"""Small hostile inputs that once exhausted memory, CPU or the stack, or ended in an
internal error (exit 70), reproduced through ``ctune.cli.main``: each is now one line on
stderr and exit 2, well inside its timeout.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from ctune.errors import EXIT_USER_ERROR

DATA = Path(__file__).parents[2] / "data" / "kernels"
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def saxpy(tmp_path: Path) -> Path:
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path / "saxpy.cu"


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """(exit code, stdout, stderr) of one ``ctune`` command in a scratch folder."""
    from ctune.cli import main
    from ctune.compile import toolchain

    monkeypatch.chdir(tmp_path)
    for name in ("CTUNE_DEBUG", "CTUNE_REGISTRY", "CTUNE_CACHE_DIR", "CTUNE_EXECUTOR"):
        monkeypatch.delenv(name, raising=False)
    probed = toolchain.probe_toolchain("nvcc")  # the machine boundary: probed once
    monkeypatch.setattr(toolchain, "probe_toolchain", lambda *_a, **_k: probed)

    def invoke(*argv: str, environ: Mapping[str, str] | None = None) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(argv), environ=environ)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        return code, out.getvalue(), err.getvalue()

    return invoke


def _one_line(err: str, needle: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]


SPEC_EDITS = [
    (
        "nested exponent",
        ('"BLOCK * UNROLL <= 4096"', '"((((BLOCK**64)**64)**64)**64)**64 > 0"'),
        "restrictions[0]: '((((BLOCK**64)**64)**64)**64)**64 > 0' cannot be evaluated with the "
        "default genes for problem n1m: a power larger than 2**1024",
    ),
    (
        "range of a trillion",
        ("UNROLL: {values: [1, 2, 4, 8]", "UNROLL: {range: [1, 1000000000000]"),
        "genes.UNROLL.range: 1000000000000 values; at most 4096",
    ),
    (
        "1,900 unary minus signs",
        ('"BLOCK * UNROLL <= 4096"', '"' + "-" * 1900 + 'BLOCK < 0"'),
        "restrictions[0]: expression nested deeper than 100 levels",
    ),
    (
        "1,000 nested brackets",
        ("launch:", "junk: " + "[" * 1000 + "\nlaunch:"),
        "nested deeper than 32 levels",
    ),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("what", "edit", "message"), SPEC_EDITS, ids=[e[0] for e in SPEC_EDITS])
def test_a_small_spec_cannot_exhaust_the_machine(
    run: Run, saxpy: Path, what: str, edit: tuple[str, str], message: str
) -> None:
    yaml_path = saxpy.with_suffix(".yaml")
    text = yaml_path.read_text()
    assert edit[0] in text
    yaml_path.write_text(text.replace(edit[0], edit[1], 1))
    assert len(yaml_path.read_bytes()) < 4096  # a few KB of spec
    code, _, err = run("space", str(saxpy))
    assert code == EXIT_USER_ERROR
    _one_line(err, message)


@pytest.mark.timeout(30)
def test_a_spec_symlinked_to_dev_zero_is_refused_unread(run: Run, saxpy: Path) -> None:
    yaml_path = saxpy.with_suffix(".yaml")
    yaml_path.unlink()
    yaml_path.symlink_to("/dev/zero")
    code, _, err = run("compile", str(saxpy))
    assert code == EXIT_USER_ERROR
    _one_line(err, f"spec {yaml_path}: a character device, not a regular file")


def test_ctune_debug_0_means_off(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """CTUNE_DEBUG=0 once turned tracebacks on (any value did)."""
    for value in ("0", "false", "no", "off", ""):
        monkeypatch.setenv("CTUNE_DEBUG", value)
        code, _, err = run("compile", "absent.cu")
        assert code == EXIT_USER_ERROR and "Traceback" not in err
        _one_line(err, "absent.cu: no such file")
        # a command given its own environment reads CTUNE_DEBUG from it
        monkeypatch.setenv("CTUNE_DEBUG", "1")
        code, _, err = run("compile", "absent.cu", environ={"CTUNE_DEBUG": value})
        assert code == EXIT_USER_ERROR
        _one_line(err, "absent.cu: no such file")
    with pytest.raises(Exception, match="no such file"):  # on: the traceback, raised
        run("compile", "absent.cu", environ={"CTUNE_DEBUG": "1"})


def test_a_ctune_debug_that_is_no_switch_is_one_line(run: Run, saxpy: Path) -> None:
    code, _, err = run("compile", str(saxpy), environ={"CTUNE_DEBUG": "maybe"})
    assert code == EXIT_USER_ERROR
    _one_line(err, "CTUNE_DEBUG=maybe: expected on or off")


@pytest.mark.parametrize(
    ("environ", "argv", "message"),
    [
        (
            {"CTUNE_COMPILE_TIMEOUT_S": "nan"},
            ["compile"],
            "CTUNE_COMPILE_TIMEOUT_S=nan: expected a finite number of seconds > 0",
        ),
        (
            {"CTUNE_EXECUTOR": "tcp://a..b:8786"},
            ["compile"],
            "CTUNE_EXECUTOR=tcp://a..b:8786: expected local, dask, auto or a Dask scheduler",
        ),
        (
            {},
            ["search", "-O", "p99", "--executor", "[::1:8786"],
            "--executor=[::1:8786: expected local, dask, auto or a Dask scheduler address",
        ),
        (
            {"CTUNE_JOBS": "lots"},
            ["compile"],
            "CTUNE_JOBS=lots: expected an integer from 0 (one per CPU core) to 1024",
        ),
        ({"CTUNE_CACHE_DIR": ""}, ["compile"], "CTUNE_CACHE_DIR='': expected a folder"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(
    run: Run, saxpy: Path, tmp_path: Path, environ: dict, argv: list[str], message: str
) -> None:
    command, *options = argv
    code, _, err = run(command, str(saxpy), *options, environ=environ)
    assert code == EXIT_USER_ERROR
    _one_line(err, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saxpy.cu", "saxpy.yaml", "saxpy_ref.py"]


@pytest.mark.timeout(30)
def test_a_negative_number_of_samples_is_one_line(run: Run, saxpy: Path) -> None:
    """``space --samples -1`` drew none and said nothing (exit 0), as a typo should not."""
    code, _, err = run("space", str(saxpy), "--samples", "-1")
    assert code == EXIT_USER_ERROR
    _one_line(err, "--samples must be 0 or more, got -1")
    code, out, _ = run("space", str(saxpy), "--samples", "0")
    assert code == 0 and "valid candidates" in out


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plot", "{fifo}", "--as", "csv"], "journal {fifo}: a FIFO, not a regular file"),
        (["init", "{fifo}"], "kernel file {fifo}: a FIFO, not a regular file"),
        (["compile", "{cu}"], "source: {cu} is a FIFO, not a file"),
    ],
    ids=["plot", "init", "compile-source"],
)
def test_a_fifo_given_to_a_command_is_refused_without_blocking(
    run: Run, saxpy: Path, argv: list[str], message: str
) -> None:
    fifo = saxpy.with_name("journal.jsonl")
    os.mkfifo(fifo)
    saxpy.unlink()
    os.mkfifo(saxpy)  # the .cu itself, its sidecar beside it
    names = {"fifo": fifo, "cu": saxpy}
    code, _, err = run(*(part.format(**names) for part in argv))
    assert code == EXIT_USER_ERROR
    _one_line(err, message.format(**names))
