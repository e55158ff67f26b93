"""Exports of a member built with a controls file: the file travels with the export and
the export names it where it put it, with the toolchain it needs (the build itself is
tests/compile/test_registry_acf_nvcc.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from registry_support import CONTROLS_BYTES, Run, make_artifact, one_line_error, with_controls

from ctune.controls.store import ControlsStore, StoreChain
from ctune.records import sha256_hex
from ctune.registry import export
from ctune.registry.service import publish_artifact

KEY = "gemm/sq4096/sm90-nvidia-h100-80gb-hbm3"
DIGEST = sha256_hex(CONTROLS_BYTES)
NEEDS = "ptxas 13.3 or later"


def _publish(registry: Path, tmp_path: Path, *digests: str) -> None:
    """The artifact, its pinned member built with ptxas's file (and nvcc's, when two)."""
    cache = ControlsStore(tmp_path / "cache" / "controls")
    cache.put(CONTROLS_BYTES)
    cache.put(CONTROLS_BYTES + b"nvcc")
    a = with_controls(make_artifact(), digests[0])
    if len(digests) > 1:
        a = with_controls(a, digests[1], compiler="nvcc")
    chain = StoreChain.of(cache.root, registry / "controls")
    publish_artifact(registry, a, controls=chain)


def test_each_format_names_the_file_and_what_it_needs() -> None:
    a = with_controls(make_artifact(), DIGEST)
    named = {DIGEST: "gemm-sq4096.acf"}
    flags = export.render(a, None, "flags", controls=named)
    assert "-Xptxas --apply-controls=gemm-sq4096.acf -DBLOCK_M=128" in flags
    header = export.render(a, None, "header", controls=named)
    assert '#define CTUNE_GEMM_CONTROLS_PTXAS "gemm-sq4096.acf"' in header
    assert (
        '#define CTUNE_GEMM_CONTROLS_PTXAS_OPTION "-Xptxas --apply-controls=gemm-sq4096.acf"'
        in header
    )
    assert f'#define CTUNE_GEMM_CONTROLS_PTXAS_SHA256 "{DIGEST}"' in header
    assert NEEDS in header and '--apply-controls=gemm-sq4096.acf"\n' in header
    here = {DIGEST: "${CMAKE_CURRENT_LIST_DIR}/gemm-sq4096.acf"}
    cmake = export.render(a, None, "cmake", controls=here)
    assert '"SHELL:-Xptxas --apply-controls=${CMAKE_CURRENT_LIST_DIR}/gemm-sq4096.acf"' in cmake
    assert f"# controls files applied: build with {NEEDS}" in cmake
    data = json.loads(export.render(a, None, "json", controls=named))
    assert data["controls"] == [
        {
            "compiler": "ptxas",
            "sha256": DIGEST,
            "path": "gemm-sq4096.acf",
            "option": ["-Xptxas", "--apply-controls=gemm-sq4096.acf"],
            "needs": export.NEEDS["ptxas"],
        }
    ]
    assert data["nvcc_flags"][-2:] == ["-Xptxas", "--apply-controls=gemm-sq4096.acf"]
    # without a placement: as the artifact names it, from the registry's root
    assert f"--apply-controls=controls/{DIGEST}.acf" in export.render(a, None, "flags")
    # a member without one exports as it always did
    assert "controls" not in json.loads(export.render(a, a.front[1].key, "json"))


def test_export_into_a_folder_copies_the_file_beside_it(
    cli: Run, registry: Path, tmp_path: Path
) -> None:
    _publish(registry, tmp_path, DIGEST)
    out = tmp_path / "build"
    out.mkdir()
    code, stdout, err = cli(
        "registry", "export", KEY, "--out", str(out), "--registry", str(registry)
    )
    assert code == 0 and stdout == ""
    assert sorted(p.name for p in out.iterdir()) == ["gemm-sq4096.acf", "gemm-sq4096.flags"]
    assert (out / "gemm-sq4096.acf").read_bytes() == CONTROLS_BYTES
    assert "-Xptxas --apply-controls=gemm-sq4096.acf " in (out / "gemm-sq4096.flags").read_text()
    assert f"note: controls files applied: build with {NEEDS}" in err
    assert "gemm-sq4096.acf" in err


@pytest.mark.parametrize("command", [("registry", "export"), ("export",)])
def test_a_trailing_slash_names_a_folder_not_yet_there(
    cli: Run, registry: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """``-o build/`` is a folder even before it exists: the header goes into it, with
    the controls file beside it, never into a file called ``build``."""
    _publish(registry, tmp_path, DIGEST)
    out = tmp_path / "new" / "build"
    code, stdout, err = cli(
        *command, KEY, "--as", "header", "-o", f"{out}/", "--registry", str(registry)
    )
    assert code == 0 and stdout == "", err
    assert out.is_dir()
    assert sorted(p.name for p in out.iterdir()) == ["gemm-sq4096.acf", "gemm-sq4096.h"]
    assert '"gemm-sq4096.acf"' in (out / "gemm-sq4096.h").read_text()


def test_export_to_a_file_copies_the_file_beside_it(
    cli: Run, registry: Path, tmp_path: Path
) -> None:
    _publish(registry, tmp_path, DIGEST)
    target = tmp_path / "cmake" / "tuned.cmake"
    code, _, err = cli(
        "registry", "export", KEY, "--as", "cmake", "-o", str(target), "--registry", str(registry)
    )
    assert code == 0, err
    assert (target.parent / "gemm-sq4096.acf").read_bytes() == CONTROLS_BYTES
    text = target.read_text()
    assert "SHELL:-Xptxas --apply-controls=${CMAKE_CURRENT_LIST_DIR}/gemm-sq4096.acf" in text


def test_export_to_stdout_names_the_registry_s_file(
    cli: Run, registry: Path, tmp_path: Path
) -> None:
    _publish(registry, tmp_path, DIGEST)
    code, out, err = cli("registry", "export", KEY, "--as", "json", "--registry", str(registry))
    assert code == 0, err
    (entry,) = json.loads(out)["controls"]
    assert Path(entry["path"]) == (registry / "controls" / f"{DIGEST}.acf").absolute()
    assert Path(entry["path"]).read_bytes() == CONTROLS_BYTES


def test_ctune_export_takes_the_build_formats_for_a_key(
    cli: Run, registry: Path, tmp_path: Path
) -> None:
    _publish(registry, tmp_path, DIGEST)
    out = tmp_path / "inc"
    out.mkdir()
    code, _, err = cli(
        "export", KEY, "--as", "header", "--out", str(out), "--registry", str(registry)
    )
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["gemm-sq4096.acf", "gemm-sq4096.h"]
    assert (
        '#define CTUNE_GEMM_CONTROLS_PTXAS "gemm-sq4096.acf"' in (out / "gemm-sq4096.h").read_text()
    )


def test_two_compilers_files_get_a_name_each(cli: Run, registry: Path, tmp_path: Path) -> None:
    other = sha256_hex(CONTROLS_BYTES + b"nvcc")
    _publish(registry, tmp_path, DIGEST, other)
    out = tmp_path / "build"
    out.mkdir()
    code, _, err = cli("registry", "export", KEY, "-o", str(out), "--registry", str(registry))
    assert code == 0, err
    assert (out / "gemm-sq4096-ptxas.acf").read_bytes() == CONTROLS_BYTES
    assert (out / "gemm-sq4096-nvcc.acf").read_bytes() == CONTROLS_BYTES + b"nvcc"
    line = (out / "gemm-sq4096.flags").read_text()
    assert (
        "-Xptxas --apply-controls=gemm-sq4096-ptxas.acf --apply-controls=gemm-sq4096-nvcc.acf"
        in line
    )


@pytest.mark.parametrize("damage", ["missing", "altered"])
def test_an_export_without_its_file_is_refused_before_writing(
    cli: Run, registry: Path, tmp_path: Path, damage: str
) -> None:
    _publish(registry, tmp_path, DIGEST)
    stored = registry / "controls" / f"{DIGEST}.acf"
    if damage == "missing":
        stored.unlink()
    else:
        stored.write_bytes(b"changed")
    out = tmp_path / "build"
    out.mkdir()
    code, stdout, err = cli("registry", "export", KEY, "-o", str(out), "--registry", str(registry))
    assert code == 2 and stdout == ""
    one_line_error(err, f"controls/{DIGEST}.acf", "ctune registry pull")
    assert list(out.iterdir()) == []


def test_a_registry_path_nvcc_cannot_pass_bare_is_refused_on_stdout_only(
    cli: Run, repo: Path, tmp_path: Path
) -> None:
    registry = repo / "my registry"
    _publish(registry, tmp_path, DIGEST)
    code, out, err = cli("registry", "export", KEY, "--registry", str(registry))
    assert code == 2 and out == ""
    one_line_error(err, "contains ' '", "--out")
    folder = tmp_path / "build"
    folder.mkdir()
    code, _, err = cli("registry", "export", KEY, "-o", str(folder), "--registry", str(registry))
    assert code == 0, err
