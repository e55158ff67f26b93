"""Load a built candidate and launch it: cubin via CuPy, launcher .so via ctypes.

``entry.kind: kernel``: the cubin is loaded with ``cupy.RawModule(path=...)`` and launched
with the geometry the spec's launch rule gives (``ctune.spec.model.launch_geometry``),
above 48 KiB of dynamic shared memory opted in; the spec's constants (role ``constant``)
are copied into the module's ``__constant__`` symbols of their names when a launch is
bound, on the launch's stream and before it, so no timed launch includes the copy.
``entry.kind: launcher``: the library's ``ctune_launch(params, stream)`` is called with
cuLaunchKernel's parameter convention on CuPy's current stream; a non-zero return is a
``cudaError_t`` (docs/spec-format.md).
Parameter packing is pure and CPU-tested; loading needs a GPU.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ctune.compile.sass import symbol_sizes
from ctune.errors import SpecError
from ctune.spec.model import Geometry, LaunchConfigError, launch_geometry

if TYPE_CHECKING:
    from ctune.measure.arrays import Buffers
    from ctune.records import GeneValue
    from ctune.spec import KernelSpec, Problem

DEFAULT_SMEM_LIMIT = 48 * 1024  # dynamic shared memory without the opt-in attribute


# --- launcher (.so) parameters ------------------------------------------------------

_CTYPES_BY_DTYPE: dict[str, type[ctypes._SimpleCData]] = {
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "int8": ctypes.c_int8,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32,
    "float16": ctypes.c_uint16,  # raw half bits
    "bfloat16": ctypes.c_uint16,  # raw bf16 bits
}


def ctypes_scalar(dtype: str, value: Any) -> ctypes._SimpleCData:
    """A ctypes holder for a scalar argument of spec dtype ``dtype`` (storage value)."""
    kind = _CTYPES_BY_DTYPE[dtype]
    if dtype == "float16":
        return kind(int(np.float16(value).view(np.uint16)))
    if dtype in ("float32", "float64"):
        return kind(float(value))
    return kind(int(value))


@dataclass
class PackedParams:
    """``void* params[]`` for the launcher plus the holders it points into (kept alive)."""

    array: Any  # ctypes array of c_void_p
    holders: list[ctypes._SimpleCData]

    def pointer(self) -> int:
        return ctypes.addressof(self.array)


def pack_params(values: Sequence[tuple[str, Any]]) -> PackedParams:
    """``values`` in argument order: ("pointer", int address) or (dtype, scalar value)."""
    holders: list[ctypes._SimpleCData] = []
    for kind, value in values:
        holders.append(
            ctypes.c_void_p(int(value)) if kind == "pointer" else ctypes_scalar(kind, value)
        )
    array_type = ctypes.c_void_p * max(1, len(holders))
    array = array_type(*[ctypes.addressof(h) for h in holders])
    return PackedParams(array, holders)


def launcher_values(buffers: Buffers) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name in buffers.order:
        if name in buffers.arrays:
            out.append(("pointer", int(buffers.arrays[name].data.ptr)))
        else:
            out.append((buffers.dtypes[name], buffers.scalars[name]))
    return out


# --- loaded candidates (GPU) -----------------------------------------------------------


class KernelLaunch:
    """A cubin's entry kernel, loaded and ready to launch with a fixed geometry."""

    def __init__(
        self, cupy: Any, path: str, symbol: str, geometry: Geometry, smem_optin_bytes: int
    ):
        self.geometry = geometry
        module = cupy.RawModule(path=path)
        self.module = module
        self._path = path
        self.kernel = module.get_function(symbol)
        self.kernel.kernel  # noqa: B018 -- load now so a bad image fails here, classified
        static = int(self.kernel.shared_size_bytes)
        if geometry.smem_bytes + static > smem_optin_bytes:
            raise LaunchConfigError(
                f"too much shared memory: {geometry.smem_bytes} B dynamic + {static} B static > "
                f"{smem_optin_bytes} B per block on this device"
            )
        if geometry.smem_bytes > DEFAULT_SMEM_LIMIT:
            self.kernel.max_dynamic_shared_size_bytes = geometry.smem_bytes

    @cached_property
    def _symbol_sizes(self) -> dict[str, int]:
        """The cubin's symbols' sizes (CuPy's ``get_global`` does not say a symbol's)."""
        with open(self._path, "rb") as file:
            return symbol_sizes(file.read())

    def bind(self, buffers: Buffers, stream: Any) -> Callable[[], None]:
        """A no-argument launcher on ``stream`` (which must be CuPy's current stream)."""
        # the loaded cupy.cuda.Function itself: skips RawKernel's per-call cache lookup, which
        # matters when the host's enqueue rate bounds microsecond kernels
        function, geo, args = self.kernel.kernel, self.geometry, buffers.args()
        for name, values in buffers.constants.items():
            fill_constant(self.module, name, self._symbol_sizes.get(name), values, stream)

        def launch() -> None:
            function(geo.grid, geo.block, args, shared_mem=geo.smem_bytes)

        return launch


