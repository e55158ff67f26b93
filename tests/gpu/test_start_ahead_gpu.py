"""The context made ahead is the device's primary context, the one CuPy then uses: in a fresh
process it is inactive before, active after ``context_ahead``, and CuPy's current context
on the main thread is that context (no second context is made)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

CHILD = r"""
import ctypes, json
import cupy
from ctune.measure.start_ahead import context_ahead, import_ahead

cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
device = ctypes.c_int()
assert cuda.cuDeviceGet(ctypes.byref(device), 0) == 0

def active() -> int:
    flags, state = ctypes.c_uint(), ctypes.c_int()
    assert cuda.cuDevicePrimaryCtxGetState(device, ctypes.byref(flags), ctypes.byref(state)) == 0
    return state.value

before = active()
with context_ahead(0):
    import_ahead()
after = active()
primary = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(primary), device) == 0
cupy.cuda.Device(0).use()
x = cupy.arange(1000, dtype=cupy.float32)
total = float((x * cupy.float32(2)).sum())
current = ctypes.c_void_p()
assert cuda.cuCtxGetCurrent(ctypes.byref(current)) == 0
print(json.dumps({"before": before, "after": after, "same": current.value == primary.value,
                  "total": total}))
"""


def test_context_ahead_makes_the_primary_context_cupy_uses() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"before": 0, "after": 1, "same": True, "total": 999000.0}
