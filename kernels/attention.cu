// CUTLASS Hopper FMHA forward (the wheel's example 88_hopper_fmha: TMA loads, wgmma, online
// softmax, warp-specialized or not), exposed as a ctune launcher.
//
// Layout as kernels/attention.cu: Q, O [B, H, S, D] and K, V [B, HKV, SK, D], row-major, fp16
// (bf16 with -DCTUNE_BF16=1), fp32 accumulation, O = softmax(Q K^T / sqrt(D)) V. Query head h
// reads KV head h / (H / HKV) (grouped-query attention; HKV = H is plain multi-head). CAUSAL=1
// masks key j > query i (requires S == SK). D = HEAD_DIM (64 or 128) is a compile-time define.
//
// How a problem maps onto the collective's (batch, head) modes. The kernel's batch is
// (b, kv head): K and V are contiguous per KV head, and so are the H / HKV query heads of its
// group in Q and O. Its second mode is
//   causal:     the query head within the group (G = H / HKV); K and V broadcast over it (static
//               stride 0, which CuTe's TMA drops), rows are the S queries;
//   non-causal: the KV split (split-KV, "flash decoding"): split j reads keys [j c, (j+1) c),
//               c = SK / splits, Q broadcasts over it; the G heads' rows are packed into one
//               G * S row sequence (no mask depends on the row), so a decode step's G rows
//               share one Q tile and one pass over K and V. With splits > 1 the partial O and
//               log-sum-exp go to scratch and a small kernel merges them.
// Build: nvcc --generate-code=arch=compute_90a,code=sm_90a -shared -Xcompiler -fPIC -std=c++17
//        --expt-relaxed-constexpr -I<cutlass include> -I<cutlass examples>.

#ifndef NDEBUG
#define NDEBUG  // CUTLASS release build: no device-side asserts
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/kernel_hardware_info.h"

#include "88_hopper_fmha/collective/fmha_fusion.hpp"
#include "88_hopper_fmha/device/device_universal.hpp"
#include "88_hopper_fmha/kernel/fmha_kernel_builder.hpp"

// ---- problem defines -----------------------------------------------------------------------
#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef CAUSAL
#define CAUSAL 1
#endif
#ifndef CTUNE_BF16
#define CTUNE_BF16 0
#endif

// ---- genes (plain compile = default build: the example's cooperative 128x128 kernel) --------
#ifndef TILE_Q
#define TILE_Q 128  // query rows per CTA
#endif
#ifndef TILE_KV
#define TILE_KV 128  // keys per K / V tile
#endif
// The kernel: 0 warp-specialized (a TMA producer warpgroup feeds MMA_WG consumer warpgroups),
// one CTA per tile; 1 the same, persistent (one CTA per SM walks the tiles); 2-4 the plain TMA
// kernel (one warpgroup loads and computes): 2 one CTA per SM, 3 two, 4 two in clusters of 2
// along the queries (K / V tiles reach both by TMA multicast). One gene, not four, because
// the schedules share few options and pinned combinations would make the space too sparse
// to sample.
#ifndef KERNEL
#define KERNEL 0
#endif
#if KERNEL <= 1
#define SCHEDULE 0
#else
#define SCHEDULE 1
#endif
#define PERSISTENT (KERNEL == 1)
#define BLOCKS_PER_SM (KERNEL == 2 ? 1 : 2)
#define CLUSTER_M (KERNEL == 4 ? 2 : 1)
#ifndef MMA_WG
#define MMA_WG 2  // consumer warpgroups (warp-specialized); each owns TILE_Q / MMA_WG rows
#endif
#ifndef STAGES
#define STAGES 5  // smem ring of K and V tiles (K and V alternate in one ring)
#endif
#ifndef Q_SEPARATE
#define Q_SEPARATE 0  // warp-specialized: 1 = a second producer warp loads Q
#endif
#ifndef Q_EXTRA
#define Q_EXTRA 0  // persistent: extra Q stages, so the next tile's Q loads during this one
#endif
#ifndef LOCKED
#define LOCKED 0  // warp-specialized: 1 = consumer warpgroups take turns in the softmax
#endif
// Tile order (warp-specialized): 0 the example's (query blocks fastest, first block first);
// 1 longest first: the causal rows' heavy query blocks (the last ones, which see the most
// keys) start first and the light ones fill the tail, heads fastest. One CTA per tile is then
// the hardware's greedy dispatch in that order; persistent CTAs walk it in a snake (round r
// goes right to left when r is odd), so each CTA's sum of tile lengths stays near the mean.
#ifndef ORDER
#define ORDER 0
#endif
#ifndef HEAD_GROUP
#define HEAD_GROUP 0  // ORDER 1: query heads walked together, longest first (0: all of them)
#endif
// Non-causal key masking: 0 CUTLASS's ResidualFusion, which masks the keys past SK in the
// first and the last key tile of every row (a compare and a select per score) whatever SK
// is; 1 only in the last tile, and only where SK is not a whole number of TILE_KV tiles.
#ifndef KEY_MASK
#define KEY_MASK 0
#endif
// The split count is the launcher's `splits` argument (a runtime gene): one build serves all.

