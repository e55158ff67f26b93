"""The device's limits as restrictions every candidate must meet, before it is measured.

A block of 64 x 32 threads is a valid point of a spec's space and a launch error on every
NVIDIA GPU, so, as Kernel Tuner does, such points are kept out: before compiling as
restrictions over the genes (:meth:`DeviceLimits.restrictions`; static shared memory from
the source's ``__shared__`` arrays, at most 48 KiB, which ptxas would refuse later), after
compiling from ptxas's resources (:meth:`DeviceLimits.violation`, ``Outcome.INVALID``:
infeasible, not a failure). The numbers come from the GPU (:func:`probe_device_limits`) or
the compute capability table (docs/spec-format.md, "Device limits").
"""

from __future__ import annotations

import importlib.util
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctune.arch import capability
from ctune.expr import Expr, parse
from ctune.spec.declarations import STATIC_SMEM_BYTES
from ctune.spec.model import LaunchConfigError, launch_geometry
from ctune.spec.space.params import Space

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ctune.records import GeneValue, Resources
    from ctune.spec.model import KernelSpec, LaunchRule

#: registers are allocated per warp in units of this many
REGISTER_ALLOCATION_UNIT = 256
WARP = 32
#: compute capability -> max dynamic + static shared memory per block, with the opt-in
_SMEM_OPTIN = {
    (7, 0): 96 * 1024,
    (7, 2): 96 * 1024,
    (7, 5): 64 * 1024,
    (8, 0): 163 * 1024,
    (8, 6): 99 * 1024,
    (8, 7): 163 * 1024,
    (8, 9): 99 * 1024,
    (9, 0): 227 * 1024,
    (10, 0): 227 * 1024,
    (10, 3): 227 * 1024,
    (11, 0): 227 * 1024,
    (12, 0): 99 * 1024,
    (12, 1): 99 * 1024,
}
_DEFAULT_SMEM = 48 * 1024  # older or unknown architectures: no opt-in above 48 KiB


@dataclass(frozen=True, slots=True)
class DeviceLimits:
    """What one block may use on the target; ``source`` says where the numbers are from."""

    source: str  # "sm_90 table" or "NVIDIA H100 80GB HBM3 (device)"
    threads_per_block: int = 1024
    block_dims: tuple[int, int, int] = (1024, 1024, 64)
    smem_per_block: int = 227 * 1024  # static + dynamic, with the opt-in
    regs_per_block: int = 64 * 1024

    # --- before compiling: restrictions over the genes ------------------------------------
    def restrictions(self, launch: LaunchRule | None) -> tuple[Expr, ...]:
        """The launch rule's bounds as expressions; none for a launcher (it picks its grid)."""
        if launch is None:
            return ()
        sources: list[str] = []
        for axis, (expr, limit) in enumerate(zip(launch.block, self.block_dims, strict=True)):
            # x alone is bounded by the threads per block below, unless its own limit is lower
            if (axis or limit < self.threads_per_block) and not _literal_within(expr, limit):
                sources.append(f"{_term(expr)} <= {limit}")
        sizes = [_literal(e) for e in launch.block]
        if None in sizes or math.prod(s or 0 for s in sizes) > self.threads_per_block:
            factors = [_term(e) for e, n in zip(launch.block, sizes, strict=True) if n != 1]
            sources.append(f"{' * '.join(factors) or '1'} <= {self.threads_per_block}")
        smem, static = launch.dynamic_smem_bytes, launch.static_smem_bytes
        if static is not None:
            # ptxas refuses more static shared memory than this on every GPU
            sources.append(f"{_term(static)} <= {STATIC_SMEM_BYTES}")
            if _literal(smem) != 0:
                sources.append(f"{_term(static)} + {_term(smem)} <= {self.smem_per_block}")
        elif not _literal_within(smem, self.smem_per_block):
            sources.append(f"{_term(smem)} <= {self.smem_per_block}")
        return tuple(parse(s) for s in dict.fromkeys(sources))

    def constrain(self, space: Space, launch: LaunchRule | None) -> Space:
        """``space`` with these limits added to its restrictions."""
        have = {r.source for r in space.restrictions}
        extra = tuple(r for r in self.restrictions(launch) if r.source not in have)
        return Space(space.genes, space.restrictions + extra, space.derived)

    # --- after compiling: the build's resources ---------------------------------------------
    def violation(
        self, block: tuple[int, int, int], dynamic_smem: int, resources: Resources
    ) -> str | None:
        """Why a built candidate cannot launch with this block, or None when it can."""
        threads = block[0] * block[1] * block[2]
        for axis, (size, limit) in enumerate(zip(block, self.block_dims, strict=True)):
            if size > limit:
                return f"block dimension {'xyz'[axis]} = {size} > {limit} ({self.source})"
        if threads > self.threads_per_block:
            return f"{threads} threads per block > {self.threads_per_block} ({self.source})"
        smem = (resources.smem_bytes or 0) + dynamic_smem
        if smem > self.smem_per_block:
            return (
                f"shared memory {resources.smem_bytes or 0} B static + {dynamic_smem} B dynamic "
                f"> {self.smem_per_block} B per block ({self.source})"
            )
        if resources.regs:
            per_warp = math.ceil(resources.regs * WARP / REGISTER_ALLOCATION_UNIT)
            needed = per_warp * REGISTER_ALLOCATION_UNIT * math.ceil(threads / WARP)
            if needed > self.regs_per_block:
                return (
                    f"{resources.regs} registers per thread x {threads} threads need {needed} "
                    f"> {self.regs_per_block} registers per block ({self.source})"
                )
        return None


