"""The CUDA error classification table and throttle-reason helpers."""

from __future__ import annotations

import pytest

from ctune.measure import device as D
from ctune.records import Outcome


@pytest.mark.parametrize(
    "text",
    [
        "CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered",
        "CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
        "CUDARuntimeError: cudaErrorLaunchFailure: unspecified launch failure",
        "CUDADriverError: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",
        "CUDARuntimeError: cudaErrorAssert: device-side assert triggered",
        "CUDADriverError: CUDA_ERROR_ASSERT: device-side assert triggered",
        "cudaErrorIllegalInstruction: an illegal instruction was encountered",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "cudaErrorMisalignedAddress: misaligned address",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        "cudaErrorHardwareStackError: hardware stack error",
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "cudaErrorInvalidPc",
        "CUDA_ERROR_INVALID_PC",
        "cudaErrorInvalidAddressSpace",
        "cudaErrorLaunchTimeout",
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "cudaErrorUnknown: unknown error",
        "cudaErrorSomethingNew: a future error",  # unknown names: safest to replace the worker
        "CUBLASError: CUBLAS_STATUS_EXECUTION_FAILED",
    ],
)
def test_sticky_errors(text):
    fault = D.classify_cuda_error(text)
    assert fault is not None and fault.sticky and fault.outcome is Outcome.RUNTIME_FAULT


@pytest.mark.parametrize(
    ("text", "name"),
    [
        (
            "cudaErrorInvalidConfiguration: invalid configuration argument",
            "cudaErrorInvalidConfiguration",
        ),
        ("CUDADriverError: CUDA_ERROR_INVALID_VALUE: invalid argument", "cudaErrorInvalidValue"),
        ("cudaErrorLaunchOutOfResources: too many resources", "cudaErrorLaunchOutOfResources"),
        ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "cudaErrorLaunchOutOfResources"),
        ("CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image", "cudaErrorNoKernelImageForDevice"),
        ("CUDA_ERROR_INVALID_IMAGE", "cudaErrorInvalidKernelImage"),
        ("CUDA_ERROR_NOT_FOUND: named symbol not found", "cudaErrorSymbolNotFound"),
        ("CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation"),
        ("cudaErrorMemoryAllocation: out of memory", "cudaErrorMemoryAllocation"),
        ("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "cudaErrorCooperativeLaunchTooLarge"),
        (
            "launcher returned cudaErrorInvalidDeviceFunction: invalid device function",
            "cudaErrorInvalidDeviceFunction",
        ),
    ],
)
def test_launch_errors_are_not_sticky(text, name):
    fault = D.classify_cuda_error(text)
    assert fault == D.FaultClass(Outcome.LAUNCH_ERROR, False, name)


def test_cupy_out_of_memory_is_a_launch_error():
    fault = D.classify_cuda_error(
        "OutOfMemoryError: Out of memory allocating 8,589,934,592 bytes "
        "(allocated so far: 0 bytes)."
    )
    assert fault is not None and fault.outcome is Outcome.LAUNCH_ERROR and not fault.sticky
    assert fault.name == "out of memory"


def test_not_a_cuda_error():
    assert D.classify_cuda_error("KeyError: 'x'") is None
    assert D.classify_exception(ValueError("bad shape")) is None


def test_classify_exception_uses_type_and_message():
    class OutOfMemoryError(MemoryError):
        pass

    fault = D.classify_exception(OutOfMemoryError("allocating 1 bytes"))
    assert fault is not None and fault.outcome is Outcome.LAUNCH_ERROR


def test_tables_do_not_overlap():
    assert not D.STICKY_ERRORS & D.LAUNCH_ERRORS


@pytest.mark.parametrize(
    ("driver", "runtime"),
    [
        ("CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress"),
        ("CUDA_ERROR_HARDWARE_STACK_ERROR", "cudaErrorHardwareStackError"),
        ("CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure"),
        ("cudaErrorAssert", "cudaErrorAssert"),
    ],
)
def test_runtime_name(driver, runtime):
    assert D.runtime_name(driver) == runtime


def test_throttle_reasons():
    assert D.excluding(D.HW_SLOWDOWN)
    assert D.excluding(D.SW_THERMAL_SLOWDOWN | D.GPU_IDLE)
    assert D.excluding(D.HW_THERMAL_SLOWDOWN)
    assert D.excluding(D.HW_POWER_BRAKE_SLOWDOWN)
    assert not D.excluding(D.SW_POWER_CAP)  # a property of heavy kernels, not noise
    assert not D.excluding(D.GPU_IDLE | D.APPLICATIONS_CLOCKS | D.SYNC_BOOST)
    assert D.describe_reasons(0) == "none"
    assert D.describe_reasons(D.SW_POWER_CAP | D.HW_SLOWDOWN) == "sw-power-cap, hw-slowdown"
    assert "0x200" in D.describe_reasons(0x200)


def test_reason_bits_match_nvml():
    pynvml = pytest.importorskip("pynvml")
    assert pynvml.nvmlClocksThrottleReasonHwSlowdown == D.HW_SLOWDOWN
    assert pynvml.nvmlClocksThrottleReasonSwThermalSlowdown == D.SW_THERMAL_SLOWDOWN
    assert pynvml.nvmlClocksThrottleReasonHwThermalSlowdown == D.HW_THERMAL_SLOWDOWN
    assert pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown == D.HW_POWER_BRAKE_SLOWDOWN
    assert pynvml.nvmlClocksThrottleReasonSwPowerCap == D.SW_POWER_CAP


def test_format_uuid():
    raw = bytes(range(16))
    assert D.format_uuid(raw) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert D.format_uuid("GPU-x") == "GPU-x"
    assert D.format_uuid(None) == ""
