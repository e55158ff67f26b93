"""Buffers on numpy: bf16 bit math, seeded never-zero inputs, poisoned outputs, scalars."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctune.errors import SpecError
from ctune.measure import arrays as A
from ctune.spec import load_spec

DATA = Path(__file__).parents[2] / "data" / "kernels"


def bits(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.uint32).view(np.float32)


def test_bf16_round_trip_is_exact_on_representable_values():
    every = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16)
    finite = every[(every & 0x7F80) != 0x7F80]  # skip Inf/NaN exponents
    back = A.float32_to_bf16_bits(np, A.bf16_bits_to_float32(np, finite))
    assert np.array_equal(back, finite)


@pytest.mark.parametrize(
    ("f32", "bf16"),
    [
        (0x3F808000, 0x3F80),  # halfway, even below: round down
        (0x3F818000, 0x3F82),  # halfway, odd below: round up to even
        (0x3F808001, 0x3F81),  # above halfway: up
        (0x3F807FFF, 0x3F80),  # below halfway: down
        (0xBF818000, 0xBF82),  # negative ties too
        (0x7F7FFFFF, 0x7F80),  # max float rounds to Inf
        (0x7F800000, 0x7F80),  # Inf
        (0xFF800000, 0xFF80),  # -Inf
        (0x00000001, 0x0000),  # tiniest denormal rounds to +0
    ],
)
def test_bf16_round_to_nearest_even(f32, bf16):
    out = A.float32_to_bf16_bits(np, bits([f32]))
    assert out.dtype == np.uint16 and int(out[0]) == bf16


def test_bf16_nan_stays_nan():
    out = A.float32_to_bf16_bits(np, bits([0x7FC00000, 0x7F800001, 0xFFFFFFFF]))
    assert np.all(np.isnan(A.bf16_bits_to_float32(np, out)))


def test_bf16_matches_float_rounding_on_random_values():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(10000).astype(np.float32)
    back = A.bf16_bits_to_float32(np, A.float32_to_bf16_bits(np, x))
    assert np.max(np.abs(back - x) / np.abs(x)) <= 2.0**-8


@pytest.mark.parametrize("dtype", sorted(A.STORAGE_DTYPES))
def test_inputs_never_zero_and_seeded(dtype):
    shape = (64, 33)
    a = A.generate_input(np, dtype, shape, ("normal", 0.0, 1.0), seed=7)
    b = A.generate_input(np, dtype, shape, ("normal", 0.0, 1.0), seed=7)
    c = A.generate_input(np, dtype, shape, ("normal", 0.0, 1.0), seed=8)
    assert a.dtype == np.dtype(A.STORAGE_DTYPES[dtype]) and a.shape == shape
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.all(A.to_float32(np, a, dtype) != 0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_values_that_round_to_zero_are_replaced(dtype):
    tiny = A.generate_input(np, dtype, (4096,), ("normal", 0.0, 1e-30), seed=1)
    assert np.all(A.to_float32(np, tiny, dtype) != 0)


def test_uniform_range_is_respected():
    x = A.generate_input(np, "float32", (10000,), ("uniform", -1.0, 1.0), seed=3)
    assert x.min() >= -1.0 and x.max() <= 1.0 and x.std() > 0.5


def test_arg_seeds_differ():
    assert len({A.arg_seed(5, i) for i in range(10)}) == 10


@pytest.mark.parametrize("dtype", sorted(A.STORAGE_DTYPES))
def test_poison_is_nan_for_floats(dtype):
    x = np.ones(8, dtype=A.STORAGE_DTYPES[dtype])
    A.poison(np, x)
    values = A.to_float32(np, x, dtype)
    if dtype in A.FLOAT_DTYPES:
        assert np.all(np.isnan(values))
    else:
        assert np.all(x.view(np.uint8) == 0xFF)


def test_scalar_values():
    assert A.scalar_value("int32", 7).dtype == np.int32
    assert A.scalar_value("float32", 1.5) == np.float32(1.5)
    assert A.scalar_value("bfloat16", 1.5) == np.uint16(0x3FC0)
    assert A.scalar_value("float16", 0.5).dtype == np.float16
    with pytest.raises(SpecError, match="does not fit"):
        A.scalar_value("int8", 300, "k")
    with pytest.raises(SpecError, match="not an integer"):
        A.scalar_value("int32", 1.5, "k")
    with pytest.raises(SpecError, match=r"scalar k: -1 does not fit uint32 \(0..4294967295\)"):
        A.scalar_value("uint32", -1, "k")
    with pytest.raises(SpecError, match="does not fit float16"):
        A.scalar_value("float16", 70000.0, "k")  # numpy would make it inf
    with pytest.raises(SpecError, match="nan does not fit float32"):
        A.scalar_value("float32", float("nan"), "k")
    with pytest.raises(SpecError, match="'x' is not an integer"):
        A.scalar_value("int32", "x", "k")  # a runtime gene's text value
    assert A.scalar_value("int32", True) == np.int32(1)  # a comparison's result
    assert A.scalar_value("int64", 2**40).dtype == np.int64


def test_make_buffers_for_saxpy():
    spec = load_spec(DATA / "saxpy.yaml")
    problem = spec.problem("ragged")
    buffers = A.make_buffers(np, spec, problem, seed=11)
    x, y = buffers.arrays["x"], buffers.arrays["y"]
    assert x.shape == (1000003,) and y.dtype == np.float32
    assert buffers.scalars["n"] == np.int32(1000003) and buffers.scalars["n"].dtype == np.int32
    assert buffers.scalars["a"] == np.float32(1.5)
    assert [type(v) for v in buffers.args()][:2] == [np.ndarray, np.ndarray]
    assert buffers.names("input") == ["x"] and buffers.names("inout") == ["y"]
    # inout starts random (uniform [-1, 1]), never zero
    assert np.all(y != 0) and y.min() >= -1.0
    inputs = buffers.reference_inputs(np)
    assert set(inputs) == {"x", "y"} and inputs["x"] is not x


def test_make_buffers_poisons_outputs():
    spec = load_spec(DATA / "faults.yaml")
    buffers = A.make_buffers(np, spec, spec.problem("n64k"), seed=1)
    assert np.all(np.isnan(buffers.arrays["y"]))
    buffers.arrays["y"][:] = 1.0
    buffers.poison_outputs(np)
    assert np.all(np.isnan(buffers.arrays["y"]))


def test_snapshot_and_restore():
    spec = load_spec(DATA / "saxpy.yaml")
    buffers = A.make_buffers(np, spec, spec.problem("ragged"), seed=2)
    saved = buffers.snapshot(np, ["y"])
    buffers.arrays["y"] += 1.0
    buffers.restore(np, saved)
    assert np.array_equal(buffers.arrays["y"], saved["y"])
