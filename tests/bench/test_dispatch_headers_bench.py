"""bench/dispatch_headers.py: the committed dispatch headers are their tables', and compile
together."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]
HEADERS = sorted((ROOT / "bench/results/dispatch").glob("*.h"))


def test_every_committed_header_is_written_from_its_table(
    bench_module: Callable[[str], ModuleType],
) -> None:
    bench = bench_module("dispatch_headers")
    assert HEADERS
    for path in HEADERS:
        assert path.read_text() == bench.render(path), path.name


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler (g++)")
def test_the_committed_headers_compile_together(tmp_path: Path) -> None:
    includes = "".join(f'#include "{p}"\n' for p in HEADERS)
    names = [p.read_text().split("namespace ", 1)[1].split(" ", 1)[0] for p in HEADERS]
    assert len(set(names)) == len(names)  # one namespace per set
    uses = "".join(f"  n += {ns}::kEntries_n + {ns}::kVendorBuild;\n" for ns in names)
    main = tmp_path / "main.cpp"
    main.write_text(f"{includes}int main() {{\n  int n = 0;\n{uses}  return n < 0;\n}}\n")
    subprocess.run(
        ["g++", "-std=c++17", "-pedantic-errors", "-Wall", "-Werror", "-fsyntax-only", str(main)],
        check=True,
    )