static_assert(KERNEL >= 0 && KERNEL <= 4, "KERNEL must be 0..4");
static_assert(ORDER == 0 || (SCHEDULE == 0 && CAUSAL), "ORDER 1: causal, warp-specialized");
static_assert(HEAD_GROUP >= 0 && (HEAD_GROUP == 0 || ORDER == 1), "HEAD_GROUP: ORDER 1 only");
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "HEAD_DIM must be 64 or 128");
static_assert(TILE_KV % 16 == 0, "TILE_KV: whole k16 steps of the P V product");
static_assert(KEY_MASK == 0 || !CAUSAL, "KEY_MASK 1: non-causal (causal masks by position)");

using namespace cute;
namespace fmha_kernel = cutlass::fmha::kernel;
namespace fmha_collective = cutlass::fmha::collective;

#if CTUNE_BF16
using Element = cutlass::bfloat16_t;
#else
using Element = cutlass::half_t;
#endif
using Accum = float;
using TileShape = Shape<Int<TILE_Q>, Int<TILE_KV>, Int<HEAD_DIM>>;

// Strides of (row, D, (batch, second mode)). The plain TMA kernel takes dynamic strides only,
// so it runs neither split-KV nor causal GQA (the YAML's restrictions): its second mode then
// has size 1 and any stride.
using DynamicStride = cute::tuple<int, _1, cute::tuple<int, int>>;
using BroadcastStride = cute::tuple<int, _1, cute::tuple<int, _0>>;
#if SCHEDULE == 1
using StrideQ = DynamicStride;
using StrideKV = DynamicStride;
#elif CAUSAL
using StrideQ = DynamicStride;     // second mode: query head in the group
using StrideKV = BroadcastStride;  // every head of the group reads the same K / V
#else
using StrideQ = BroadcastStride;   // second mode: KV split; every split reads the same Q
using StrideKV = DynamicStride;
#endif
using StrideO = DynamicStride;
using StrideLSE = cute::tuple<_1, cute::tuple<int, int>>;

namespace ctune_attention {

// KEY_MASK 1: ResidualFusion's trip counts and mask, applied only where SK % TILE_KV != 0
// (a uniform branch on the problem size; the unmasked loop then runs every tile but the
// first, which the collective peels).
struct TailOnlyFusion : fmha_collective::ResidualFusion {
  template <class ProblemSize>
  CUTLASS_DEVICE static bool ragged(ProblemSize const& problem_size) {
    return get<3>(problem_size) % TILE_KV != 0;
  }

  template <class BlkCoord, class Tile, class ProblemSize>
  CUTLASS_DEVICE int get_masked_trip_count(
      BlkCoord const&, Tile const&, ProblemSize const& problem_size) {
    return ragged(problem_size) ? 1 : 0;
  }

  template <class BlkCoord, class Tile, class ProblemSize>
  CUTLASS_DEVICE int get_unmasked_trip_count(
      BlkCoord const& blk_coord, Tile const& tile, ProblemSize const& problem_size) {
    return get_trip_count(blk_coord, tile, problem_size) - (ragged(problem_size) ? 1 : 0);
  }

