"""A measuring process's start, overlapped: the CUDA context made while Python imports.

Creating the device's context and importing what the first set-up needs used to sit one
after the other on the path to a search's first measurement, and the first measurement
waits for the slowest process. Here the primary context (the one CuPy uses) is made in a
thread through the driver API (``cuDevicePrimaryCtxRetain`` via ``ctypes``, which releases
the GIL) while the main thread imports. A failure here is left for CuPy to meet and report
as it would without this. Timings: docs/search.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
from collections.abc import Callable, Iterator

from ctune.interrupts import start_thread

#: what a measuring process's set-up imports anyway; imported while the context is made
IMPORTS_AHEAD = (
    "cupyx",  # CuPy imports it at its first elementwise call
    "ctune.spec",
    "ctune.measure.arrays",
    "ctune.measure.correctness",
    "ctune.measure.launch",
)


def retain_primary_context(device: int) -> bool:
    """Create (or take a reference to) CUDA device ``device``'s primary context; the
    reference is held until the process ends. False where that failed: CuPy then
    creates the context itself."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    handle = ctypes.c_int()
    context = ctypes.c_void_p()
    return bool(
        cuda.cuInit(0) == 0
        and cuda.cuDeviceGet(ctypes.byref(handle), device) == 0
        and cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle) == 0
    )


def import_ahead(names: tuple[str, ...] = IMPORTS_AHEAD) -> None:
    """Import ``names``, each skipped where it does not import: the code that needs it
    meets the error and reports it as it would."""
    for name in names:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


@contextlib.contextmanager
def context_ahead(
    device: int, make: Callable[[int], bool] = retain_primary_context
) -> Iterator[None]:
    """Make ``device``'s context (``make``) in a thread while the block runs; at its end,
    wait for it. The block should hold the GIL (imports) and do nothing with CUDA."""
    thread = start_thread(make, device, name="cuda-context")
    try:
        yield
    finally:
        thread.join()


__all__ = ["IMPORTS_AHEAD", "context_ahead", "import_ahead", "retain_primary_context"]
