"""ctune init's reading of a kernel file and the draft it writes (no nvcc: the undefined
names a compile would find are given). The draft must load as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctune.compile.entry import resolve
from ctune.errors import UserError
from ctune.spec import load_spec
from ctune.spec.draft.guess import block_axis, default_for, gene_values, parse_int, work_axis
from ctune.spec.draft.sidecar import check_loads, draft_sidecar
from ctune.spec.draft.source import read_source, strip_comments
from ctune.spec.draft.undefined import Probe
from ctune.spec.entry import parse_entry

FILE = r"""
// template <int NOT_THIS>  (a comment)
#include <cuda_fp16.h>
#define WIDTH 4096
#ifndef BLOCK
#define BLOCK 128
#endif
#if !defined(UNROLL)
#define UNROLL 2
#endif
#if USE_LDG && defined(BLOCK)
#endif
const char* banner = "__global__ void fake(int x)";

template <int BM, typename T = float, unsigned BN = 64>
__global__ void __launch_bounds__(BM) gemm(const T* __restrict__ a, T* c, int m, int n) {}

extern "C" __global__ void saxpy(float* y, const float* x, float alpha, int n);
extern "C" __global__ void saxpy(float* y, const float* x, float alpha, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  extern __shared__ float s[];
  if (i < n) y[i] += alpha * x[i] + threadIdx.y;
}
__global__ void halves(__half* h, size_t count, bool flag, const double vals[]) {}
"""


def test_the_source_says_its_kernels_macros_and_reads() -> None:
    source = read_source(FILE)
    assert [k.name for k in source.kernels] == ["gemm", "saxpy", "halves"]
    gemm, saxpy, halves = source.kernels
    assert [(t.kind, t.name, t.default) for t in gemm.template] == [
        ("value", "BM", None),
        ("type", "T", "float"),
        ("value", "BN", "64"),
    ]
    assert gemm.launch_bounds == "BM" and not gemm.extern_c
    assert [(p.name, p.ctype, p.const_pointee) for p in gemm.params] == [
        ("a", "const T*", True),
        ("c", "T*", False),
        ("m", "int", False),
        ("n", "int", False),
    ]
    assert saxpy.extern_c and not saxpy.template  # the definition, not the declaration
    assert [p.base for p in halves.params] == ["__half", "size_t", "bool", "double"]
    assert halves.params[3].pointer and halves.params[3].const_pointee  # const double vals[]
    assert source.defines == {"WIDTH": "4096", "BLOCK": "128", "UNROLL": "2"}
    assert source.guarded == {"BLOCK": "128", "UNROLL": "2"}
    assert source.conditions == {"USE_LDG"}
    assert {"blockIdx.x", "blockDim.x", "threadIdx.x", "threadIdx.y"} <= source.reads
    assert source.dynamic_shared


def test_comments_go_strings_stay_lines_hold() -> None:
    text = 'a // x\n/* y\n z */ b "// s"\n'
    out = strip_comments(text)
    assert out.count("\n") == text.count("\n") and '"// s"' in out and "x" not in out


@pytest.mark.parametrize(
    ("name", "axis"),
    [
        ("block_size_x", "x"),
        ("BLOCK_SIZE_Y", "y"),
        ("BLOCK_X", "x"),
        ("BLOCK_DIM_Z", "z"),
        ("BLOCK", "x"),
        ("THREADS", "x"),
        ("threads_per_block", "x"),
        ("BLOCK_ROWS", "y"),
        ("TILE_WIDTH", None),
        ("UNROLL", None),
        ("N", None),
    ],
)
def test_block_names(name: str, axis: str | None) -> None:
    assert block_axis(name) == axis


def test_values_around_defaults() -> None:
    assert gene_values("block_size_x", 256) == (32, 64, 128, 256, 512, 1024)
    assert gene_values("block_size_y", 1) == (1, 2, 4, 8, 16, 32)
    assert gene_values("TILE_WIDTH", 16) == (8, 16, 32, 64)
    assert gene_values("UNROLL", 2) == (1, 2, 4, 8, 16)
    assert gene_values("USE_LDG", 0) == (0, 1)
    assert gene_values("RADIUS", 64) == (16, 32, 64, 128, 256)
    assert gene_values("RADIUS", 3) == (1, 3, 6)
    assert gene_values("block_size_x", 96) == (32, 64, 96, 128, 256, 512, 1024)
    assert work_axis("tile_size_z") == "z" and work_axis("ITEMS_PER_THREAD") == "x"
    assert work_axis("block_size_x") is None and work_axis("WIDTH") is None
    assert default_for("block_size_x") == 256 and default_for("block_size_y") == 1
    assert default_for("USE_LDG") == 0 and default_for("TILE") == 16
    assert [parse_int(t) for t in ("256", "(64)", "0x40", "8u", "2.5f", "N*2")] == [
        256, 64, 64, 8, None, None,
    ]  # fmt: skip


def _write(tmp_path: Path, text: str, name: str = "k") -> Path:
    path = tmp_path / f"{name}.cu"
    path.write_text(text)
    return path


def _draft_and_load(tmp_path: Path, text: str, entry: str | None = None, probe=None):
    cu = _write(tmp_path, text)
    draft = draft_sidecar(
        read_source(text), stem="k", source_name=cu.name, entry=entry, probe=probe
    )
    (tmp_path / "k.yaml").write_text(draft.yaml)
    (tmp_path / draft.reference_file).write_text(draft.reference)
    return draft, load_spec(tmp_path / "k.yaml")


def test_a_vector_add_draft_loads_with_a_runtime_block(tmp_path: Path) -> None:
    draft, spec = _draft_and_load(
        tmp_path,
        "__global__ void vadd(const float* a, const float* b, float* c, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n",
    )
    assert spec.entry_symbol == "vadd" and spec.name == "vadd"  # the kernel names it
    assert [(a.name, a.role, a.dtype) for a in spec.args] == [
        ("a", "input", "float32"),
        ("b", "input", "float32"),
        ("c", "output", "float32"),  # only written
        ("n", "scalar", "int32"),
    ]
    assert spec.space.gene("BLOCK_X").family == "runtime"
    assert [e.source for e in spec.launch.grid[:1]] == ["ceil_div(N, BLOCK_X)"]
    assert spec.problem().dims == {"N": 1 << 22}
    assert "write the reference of vadd" in " ".join(draft.checks)
    with pytest.raises(NotImplementedError, match="write the reference of vadd"):
        spec.reference()(None, {}, {})


def test_a_draft_records_the_arch_it_was_drafted_for(tmp_path: Path) -> None:
    """``ctune init --arch sm_90a``: a kernel that needs sm_90a's features compiles only for
    it, so the draft says so; the default arch needs no line."""
    text = "__global__ void twice(float* y, int n) { y[threadIdx.x] *= 2.0f; }\n"
    source = read_source(text)
    plain = draft_sidecar(source, stem="k", source_name="k.cu")
    assert "arch:" not in plain.yaml
    draft = draft_sidecar(source, stem="k", source_name="k.cu", arch="sm_90a")
    assert "\narch: sm_90a\n" in draft.yaml
    _write(tmp_path, text)
    (tmp_path / "k.yaml").write_text(draft.yaml)
    (tmp_path / draft.reference_file).write_text(draft.reference)
    assert load_spec(tmp_path / "k.yaml").arch == "sm_90a"


def test_a_kernel_tuner_style_draft_takes_what_the_compiler_found(tmp_path: Path) -> None:
    text = (
        'extern "C" __global__ void stencil(float* out, const float* in, int nx, int ny) {\n'
        "  int x = blockIdx.x * block_size_x + threadIdx.x;\n"
        "  int y = (blockIdx.y * block_size_y + threadIdx.y) * tile_size_y;\n"
        "  out[y * nx + x] = in[y * nx + x]; }\n"
    )
    probe = Probe({"block_size_x": 256, "block_size_y": 1, "tile_size_y": 1}, builds=True)
    _, spec = _draft_and_load(tmp_path, text, probe=probe)
    assert [e.source for e in spec.launch.block[:2]] == ["block_size_x", "block_size_y"]
    assert [e.source for e in spec.launch.grid[:2]] == [
        "ceil_div(NX, block_size_x)",
        "ceil_div(NY, block_size_y * tile_size_y)",
    ]
    assert spec.space.gene("tile_size_y").values == (1, 2, 4, 8, 16)
    assert spec.args[0].shape[0].source == "NY" and spec.args[0].shape[1].source == "NX"


def test_a_template_draft_feeds_its_genes_to_the_entry(tmp_path: Path) -> None:
    text = (
        "template <int BLOCK_SIZE, typename T>\n"
        "__global__ void reduce(const T* in, T* out, int n) {\n"
        "  __shared__ T s[BLOCK_SIZE]; out[blockIdx.x] = in[threadIdx.x]; }\n"
    )
    draft, spec = _draft_and_load(tmp_path, text)
    assert spec.entry_symbol == "reduce<BLOCK_SIZE, float>" and draft.entry == spec.entry_symbol
    assert spec.space.gene("BLOCK_SIZE").family == "template"
    assert [e.source for e in spec.launch.block[:1]] == ["BLOCK_SIZE"]
    assert any("type template arguments are float" in c for c in draft.checks)


def test_macro_sizes_become_the_problem(tmp_path: Path) -> None:
    text = (
        "#define WIDTH 1024\n#define HEIGHT 512\n#ifndef TILE\n#define TILE 16\n#endif\n"
        "__global__ void t(float* o, const float* i) {\n"
        "  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;\n"
        "  o[x * HEIGHT + y] = i[y * WIDTH + x]; }\n"
    )
    _, spec = _draft_and_load(tmp_path, text)
    assert spec.problem().dims == {"WIDTH": 1024, "HEIGHT": 512}
    assert [e.source for e in spec.launch.block[:2]] == ["TILE", "TILE"]


SWITCHED = """\
#ifndef BLOCK_X
#define BLOCK_X 256
#endif
#ifndef VEC_WIDTH
#define VEC_WIDTH 0
#endif
#if USE_VEC
#define W 4
#else
#define W 1
#endif
extern "C" __global__ void dyn(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i * W < n) { for (int k = 0; k < W; ++k) y[i*W+k] = 2.f * x[i*W+k]; }
}
"""


def test_a_switch_is_0_or_1_and_never_divides_the_grid(tmp_path: Path) -> None:
    # USE_VEC reads like work per thread ("vec"), but #if tests it: it is on or off, and
    # as a grid divisor its default 0 divided by zero, so the draft did not load
    draft, spec = _draft_and_load(tmp_path, SWITCHED)
    assert spec.space.gene("USE_VEC").values == (0, 1)
    assert spec.space.gene("VEC_WIDTH").values == (0, 1)  # a default of 0 is off, not a count
    assert [e.source for e in spec.launch.grid[:1]] == ["ceil_div(N, BLOCK_X)"]
    assert [g.work for g in draft.genes] == [None, None, None]
    assert work_axis("USE_VEC") is None and gene_values("USE_VEC", 0) == (0, 1)
    assert gene_values("VEC_WIDTH", 4) == (1, 2, 4, 8, 16) and work_axis("VEC_WIDTH") == "x"


IFDEFS = """\
#ifdef USE_LDG
#define LOAD(p) __ldg(p)
#else
#define LOAD(p) (*(p))
#endif
#ifndef NO_TAIL
#define TAIL 1
#endif
#if defined(USE_FMA) || USE_VEC
#elifdef USE_ELIF
#endif
#ifndef BLOCK
#define BLOCK 128
#endif
#ifdef __CUDA_ARCH__
#endif
__global__ void k(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = LOAD(x + i);
}
"""


def test_a_name_tested_by_ifdef_drafts_an_ifdef_switch(tmp_path: Path) -> None:
    # #ifdef USE_LDG drafted nothing, #if defined(USE_FMA) a plain 0/1 gene: its 0 passed
    # -DUSE_FMA=0, which defines USE_FMA, so the "off" build was on
    source = read_source(IFDEFS)
    assert source.ifdefs == {"USE_LDG", "NO_TAIL", "USE_FMA", "USE_ELIF"}
    assert source.conditions == {"USE_VEC"}
    draft, spec = _draft_and_load(tmp_path, IFDEFS)
    assert "  USE_LDG: {values: [0, 1], default: 0, family: define, ifdef: true}" in draft.yaml
    assert (
        "  USE_VEC: {values: [0, 1], default: 0, family: define}  # check: values (#if USE_VEC"
        in draft.yaml
    )
    switches = {g.name: g.ifdef for g in spec.genes if g.name != "BLOCK"}
    assert switches == {
        "NO_TAIL": True, "USE_ELIF": True, "USE_FMA": True, "USE_LDG": True, "USE_VEC": False,
    }  # fmt: skip
    assert spec.space.gene("USE_LDG").defines(1) and not spec.space.gene("USE_LDG").defines(0)


def test_a_draft_that_would_not_load_writes_nothing(tmp_path: Path) -> None:
    text = "__global__ void k(float* y, int n) { y[blockIdx.x] = n; }\n"
    cu = _write(tmp_path, text)
    draft = draft_sidecar(read_source(text), stem="k", source_name=cu.name)
    check_loads(draft, cu)  # the draft as drafted loads
    draft.yaml = draft.yaml.replace("ceil_div(N, 256)", "ceil_div(N, 0)")
    with pytest.raises(
        UserError,
        match=r"^k\.cu: the draft would not load \(k\.yaml: launch\.grid\[0\]: ceil_div by zero ",
    ):
        check_loads(draft, cu)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.cu"]


OVERLOADED = """\
__global__ void add(float* a, const float* b, int n);
__global__ void add(float* a, const float* b, int n) { a[blockIdx.x] += b[blockIdx.x]; }
__global__ void add(double* a, const double* b, const int n) { a[blockIdx.x] += b[blockIdx.x]; }
"""


def test_an_overload_is_picked_and_named_by_its_parameter_list(tmp_path: Path) -> None:
    # overloads were one kernel: the draft said entry: add with float64 args
    source = read_source(OVERLOADED)
    assert [k.signature() for k in source.kernels] == [
        "add(float*, const float*, int)",
        "add(double*, const double*, const int)",
    ]
    with pytest.raises(
        UserError,
        match=r"k\.cu: 2 kernels \(add\(float\*, const float\*, int\), add\(double\*, "
        r"const double\*, const int\)\); pick one with --entry NAME \(an overload by its "
        r'parameters: --entry "add\(float\*, const float\*, int\)"\)$',
    ):
        draft_sidecar(source, stem="k", source_name="k.cu")
    with pytest.raises(UserError, match=r"k\.cu: 2 kernels"):
        draft_sidecar(source, stem="k", source_name="k.cu", entry="add")
    with pytest.raises(UserError, match=r"no kernel 'add\(int\)' \(kernels: add\(float"):
        draft_sidecar(source, stem="k", source_name="k.cu", entry="add(int)")
    cubin = {  # what the cubin's kernels demangle to
        "_Z3addPfPKfi": "add(float*, float const*, int)",
        "_Z3addPdPKdi": "add(double*, double const*, int)",
    }
    for entry, symbol, dtype in [
        ("add(float*, const float*, int)", "_Z3addPfPKfi", "float32"),
        ("add(double *, double const*, int)", "_Z3addPdPKdi", "float64"),
    ]:
        draft, spec = _draft_and_load(tmp_path, OVERLOADED, entry=entry)
        assert spec.args[0].dtype == dtype and draft.entry == spec.entry_symbol
        assert resolve(parse_entry(spec.entry_symbol), cubin) == symbol


def test_a_literal_launch_bound_caps_the_block(tmp_path: Path) -> None:
    # a block over __launch_bounds__(N) cannot launch: the draft's BLOCK_X went to 1024
    hk = (
        "__global__ void __launch_bounds__(256) hk(float* y, const float* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }\n"
    )
    _, spec = _draft_and_load(tmp_path, hk)
    assert spec.space.gene("BLOCK_X").values == (32, 64, 128, 256)
    tiled = (  # a #define no build sets is as literal; two axes share the bound
        "#define MAXT 128\n#ifndef block_size_y\n#define block_size_y 4\n#endif\n"
        "__global__ void __launch_bounds__(MAXT, 2) t(float* y, int w, int h) {\n"
        "  int i = blockIdx.x * block_size_x + threadIdx.x;\n"
        "  y[(blockIdx.y * block_size_y + threadIdx.y) * w + i] = 1.f; }\n"
    )
    _, spec = _draft_and_load(tmp_path, tiled, probe=Probe({"block_size_x": 32}, builds=True))
    assert spec.space.gene("block_size_x").values == (32, 64, 128)
    assert spec.space.gene("block_size_y").values == (1, 2, 4, 8, 16, 32)
    assert [r.source for r in spec.restrictions] == ["block_size_x * block_size_y <= 128"]
    draft, spec = _draft_and_load(tmp_path, tiled, probe=Probe({"block_size_x": 256}))
    assert spec.space.gene("block_size_x").default == 128  # 256 could not launch
    assert "block_size_x: default 256 is over __launch_bounds__(128); 128 instead" in draft.checks
    assert not spec.restrictions  # 128 x 4 by default: the author's to settle
    assert "launch.block: the default block is over __launch_bounds__(128)" in draft.checks
    fixed = "__global__ void __launch_bounds__(64) f(float* y) { y[threadIdx.x] = 1.f; }\n"
    _, spec = _draft_and_load(tmp_path, fixed)
    assert [e.source for e in spec.launch.block[:1]] == ["64"]


def test_what_a_draft_cannot_be_is_one_line(tmp_path: Path) -> None:
    several = "__global__ void a(float* x) {}\n__global__ void b(float* x) {}\n"
    with pytest.raises(UserError, match=r"k\.cu: 2 kernels \(a, b\); pick one with --entry"):
        draft_sidecar(read_source(several), stem="k", source_name="k.cu")
    with pytest.raises(UserError, match="no kernel 'c' \\(kernels: a, b\\)"):
        draft_sidecar(read_source(several), stem="k", source_name="k.cu", entry="c")
    draft = draft_sidecar(read_source(several), stem="k", source_name="k.cu", entry="b")
    assert draft.kernel.name == "b"
    with pytest.raises(UserError, match="no __global__ function found"):
        draft_sidecar(read_source("int main() {}"), stem="k", source_name="k.cu")
    struct = "struct P { int a; };\n__global__ void k(float* y, P p) {}\n"
    with pytest.raises(UserError, match="parameter p of k has type P"):
        draft_sidecar(read_source(struct), stem="k", source_name="k.cu")
    readonly = "__global__ void k(const float* x, int n) {}\n"
    with pytest.raises(UserError, match="nothing to check against a reference"):
        draft_sidecar(read_source(readonly), stem="k", source_name="k.cu")