  template <class AccQK, class IndexQK, class ProblemSize>
  CUTLASS_DEVICE void before_softmax(
      AccQK& acc_qk, IndexQK const& index_qk, ProblemSize const& problem_size) {
    if (ragged(problem_size)) ResidualFusion::before_softmax(acc_qk, index_qk, problem_size);
  }
};

}  // namespace ctune_attention

#if CAUSAL
using Fusion = fmha_collective::CausalFusion;  // also masks the keys past SK
#elif KEY_MASK
using Fusion = ctune_attention::TailOnlyFusion;
#else
using Fusion = fmha_collective::ResidualFusion;  // masks the keys past SK in the last tile
#endif

template <bool B>
using Flag = std::integral_constant<bool, B>;

namespace ctune_attention {

// The tile scheduler of ORDER 1 (see the define): the example's schedulers' interface, tiles
// numbered heavy query blocks first. The bh = batches x second modes (query heads) go in
// groups of HEAD_GROUP (0: one group of all): group by group, and within a group query block
// nm - 1 first, its heads fastest. One group of all balances best; smaller groups keep fewer
// heads' K and V streaming through L2 at a time (at S = 8192 one head's K and V are 4 MiB).
template <bool Persistent, int HeadGroup>
struct LongestFirstScheduler {
  struct Params {
    int num_blocks;
    int num_m_blocks;
    int group_tiles;  // tiles of the whole groups (the last group may be smaller)
    int tail_first;   // first bh of that last group
    cutlass::FastDivmod divmod_group_tiles;  // group x num_m_blocks
    cutlass::FastDivmod divmod_group;
    cutlass::FastDivmod divmod_tail;  // the last group's size (1 when there is none)
    cutlass::FastDivmod divmod_second;
    int ctas;
  };

  int round = 0;
  int tile = 0;
  Params params;

  CUTLASS_DEVICE
  explicit LongestFirstScheduler(Params const& p) : params(p) { tile = tile_of(0); }

  template <class ProblemSize, class ClusterShape, class Tile>
  static Params to_underlying_arguments(ProblemSize const& problem_size,
                                        cutlass::KernelHardwareInfo hw_info, ClusterShape const&,
                                        Tile const& tile_shape) {
    const int num_m_blocks = int(ceil_div(size<2>(problem_size), size<0>(tile_shape)));
    const int bh = int(size<0>(problem_size)) * int(size<1>(problem_size));
    const int num_blocks = num_m_blocks * bh;
    const int group = HeadGroup > 0 && HeadGroup < bh ? HeadGroup : bh;
    const int tail_first = bh / group * group;
    const int tail = bh - tail_first;
    int ctas = num_blocks;
    if (Persistent) {
      int sm_count = hw_info.sm_count;
      if (sm_count <= 0) {
        sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);
      }
      ctas = std::min(num_blocks, sm_count);
    }
    return Params{num_blocks,
                  num_m_blocks,
                  tail_first * num_m_blocks,
                  tail_first,
                  cutlass::FastDivmod(group * num_m_blocks),
                  cutlass::FastDivmod(group),
                  cutlass::FastDivmod(tail > 0 ? tail : 1),
                  cutlass::FastDivmod(int(size<1>(problem_size))),
                  ctas};
  }

  static dim3 get_grid_shape(Params const& p) { return dim3(p.ctas, 1, 1); }

  CUTLASS_DEVICE
  int tile_of(int r) const {
    const int lane = int(blockIdx.x);
    return r * params.ctas + ((r & 1) ? params.ctas - 1 - lane : lane);
  }

  CUTLASS_DEVICE
  bool is_valid() const { return tile < params.num_blocks; }

  CUTLASS_DEVICE
  auto get_block_coord() const {
    int heavy_rank, bh, batch, second;
    if (tile < params.group_tiles) {
      int group_index, in_group_tile, in_group;
      params.divmod_group_tiles(group_index, in_group_tile, tile);
      params.divmod_group(heavy_rank, in_group, in_group_tile);
      bh = group_index * params.divmod_group.divisor + in_group;
    } else {
      int in_tail;
      params.divmod_tail(heavy_rank, in_tail, tile - params.group_tiles);
      bh = params.tail_first + in_tail;
    }
    params.divmod_second(batch, second, bh);
    return make_coord(params.num_m_blocks - 1 - heavy_rank, _0{}, make_coord(batch, second));
  }

