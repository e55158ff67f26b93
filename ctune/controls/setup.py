"""What a search needs to propose controls files: the engine, its spaces, the store.

Made once where a search is put together (the command line, the API) from the settings
and the toolchain, then handed to the strategy in its context. It is plain data: the
engine itself is made by the strategy when its controls phase starts, so a search that
never gets there never imports CompileIQ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctune.controls.spaces import space_for
from ctune.controls.store import FOLDER
from ctune.spec.space.nvcc import ACF

#: the engine a search uses unless told otherwise
DEFAULT_ENGINE = "compileiq"


@dataclass(frozen=True)
class ControlsSetup:
    """The controls engine's name and options, a search space file per acf gene, and the
    store the proposed files go to."""

    store_root: Path
    spaces: Mapping[str, Path]  # acf gene name -> its search space file
    engine: str = DEFAULT_ENGINE
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def genes(self) -> tuple[str, ...]:
        return tuple(self.spaces)


def controls_setup(
    compilers: Sequence[str],
    toolchain: Any,
    *,
    cache_dir: Path,
    spaces_folder: Path | None,
    engine: str = DEFAULT_ENGINE,
    variant: str = "default",
    options: Mapping[str, Any] | None = None,
) -> ControlsSetup | None:
    """The setup for the acf genes of ``compilers`` (None when there are none): each one's
    space file for this toolchain's release, found in ``spaces_folder`` (one line with the
    fix when it is not there, before anything is compiled)."""
    if not compilers:
        return None
    spaces = {ACF[c].gene_name: space_for(c, toolchain, spaces_folder, variant) for c in compilers}
    return ControlsSetup(Path(cache_dir) / FOLDER, spaces, engine, dict(options or {}))


__all__ = ["DEFAULT_ENGINE", "ControlsSetup", "controls_setup"]
