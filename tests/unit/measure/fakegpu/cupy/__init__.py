"""A stand-in for the slice of CuPy that ctune's measurement worker uses, on numpy.

Put ``tests/unit/measure/fakegpu`` first on PYTHONPATH and the real worker
(``python -m ctune.measure.worker``) runs against this instead of a GPU, so its
Python paths (protocol, correctness, the timing loop, fault classification,
sticky exits) are exercised on the CPU. Kernels run synchronously in numpy.

A "cubin" is a JSON file: ``{"kernel": "faults", "mode": 1, "static_smem": 0}``;
anything else fails to load like a bad image. Modes follow
tests/data/kernels/faults.cu (0 ok, 1 illegal address, 2 trap, 3 hang,
4 wrong, 5 launch error via the block size, 6 assert) plus "racy" (differs
per run) and "clobber" (writes its input). Kernel "saxpy" is y = a x + y.
This is a test double: it says nothing about GPU timing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from types import SimpleNamespace
from typing import Any

import numpy as _np

__version__ = "0.0-fake"

# a process that imports this stand-in never reaches a real GPU: the real driver, which the
# worker's context-ahead thread calls (ctune/measure/start_ahead.py), reads this at cuInit
os.environ["CUDA_VISIBLE_DEVICES"] = ""

# --- arrays: numpy, with CuPy's .data.ptr ------------------------------------------------


class ndarray(_np.ndarray):
    @property
    def data(self) -> Any:  # type: ignore[override]
        return SimpleNamespace(ptr=int(self.ctypes.data))


def _wrap(value: Any) -> Any:
    return value.view(ndarray) if isinstance(value, _np.ndarray) else value


def _wrapped(function: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        return _wrap(function(*args, **kwargs))

    return call


for _name in (
    "empty", "zeros", "ones", "full", "arange", "asarray", "ascontiguousarray", "array",
    "where", "clip", "rint", "sqrt", "abs", "isfinite", "empty_like", "zeros_like",
):  # fmt: skip
    globals()[_name] = _wrapped(getattr(_np, _name))
copyto = _np.copyto
from_dlpack = _wrapped(_np.from_dlpack)
asnumpy = _np.asarray
for _name in (
    "float16", "float32", "float64", "int8", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "nan", "inf", "bool_",
):  # fmt: skip
    globals()[_name] = getattr(_np, _name)


class _RandomState:
    def __init__(self, seed: int) -> None:
        self._rs = _np.random.RandomState(seed)

    def random_sample(self, size: Any = None, dtype: Any = float) -> Any:
        return _wrap(self._rs.random_sample(size).astype(dtype))

    def standard_normal(self, size: Any = None, dtype: Any = float) -> Any:
        return _wrap(self._rs.standard_normal(size).astype(dtype))


random = SimpleNamespace(RandomState=_RandomState)


class _Pool:
    def free_all_blocks(self) -> None:
        pass


def get_default_memory_pool() -> _Pool:
    return _Pool()


# --- errors and device state ------------------------------------------------------------


_ERROR_NAMES = {
    1: "cudaErrorInvalidValue: invalid argument",
    9: "cudaErrorInvalidConfiguration: invalid configuration argument",
    700: "cudaErrorIllegalAddress: an illegal memory access was encountered",
}


class CUDARuntimeError(RuntimeError):
    def __init__(self, status: int | str) -> None:
        self.status = status
        text = status if isinstance(status, str) else _ERROR_NAMES.get(status, f"cudaError{status}")
        super().__init__(text)


class CUDADriverError(RuntimeError):
    pass


class _State:
    sticky: str | None = None
    hung = False
    racy_runs = 0
    captured: list[Any] | None = None  # launches recorded by a stream capture in progress


def _check() -> None:
    if _State.hung:
        time.sleep(3600)  # a kernel that never finishes: the parent must kill us
    if _State.sticky:
        raise CUDARuntimeError(_State.sticky)


class _Runtime:
    CUDARuntimeError = CUDARuntimeError
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97

    @staticmethod
    def getDeviceCount() -> int:
        return 1

    @staticmethod
    def deviceGetPCIBusId(device: int) -> str:
        return "00000000:1B:00.0"

    @staticmethod
    def getDeviceProperties(device: int) -> dict[str, Any]:
        return {
            "name": b"Fake H100",
            "uuid": bytes(range(16)),
            "major": 9,
            "minor": 0,
            "multiProcessorCount": 132,
            "totalGlobalMem": 80 << 30,
            "l2CacheSize": 50 << 20,
        }

    @staticmethod
    def driverGetVersion() -> int:
        return 13000

    @staticmethod
    def deviceGetAttribute(attribute: int, device: int) -> int:
        return 232448

    @staticmethod
    def memsetAsync(ptr: int, value: int, size: int, stream: int) -> None:
        _check()

    @staticmethod
    def deviceSynchronize() -> None:
        _check()


class _Graph:
    """A captured graph: its launches replayed in order (what cudaGraphLaunch does)."""

    def __init__(self, launches: list[Any]) -> None:
        self.launches = launches

    def upload(self, stream: Any = None) -> None:
        pass

    def launch(self, stream: Any = None) -> None:
        for run in self.launches:
            run()


class Stream:
    def __init__(self, null: bool = False, non_blocking: bool = False) -> None:
        self.ptr = 0x5000

    def use(self) -> Stream:
        return self

    def synchronize(self) -> None:
        _check()

    def begin_capture(self) -> None:
        if os.environ.get("FAKE_NO_CAPTURE"):
            raise CUDARuntimeError("cudaErrorStreamCaptureUnsupported")
        _State.captured = []

    def end_capture(self) -> _Graph:
        launches, _State.captured = _State.captured or [], None
        return _Graph(launches)


class Event:
    def __init__(self, block: bool = False, disable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        _check()
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        _check()

    @property
    def done(self) -> bool:
        _check()
        return True


def get_elapsed_time(start: Event, end: Event) -> float:
    _check()
    return max((end.t - start.t) * 1e3, 1e-4)


class Device:
    def __init__(self, index: int = 0) -> None:
        self.index = index

    def use(self) -> None:
        pass


cuda = SimpleNamespace(
    runtime=_Runtime,
    Stream=Stream,
    Event=Event,
    Device=Device,
    get_elapsed_time=get_elapsed_time,
    CUDADriverError=CUDADriverError,
)


# --- modules and kernels ----------------------------------------------------------------


class RawKernel:
    def __init__(self, symbol: str, behaviour: dict[str, Any]) -> None:
        self.symbol = symbol
        self.behaviour = behaviour
        self.max_dynamic_shared_size_bytes = 48 * 1024

    @property
    def kernel(self) -> RawKernel:
        return self

    @property
    def shared_size_bytes(self) -> int:
        return int(self.behaviour.get("static_smem", 0))

    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
        _check()
        if not isinstance(grid, tuple) or not isinstance(block, tuple):
            raise TypeError("grid and block must be tuples (CuPy's Function requires it)")
        threads = 1
        for b in block:
            threads *= int(b)
        if threads > 1024 or shared_mem > self.max_dynamic_shared_size_bytes:
            raise CUDADriverError("CUDA_ERROR_INVALID_VALUE: invalid argument")
        run = getattr(self, "_" + self.symbol)
        if _State.captured is not None:
            _State.captured.append(lambda: run(*args))
            return
        run(*args)

    # helpers compiled from source by the worker
    def _ctune_spin(self, ns: Any) -> None:
        pass

    def _ctune_health_add(self, a: Any, b: Any, c: Any, n: Any) -> None:
        c[: int(n)] = a[: int(n)] + b[: int(n)]

    # test kernels
    def _saxpy(self, x: Any, y: Any, a: Any, n: Any) -> None:
        y[: int(n)] = a * x[: int(n)] + y[: int(n)]

    def _faults(self, x: Any, y: Any, n: Any) -> None:
        mode = self.behaviour.get("mode", 0)
        if mode == 1:
            _State.sticky = "cudaErrorIllegalAddress: an illegal memory access was encountered"
        elif mode == 2:
            _State.sticky = "cudaErrorLaunchFailure: unspecified launch failure"
        elif mode == 3:
            _State.hung = True
        elif mode == 6:
            print("faults.cu:33: faults: Assertion `i != 0` failed.", file=sys.stderr, flush=True)
            _State.sticky = "cudaErrorAssert: device-side assert triggered"
        y[: int(n)] = 2.0 * x[: int(n)] + (1.0 if mode == 4 else 0.0)
        if mode == "racy":
            # A nudge under the 1e-5 tolerance but several float32 ulps wide, different on
            # every run, so two runs never agree by chance (a random one could round away).
            _State.racy_runs += 1
            y[0] += _np.float32(2e-6 * (_State.racy_runs % 3 + 1))
        if mode == "clobber":
            x[0] = 0.5


def _built_mode(path: str) -> int:
    """-DMODE=N from the build.json NvccCompiler keeps next to the cubin (0 without one)."""
    import os
    import re

    record = os.path.join(os.path.dirname(path), "build.json")
    try:
        with open(record) as handle:
            argv = json.load(handle).get("argv", [])
    except (OSError, ValueError):
        return 0
    for item in argv:
        match = re.fullmatch(r"-DMODE=(\d+)", str(item))
        if match:
            return int(match.group(1))
    return 0


class RawModule:
    def __init__(self, code: str | None = None, path: str | None = None, options: tuple = ()):
        self.behaviour: dict[str, Any] = {}
        if path is not None:
            with open(path, "rb") as handle:
                data = handle.read()
            if data[:4] == b"\x7fELF" and len(data) > 512:
                # a real cubin from nvcc: run the numpy twin, with the MODE it was built with
                self.behaviour = {"any": True, "mode": _built_mode(path)}
                return
            try:
                self.behaviour = json.loads(data)
            except ValueError:
                raise CUDADriverError(
                    "CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid"
                ) from None

    def get_function(self, name: str) -> RawKernel:
        if self.behaviour.get("any"):
            return RawKernel(name, {"kernel": name, "mode": self.behaviour["mode"]})
        if self.behaviour and self.behaviour.get("kernel") != name:
            raise CUDADriverError("CUDA_ERROR_NOT_FOUND: named symbol not found")
        return RawKernel(name, self.behaviour)
