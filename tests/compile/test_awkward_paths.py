"""The include closure of kernels in folders with awkward but legal names, with the real
nvcc: its ``-M`` output escapes a space and nothing else, and cannot write a ``"``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ctune.compile.deps import include_closure
from ctune.errors import UserError

pytestmark = pytest.mark.nvcc

#: kernel folders (a tab, like any control character, is refused on nvcc's command line)
FOLDERS = ["my kernels", "a;b", "a#b", "a:b", "it's", "a  b", "a%b=c", 'it\'s "here"']
#: header folders, named only by an #include line
HEADER_FOLDERS = ["inc $x", "a\tb", "a#b:c;d", "a\\b c"]


def _kernel(folder: Path, include: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "k.cu"
    source.write_text(
        f'#include {include}\nextern "C" __global__ void k(float* y) {{ y[0] = TILE; }}\n'
    )
    return source


def _header(path: Path) -> Path:
    path.parent.mkdir(parents=True)
    path.write_text("#define TILE 4\n")
    return path.resolve()


@pytest.mark.parametrize("name", FOLDERS)
def test_a_kernel_folders_closure_names_the_source_and_its_header(
    tmp_path: Path, name: str
) -> None:
    header = _header(tmp_path / name / "inc" / "tile.h")
    source = _kernel(tmp_path / name, '"inc/tile.h"')
    files = include_closure("nvcc", source, (), {}, "c++17", "sm_90")
    assert files == sorted({source.resolve(), header})


@pytest.mark.parametrize("name", HEADER_FOLDERS)
def test_a_header_folders_name_comes_back_as_it_is(tmp_path: Path, name: str) -> None:
    header = _header(tmp_path / name / "tile.h")
    source = _kernel(tmp_path, f'"{name}/tile.h"')
    if "\\" in name:  # nvcc lists a backslash as '/': refused, naming what it listed
        with pytest.raises(UserError, match="does not exist"):
            include_closure("nvcc", source, (), {}, "c++17", "sm_90")
        return
    assert include_closure("nvcc", source, (), {}, "c++17", "sm_90") == sorted(
        {source.resolve(), header}
    )


def test_a_header_in_a_folder_with_a_quote_is_found_by_the_include_lines(tmp_path: Path) -> None:
    """nvcc lists ``q"q/tile.h`` as ``q\\``: the file the #include line names is taken."""
    header = _header(tmp_path / "inc" / 'q"q' / "tile.h")
    source = _kernel(tmp_path, '<q"q/tile.h>')
    files = include_closure("nvcc", source, (tmp_path / "inc",), {}, "c++17", "sm_90")
    assert files == sorted({source.resolve(), header})


def test_a_fifo_header_is_refused_at_once(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text('#include "pipe.h"\n')
    os.mkfifo(tmp_path / "pipe.h")
    start = time.monotonic()
    with pytest.raises(UserError, match=r"pipe\.h: a FIFO"):
        include_closure("nvcc", source, (), {}, "c++17", "sm_90")
    assert time.monotonic() - start < 5
