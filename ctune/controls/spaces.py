"""Find CompileIQ's search space for a compiler: the ``acf_spaces`` folder, never the network.

A space belongs to one compiler release: ptxas 13.3's controls are described by
``ptxas13.3.bin``, the attention-curated variant by ``ptxas13.3_att.bin``, nvcc's by
``nvcc13.3.bin``. The folder named by the ``acf_spaces`` setting (``CTUNE_ACF_SPACES``,
``[tool.ctune] acf_spaces``) holds them under those names, or is a CompileIQ spaces folder
whose ``manifest.json`` names the files and their digests (what ``CIQ_SEARCH_SPACES_DIR``
takes). Spaces are NVIDIA's and not redistributable: they are never committed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ctune.controls.store import ControlsError
from ctune.files import read_capped, read_text_capped
from ctune.records import sha256_hex

COMPILERS = ("ptxas", "nvcc")
VARIANTS = ("default", "att")
MANIFEST = "manifest.json"
_MAX_MANIFEST_BYTES = 1024 * 1024
_MAX_SPACE_BYTES = 16 * 1024 * 1024
_FIX = (
    "set acf_spaces (CTUNE_ACF_SPACES or [tool.ctune] acf_spaces) to a folder holding it "
    "(docs/advanced-controls.md says where the spaces come from)"
)


def release(version: str) -> str:
    """``13.3`` of ``13.3.73``: a space belongs to a major.minor release."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ControlsError(f"compiler version {version!r}: expected major.minor[.patch]")
    return f"{int(match.group(1))}.{int(match.group(2))}"


def file_name(compiler: str, version: str, variant: str = "default") -> str:
    """``ptxas13.3.bin``, ``ptxas13.3_att.bin``: the naming rule of a spaces folder."""
    suffix = "" if variant == "default" else f"_{variant}"
    return f"{compiler}{release(version)}{suffix}.bin"


def space_file(compiler: str, version: str, folder: Path | None, variant: str = "default") -> Path:
    """The search space of ``compiler`` at ``version`` (its major.minor) in ``folder``.

    One line naming the fix when the setting is unset, the folder or the file is missing,
    or the manifest's digest does not match the file.
    """
    if compiler not in COMPILERS:
        raise ControlsError(f"acf space {compiler!r}: expected one of {', '.join(COMPILERS)}")
    if variant not in VARIANTS or (variant != "default" and compiler != "ptxas"):
        offered = ", ".join(VARIANTS) if compiler == "ptxas" else "default"
        raise ControlsError(
            f"acf space variant {variant!r} for {compiler}: expected one of {offered}"
        )
    name = file_name(compiler, version, variant)
    what = f"the {compiler} {release(version)} search space ({name})"
    if folder is None:
        raise ControlsError(f"{what} is needed and acf_spaces is not set: {_FIX}")
    folder = Path(folder)
    if not folder.is_dir():
        raise ControlsError(f"acf_spaces {folder}: not a folder; {_FIX}")
    manifest = folder / MANIFEST
    if manifest.is_file():
        return _from_manifest(manifest, compiler, release(version), variant, what)
    path = folder / name
    if not path.is_file():
        raise ControlsError(f"acf_spaces {folder}: no {name}, {what}; put the file there")
    return path


def _from_manifest(manifest: Path, compiler: str, release_: str, variant: str, what: str) -> Path:
    """The file a CompileIQ manifest names for the space, its size and digest checked."""
    try:
        data = json.loads(read_text_capped(manifest, _MAX_MANIFEST_BYTES, "spaces manifest"))
        entries: list[dict[str, Any]] = list(data["entries"])
    except (ValueError, KeyError, TypeError):
        raise ControlsError(
            f"{manifest}: not a CompileIQ spaces manifest (no entries); fix or remove it"
        ) from None
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if (entry.get("compiler"), str(entry.get("compiler_version")), entry.get("variant")) != (
            compiler,
            release_,
            variant,
        ):
            continue
        filename = str(entry.get("filename", ""))
        if not filename or "/" in filename or filename.startswith("."):
            raise ControlsError(f"{manifest}: {what}: bad filename {filename!r}")
        path = manifest.parent / filename
        data_bytes = read_capped(path, _MAX_SPACE_BYTES, "search space")
        if sha256_hex(data_bytes) != entry.get("sha256"):
            raise ControlsError(
                f"{path}: its sha256 is not the one {manifest.name} gives; get the file again"
            )
        return path
    raise ControlsError(f"{manifest}: no entry for {what}; add the space to that folder")


def space_for(compiler: str, toolchain: Any, folder: Path | None, variant: str = "default") -> Path:
    """:func:`space_file` for the toolchain's own release of ``compiler`` (a ``Toolchain``:
    its ``ptxas_version`` for the ptxas space, its ``nvcc_version`` for nvcc's)."""
    version = toolchain.ptxas_version if compiler == "ptxas" else toolchain.nvcc_version
    return space_file(compiler, version, folder, variant)


__all__ = ["COMPILERS", "VARIANTS", "file_name", "release", "space_file", "space_for"]