def fill_constant(module: Any, name: str, size: int | None, values: Any, stream: Any) -> None:
    """Copy ``values`` (a device array) into the module's ``__constant__`` symbol ``name``
    of ``size`` bytes (None: not in the cubin's symbol table), on ``stream``; SpecError when
    the module has no such symbol or it is smaller."""
    try:
        symbol = None if size is None else module.get_global(name)
    except Exception:
        symbol = None
    if symbol is None or size is None:
        raise SpecError(
            f"args.{name}: role constant, but the kernel's module has no __constant__ symbol "
            f"'{name}' (name the arg as the source names the symbol)"
        )
    if values.nbytes > size:
        raise SpecError(
            f"args.{name}: {values.nbytes} B, but __constant__ {name} holds {size} B; "
            "make its shape fit the declaration"
        )
    symbol.copy_from_device_async(values.data, values.nbytes, stream)


class LauncherError(RuntimeError):
    """A launcher returned a non-zero cudaError_t; the message carries its name."""


class LauncherLaunch:
    """A launcher shared library: ``int symbol(void* const* params, cudaStream_t stream)``."""

    def __init__(self, cupy: Any, path: str, symbol: str):
        self._cupy = cupy
        library = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        self.function = getattr(library, symbol)
        self.function.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.function.restype = ctypes.c_int
        self._library = library  # never unloaded: the worker is recycled instead

    def bind(self, buffers: Buffers, stream: Any) -> Callable[[], None]:
        packed = pack_params(launcher_values(buffers))
        function, stream_ptr = self.function, int(stream.ptr)
        error_text = self._error_text

        def launch() -> None:
            # `packed` is referenced here so its holders live as long as the launcher
            status = function(packed.pointer(), stream_ptr)
            if status:
                raise LauncherError(error_text(status))

        return launch

    def _error_text(self, status: int) -> str:
        try:
            return f"launcher returned {self._cupy.cuda.runtime.CUDARuntimeError(status)}"
        except Exception:
            return f"launcher returned cudaError_t {status}"


def load_candidate(
    cupy: Any,
    spec: KernelSpec,
    genes: Mapping[str, GeneValue],
    problem: Problem,
    binary_path: str,
    smem_optin_bytes: int,
    symbol: str | None = None,
) -> KernelLaunch | LauncherLaunch:
    """``symbol``: the kernel's name in the cubin as the build found it (mangled for a C++
    kernel); the spec's ``entry`` as written when the build did not record one."""
    if spec.entry_kind == "launcher":
        return LauncherLaunch(cupy, binary_path, spec.entry_symbol)
    geometry = launch_geometry(spec, genes, problem.dims)
    name = symbol or spec.entry_symbol
    return KernelLaunch(cupy, binary_path, name, geometry, smem_optin_bytes)


__all__ = [
    "KernelLaunch",
    "LauncherError",
    "LauncherLaunch",
    "PackedParams",
    "ctypes_scalar",
    "fill_constant",
    "launcher_values",
    "load_candidate",
    "pack_params",
]