def launch_violation(
    limits: DeviceLimits,
    spec: KernelSpec,
    values: Mapping[str, GeneValue],
    dims: Mapping[str, int],
    resources: Resources,
) -> str | None:
    """Why a built candidate cannot launch on the device, or None.

    A launch rule that gives no valid launch at all (a zero block) is the measurer's
    LAUNCH_ERROR, as before; this answers only for launches the device's limits refuse.
    """
    if spec.launch is None:
        return None
    try:
        geometry = launch_geometry(spec, values, dims)
    except LaunchConfigError:
        return None
    return limits.violation(geometry.block, geometry.smem_bytes, resources)


def _literal_within(expr: Expr, limit: int) -> bool:
    """A number literal no larger than ``limit`` (a bound that can never be broken)."""
    value = _literal(expr)
    return value is not None and value <= limit


def _literal(expr: Expr) -> float | None:
    if expr.names:
        return None
    try:
        value = expr.evaluate({})
    except ValueError:
        return None
    return float(value) if isinstance(value, (int, float)) else None


def _term(expr: Expr) -> str:
    """An expression's text as a factor: bare names and numbers as they are."""
    text = expr.source.strip()
    return text if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$|^\d+$", text) else f"({text})"


def table_limits(arch: str) -> DeviceLimits:
    """The limits of ``arch`` (sm_90, sm_90a, compute_80) from the compute-capability table.

    An architecture the table has no row for gets the defaults every GPU meets (48 KiB of
    shared memory, no opt-in), and ``source`` says so rather than name a table.
    """
    return tabled_limits(arch) or DeviceLimits(
        source=f"defaults, no {arch} table", smem_per_block=_DEFAULT_SMEM
    )


def tabled_limits(arch: str) -> DeviceLimits | None:
    """The limits of ``arch`` where the compute-capability table has its row, else None
    (the defaults every GPU meets are a floor, not that architecture's limits: a build
    over them may still launch there)."""
    smem = _SMEM_OPTIN.get(capability(arch) or (0, 0))
    return None if smem is None else DeviceLimits(source=f"{arch} table", smem_per_block=smem)


def probe_device_limits(arch: str, device: int = 0) -> DeviceLimits | None:
    """The limits CuPy reads from GPU ``device``, if there is one of ``arch``'s capability.

    None without CuPy, without a GPU, or when the GPU is another architecture than the
    one compiled for (then the table of ``arch`` is what the build will meet elsewhere).
    Reads device attributes only; no context is created here.
    """
    if importlib.util.find_spec("cupy") is None:
        return None
    try:
        import cupy

        rt = cupy.cuda.runtime
        if rt.getDeviceCount() <= device:
            return None

        def attr(name: str) -> int:
            return int(rt.deviceGetAttribute(getattr(rt, f"cudaDevAttr{name}"), device))

        if (attr("ComputeCapabilityMajor"), attr("ComputeCapabilityMinor")) != capability(arch):
            return None
        name = rt.getDeviceProperties(device)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return DeviceLimits(
            source=f"{name} (device)",
            threads_per_block=attr("MaxThreadsPerBlock"),
            block_dims=(attr("MaxBlockDimX"), attr("MaxBlockDimY"), attr("MaxBlockDimZ")),
            smem_per_block=attr("MaxSharedMemoryPerBlockOptin"),
            regs_per_block=attr("MaxRegistersPerBlock"),
        )
    except Exception:  # a driver without a device, a CuPy without this attribute
        return None


def device_limits(arch: str, probe: bool = True) -> DeviceLimits:
    """The GPU's limits when ``probe`` finds one of ``arch``, else ``arch``'s table."""
    found = probe_device_limits(arch) if probe else None
    return found or table_limits(arch)


__all__ = [
    "DeviceLimits",
    "device_limits",
    "launch_violation",
    "probe_device_limits",
    "table_limits",
    "tabled_limits",
]
