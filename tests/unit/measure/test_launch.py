"""Launch geometry from the spec's rule, and the launcher's ``void* params[]`` packing."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from ctune.measure import launch as L
from ctune.measure.arrays import make_buffers
from ctune.spec import Geometry, LaunchConfigError, launch_geometry, load_spec

DATA = Path(__file__).parents[2] / "data" / "kernels"


@pytest.fixture(scope="module")
def saxpy():
    return load_spec(DATA / "saxpy.yaml")


@pytest.fixture(scope="module")
def faults():
    return load_spec(DATA / "faults.yaml")


def test_saxpy_geometry(saxpy):
    geo = launch_geometry(saxpy, {"BLOCK": 128, "UNROLL": 4}, {"N": 1000003})
    assert geo == Geometry((1954, 1, 1), (128, 1, 1), 0)  # ceil(1000003 / 512)
    assert geo.threads == 128


def test_fault_mode_5_asks_for_2048_threads(faults):
    assert launch_geometry(faults, {"MODE": 5}, {"N": 65536}).block == (2048, 1, 1)
    assert launch_geometry(faults, {"MODE": 0}, {"N": 65536}).block == (256, 1, 1)


def test_bad_geometry_is_a_launch_config_error(saxpy):
    with pytest.raises(LaunchConfigError, match="grid"):
        launch_geometry(saxpy, {"BLOCK": 128, "UNROLL": 4}, {"N": 0})
    with pytest.raises(LaunchConfigError):
        launch_geometry(saxpy, {"BLOCK": 128, "UNROLL": 4}, {"N": 2**40})  # grid.x too large
    with pytest.raises(LaunchConfigError, match=r"launch.grid\[0\]: unknown name 'UNROLL'") as err:
        launch_geometry(saxpy, {"BLOCK": 128}, {"N": 10})  # UNROLL missing
    assert (err.value.key, err.value.detail) == ("launch.grid[0]", "unknown name 'UNROLL'")


def test_ctypes_scalars():
    assert L.ctypes_scalar("float32", np.float32(1.5)).value == 1.5
    assert L.ctypes_scalar("int32", np.int32(-7)).value == -7
    assert L.ctypes_scalar("float16", np.float16(1.0)).value == 0x3C00
    assert L.ctypes_scalar("bfloat16", np.uint16(0x3FC0)).value == 0x3FC0
    assert isinstance(L.ctypes_scalar("int64", 5), ctypes.c_int64)


def test_pack_params_points_at_each_value():
    packed = L.pack_params([("pointer", 0xDEADBEEF), ("float32", 2.5), ("int32", 42)])
    params = ctypes.cast(packed.pointer(), ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.cast(params[0], ctypes.POINTER(ctypes.c_void_p)).contents.value == 0xDEADBEEF
    assert ctypes.cast(params[1], ctypes.POINTER(ctypes.c_float)).contents.value == 2.5
    assert ctypes.cast(params[2], ctypes.POINTER(ctypes.c_int32)).contents.value == 42


def test_launcher_values_follow_argument_order(saxpy):
    buffers = make_buffers(np, saxpy, saxpy.problem("ragged"), seed=1)

    class Device:  # CuPy arrays expose .data.ptr
        def __init__(self, ptr: int) -> None:
            self.data = type("Ptr", (), {"ptr": ptr})()

    buffers.arrays = {"x": Device(0x1000), "y": Device(0x2000)}
    assert L.launcher_values(buffers) == [
        ("pointer", 0x1000),
        ("pointer", 0x2000),
        ("float32", np.float32(1.5)),
        ("int32", np.int32(1000003)),
    ]


class _Module:
    """A loaded module's symbol lookup, as CuPy's RawModule.get_global answers it."""

    def __init__(self, names: set[str]) -> None:
        self.names, self.copies = names, []

    def get_global(self, name: str):
        if name not in self.names:
            raise RuntimeError("CUDA_ERROR_NOT_FOUND")
        module = self

        class Symbol:
            def copy_from_device_async(self, src, size, stream):
                module.copies.append((name, size, stream))

        return Symbol()


class _Values:
    nbytes, data = 64, object()


def test_a_constant_is_copied_into_its_symbol_on_the_stream() -> None:
    from ctune.measure.launch import fill_constant

    module = _Module({"taps"})
    fill_constant(module, "taps", 64, _Values(), "stream")
    assert module.copies == [("taps", 64, "stream")]


def test_a_constant_the_module_lacks_or_too_large_is_one_line() -> None:
    from ctune.errors import SpecError
    from ctune.measure.launch import fill_constant

    with pytest.raises(SpecError, match="no __constant__ symbol 'taps'"):
        fill_constant(_Module(set()), "taps", None, _Values(), "stream")
    with pytest.raises(SpecError, match="64 B, but __constant__ taps holds 32 B"):
        fill_constant(_Module({"taps"}), "taps", 32, _Values(), "stream")
