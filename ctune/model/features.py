"""A candidate as the numbers a cost model learns from, known before it is built.

The row holds each gene's value (a number as itself, true/false as 1/0, text as its
position among the gene's values), the problem's dims, the space's derived values, the
launch rule's block threads, grid blocks and dynamic shared memory, each as a share of
the device's limit where it has one, and the GPU's SM version. Every journal of a kernel
maps into the same columns (the current spec's), so trials of other shapes and GPUs
train the same model; what a row cannot say (a gene that spec lacks) is ``MISSING``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ctune.expr import ExprError
from ctune.records import GeneValue
from ctune.spec.model import LaunchConfigError, launch_geometry

if TYPE_CHECKING:
    from ctune.spec import KernelSpec
    from ctune.spec.space.limits import DeviceLimits

#: what a column holds when the row cannot say (trees split it off like any value)
MISSING = -1.0

_SM = re.compile(r"sm_(\d+)")


def sm_number(text: str | None) -> float:
    """``90`` from ``NVIDIA H200 (sm_90)`` or ``sm_90a``; MISSING when none is named."""
    found = _SM.search(text or "")
    return float(found.group(1)) if found else MISSING


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _or_missing(number: float | None) -> float:
    return MISSING if number is None else number


class FeatureMap:
    """The columns of one kernel's spec, and each candidate's row in them."""

    def __init__(self, spec: KernelSpec, limits: DeviceLimits | None = None) -> None:
        self.spec = spec
        self.limits = limits
        self.dims = sorted({name for p in spec.problems for name in p.dims})
        self.derived = [name for name, _ in spec.space.derived]
        self.names = (
            [f"gene:{g.name}" for g in spec.space.genes]
            + [f"dim:{d}" for d in self.dims]
            + [f"derived:{d}" for d in self.derived]
            + ["launch:threads", "launch:blocks", "launch:smem", "sm"]
        )

    def row(
        self, genes: Mapping[str, GeneValue], dims: Mapping[str, int], sm: float = MISSING
    ) -> list[float]:
        """The candidate ``genes`` on a problem of ``dims`` on a GPU of SM version ``sm``."""
        out: list[float] = []
        for gene in self.spec.space.genes:
            value = genes.get(gene.name)
            number = _number(value)
            if number is None:
                number = float(gene.values.index(value)) if value in gene.values else MISSING
            out.append(number)
        out += [_or_missing(_number(dims.get(d))) for d in self.dims]
        try:
            env = self.spec.space.environment(genes, dims)
        except (ExprError, TypeError, ValueError, ZeroDivisionError):
            env = {}
        for name in self.derived:
            out.append(_or_missing(_number(env.get(name))))
        out += self._launch(genes, dims)
        out.append(sm)
        return out

    def unseen(self, genes: Mapping[str, GeneValue]) -> list[str]:
        """The genes whose value no column describes: an open gene's digest (a controls
        file's bytes are encrypted), so two such candidates are one row to a model."""
        return [
            g.name
            for g in self.spec.space.genes
            if g.open and genes.get(g.name) is not None and genes.get(g.name) not in g.values
        ]

    def _launch(self, genes: Mapping[str, GeneValue], dims: Mapping[str, int]) -> list[float]:
        """Threads per block, blocks and dynamic shared memory, each over the device's
        limit where the limits are known (a launcher has no rule: MISSING)."""
        if self.spec.launch is None:
            return [MISSING] * 3
        try:
            geometry = launch_geometry(self.spec, genes, dims)
        except (LaunchConfigError, ExprError, TypeError, ValueError, ZeroDivisionError):
            return [MISSING] * 3
        threads = float(math.prod(geometry.block))
        blocks = float(math.prod(geometry.grid))
        smem = float(geometry.smem_bytes)
        if self.limits is not None:
            threads /= self.limits.threads_per_block
            smem /= self.limits.smem_per_block
        return [threads, blocks, smem]


__all__ = ["MISSING", "FeatureMap", "sm_number"]
