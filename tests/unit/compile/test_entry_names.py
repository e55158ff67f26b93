"""Kernel names as authors write them, matched against a cubin's (demangled) kernels. Pure."""

from __future__ import annotations

import shutil

import pytest

from ctune.compile.entry import EntryError, demangle, instantiation_source, resolve
from ctune.compile.logs import first_error_line
from ctune.spec.entry import (
    parse_entry,
    split_name,
    substitute,
    template_parameters,
    undeclared_arguments,
)

# what c++filt prints for the kernels of one file (symbol -> demangled)
KERNELS = {
    "_Z5scalePffi": "scale(float*, float, int)",
    "_Z3addPfPKfi": "add(float*, float const*, int)",
    "_Z3addPdPKdi": "add(double*, double const*, int)",
    "_ZN4blas4axpyEPfPKffi": "blas::axpy(float*, float const*, float, int)",
    "_Z4gemmILi128ELi64EEvPKfPfi": "void gemm<128, 64>(float const*, float*, int)",
    "_Z4gemmILi64ELi64EEvPKfPfi": "void gemm<64, 64>(float const*, float*, int)",
    "_Z4tileILj32ELb1EEvPf": "void tile<32u, true>(float*)",
    "_ZN36_GLOBAL__N__x_4_k_cu_1a2b3c4d6hiddenEPf": "(anonymous namespace)::hidden(float*)",
    "copy_c": "copy_c",
}


@pytest.mark.parametrize(
    ("written", "symbol"),
    [
        ("copy_c", "copy_c"),  # extern "C": the symbol itself
        ("_Z3addPdPKdi", "_Z3addPdPKdi"),  # a mangled name as written
        ("scale", "_Z5scalePffi"),
        ("blas::axpy", "_ZN4blas4axpyEPfPKffi"),
        ("axpy", "_ZN4blas4axpyEPfPKffi"),  # unqualified, when only one namespace has it
        ("add(float*, const float*, int)", "_Z3addPfPKfi"),  # an overload by its parameters
        ("add(double *, double const *, int)", "_Z3addPdPKdi"),
        ("add(float* const, const float*, const int)", "_Z3addPfPKfi"),  # top-level const
        ("gemm<128, 64>", "_Z4gemmILi128ELi64EEvPKfPfi"),
        ("gemm<128,64>", "_Z4gemmILi128ELi64EEvPKfPfi"),
        ("tile<32, 1>", "_Z4tileILj32ELb1EEvPf"),  # 32u and 32, true and 1 are the same
        ("tile", "_Z4tileILj32ELb1EEvPf"),
        ("hidden", "_ZN36_GLOBAL__N__x_4_k_cu_1a2b3c4d6hiddenEPf"),
    ],
)
def test_a_name_as_written_finds_its_kernel(written: str, symbol: str) -> None:
    assert resolve(parse_entry(written), KERNELS) == symbol


def test_a_template_argument_the_spec_does_not_set_matches_any_value() -> None:
    one = {k: v for k, v in KERNELS.items() if "gemm<64" not in v}
    assert resolve(parse_entry("gemm<BM, 64>"), one) == "_Z4gemmILi128ELi64EEvPKfPfi"
    with pytest.raises(EntryError, match="'gemm<BM, 64>' is ambiguous"):
        resolve(parse_entry("gemm<BM, 64>"), KERNELS)


def test_overloads_are_one_line_listing_the_candidates() -> None:
    with pytest.raises(EntryError) as err:
        resolve(parse_entry("add"), KERNELS)
    text = str(err.value)
    assert "entry 'add' is ambiguous: 2 kernels match" in text and "\n" not in text
    assert "add(float*, float const*, int)" in text and "add(double*, double const*, int)" in text
    assert 'entry: "add(' in text  # says how to name one
    with pytest.raises(EntryError, match="'gemm' is ambiguous: 2 kernels"):
        resolve(parse_entry("gemm"), KERNELS)


def test_a_missing_name_lists_the_kernels_found() -> None:
    with pytest.raises(EntryError) as err:
        resolve(parse_entry("vadd"), KERNELS, " (note)")
    text = str(err.value)
    assert text.startswith("entry 'vadd' is not a kernel of the cubin; kernels found: ")
    assert "blas::axpy(float*, float const*, float, int)" in text and "copy_c" in text
    assert "(note); set entry: to one of them" in text
    with pytest.raises(EntryError, match="'gemm<32, 64>' is not a kernel"):
        resolve(parse_entry("gemm<32, 64>"), KERNELS)
    with pytest.raises(EntryError, match="the cubin has no kernels"):
        resolve(parse_entry("vadd"), {})


def test_long_listings_are_cut() -> None:
    many = {f"k{i}": f"k{i}" for i in range(20)}
    with pytest.raises(EntryError, match=r"and 12 more; set entry"):
        resolve(parse_entry("nope"), many)


