"""include_dirs tokens: "@cutlass" and "@cutlass_examples" resolve into the nvidia-cutlass
wheel, label the files found under them, and a missing folder is one clear line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ctune.compile import deps
from ctune.errors import SpecError
from ctune.spec import load_spec

DATA = Path(__file__).parents[2] / "data" / "kernels"


@pytest.fixture
def saxpy(tmp_path: Path) -> Path:
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path / "saxpy.yaml"


def _with_includes(path: Path, includes: list[str]) -> Path:
    data = yaml.safe_load(path.read_text())
    data["include_dirs"] = includes
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_tokens_resolve_into_the_wheel(saxpy: Path) -> None:
    pytest.importorskip("cutlass_library", reason="the tokens point into nvidia-cutlass")
    spec = load_spec(_with_includes(saxpy, ["@cutlass", "@cutlass_examples"]))
    include, examples = spec.include_dirs
    assert (include / "cutlass" / "cutlass.h").is_file()
    assert (examples / "88_hopper_fmha" / "kernel" / "fmha_kernel_builder.hpp").is_file()
    assert include.parent == examples.parent  # both in the wheel's source/ folder


def test_files_under_a_token_are_labelled_by_it(saxpy: Path) -> None:
    pytest.importorskip("cutlass_library", reason="the tokens point into nvidia-cutlass")
    spec = load_spec(_with_includes(saxpy, ["@cutlass", "@cutlass_examples"]))
    roots = deps.closure_roots(spec)
    assert [name for name, _ in roots] == ["", "@cutlass", "@cutlass_examples"]
    header = spec.include_dirs[1] / "88_hopper_fmha" / "collective" / "fmha_fusion.hpp"
    assert (
        deps.closure_label(header, roots)
        == "@cutlass_examples/88_hopper_fmha/collective/fmha_fusion.hpp"
    )
    cute = spec.include_dirs[0] / "cute" / "tensor.hpp"
    assert deps.closure_label(cute, roots) == "@cutlass/cute/tensor.hpp"


def test_either_token_puts_the_wheel_version_in_the_identity(saxpy: Path) -> None:
    pytest.importorskip("cutlass_library", reason="the tokens point into nvidia-cutlass")
    examples_only = load_spec(_with_includes(saxpy, ["@cutlass_examples"]))
    assert deps.uses_cutlass(examples_only.include_dirs)
    assert not deps.uses_cutlass((saxpy.parent,))


def test_a_missing_folder_is_one_clear_line(saxpy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(deps.INCLUDE_TOKENS, "@cutlass_examples", lambda: None)
    with pytest.raises(SpecError) as err:
        load_spec(_with_includes(saxpy, ["@cutlass_examples"]))
    message = str(err.value)
    assert "\n" not in message
    assert "include_dirs" in message and "@cutlass_examples" in message
    assert "pip install nvidia-cutlass" in message


def test_an_unknown_token_is_a_missing_folder(saxpy: Path) -> None:
    """Only the listed tokens are special: another "@name" is a folder path like any other."""
    with pytest.raises(SpecError, match="@cutlas is not a directory"):
        load_spec(_with_includes(saxpy, ["@cutlas"]))
