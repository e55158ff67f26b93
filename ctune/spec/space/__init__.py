"""Search spaces: genes of four families in one genome, with restrictions."""

from ctune.spec.space.nvcc import CATALOGUE, FlagSpec, render_flags
from ctune.spec.space.params import FAMILIES, Gene, Space

__all__ = ["CATALOGUE", "FAMILIES", "FlagSpec", "Gene", "Space", "render_flags"]
