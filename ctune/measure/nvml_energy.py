"""Energy and average power from NVML's total-energy counter (nvidia-ml-py's ``pynvml``).

NVML's power reading is a slow moving average and its energy counter ticks coarsely, so
energy per call is taken over a window of at least 1 s aligned to counter ticks while the
GPU runs the candidate back to back; power is energy over the window, energy per call is
power times the time per launch. The measurements behind this: docs/design.md, "Measured
facts". ``pynvml`` is imported inside functions only.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctune.errors import ToolchainError, UserError
from ctune.measure.plan import MIN_ENERGY_WINDOW_S

log = logging.getLogger(__name__)

RAMP_S = 0.2
QUEUE_MS = 50.0  # GPU work kept queued while the host reads the counter (a read takes ~4.3 ms)
BATCH_MS = 5.0
BATCH_MAX = 250  # launches per batch: bounds the host time between two counter reads
TICK_TIMEOUT_S = 2.0  # the counter moves every ~100 ms; no move in 2 s means it is broken
METHOD = "nvml-total-energy, tick-aligned window, back-to-back hot launches"


@dataclass(frozen=True, slots=True)
class EnergyResult:
    energy_j: float  # per call
    avg_power_w: float
    window_s: float
    launches: int  # launches that ran inside the window (window / time per launch)
    time_per_launch_ms: float
    method: str


def nvml_available(device: int = 0) -> bool:
    """True when NVML loads and the device's energy counter can be read."""
    return _nvml_problem(device) is None


def _nvml_problem(device: int) -> str | None:
    try:
        import pynvml
    except ImportError:
        return "the nvidia-ml-py package is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return f"NVML does not initialise ({exc}); is the NVIDIA driver installed?"
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(device)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        return None
    except Exception as exc:
        return f"GPU {device} has no readable energy counter ({exc})"
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def require_nvml(device: int = 0) -> None:
    """Raise ToolchainError before a search when energy objectives cannot be measured."""
    problem = _nvml_problem(device)
    if problem is not None:
        raise ToolchainError(f"energy and power objectives need NVML: {problem}")


def power_limit_w(device: int = 0) -> float | None:
    """The enforced board power limit in watts (NVML index), or None."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(device)
            return float(pynvml.nvmlDeviceGetEnforcedPowerLimit(handle)) / 1000.0
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def energy_figures(
    delta_mj: float, window_s: float, time_per_launch_ms: float
) -> tuple[float, float, int]:
    """(energy per call in J, average power in W, launches in the window). Pure."""
    if window_s <= 0 or time_per_launch_ms <= 0:
        raise ValueError("window and time per launch must be positive")
    power_w = delta_mj / 1000.0 / window_s
    energy_j = power_w * time_per_launch_ms / 1000.0
    launches = max(1, round(window_s * 1000.0 / time_per_launch_ms))
    return energy_j, power_w, launches


def batch_size(kernel_ms: float) -> int:
    return max(1, min(BATCH_MAX, math.ceil(BATCH_MS / max(kernel_ms, 1e-6))))


def queue_depth(batch: int, kernel_ms: float) -> int:
    return max(2, min(200, math.ceil(QUEUE_MS / max(batch * kernel_ms, 1e-6))))


def measure_energy(
    cupy: Any,
    stream: Any,
    launch: Callable[[], None],
    handle: Any,
    window_s: float,
    kernel_ms: float,
    restore: Callable[[], None] | None = None,
) -> EnergyResult:
    """Energy per call and average power over a tick-aligned window of back-to-back launches."""
    import pynvml

    if window_s < MIN_ENERGY_WINDOW_S:
        raise UserError(f"energy window {window_s:g} s is under {MIN_ENERGY_WINDOW_S:g} s")

    def read() -> int:
        try:
            return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except pynvml.NVMLError as exc:
            raise ToolchainError(f"NVML's energy counter cannot be read: {exc}") from None

    batch = batch_size(kernel_ms)
    depth = queue_depth(batch, kernel_ms)
    pending: collections.deque[Any] = collections.deque()
    launches = 0

    def top_up(max_batches: int = 2) -> None:
        nonlocal launches
        while pending and pending[0].done:
            pending.popleft()
        added = 0
        while len(pending) < depth and added < max_batches:
            for _ in range(batch):
                launch()
            launches += batch
            marker = cupy.cuda.Event(disable_timing=True)
            marker.record(stream)
            pending.append(marker)
            added += 1

    def next_tick(after: int) -> tuple[int, float]:
        deadline = time.perf_counter() + TICK_TIMEOUT_S
        while True:
            top_up()
            value = read()
            if value != after:
                return value, time.perf_counter()
            if time.perf_counter() > deadline:
                raise ToolchainError(
                    f"NVML's energy counter did not move in {TICK_TIMEOUT_S:g} s under load"
                )

    if restore is not None:
        restore()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    ramp_end = time.perf_counter() + RAMP_S
    top_up(depth)
    while time.perf_counter() < ramp_end:
        top_up()
        time.sleep(0.0005)
    e0, t0 = next_tick(read())
    while time.perf_counter() - t0 < window_s:
        top_up()
        time.sleep(0.001)
    e1, t1 = next_tick(read())
    end.record(stream)
    end.synchronize()
    gpu_ms = float(cupy.cuda.get_elapsed_time(start, end))
    per_launch_ms = gpu_ms / max(launches, 1)
    window = t1 - t0
    energy_j, power_w, in_window = energy_figures(float(e1 - e0), window, per_launch_ms)
    method = METHOD
    if per_launch_ms > 1.2 * kernel_ms:
        method += f"; host-bound ({per_launch_ms:.4g} ms per launch vs {kernel_ms:.4g} ms kernel)"
    return EnergyResult(energy_j, power_w, window, in_window, per_launch_ms, method)


__all__ = [
    "EnergyResult",
    "batch_size",
    "energy_figures",
    "measure_energy",
    "nvml_available",
    "power_limit_w",
    "queue_depth",
    "require_nvml",
]
