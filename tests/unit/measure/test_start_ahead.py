"""A measuring process's start overlapped: the context is made in a thread while the block
(the imports) runs, and is waited for at the block's end. The context maker here is a
stand-in that records its calls; tests/gpu/test_start_ahead_gpu.py makes a real context."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from ctune.measure.start_ahead import context_ahead, import_ahead


class ContextMakerStandIn:
    """Records the device and thread of each call; waits for ``block_ran`` first (so a
    maker run before the block, not beside it, times out)."""

    def __init__(self, block_ran: threading.Event) -> None:
        self.block_ran = block_ran
        self.calls: list[tuple[int, str]] = []

    def __call__(self, device: int) -> bool:
        if not self.block_ran.wait(timeout=10):
            raise TimeoutError("the block never ran while the context was made")
        self.calls.append((device, threading.current_thread().name))
        return True


def test_context_is_made_in_a_thread_while_the_block_runs() -> None:
    block_ran = threading.Event()
    make = ContextMakerStandIn(block_ran)
    with context_ahead(3, make=make):
        block_ran.set()
    assert make.calls == [(3, "cuda-context")]  # waited for at the block's end


def test_an_error_in_the_block_propagates_after_the_thread_is_joined() -> None:
    block_ran = threading.Event()
    make = ContextMakerStandIn(block_ran)
    with pytest.raises(ValueError, match="import went wrong"), context_ahead(0, make=make):
        block_ran.set()
        raise ValueError("import went wrong")
    assert make.calls == [(0, "cuda-context")]


def test_without_a_usable_driver_it_says_so_and_raises_nothing() -> None:
    # no GPU visible to the driver (or no libcuda at all): False, and CuPy reports it later.
    # A fresh process: the driver reads CUDA_VISIBLE_DEVICES once, at its first cuInit
    code = "from ctune.measure.start_ahead import retain_primary_context as r; print(r(0))"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_import_ahead_imports_what_imports_and_skips_the_rest(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    import_ahead(("ctune_no_such_module", "colorsys"))
    assert "colorsys" in sys.modules and "ctune_no_such_module" not in sys.modules
