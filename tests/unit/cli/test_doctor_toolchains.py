"""`ctune doctor` lists every toolchain it finds (PATH, CUDA_HOME, the nvidia-cuda-nvcc
wheel, the settings' own, a split one), says which takes advanced controls and which is
selected, and whether CompileIQ and its search spaces are there. The toolchains are
stand-in scripts (tests/unit/compile/test_toolchain_select.py)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

from ctune.compile.toolchain import forget_probes
from tests.unit.compile.test_toolchain_select import (
    read_only,
    standin_cuda,
    standin_ptxas,
    standin_wheel,
)


@pytest.fixture
def doctor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """(exit code, rows by detail) of ``ctune doctor --json`` with ``environ``."""
    from ctune.cli import main

    monkeypatch.chdir(tmp_path)
    forget_probes()

    def run(*argv: str, environ: dict[str, str]) -> tuple[int, list[dict], str]:
        out, err = io.StringIO(), io.StringIO()
        code = 0
        env = {"PATH": "/usr/bin:/bin", "CTUNE_CACHE_DIR": str(tmp_path / "cache"), **environ}
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(["doctor", "--json", *argv], environ=env)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        rows = json.loads(out.getvalue())["checks"] if out.getvalue().strip() else []
        return code, rows, err.getvalue()

    yield run
    forget_probes()


def _rows(rows: list[dict], name: str) -> list[dict]:
    return [r for r in rows if r["name"] == name]


def test_every_toolchain_found_is_one_row(doctor, tmp_path: Path, monkeypatch) -> None:
    old = standin_cuda(tmp_path / "cuda-13.0", "13.0.88")
    home = standin_cuda(tmp_path / "cuda-13.5", "13.5.37")
    wheel = standin_wheel(tmp_path / "site", "13.3.73")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site"), *sys.path])
    environ = {"PATH": f"{old.parent}:/usr/bin:/bin", "CUDA_HOME": str(tmp_path / "cuda-13.5")}
    code, rows, _ = doctor("--nvcc", str(old), environ=environ)
    assert code == 0
    (selected,) = _rows(rows, "nvcc / ptxas")
    assert selected["ok"] and "nvcc 13.0.88 / ptxas 13.0.88" in selected["detail"]
    assert "advanced controls: ptxas no, nvcc no" in selected["detail"]
    found = {r["detail"].split(" in ")[1].split(" (")[0]: r for r in _rows(rows, "toolchain")}
    mine = {str(old.parent), str(home.parent), str(wheel.parent)}
    assert mine <= set(found)
    assert found[str(old.parent)]["detail"].startswith("selected: nvcc 13.0.88 / ptxas 13.0.88")
    assert "(nvcc setting" in found[str(old.parent)]["detail"]
    assert "PATH" in found[str(old.parent)]["detail"]  # one row for two places
    assert "CUDA_HOME" in found[str(home.parent)]["detail"]
    assert "advanced controls: ptxas yes, nvcc sm_100 and up" in found[str(home.parent)]["detail"]
    wheel_row = found[str(wheel.parent)]["detail"]
    assert "nvidia-cuda-nvcc wheel" in wheel_row and "nvcc 13.3.73 / ptxas 13.3.73" in wheel_row
    assert not wheel_row.startswith("selected")


def test_the_split_toolchain_is_selected_and_takes_ptxas_controls(doctor, tmp_path: Path) -> None:
    old = standin_cuda(tmp_path / "cuda-13.0", "13.0.88")
    ptxas = standin_ptxas(tmp_path / "carried" / "ptxas", "13.3.73")
    code, rows, _ = doctor("--nvcc", str(old), "--ptxas", str(ptxas), environ={})
    assert code == 0
    (selected,) = _rows(rows, "nvcc / ptxas")
    assert "nvcc 13.0.88 / ptxas 13.3.73 (split)" in selected["detail"]
    assert "advanced controls: ptxas yes, nvcc no" in selected["detail"]
    (split,) = [r for r in _rows(rows, "toolchain") if "(split)" in r["detail"]]
    assert split["detail"].startswith("selected: ") and "ptxas setting" in split["detail"]
    plain = [r for r in _rows(rows, "toolchain") if f"in {old.parent} " in r["detail"]]
    assert plain and not plain[0]["detail"].startswith("selected")


def test_compileiq_and_the_spaces_have_rows(doctor, tmp_path: Path) -> None:
    old = standin_cuda(tmp_path / "cuda", "13.0.88")
    _, rows, _ = doctor("--nvcc", str(old), environ={})
    (ciq,) = _rows(rows, "compileiq")
    installed = ciq["ok"]
    assert ciq["detail"].startswith("compileiq 1.") if installed else "ctune[acf]" in ciq["detail"]
    (spaces,) = _rows(rows, "controls spaces")
    assert not spaces["ok"] and spaces["detail"].startswith("not configured")
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "nvcc13.3.bin").write_bytes(b"stand-in")
    _, rows, _ = doctor("--nvcc", str(old), environ={"CTUNE_ACF_SPACES": str(ours)})
    (spaces,) = _rows(rows, "controls spaces")  # judged for 13.3, the release that takes them
    assert spaces["ok"] and spaces["detail"].startswith(f"acf_spaces={ours}: nvcc13.3.bin; ")
    assert "no ptxas13.3.bin" in spaces["detail"]


def test_the_spaces_row_reads_the_setting_the_search_reads(doctor, tmp_path: Path) -> None:
    """CompileIQ's CIQ_SEARCH_SPACES_DIR is not ctune's setting: a search would not find
    the spaces there, so doctor does not call them ok."""
    old = standin_cuda(tmp_path / "cuda-13.0", "13.0.88")
    ptxas = standin_ptxas(tmp_path / "carried" / "ptxas", "13.3.73")
    folder = tmp_path / "spaces"
    folder.mkdir()
    (folder / "ptxas13.3.bin").write_bytes(b"stand-in")
    split = ("--nvcc", str(old), "--ptxas", str(ptxas))
    _, rows, _ = doctor(*split, environ={"CIQ_SEARCH_SPACES_DIR": str(folder)})
    (spaces,) = _rows(rows, "controls spaces")
    assert not spaces["ok"] and spaces["detail"].startswith("not configured (acf_spaces")
    assert "CIQ_SEARCH_SPACES_DIR is CompileIQ's, ctune does not read it" in spaces["detail"]
    _, rows, _ = doctor(*split, environ={"CTUNE_ACF_SPACES": str(folder)})
    (spaces,) = _rows(rows, "controls spaces")  # the split's ptxas 13.3 takes its space
    assert spaces["ok"] and spaces["detail"] == f"acf_spaces={folder}: ptxas13.3.bin"
    (folder / "ptxas13.3.bin").unlink()
    (folder / "ptxas13.5.bin").write_bytes(b"stand-in")
    _, rows, _ = doctor(*split, environ={"CTUNE_ACF_SPACES": str(folder)})
    (spaces,) = _rows(rows, "controls spaces")  # another release's space is not this one's
    assert not spaces["ok"] and "no ptxas13.3.bin" in spaces["detail"]


def test_the_registry_s_journals_have_a_row(doctor, tmp_path: Path) -> None:
    """How many journal copies the registry keeps, by kernel: never a gap."""
    from ctune.search.journal_copy import pack

    old = standin_cuda(tmp_path / "cuda", "13.0.88")
    registry = tmp_path / "shared-registry"
    environ = {"CTUNE_REGISTRY": str(registry)}
    _, rows, _ = doctor("--nvcc", str(old), environ=environ)
    (row,) = _rows(rows, "registry journals")
    assert row["ok"] and row["detail"].startswith("none kept in ")
    for rel in ("gemm/sq4096/d.jsonl.gz", "gemm/t16/d.jsonl.gz", "attention/s1024/d.jsonl.gz"):
        (registry / rel).parent.mkdir(parents=True, exist_ok=True)
        (registry / rel).write_bytes(pack(b"{}\n"))
    _, rows, _ = doctor("--nvcc", str(old), environ=environ)
    (row,) = _rows(rows, "registry journals")
    assert row["ok"] and row["detail"] == f"3 kept in {registry} (attention 1, gemm 2)"


def test_no_selected_toolchain_is_exit_3_with_the_other_rows(doctor, tmp_path: Path) -> None:
    home = standin_cuda(tmp_path / "cuda", "13.3.73")
    code, rows, err = doctor(
        "--nvcc", str(tmp_path / "none" / "nvcc"), environ={"CUDA_HOME": str(home.parent.parent)}
    )
    assert code == 3 and "nvcc is required" in err
    (selected,) = _rows(rows, "nvcc / ptxas")
    assert not selected["ok"] and selected["detail"].startswith(
        f"nvcc {tmp_path}/none/nvcc: no such"
    )
    assert any(f"in {home.parent} (CUDA_HOME)" in r["detail"] for r in _rows(rows, "toolchain"))


def test_a_missing_ptxas_is_one_line_and_exit_2(doctor, tmp_path: Path) -> None:
    code, rows, err = doctor("--ptxas", str(tmp_path / "nope"), environ={})
    assert code == 2 and rows == []
    assert err.strip().count("\n") == 0 and "--ptxas=" in err and "no such file" in err


def test_a_read_only_cache_marks_the_split_row_and_shows_the_rest(
    doctor, tmp_path: Path, monkeypatch
) -> None:
    """--ptxas with a cache folder that cannot be written: every row, the selected one
    missing with why and what to do, exit 3 (not a bare OSError line, exit 2)."""
    old = standin_cuda(tmp_path / "cuda-13.0", "13.0.88")
    ptxas = standin_ptxas(tmp_path / "carried" / "ptxas", "13.3.73")
    read_only(monkeypatch, tmp_path / "cache")
    code, rows, err = doctor("--nvcc", str(old), "--ptxas", str(ptxas), environ={})
    assert code == 3 and "nvcc is required" in err
    (selected,) = _rows(rows, "nvcc / ptxas")
    assert not selected["ok"] and "Read-only file system" in selected["detail"]
    assert "set CTUNE_CACHE_DIR" in selected["detail"]
    assert any(f"in {old.parent} " in r["detail"] for r in _rows(rows, "toolchain"))
    assert _rows(rows, "compileiq") and _rows(rows, "registry journals")
