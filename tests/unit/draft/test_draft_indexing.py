"""ctune init drafts from the kernel's own index arithmetic (issue 46): every guess marked,
2-D where the kernel indexes 2-D, #if selectors with all their values, unused block axes
left out, and restrictions where a step can be 0 or static shared memory can pass 48 KiB."""

from __future__ import annotations

from pathlib import Path

from ctune.spec import load_spec
from ctune.spec.draft.indexing import Reader, zero_steps
from ctune.spec.draft.sidecar import draft_sidecar
from ctune.spec.draft.source import read_source
from ctune.spec.draft.undefined import Probe


def _draft(tmp_path: Path, text: str, probe: Probe | None = None):
    (tmp_path / "k.cu").write_text(text)
    draft = draft_sidecar(read_source(text), stem="k", source_name="k.cu", probe=probe)
    (tmp_path / "k.yaml").write_text(draft.yaml)
    (tmp_path / draft.reference_file).write_text(draft.reference)
    return draft, load_spec(tmp_path / "k.yaml")


def _line(yaml: str, start: str) -> str:
    return next(line for line in yaml.splitlines() if line.lstrip().startswith(start))


ROWS_2D = """\
__global__ void scale(float* out, const float* in, int width, int height) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < height && col < width) out[row * width + col] = 2.0f * in[row * width + col];
}
"""


def test_a_row_index_makes_the_grid_and_shapes_2d(tmp_path: Path) -> None:
    draft, spec = _draft(tmp_path, ROWS_2D)
    assert [e.source for e in spec.launch.grid[:2]] == [
        "ceil_div(WIDTH, BLOCK_X)",
        "ceil_div(HEIGHT, BLOCK_Y)",
    ]
    assert [[e.source for e in a.shape] for a in spec.args[:2]] == [
        ["HEIGHT", "WIDTH"],
        ["HEIGHT", "WIDTH"],
    ]
    assert spec.problem().dims == {"WIDTH": 2048, "HEIGHT": 2048}  # 2-D sizes, not 4 Mi each
    assert spec.args[0].role == "output"
    assert "# check:" in _line(draft.yaml, "grid:") and "# check:" in _line(draft.yaml, "block:")


def test_a_matrix_product_reads_each_operand_s_own_shape(tmp_path: Path) -> None:
    text = """\
__global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  if (row < M && col < N) C[row * N + col] = acc;
}
"""
    _, spec = _draft(tmp_path, text)
    shapes = {a.name: [e.source for e in a.shape] for a in spec.args if a.shape}
    assert shapes == {"A": ["M", "K"], "B": ["K", "N"], "C": ["M", "N"]}
    assert spec.metrics["bytes"].source == "4 * (M * K + K * N + M * N)"


SELECTED = """\
#ifndef BLOCK
#define BLOCK 128
#endif
__global__ void k(float* y, const float* x, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
#if ALGO == 0
  if (i < n) y[i] = x[i];
#elif ALGO == 1
  if (i < n) y[i] = 2.0f * x[i];
#elif ALGO == 2
  if (i < n) y[i] = x[i] * x[i];
#elif ALGO == 3
  if (i < n) y[i] = -x[i];
#endif
}
"""


def test_an_if_selector_takes_every_value_the_source_tests(tmp_path: Path) -> None:
    draft, spec = _draft(tmp_path, SELECTED)
    assert spec.space.gene("ALGO").values == (0, 1, 2, 3)
    assert "# check:" in _line(draft.yaml, "ALGO:")


def test_a_block_axis_the_kernel_never_reads_stays_out_of_the_launch(tmp_path: Path) -> None:
    text = """\
extern "C" __global__ void k(float* y, const float* x, int nx, int ny) {
  int i = blockIdx.x * block_size_x + threadIdx.x;
  int j = blockIdx.y * block_size_y + threadIdx.y + 0 * block_size_z;
  if (i < nx && j < ny) y[j * nx + i] = x[j * nx + i];
}
"""
    probe = Probe({"block_size_x": 256, "block_size_y": 1, "block_size_z": 1}, builds=True)
    _, spec = _draft(tmp_path, text, probe)
    assert [e.source for e in spec.launch.block] == ["block_size_x", "block_size_y", "1"]
    assert spec.space.gene("block_size_z").values == (1,)


TILED = """\
#ifndef TILE
#define TILE 32
#endif
#ifndef ROWS_PER_THREAD
#define ROWS_PER_THREAD 4
#endif
__global__ void t(float* out, const float* in, int n) {
  __shared__ float tile[TILE][TILE + 1];
  int rows = TILE / ROWS_PER_THREAD;
  for (int r = threadIdx.y; r < TILE; r += rows) tile[r][threadIdx.x] = in[r * n];
  out[blockIdx.x] = tile[threadIdx.x][0];
}
"""


def test_a_step_that_can_be_0_gets_a_restriction(tmp_path: Path) -> None:
    assert zero_steps(read_source(TILED).kernels[0].body, {"TILE", "ROWS_PER_THREAD"}) == [
        ("TILE", "ROWS_PER_THREAD")
    ]
    draft, spec = _draft(tmp_path, TILED)
    assert [r.source for r in spec.restrictions] == ["TILE % ROWS_PER_THREAD == 0"]
    assert "# check:" in _line(draft.yaml, '- "TILE % ROWS_PER_THREAD')
    loop = "__global__ void k(float* o) { for (int j = 0; j < TILE; j += ROWS) o[j] = 0; }"
    assert zero_steps(loop, {"TILE", "ROWS"}) == [("TILE", "ROWS")]


