"""What this machine can measure: a CUDA device ("gpu") and energy counters ("nvml").

Asked where a measurer does not say (``Measurer.capabilities`` is None): by the search
before anything is compiled, and by an engine's GPU worker for the measurer it hosts.
"""

from __future__ import annotations

from collections.abc import Callable


def gpu_available(index: int = 0) -> bool:
    """Is CUDA device ``index`` visible (NVML, else CuPy)? Never raises."""
    try:
        from ctune.evidence.identity import probe_gpu

        if probe_gpu(index) is not None:
            return True
    except Exception:  # NVML missing or broken: try CuPy below
        pass
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > index)
    except Exception:  # no CuPy, no driver (or one too old), no device
        return False


def probe_capabilities(gpu: Callable[[int], bool] = gpu_available) -> set[str]:
    """What this machine offers: "gpu" (a CUDA device, as ``gpu`` sees device 0) and
    "nvml" (energy counters)."""
    caps: set[str] = {"gpu"} if gpu(0) else set()
    try:
        from ctune.measure.nvml_energy import nvml_available

        if nvml_available():
            caps.add("nvml")
    except ImportError:
        pass
    return caps


__all__ = ["gpu_available", "probe_capabilities"]
