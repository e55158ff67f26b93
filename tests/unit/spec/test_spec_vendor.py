"""The spec's ``vendor: {python: FILE.py:FUNCTION, name: TEXT}``: how the loader takes or
refuses it, and that it is no input of an artifact (adding one leaves every digest as it
was: it says what a search is compared with, not what it measures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.errors import SpecError
from ctune.evidence.identity import spec_part_fields
from ctune.spec import load_spec
from ctune.testing.spec_copies import copy_spec, with_key

DATA = Path(__file__).parents[2] / "data" / "kernels"
KERNELS = Path(__file__).parents[3] / "kernels"

CALLS = "def library(xp, arrays, dims, dtypes):\n    return lambda: None\n"


@pytest.fixture
def saxpy(tmp_path: Path) -> Path:
    return copy_spec(
        DATA, ("saxpy.yaml", "saxpy_ref.py", "saxpy.cu"), tmp_path, {"calls.py": CALLS}
    )


def _with_vendor(path: Path, value: object) -> Path:
    return with_key(path, "vendor", value)


def test_a_vendor_key_loads_and_imports(saxpy: Path) -> None:
    before = load_spec(saxpy)
    assert before.vendor_path is None and before.vendor() is None
    spec = load_spec(_with_vendor(saxpy, {"python": "calls.py:library", "name": " the lib "}))
    assert spec.vendor_path == (saxpy.parent / "calls.py").resolve()
    assert spec.vendor_function == "library" and spec.vendor_name == "the lib"
    function = spec.vendor()
    assert function is not None and function.__name__ == "library"


def test_a_vendor_key_changes_no_artifact_digest(saxpy: Path) -> None:
    before = spec_part_fields(load_spec(saxpy), "ragged")
    after = load_spec(_with_vendor(saxpy, {"python": "calls.py:library", "name": "lib"}))
    assert spec_part_fields(after, "ragged") == before


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("calls.py:library", ["vendor", "{python: FILE.py:FUNCTION, name: TEXT}"]),
        ({"python": "calls.py:library"}, ["vendor", "name: TEXT"]),
        ({"python": "calls.py", "name": "lib"}, ["vendor.python", "FILE.py:FUNCTION"]),
        ({"python": "calls.py:absent", "name": "lib"}, ["vendor.python", "'absent'"]),
        ({"python": "none.py:library", "name": "lib"}, ["vendor.python", "not a file"]),
        ({"python": "../calls.py:library", "name": "lib"}, ["vendor.python", "outside"]),
        ({"python": "calls.py:library", "name": ""}, ["vendor.name", "1 to 60"]),
        ({"python": "calls.py:library", "name": 7}, ["vendor.name", "1 to 60"]),
    ],
)
def test_a_bad_vendor_key_is_one_line(saxpy: Path, value: object, words: list[str]) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(_with_vendor(saxpy, value))
    text = str(caught.value)
    assert "\n" not in text
    for word in words:
        assert word in text, text


def test_the_cli_exits_2_on_a_bad_vendor_key(
    saxpy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctune.cli import main

    _with_vendor(saxpy, {"python": "calls.py:absent", "name": "lib"})
    with pytest.raises(SystemExit) as exited:
        main(["space", str(saxpy)])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "vendor.python" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("kernel", "function", "name"),
    [
        ("gemm", "cublas_gemm", "cuBLAS"),
        ("hand_gemm", "cublas_gemm", "cuBLAS"),
        ("attention", "sdpa", "PyTorch SDPA"),
        ("hand_attention", "sdpa", "PyTorch SDPA"),
    ],
)
def test_the_shipped_kernels_name_their_vendor_call(kernel: str, function: str, name: str) -> None:
    spec = load_spec(KERNELS / f"{kernel}.yaml")
    assert spec.vendor_function == function and spec.vendor_name == name
    assert spec.vendor_path == (KERNELS / "vendor_calls.py").resolve()