  CUTLASS_DEVICE
  LongestFirstScheduler& operator++() {
    if (Persistent) {
      tile = tile_of(++round);
    } else {
      tile = params.num_blocks;  // one tile per CTA
    }
    return *this;
  }
};

// The example's cooperative builder, with the tile scheduler chosen by ORDER.
template <class... Options>
struct WarpSpecialized {
  using Built = typename fmha_kernel::FmhaBuilder<
      Element, Accum, Accum, TileShape, StrideQ, StrideKV, StrideKV, Fusion,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative, Options...>;
  using Scheduler = std::conditional_t<ORDER == 1, LongestFirstScheduler<PERSISTENT, HEAD_GROUP>,
                                       typename Built::TileScheduler>;
  using Kernel = fmha_kernel::FmhaKernelTmaWarpSpecialized<
      typename Built::CollectiveMainloop, typename Built::CollectiveEpilogue, Scheduler,
      Options...>;
};

}  // namespace ctune_attention

#if SCHEDULE == 0
using Kernel = typename ctune_attention::WarpSpecialized<
    fmha_kernel::Option<fmha_kernel::Tag::kNumMmaWarpGroups, Int<MMA_WG>>,
    fmha_kernel::Option<fmha_kernel::Tag::kStagesKV, Int<STAGES>>,
    fmha_kernel::Option<fmha_kernel::Tag::kStagesQ, Int<MMA_WG + Q_EXTRA>>,
    fmha_kernel::Option<fmha_kernel::Tag::kIsPersistent, Flag<PERSISTENT>>,
    fmha_kernel::Option<fmha_kernel::Tag::kLoadsQSeparately, Flag<Q_SEPARATE != 0>>,
    fmha_kernel::Option<fmha_kernel::Tag::kIsMainloopLocked, Flag<LOCKED != 0>>>::Kernel;
#else
using Kernel = typename fmha_kernel::FmhaBuilder<
    Element, Accum, Accum, TileShape, StrideQ, StrideKV, StrideKV, Fusion,
    cutlass::gemm::KernelTma,
    fmha_kernel::Option<fmha_kernel::Tag::kStagesKV, Int<STAGES>>,
    fmha_kernel::Option<fmha_kernel::Tag::kBlocksPerSM, Int<BLOCKS_PER_SM>>,
    fmha_kernel::Option<fmha_kernel::Tag::kClusterM, Int<CLUSTER_M>>>::Kernel;
#endif
using Operation = cutlass::device::Universal<Kernel>;

// The YAML's smem restriction mirrors this; failing here beats failing at launch.
static_assert(Kernel::SharedStorageSize <= 227 * 1024,
              "Q, K / V stages and epilogue exceed the 227 KiB of shared memory per block");

// A named namespace: nvcc's stub for a __global__ in an anonymous one is ambiguous beside
// CuTe's anonymous namespace once `using namespace cute` is in effect.
namespace ctune_attention {

// O = sum_j exp(lse_j - m) O_j / sum_j exp(lse_j - m), m = max_j lse_j, per row and column:
// one block per (batch, row), one thread per head-dim column.
__global__ void merge_splits(const Element* __restrict__ o_part, const float* __restrict__ lse_part,
                             Element* __restrict__ out, int rows, int splits) {
  const int batch = blockIdx.x / rows;
  const int row = blockIdx.x % rows;
  const int col = threadIdx.x;
  const float* lse = lse_part + int64_t(batch) * splits * rows + row;
  float top = -INFINITY;
  for (int j = 0; j < splits; ++j) {
    const float l = lse[int64_t(j) * rows];
    if (l != INFINITY) top = fmaxf(top, l);  // +inf marks a split that saw no key
  }
  float sum = 0.f, acc = 0.f;
  for (int j = 0; j < splits; ++j) {
    const float l = lse[int64_t(j) * rows];
    if (l == INFINITY || top == -INFINITY) continue;
    const float w = __expf(l - top);
    const int64_t at = ((int64_t(batch) * splits + j) * rows + row) * HEAD_DIM + col;
    sum += w;
    acc += w * float(o_part[at]);
  }
  out[(int64_t(batch) * rows + row) * HEAD_DIM + col] = Element(sum > 0.f ? acc / sum : 0.f);
}

}  // namespace ctune_attention

