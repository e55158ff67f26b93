"""Finding CompileIQ's search space: the acf_spaces folder by name or by its manifest."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ctune.controls.spaces import file_name, release, space_file, space_for
from ctune.controls.store import ControlsError
from ctune.records import sha256_hex


def test_a_space_belongs_to_a_major_minor_release() -> None:
    assert release("13.3.73") == "13.3"
    assert file_name("ptxas", "13.3.73") == "ptxas13.3.bin"
    assert file_name("ptxas", "13.3", "att") == "ptxas13.3_att.bin"
    assert file_name("nvcc", "13.10.1") == "nvcc13.10.bin"


def test_the_toolchain_s_ptxas_release_picks_the_file(tmp_path: Path) -> None:
    (tmp_path / "ptxas13.3.bin").write_bytes(b"space")
    (tmp_path / "ptxas13.3_att.bin").write_bytes(b"att space")
    toolchain = SimpleNamespace(ptxas_version="13.3.73", nvcc_version="13.0.88")
    assert space_for("ptxas", toolchain, tmp_path) == tmp_path / "ptxas13.3.bin"
    assert space_for("ptxas", toolchain, tmp_path, "att") == tmp_path / "ptxas13.3_att.bin"
    with pytest.raises(ControlsError, match=r"no nvcc13\.0\.bin"):
        space_for("nvcc", toolchain, tmp_path)


@pytest.mark.parametrize(
    ("folder", "match"),
    [
        (None, "set acf_spaces .CTUNE_ACF_SPACES or \\[tool.ctune\\] acf_spaces"),
        ("missing", "not a folder"),
    ],
)
def test_no_space_is_one_line_with_the_fix(tmp_path: Path, folder: str | None, match: str) -> None:
    where = None if folder is None else tmp_path / folder
    with pytest.raises(ControlsError, match=match) as caught:
        space_file("ptxas", "13.3.73", where)
    assert "\n" not in str(caught.value)


def test_variants_are_ptxas_s_only(tmp_path: Path) -> None:
    with pytest.raises(ControlsError, match="variant 'att' for nvcc"):
        space_file("nvcc", "13.3", tmp_path, "att")
    with pytest.raises(ControlsError, match="variant 'fast'"):
        space_file("ptxas", "13.3", tmp_path, "fast")


def _manifest(folder: Path, entries: list[dict[str, object]]) -> None:
    (folder / "manifest.json").write_text(
        json.dumps({"manifest_format": "1.0.0", "tag": "t", "entries": entries})
    )


def test_a_compileiq_manifest_names_the_file_and_its_digest(tmp_path: Path) -> None:
    (tmp_path / "renamed.bin").write_bytes(b"the ptxas space")
    entry = {
        "compiler": "ptxas",
        "compiler_version": "13.3",
        "variant": "default",
        "filename": "renamed.bin",
        "sha256": sha256_hex(b"the ptxas space"),
        "size_bytes": 15,
    }
    _manifest(tmp_path, [entry])
    assert space_file("ptxas", "13.3.73", tmp_path) == tmp_path / "renamed.bin"
    with pytest.raises(ControlsError, match=r"no entry for the ptxas 13\.3 search space"):
        space_file("ptxas", "13.3", tmp_path, "att")
    _manifest(tmp_path, [{**entry, "sha256": "0" * 64}])
    with pytest.raises(ControlsError, match=r"sha256 is not the one manifest\.json gives"):
        space_file("ptxas", "13.3", tmp_path)
    _manifest(tmp_path, [{**entry, "filename": "../elsewhere.bin"}])
    with pytest.raises(ControlsError, match="bad filename"):
        space_file("ptxas", "13.3", tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ControlsError, match="not a CompileIQ spaces manifest"):
        space_file("ptxas", "13.3", tmp_path)