@pytest.mark.parametrize(
    "bad", ["", "vadd;rm", "a b", "9lives", "k<1>>2", 'k"', "x" * 2000, "gemm<128>::"]
)
def test_what_is_not_a_kernel_name_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_entry(bad)


def test_names_split_into_parts() -> None:
    name = split_name("void ns::gemm<128, (char)3, Tile<2, 4> >(float const*, int)")
    assert name.name == "ns::gemm" and name.template_args == ("128", "(char)3", "Tile<2, 4>")
    assert name.params == ("float const*", "int")
    assert split_name("k(void)").params == () and split_name("k").params is None
    assert name.display() == "ns::gemm<128, (char)3, Tile<2, 4>>(float const*, int)"


def test_genes_fill_template_arguments() -> None:
    entry = parse_entry("gemm<BM, BN, 2, FLAG>")
    assert entry.genes_used() == {"BM", "BN", "FLAG"}
    filled = substitute(entry, {"BM": 128, "BN": 64, "FLAG": True, "OTHER": 1})
    assert filled.template_args == ("128", "64", "2", "1")
    assert substitute(parse_entry("scale"), {"BM": 1}) == parse_entry("scale")


def test_template_parameters_of_a_source() -> None:
    source = """
    // template <int COMMENTED>
    template <int BM, typename T, unsigned int BN = 64, template <int> class Policy>
    __global__ void gemm(T* x) {}
    template<int N> struct Tile { float v[N]; };
    """
    assert template_parameters(source) == {"BM", "T", "BN", "Policy", "N"}


def test_template_arguments_that_nothing_defines(tmp_path) -> None:
    (tmp_path / "k.cu").write_text(
        '#include "cfg.cuh"\n#include "../outside.cuh"\n// NOT_CODE\n'
        "template <int TILE, int UNROLL_K> __global__ void tmm(float* x) {}\n"
    )
    (tmp_path / "cfg.cuh").write_text("struct Acc {};\nconstexpr int kTile = 64;\n")
    (tmp_path.parent / "outside.cuh").write_text("struct Far {};\n")
    known = {"TILE", "UNROLL_K"}

    def undeclared(entry: str) -> list[str]:
        return undeclared_arguments(parse_entry(entry), known, tmp_path / "k.cu")

    assert undeclared("tmm<TILE, UNROLLK>") == ["UNROLLK"]  # the typo nvcc reported far away
    assert undeclared("tmm<TILE, UNROLL_K, kTile, Acc, float, half, true, int4>") == []
    assert undeclared("tmm<TILE * 2, (kTile + 1), ::Far, Box<2, 4>>") == []  # not bare: as is
    assert undeclared("tmm<Far, NOT_CODE, TILEE>") == ["Far", "NOT_CODE", "TILEE"]
    assert undeclared_arguments(parse_entry("tmm<UNROLLK>"), {"UNROLLK"}, tmp_path / "k.cu") == []


def test_a_qualified_type_matches_its_demangled_name() -> None:
    kernels = {"_Z3fooI3AccEvPf": "void foo<Acc>(float*)"}
    assert resolve(parse_entry("foo<::Acc>"), kernels) == "_Z3fooI3AccEvPf"


def test_the_instantiation_source_includes_the_kernel_and_takes_the_address(tmp_path) -> None:
    entry = substitute(parse_entry("gemm<BM, float>(const float*, float*)"), {"BM": 128})
    text = instantiation_source(tmp_path / "k.cu", entry, {"BM"})
    lines = text.splitlines()
    assert lines.index("#undef BM") < lines.index(f'#include "{tmp_path / "k.cu"}"')
    assert "static_cast<void (*)(const float*, float*)>(&gemm<128, float>)" in text
    with pytest.raises(ValueError, match="names no template"):
        instantiation_source(tmp_path / "k.cu", parse_entry("scale"))
    with pytest.raises(ValueError, match="quotes"):
        instantiation_source(tmp_path / 'a"b.cu', entry)


def test_without_a_demangler_names_stay_as_they_are() -> None:
    assert demangle(["_Z5scalePffi", "copy_c"], None) == {
        "_Z5scalePffi": "_Z5scalePffi",
        "copy_c": "copy_c",
    }


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="binutils' c++filt is not installed")
def test_cxxfilt_demangles_cuda_symbols() -> None:
    found = demangle(["_Z4gemmILi128ELi64EEvPKfPfi", "copy_c"], shutil.which("c++filt"))
    assert found["_Z4gemmILi128ELi64EEvPKfPfi"] == "void gemm<128, 64>(float const*, float*, int)"
    assert found["copy_c"] == "copy_c"


def test_ctunes_own_diagnosis_is_the_failure_line() -> None:
    log = "warning #177-D: an error-free warning\n[ctune] error: entry 'x' is ambiguous"
    assert first_error_line(log) == "entry 'x' is ambiguous"
    assert first_error_line("a\nk.cu(3): error: boom\nb") == "k.cu(3): error: boom"
    assert first_error_line("") == "(no compiler output)"
