"""A kernel in a folder whose name is not UTF-8, with the real nvcc: ``nvcc -M`` lists the
path as the bytes it is, and ``ctune compile`` once failed decoding them (exit 70)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path

import pytest

from ctune.compile.deps import include_closure
from ctune.errors import EXIT_OK

pytestmark = pytest.mark.nvcc

DATA = Path(__file__).parents[2] / "tests" / "data" / "kernels"


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/k\xff\xfe"))  # not UTF-8
    folder.mkdir()
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, folder / name)
    (folder / "tile.cuh").write_text("#define TILE 4\n")
    source = folder / "saxpy.cu"
    source.write_text('#include "tile.cuh"\n' + source.read_text())
    return source


def test_the_include_closure_names_the_files_as_they_are(kernel: Path) -> None:
    files = include_closure("nvcc", kernel, (), {}, "c++17", "sm_90")
    assert set(files) == {kernel.resolve(), kernel.with_name("tile.cuh").resolve()}
    assert all(f.is_file() for f in files)  # the surrogates name the same files again


@pytest.mark.timeout(300)
def test_compile_in_a_non_utf8_folder(
    kernel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctune.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTUNE_DEBUG", raising=False)
    out, err = io.StringIO(), io.StringIO()
    code = EXIT_OK
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["compile", str(kernel)])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    assert code == EXIT_OK, err.getvalue()
    assert any(line.split() == ["outcome", "ok"] for line in out.getvalue().splitlines())
