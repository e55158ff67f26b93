"""compile.deps: reading ``nvcc -M`` output, and the check of included files before nvcc runs.

The outputs below are nvcc 13.0's own, for the folder names shown (the real runs are in
tests/compile/test_awkward_paths.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctune.compile.deps import parse_make_deps, scan_includes
from ctune.files import InputFileError

SOURCE = Path("/k/t.cu")


def test_one_file_a_line_with_spaces_escaped_and_everything_else_as_it_is() -> None:
    text = (
        "t.o : /k/a\\ b/t.cu \\\n"
        "    /usr/include/stdc-predef.h \\\n"
        "    /k/h\\ \\ b/x.h \\\n"
        "    /k/h#b/x.h \\\n"
        "    /k/h$b/x.h \\\n"
        "    /k/h:b/x.h \\\n"
        "    /k/h;b/x.h \\\n"
        "    /k/h'b/x.h \\\n"
        "    /k/h\tt/x.h \\\n"
        "    /k/h%b/x.h\n"
    )
    assert parse_make_deps(text, SOURCE) == [
        "/k/a b/t.cu",
        "/usr/include/stdc-predef.h",
        "/k/h  b/x.h",
        "/k/h#b/x.h",
        "/k/h$b/x.h",
        "/k/h:b/x.h",
        "/k/h;b/x.h",
        "/k/h'b/x.h",
        "/k/h\tt/x.h",
        "/k/h%b/x.h",
    ]


def test_the_target_is_cut_by_its_name_not_at_a_colon() -> None:
    text = "a : b.o : /k/a\\ :\\ b.cu \\\n    /k/x.h\n"
    assert parse_make_deps(text, Path("/k/a : b.cu")) == ["/k/a : b.cu", "/k/x.h"]


def test_a_name_cut_at_a_quote_keeps_its_last_backslash() -> None:
    """``/k/it's "here"/t.cu`` as nvcc lists it last: cut at the quote, no continuation."""
    text = "t.o : /k/it's\\ \"here\"/t.cu \\\n    /k/it's\\ \\\n"
    assert parse_make_deps(text, SOURCE) == ['/k/it\'s "here"/t.cu', "/k/it's \\"]


def test_several_files_on_a_line_are_read_too() -> None:
    assert parse_make_deps("t.o: /k/t.cu /k/a\\ b.h \\\n /k/c.h\n", SOURCE) == [
        "/k/t.cu",
        "/k/a b.h",
        "/k/c.h",
    ]


def test_an_included_fifo_is_refused_before_anything_reads_it(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "inc").mkdir()
    os.mkfifo(tmp_path / "inc" / "pipe.h")
    (tmp_path / "sub" / "a.h").write_text('#include "b.h"\n')
    (tmp_path / "sub" / "b.h").write_text("#include <pipe.h>\n")
    source = tmp_path / "k.cu"
    source.write_text('#include "sub/a.h"\n#include <cuda_runtime.h>\n')
    with pytest.raises(InputFileError, match=r"header .*pipe\.h: a FIFO, not a regular file"):
        scan_includes(source, [tmp_path / "inc"])


def test_the_scan_names_what_the_include_lines_find(tmp_path: Path) -> None:
    (tmp_path / 'it\'s "q"').mkdir()
    header = tmp_path / 'it\'s "q"' / "x.h"
    header.write_text('#pragma once\n#include "x.h"\n')  # a cycle ends
    source = tmp_path / "k.cu"
    source.write_text('#include "it\'s \\"q\\"/x.h"\n  #  include "missing.h"\n')
    # an include line holds no escapes: "it's \"q\"/x.h" is not a name the scan finds
    assert set(scan_includes(source, [])) == {str(source)}
    source.write_text('#include <it\'s "q"/x.h>\n')
    assert scan_includes(source, [tmp_path]) == {
        str(source): source.resolve(),
        str(header): header.resolve(),
    }


def test_a_folder_of_the_included_name_is_passed_over_as_the_preprocessor_does(
    tmp_path: Path,
) -> None:
    (tmp_path / "a" / "x.h").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    header = tmp_path / "b" / "x.h"
    header.write_text("#define X 1\n")
    source = tmp_path / "k.cu"
    source.write_text("#include <x.h>\n")
    found = scan_includes(source, [tmp_path / "a", tmp_path / "b"])
    assert found == {str(source): source.resolve(), str(header): header.resolve()}


def test_a_closure_asked_from_several_threads_at_once_is_computed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search asks for its kernel's closure from three threads at its start, each with its
    own temporary folder for nvcc: the first computes it, the others wait for its answer."""
    import threading
    import time

    from ctune.compile import deps
    from ctune.testing.standins import standin_spec

    spec = standin_spec(tmp_path / "kernel")
    calls: list[Path | None] = []

    def slow_closure(*args: object, scratch: Path | None = None, **kwargs: object) -> list[Path]:
        calls.append(scratch)
        time.sleep(0.2)  # nvcc -M on a CUTLASS kernel takes seconds
        return [spec.source_path]

    monkeypatch.setattr(deps, "include_closure", slow_closure)
    deps.forget_closures()
    got: list[dict[str, str]] = []
    threads = [
        threading.Thread(target=lambda s=s: got.append(deps.source_closure(spec, scratch=s)))
        for s in (None, tmp_path / "a", tmp_path / "b")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 3 and got[0] == got[1] == got[2]
    assert list(got[0]) == [spec.source_path.name]
    deps.forget_closures()
    deps.source_closure(spec)  # forgotten: computed again
    assert len(calls) == 2
    deps.forget_closures()


def test_an_nvcc_m_that_cannot_run_is_not_the_kernels_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk passes through as the OSError it is (exit 3 naming the file); nvcc that
    cannot be started is the toolchain's (exit 3), not a bad kernel (exit 2)."""
    import errno

    from ctune.compile import deps
    from ctune.errors import ToolchainError

    number = errno.ENOSPC

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError(number, os.strerror(number), "/cache/x")

    monkeypatch.setattr(deps, "run_nvcc", refused)
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    with pytest.raises(OSError) as err:
        deps.include_closure("nvcc", source, [], {}, "c++17", "sm_90")
    assert err.value.errno == errno.ENOSPC and err.value.filename == "/cache/x"
    number = errno.EACCES
    with pytest.raises(ToolchainError, match=r"^nvcc: could not run nvcc -M for k\.cu"):
        deps.include_closure("nvcc", source, [], {}, "c++17", "sm_90")
