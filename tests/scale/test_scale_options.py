"""The executor and gpus settings, and a missing engine: one line, the documented exit code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctune.cli import search as search_cli
from ctune.config import Settings, resolve
from ctune.engine_settings import parse_executor, parse_gpus
from ctune.errors import EXIT_TOOLCHAIN, UserError
from ctune.scale.engine import resolve_executor, resolve_gpus
from ctune.spec import load_spec
from ctune.testing.cli_app import ctune_main
from ctune.testing.standins import write_standin_kernel


@pytest.mark.parametrize(
    ("text", "kind", "address"),
    [
        ("local", "local", ""),
        ("DASK", "dask", ""),
        ("auto", "auto", ""),
        ("tcp://10.0.0.5:8786", "address", "tcp://10.0.0.5:8786"),
        ("node7:8786", "address", "tcp://node7:8786"),
        ("tls://sched.example.com:8786", "address", "tls://sched.example.com:8786"),
        ("[::1]:8786", "address", "tcp://[::1]:8786"),
        ("ucx://gpu_node-3:65535", "address", "ucx://gpu_node-3:65535"),
    ],
)
def test_executor_values(text: str, kind: str, address: str) -> None:
    choice = parse_executor(text)
    assert (choice.kind, choice.address) == (kind, address)


@pytest.mark.parametrize(
    "bad",
    [
        *("ray", "tcp://host", "8786", ""),
        # addresses Dask itself fails on with a ValueError (once exit 70): an empty label, a
        # port out of range, an unclosed or unbracketed IPv6 address, an unknown scheme
        *("tcp://a..b:8786", "host:99999", "host:0", "[::1:8786", "::::1:1", "tcp://-x:1"),
        *("http://host:8786", "host:\u0663", "[not-ipv6]:8786", "a" * 64 + ":8786"),
    ],
)
def test_a_bad_executor_is_one_line(bad: str) -> None:
    with pytest.raises(UserError, match=r"executor=.*allowed local, dask, auto"):
        parse_executor(bad)


def test_gpus_values() -> None:
    assert parse_gpus("") == ()
    assert parse_gpus("all") == "all"
    assert parse_gpus("0, 2") == (0, 2)
    assert resolve_gpus("") == (0,)
    with pytest.raises(UserError, match="named twice"):
        parse_gpus("1,1")
    with pytest.raises(UserError, match="allowed all or GPU indices"):
        parse_gpus("first")


def test_settings_layers_and_checks(tmp_path: Path) -> None:
    cfg = resolve(environ={"CTUNE_EXECUTOR": "dask", "CTUNE_GPUS": "0,1"}, cwd=tmp_path)
    assert (cfg.executor, cfg.gpus) == ("dask", "0,1")
    assert resolve_executor(cfg).kind == "dask"
    # several GPUs need the engine even when the executor is local
    several = Settings(gpus="0,1")
    assert resolve_executor(several).kind == "dask"
    assert resolve_executor(Settings(gpus="1")).kind == "local"
    with pytest.raises(UserError, match="applies to an engine started here"):
        resolve({"executor": "tcp://h:8786", "gpus": "0,1"}, environ={}, cwd=tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.ctune]\nexecutor = "h:8786"\n')
    assert resolve(environ={}, cwd=tmp_path).executor == "h:8786"


def test_auto_without_a_configured_scheduler_is_local(monkeypatch: pytest.MonkeyPatch) -> None:
    dask = pytest.importorskip("dask")
    monkeypatch.setitem(dask.config.config, "scheduler-address", None)
    assert resolve_executor(Settings(executor="auto")).kind == "local"
    monkeypatch.setitem(dask.config.config, "scheduler-address", "tcp://sched:8786")
    assert resolve_executor(Settings(executor="auto")).address == "tcp://sched:8786"
    monkeypatch.setitem(dask.config.config, "scheduler-address", "tcp://a..b:8786")
    with pytest.raises(UserError, match=r"scheduler-address 'tcp://a\.\.b:8786' \(DASK_SCHED"):
        resolve_executor(Settings(executor="auto"))


def test_without_dask_the_engine_is_one_line_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_standin_kernel(tmp_path / "k")
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    monkeypatch.setattr(search_cli, "load_kernel", lambda kernel, cfg: (load_spec(kernel), None))
    result = CliRunner().invoke(
        ctune_main,
        ["search", "k/standin.cu", "-O", "p50", "--executor", "dask"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == EXIT_TOOLCHAIN, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert "pip install 'ctune[cluster]'" in lines[0]
    assert "Traceback" not in result.output
