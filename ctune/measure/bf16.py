"""bfloat16 as raw 16-bit words: CuPy and numpy have no bfloat16 dtype, so a bf16 buffer is
uint16 on the device. fp32 -> bf16 rounds to nearest, ties to even, on the bit pattern;
bf16 -> fp32 is a 16-bit left shift. Generic over ``xp`` (numpy or cupy)."""

from __future__ import annotations

from types import ModuleType
from typing import Any


def float32_to_bf16_bits(xp: ModuleType, values: Any) -> Any:
    """fp32 -> bf16 bit patterns (uint16), round to nearest, ties to even; NaN stays NaN."""
    bits = xp.ascontiguousarray(values, dtype=xp.float32).view(xp.uint32)
    lsb = (bits >> 16) & xp.uint32(1)
    rounded = ((bits + (xp.uint32(0x7FFF) + lsb)) >> 16).astype(xp.uint16)
    is_nan = (bits & xp.uint32(0x7FFFFFFF)) > xp.uint32(0x7F800000)
    quiet = ((bits >> 16) | xp.uint32(0x0040)).astype(xp.uint16)
    return xp.where(is_nan, quiet, rounded)


def bf16_bits_to_float32(xp: ModuleType, bits: Any) -> Any:
    """bf16 bit patterns (uint16) -> fp32, exact."""
    wide = xp.ascontiguousarray(bits, dtype=xp.uint16).astype(xp.uint32) << 16
    return wide.view(xp.float32)


__all__ = ["bf16_bits_to_float32", "float32_to_bf16_bits"]