namespace {

constexpr int kMaxSplits = 64;

// One allocation that only grows (reallocated synchronously: rare, warm-up only).
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  cudaError_t reserve(size_t need) {
    if (need <= bytes) return cudaSuccess;
    if (ptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
    cudaError_t err = cudaMalloc(&ptr, need);
    if (err == cudaSuccess) bytes = need;
    return err;
  }
  void release() {
    if (ptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
  }
};

// The last problem's operator: re-launching it skips the TMA-descriptor encoding.
struct Cache {
  Operation op;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  int b = -1, h = -1, hkv = -1, s = -1, sk = -1, splits = -1, device = -1, sm_count = 0;
  int splits_used = 1;                    // splits > 1: merge them after the kernel
  int merge_batches = 0, merge_rows = 0;
  bool ready = false;
  Scratch lse, o_part;
};
Cache cache;

cudaError_t to_error(cutlass::Status s) {
  if (s == cutlass::Status::kSuccess) return cudaSuccess;
  cudaError_t e = cudaGetLastError();  // a CUDA failure inside CUTLASS, if any
  return e != cudaSuccess ? e : cudaErrorInvalidValue;
}

cudaError_t launch(cudaStream_t stream) {
  cudaError_t err = to_error(cache.op.run(stream));
  if (err != cudaSuccess || cache.splits_used == 1) return err;
  ctune_attention::merge_splits<<<cache.merge_batches * cache.merge_rows, HEAD_DIM, 0, stream>>>(
      static_cast<const Element*>(cache.o_part.ptr), static_cast<const float*>(cache.lse.ptr),
      static_cast<Element*>(cache.o), cache.merge_rows, cache.splits_used);
  return cudaGetLastError();
}

}  // namespace

namespace {

#if !CAUSAL
// The largest split count <= want that divides sk: every split then reads exactly sk / n keys
// (the kernel's key extent is per split, so a ragged last split would read its neighbour's).
int split_count(int want, int sk) {
  int n = want < sk ? want : sk;
  n = n < kMaxSplits ? n : kMaxSplits;
  n = n > 1 ? n : 1;
  while (sk % n != 0) --n;
  return n;
}
#endif

// (row, D, (batch, second)) strides; a static second stride (the broadcast 0) stays as it is.
template <class Stride>
Stride rows_stride(int64_t row, int64_t batch, int64_t second) {
  Stride s{};
  get<0>(s) = int(row);
  get<2, 0>(s) = int(batch);
  if constexpr (!cute::is_static<std::decay_t<decltype(get<2, 1>(s))>>::value) {
    get<2, 1>(s) = int(second);
  }
  return s;
}

StrideLSE lse_stride(int64_t batch, int64_t second) {
  StrideLSE s{};
  get<1, 0>(s) = int(batch);
  get<1, 1>(s) = int(second);
  return s;
}

// The kernel's own problem (see the top of the file) for one launch's arguments.
struct Mapping {
  int batches, second, rows, keys, splits;
  StrideQ dq;
  StrideKV dkv;
  StrideO d_o;
  StrideLSE dlse;
};

cudaError_t map_problem(int B, int H, int HKV, int S, int SK, int splits, Mapping& m) {
  if (B < 1 || H < 1 || HKV < 1 || S < 1 || SK < 1 || splits < 1 || H % HKV != 0) {
    return cudaErrorInvalidValue;
  }
  constexpr int64_t D = HEAD_DIM;
  const int G = H / HKV;
  m.batches = B * HKV;
#if CAUSAL
  if (S != SK || splits != 1) return cudaErrorInvalidValue;
  if (SCHEDULE == 1 && G != 1) return cudaErrorInvalidValue;  // needs the broadcast stride
  m.second = G;
  m.rows = S;
  m.keys = SK;
  m.splits = 1;
  m.dq = rows_stride<StrideQ>(D, G * S * D, S * D);
  m.dkv = rows_stride<StrideKV>(D, SK * D, SK * D);
  m.d_o = rows_stride<StrideO>(D, G * S * D, S * D);
  m.dlse = lse_stride(int64_t(G) * S, S);
#else
  if (SCHEDULE == 1 && splits != 1) return cudaErrorInvalidValue;  // needs the broadcast stride
  m.splits = split_count(splits, SK);
  m.second = m.splits;
  m.rows = G * S;
  m.keys = SK / m.splits;
  const int64_t rows = m.rows;
  m.dq = rows_stride<StrideQ>(D, rows * D, rows * D);
  m.dkv = rows_stride<StrideKV>(D, SK * D, m.keys * D);
  m.d_o = rows_stride<StrideO>(D, m.splits * rows * D, rows * D);
  m.dlse = lse_stride(m.splits * rows, rows);
#endif
  return cudaSuccess;
}

cudaError_t set_device(int device) {
  if (cache.device == device) return cudaSuccess;
  cache.lse.release();
  cache.o_part.release();
  cache.device = -1;
  cudaError_t err = cudaDeviceGetAttribute(&cache.sm_count, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  // Universal::initialize sets this once per process; a second device needs its own.
  err = cudaFuncSetAttribute(cutlass::device_kernel<Kernel>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(Kernel::SharedStorageSize));
  if (err != cudaSuccess) return err;
  cache.device = device;
  return cudaSuccess;
}

}  // namespace

extern "C" int ctune_launch(void* const* params, cudaStream_t stream) {
  const auto* Q = *static_cast<const Element* const*>(params[0]);
  const auto* K = *static_cast<const Element* const*>(params[1]);
  const auto* V = *static_cast<const Element* const*>(params[2]);
  auto* O = *static_cast<Element* const*>(params[3]);
  const int B = *static_cast<const int*>(params[4]);
  const int H = *static_cast<const int*>(params[5]);
  const int HKV = *static_cast<const int*>(params[6]);
  const int S = *static_cast<const int*>(params[7]);
  const int SK = *static_cast<const int*>(params[8]);
  const int splits = *static_cast<const int*>(params[9]);

  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;

  if (cache.ready && cache.q == Q && cache.k == K && cache.v == V && cache.o == O &&
      cache.b == B && cache.h == H && cache.hkv == HKV && cache.s == S && cache.sk == SK &&
      cache.splits == splits && cache.device == device) {
    return launch(stream);
  }

  cache.ready = false;
  Mapping m{};
  err = map_problem(B, H, HKV, S, SK, splits, m);
  if (err != cudaSuccess) return err;
  err = set_device(device);
  if (err != cudaSuccess) return err;

  // One log-sum-exp per (batch, second mode, row); O partials only when split.
  const size_t cells = size_t(m.batches) * m.second * m.rows;
  err = cache.lse.reserve(cells * sizeof(float));
  if (err != cudaSuccess) return err;
  Element* o_target = O;
  if (m.splits > 1) {
    err = cache.o_part.reserve(cells * HEAD_DIM * sizeof(Element));
    if (err != cudaSuccess) return err;
    o_target = static_cast<Element*>(cache.o_part.ptr);
  }

  cutlass::KernelHardwareInfo hw_info;
  hw_info.device_id = device;
  hw_info.sm_count = cache.sm_count;
  // Universal::can_implement is not asked: it wants the query count to be a multiple of 8,
  // which TMA does not need (the row strides are D elements; out-of-range rows are clipped).
  typename Operation::Arguments args{
      {m.batches, m.second, m.rows, m.keys, HEAD_DIM},
      {Q, m.dq, K, m.dkv, V, m.dkv},
      {o_target, m.d_o, static_cast<float*>(cache.lse.ptr), m.dlse},
      hw_info};
  err = to_error(cache.op.initialize(args, nullptr, stream));
  if (err != cudaSuccess) return err;

  cache.q = Q;
  cache.k = K;
  cache.v = V;
  cache.o = O;
  cache.b = B;
  cache.h = H;
  cache.hkv = HKV;
  cache.s = S;
  cache.sk = SK;
  cache.splits = splits;
  cache.splits_used = m.splits;
  cache.merge_batches = m.batches;
  cache.merge_rows = m.rows;
  cache.ready = true;
  return launch(stream);
}
