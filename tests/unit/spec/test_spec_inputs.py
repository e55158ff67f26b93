"""Spec roles and element types of issue 46 as the loader takes or refuses them: vector and
struct dtypes, constant-memory args, given input data, header sources, and the static
shared memory a kernel's source declares."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ctune.errors import SpecError
from ctune.spec import load_spec
from ctune.spec.elements import ElementError, element, struct_element

GIVEN = Path(__file__).parents[2] / "data" / "kernels" / "given"


@pytest.fixture
def fir(tmp_path: Path) -> Path:
    for item in GIVEN.iterdir():
        shutil.copy(item, tmp_path / item.name)
    return tmp_path / "fir_points.yaml"


def _edit(path: Path, change) -> Path:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _arg(data: dict, name: str) -> dict:
    return next(a for a in data["args"] if a["name"] == name)


def _refused(path: Path, *words: str) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    text = str(caught.value)
    assert "\n" not in text
    for word in words:
        assert word in text, text
    return text


def test_the_example_loads_with_every_new_role(fir: Path) -> None:
    spec = load_spec(fir)
    by_name = {a.name: a for a in spec.args}
    assert by_name["in"].dtype == "float2"
    assert by_name["pts"].dtype == "struct{x:float32,y:float32}"
    assert by_name["coeffs"].role == "constant" and not by_name["coeffs"].is_parameter
    assert [a.name for a in spec.parameters()] == ["in", "pts", "out", "n"]
    assert by_name["coeffs"].init.kind == "npy"
    assert by_name["pts"].init.member == "sorted_points"


def test_c_layouts_of_vectors_and_structs() -> None:
    assert (element("float4").itemsize, element("float4").align) == (16, 16)
    assert (element("half2").itemsize, element("float3").itemsize) == (4, 12)
    mixed = struct_element([("flag", "int8"), ("v", "float2"), ("w", "float64")])
    assert [f.offset for f in mixed.fields] == [0, 8, 16]
    assert (mixed.itemsize, mixed.align) == (24, 8)
    assert element(mixed.dtype) == mixed  # the text the spec carries reads back the same
    with pytest.raises(ElementError, match="repeated"):
        struct_element([("x", "float32"), ("x", "int32")])


@pytest.mark.parametrize(
    ("dtype", "words"),
    [
        ("float5", ["args.in.dtype", "float5", "float2", "struct"]),
        ({"struct": [["x", "complex64"]]}, ["args.in.dtype", "complex64"]),
        ({"struct": []}, ["args.in.dtype", "at least one field"]),
        ({"struct": [["x"]]}, ["args.in.dtype", "[[FIELD, DTYPE], ...]"]),
        ("struct{x:float32}", ["args.in.dtype"]),  # the inner text is not a spelling
    ],
)
def test_a_bad_element_type_is_one_line(fir: Path, dtype, words) -> None:
    _edit(fir, lambda d: _arg(d, "in").update(dtype=dtype))
    _refused(fir, *words)


def test_a_scalar_cannot_be_a_vector(fir: Path) -> None:
    _edit(fir, lambda d: _arg(d, "n").update(dtype="int2"))
    _refused(fir, "args.n.dtype", "vectors and structs are for buffers")


def test_a_problem_cannot_override_a_vector_dtype(fir: Path) -> None:
    _edit(fir, lambda d: d["problems"][0].update(dtypes={"in": "float16"}))
    _refused(fir, "problems.small.dtypes.in", "float2")


def test_constant_memory_over_64_kib_is_refused_naming_the_sizes(fir: Path) -> None:
    _edit(
        fir,
        lambda d: (
            _arg(d, "coeffs").update(shape=["N * 4"], init="normal"),
            d["problems"].append({"name": "big", "dims": {"N": 8192}}),
        ),
    )
    _refused(fir, "args.coeffs", "65536 B", "problem big", "131072 B", "role: input")


def test_a_launcher_cannot_take_a_constant(fir: Path) -> None:
    def change(d: dict) -> None:
        d["entry"] = {"symbol": "ctune_launch", "kind": "launcher"}
        del d["launch"]
        del d["genes"]

    _edit(fir, change)
    _refused(fir, "args.coeffs.role", "launcher")


@pytest.mark.parametrize(
    ("init", "words"),
    [
        ({"npy": "missing.npy"}, ["args.coeffs.init.npy", "missing.npy", "not a file"]),
        ({"npy": "../outside.npy"}, ["args.coeffs.init.npy", "outside the spec's folder"]),
        ({"npy": "taps.txt"}, ["args.coeffs.init.npy", "FILE.npy"]),
        ({"npz": "taps.npz"}, ["args.coeffs.init.npz", "FILE.npz:MEMBER"]),
        ({"python": "points.py"}, ["args.coeffs.init.python", "FILE.py:FUNCTION"]),
        ({"pickle": "x.pkl"}, ["args.coeffs.init", "{npy: FILE.npy}"]),
    ],
)
def test_given_data_is_named_as_a_file_of_the_spec(fir: Path, init, words) -> None:
    (fir.parent.parent / "outside.npy").write_bytes(b"")
    _edit(fir, lambda d: _arg(d, "coeffs").update(init=init))
    _refused(fir, *words)


def test_an_output_cannot_be_given(fir: Path) -> None:
    _edit(fir, lambda d: _arg(d, "out").update(init={"npy": "taps.npy"}))
    _refused(fir, "args.out.init", "not read by the kernel")


def test_a_header_source_is_the_spec_source_it_was_given_as(fir: Path) -> None:
    folder = fir.parent
    (folder / "fir_points.cu").rename(folder / "fir_points.cuh")
    spec = load_spec(folder / "fir_points.cuh")  # no source: key; the header given is it
    assert spec.source_path.name == "fir_points.cuh"
    _refused(fir, "source", "fir_points.cu does not exist")  # by the yaml: the default .cu


def test_static_shared_memory_is_read_from_the_entry_body(fir: Path) -> None:
    spec = load_spec(fir)
    assert spec.launch is not None and spec.launch.static_smem_bytes is not None
    assert spec.launch.static_smem_bytes.evaluate({"BLOCK": 256}) == 4 * 256


def test_the_sources_plain_structs_are_read_as_dtypes() -> None:
    from ctune.spec.declarations import struct_dtypes
    from ctune.spec.elements import yaml_dtype

    found = struct_dtypes(
        "struct Point { float x; float y; };\n"
        "typedef struct Tag { int a, b; float2 v; } Pair;\n"
        "struct Arr { float v[3]; };\n"  # an array member: not read
        "struct __align__(16) Wide { float x; };\n"  # its own alignment: not read
        "struct Meth { float x; __device__ float f() { return x; } };\n"
    )
    assert found == {
        "Point": "struct{x:float32,y:float32}",
        "Tag": "struct{a:int32,b:int32,v:float2}",
        "Pair": "struct{a:int32,b:int32,v:float2}",
    }
    assert yaml_dtype(found["Pair"]) == "{struct: [[a, int32], [b, int32], [v, float2]]}"
    assert yaml_dtype("float2") == "float2"


def test_the_kernels_a_source_defines_and_launches_are_read() -> None:
    from ctune.spec.declarations import defined_kernels, launched_kernels

    source = (
        "template <int N> __global__ void __launch_bounds__(256, 1) tiled(float* a) {}\n"
        'extern "C" __global__ void plain(int n);\n'
        "__global__ static void\nsplit_line (int)\n"
        "void host() { tiled<4><<<1, 256>>>(p); ns::lib_kernel<<<1, 1>>>(); }\n"
    )
    assert defined_kernels(source) == {"tiled", "plain", "split_line"}
    assert launched_kernels(source) == {"tiled", "lib_kernel"}
    kernels = Path(__file__).parents[3] / "kernels"
    assert defined_kernels((kernels / "gemm.cu").read_text()) == set()  # all CUTLASS's
    assert defined_kernels((kernels / "attention.cu").read_text()) == {"merge_splits"}


def test_given_data_bytes_are_part_of_the_artifacts_inputs(fir: Path) -> None:
    from ctune.evidence.identity import spec_part_fields

    before = spec_part_fields(load_spec(fir))["spec_args_sha256"]
    taps = fir.parent / "taps.npy"
    data = bytearray(taps.read_bytes())
    data[-1] ^= 0xFF  # other values, same shape: only the bytes tell
    taps.write_bytes(bytes(data))
    assert spec_part_fields(load_spec(fir))["spec_args_sha256"] != before


def test_a_spec_without_given_data_keeps_its_args_digest(fir: Path) -> None:
    from ctune.evidence.identity import _digest, spec_part_fields

    data = yaml.safe_load(fir.read_text())
    for arg in data["args"]:
        if isinstance(arg.get("init"), dict):
            arg["init"] = "normal"
    fir.write_text(yaml.safe_dump(data))
    spec = load_spec(fir)
    assert spec_part_fields(spec)["spec_args_sha256"] == _digest(spec.raw.get("args"))
