"""A spec's args against the kernel's PTX parameter list. Pure."""

from __future__ import annotations

import pytest

from ctune.compile.signature import KernelParams, arg_mismatch, ptx_param_sizes
from ctune.expr import parse
from ctune.spec import ArgSpec

PTX = """
.visible .entry _Z4vaddPfPKfS_i(
	.param .u64 _Z4vaddPfPKfS_i_param_0,
	.param .u64 .ptr .global .align 4 _Z4vaddPfPKfS_i_param_1,
	.param .u64 _Z4vaddPfPKfS_i_param_2,
	.param .u32 _Z4vaddPfPKfS_i_param_3
)
{
	ret;
}
.visible .entry scale_struct(
	.param .u64 scale_struct_param_0,
	.param .f32 scale_struct_param_1,
	.param .align 8 .b8 scale_struct_param_2[24],
	.param .align 2 .b8 scale_struct_param_3[2],
	.param .u8 scale_struct_param_4
)
{
	ret;
}
.visible .entry noargs()
{
	ret;
}
"""


def test_param_sizes_come_from_the_entry_declaration() -> None:
    assert ptx_param_sizes(PTX, "_Z4vaddPfPKfS_i") == (8, 8, 8, 4)
    assert ptx_param_sizes(PTX, "scale_struct") == (8, 4, 24, 2, 1)
    assert ptx_param_sizes(PTX, "noargs") == ()
    assert ptx_param_sizes(PTX, "absent") is None


def _buffer(name: str, dtype: str = "float32") -> ArgSpec:
    return ArgSpec(name, "input", dtype, (parse("N"),))


def _scalar(name: str, dtype: str = "int32") -> ArgSpec:
    return ArgSpec(name, "scalar", dtype, value=parse("N"))


VADD = KernelParams(
    "vadd(float*, float const*, float*, int)",
    (8, 8, 8, 4),
    ("float*", "float const*", "float*", "int"),
)


def test_args_that_fit_pass() -> None:
    args = [_buffer("a"), _buffer("b"), _buffer("c"), _scalar("n")]
    assert arg_mismatch(args, VADD) is None
    # extern "C" kernels have no C types: sizes alone decide
    assert arg_mismatch(args, KernelParams("vadd", VADD.sizes)) is None


def test_a_missing_arg_says_what_the_kernel_takes() -> None:
    text = arg_mismatch([_buffer("a"), _buffer("b"), _buffer("c")], VADD)
    assert text is not None and "\n" not in text
    assert "takes 4 parameter(s) (8 B, 8 B, 8 B, 4 B), but args lists 3 (a, b, c)" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [_buffer("a"), _buffer("b"), _buffer("c"), _scalar("n", "int64")],
            "args.n: int64 is 8 B, but parameter 4 of vadd(float*, float const*, float*, int) "
            "(int) is 4 B",
        ),
        (
            [_buffer("a"), _scalar("b", "int64"), _buffer("c"), _scalar("n")],
            "args.b: a scalar, but parameter 2 of vadd",
        ),
        (
            [_buffer("a"), _buffer("b"), _buffer("c"), _buffer("n")],
            "args.n: a buffer (passed as a pointer), but parameter 4",
        ),
    ],
)
def test_a_wrong_kind_or_size_names_the_arg_and_the_parameter(
    args: list[ArgSpec], message: str
) -> None:
    text = arg_mismatch(args, VADD)
    assert text is not None and message in text


def test_a_buffer_on_a_small_parameter_without_types() -> None:
    text = arg_mismatch([_buffer("a")], KernelParams("k", (4,)))
    assert text is not None and "a buffer is passed as an 8 B pointer, but parameter 1" in text


def test_qualified_pointers_are_pointers() -> None:
    params = KernelParams("k", (8, 8), ("float* const", "float const* __restrict__"))
    assert arg_mismatch([_buffer("a"), _buffer("b")], params) is None


PAIRS = KernelParams(
    "pairs(float2 const*, Point*, unsigned int*, int)",
    (8, 8, 8, 4),
    ("float2 const*", "Point*", "unsigned int*", "int"),
)


def test_a_buffer_element_type_must_be_what_the_pointer_points_at() -> None:
    point = "struct{x:float32,y:float32}"
    fits = [_buffer("v", "float2"), _buffer("p", point), _buffer("u", "int32"), _scalar("n")]
    assert arg_mismatch(fits, PAIRS) is None  # a struct the table does not know, signedness
    wrong = [_buffer("v"), _buffer("p", point), _buffer("u", "int32"), _scalar("n")]
    text = arg_mismatch(wrong, PAIRS)
    assert text is not None and "\n" not in text
    assert "args.v: dtype float32" in text and "(float2 const*)" in text
    floats = [_buffer("v", "float2"), _buffer("p", point), _buffer("u"), _scalar("n")]
    assert "args.u: dtype float32" in (arg_mismatch(floats, PAIRS) or "")
    # a problem's dtype override is what the build was made with
    assert arg_mismatch(fits, PAIRS, {"v": "float4"}) is not None


def test_constants_are_not_parameters() -> None:
    args = [_buffer("a"), _buffer("b"), _buffer("c"), _scalar("n")]
    taps = ArgSpec("taps", "constant", "float32", (parse("16"),))
    assert arg_mismatch([*args[:2], taps, *args[2:]], VADD) is None


def test_a_struct_the_source_spells_out_is_compared_by_layout() -> None:
    structs = {"Point": "struct{x:float32,y:float32}"}
    same = "struct{a:float32,b:float32}"  # names are the author's; the layout is the same
    fits = [_buffer("v", "float2"), _buffer("p", same), _buffer("u", "int32"), _scalar("n")]
    assert arg_mismatch(fits, PAIRS, structs=structs) is None
    other = "struct{x:float32,y:int32}"
    wrong = [_buffer("v", "float2"), _buffer("p", other), _buffer("u", "int32"), _scalar("n")]
    text = arg_mismatch(wrong, PAIRS, structs=structs) or ""
    assert "args.p: dtype struct{x:float32,y:int32}" in text and "(Point*)" in text