def test_static_shared_memory_sized_by_genes_is_held_to_48_kib(tmp_path: Path) -> None:
    text = """\
#ifndef TILE
#define TILE 64
#endif
#ifndef DEPTH
#define DEPTH 2
#endif
__global__ void k(float* out, const double* in, int n) {
  __shared__ double stage[DEPTH][TILE][TILE];
  __shared__ float flags[32];
  stage[0][threadIdx.y][threadIdx.x] = in[blockIdx.x];
  out[blockIdx.x] = stage[0][0][threadIdx.x] + flags[0];
}
"""
    _, spec = _draft(tmp_path, text)
    (limit,) = [r.source for r in spec.restrictions if "49152" in r.source]
    assert limit == "8 * DEPTH * TILE * TILE + 4 * 32 <= 49152"
    small = TILED  # at most 64 x 65 floats: no combination passes the limit
    _, spec = _draft(tmp_path, small)
    assert not [r for r in spec.restrictions if "49152" in r.source]


def test_one_block_per_row_through_a_row_pointer(tmp_path: Path) -> None:
    text = """\
namespace nn {
__global__ void norm(float* y, const float* x, int cols) {
  const float* row = x + (long)blockIdx.x * cols;
  float* out = y + (long)blockIdx.x * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = row[c] * 0.5f;
}
}
"""
    _, spec = _draft(tmp_path, text)
    assert spec.entry_symbol == "nn::norm"
    assert [e.source for e in spec.launch.grid[:1]] == ["ROWS"]
    assert [[e.source for e in a.shape] for a in spec.args[:2]] == [["ROWS", "COLS"]] * 2
    assert spec.args[0].role == "output"


def test_a_sum_into_one_element_is_inout_and_not_deterministic(tmp_path: Path) -> None:
    text = """\
__global__ void total(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, in[i]);
}
"""
    draft, spec = _draft(tmp_path, text)
    assert [(a.name, a.role, [e.source for e in a.shape]) for a in spec.args[:2]] == [
        ("in", "input", ["N"]),
        ("out", "inout", ["1"]),
    ]
    assert "deterministic: false  # check:" in draft.yaml
    assert "init: {uniform: [0, 1]}" in _line(draft.yaml, "- {name: in,")


def test_a_border_left_unwritten_keeps_the_output_inout() -> None:
    body = "int x = threadIdx.x; if (x < 1 || x >= n - 1) return; out[x] = in[x - 1];"
    reader = Reader(body, {"n": "N"})
    assert reader.written_only("out") and reader.skips_a_border()


def test_a_sum_in_a_loop_gets_a_looser_tolerance(tmp_path: Path) -> None:
    from ctune.spec.draft.indexing import accumulates

    assert accumulates("float acc = 0; for (int k = 0; k < n; k += 4) acc += a[k] * b[k];")
    assert not accumulates("for (int i = t; i < n; i += stride) y[i] = x[i];")  # its step
    draft, _ = _draft(tmp_path, ROWS_2D)
    assert "rel_l2: 1.0e-6" in _line(draft.yaml, "tolerance:")
    text = ROWS_2D.replace(
        "out[row * width + col] = 2.0f * in[row * width + col];",
        "{ float s = 0; for (int k = 0; k < width; ++k) s += in[row * width + k];"
        " out[row * width + col] = s; }",
    )
    draft, _ = _draft(tmp_path, text)
    assert "rel_l2: 1.0e-4" in _line(draft.yaml, "tolerance:")
    assert "# check:" in _line(draft.yaml, "tolerance:")


def test_a_pointer_the_kernel_only_reads_is_an_input_and_macro_sizes_pair_up(
    tmp_path: Path,
) -> None:
    text = """\
#define image_height 512
#define image_width 1024
#define filter_width 17
__global__ void blur(float* out, float* in, float* unused) {
  int x = blockIdx.x * block_size_x + threadIdx.x;
  int y = blockIdx.y * block_size_y + threadIdx.y;
  float s = 0;
  for (int j = 0; j < filter_width; j++) s += in[y * image_width + x + j];
  out[y * image_width + x] = s;
}
"""
    probe = Probe({"block_size_x": 32, "block_size_y": 4}, builds=True)
    draft, spec = _draft(tmp_path, text, probe)
    assert [(a.name, a.role) for a in spec.args] == [
        ("out", "output"),
        ("in", "input"),  # not const, but never written
        ("unused", "input"),
    ]
    assert [e.source for e in spec.args[0].shape] == ["image_height", "image_width"]
    assert spec.problem().dims == {"image_height": 512, "image_width": 1024}  # not filter_width
    assert [e.source for e in spec.launch.grid[:2]] == [
        "ceil_div(image_width, block_size_x)",
        "ceil_div(image_height, block_size_y)",
    ]
    assert "# check: the kernel never writes it" in _line(draft.yaml, "- {name: in,")
