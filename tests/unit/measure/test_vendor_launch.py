"""The vendor call's launch keeps the worker's stream current (no GPU: a stand-in stream that
behaves as CuPy's does). A build's kernel launches on the current stream, so a vendor call
that left another one current would send the builds measured after it outside the timed
stream (seen on the H200: a 0.4 ms GEMM measured at 0.0013 ms after cuBLAS ran)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ctune.measure.arrays import Buffers
from ctune.measure.vendor import VendorLaunch


class _StandInStream:
    """NOT CuPy: ``use()`` makes a stream current; leaving ``with stream:`` makes the null
    stream current (CuPy's stack holds what ``with`` entered from, not what ``use()`` set)."""

    current: _StandInStream | None = None

    def __init__(self, name: str) -> None:
        self.name = name

    def use(self) -> _StandInStream:
        _StandInStream.current = self
        return self

    def __enter__(self) -> _StandInStream:
        return self.use()

    def __exit__(self, *exc: object) -> None:
        _StandInStream.current = NULL


NULL = _StandInStream("null")


def _buffers() -> Buffers:
    return Buffers(
        order=("x", "y"),
        roles={"x": "input", "y": "output"},
        dtypes={"x": "float32", "y": "float32"},
        arrays={"x": np.ones(4, np.float32), "y": np.zeros(4, np.float32)},
    )


def test_the_worker_stream_stays_current_whatever_the_vendor_code_does() -> None:
    worker, other = _StandInStream("worker"), _StandInStream("other")
    seen: list[str] = []

    def library(xp: Any, arrays: dict[str, Any], dims: Any, dtypes: Any) -> Any:
        seen.append(_StandInStream.current.name if _StandInStream.current else "none")
        with other:  # the vendor's own code switches streams and leaves through `with`
            pass

        def call() -> None:
            seen.append(_StandInStream.current.name if _StandInStream.current else "none")
            with other:
                arrays["y"][...] = 2 * arrays["x"]

        return call

    worker.use()
    launch = VendorLaunch(np, library, {"N": 4}).bind(_buffers(), worker)
    assert _StandInStream.current is worker
    launch()
    launch()
    assert _StandInStream.current is worker
    assert seen == ["worker", "worker", "worker"]  # its code runs with the worker's stream
