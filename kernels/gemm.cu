// CUTLASS 3.x Hopper GEMM (TMA + wgmma, warp-specialized), exposed as a ctune launcher; with
// GEMV=1, CUTLASS's SIMT GEMV instead (cutlass::gemm::kernel::Gemv, row-major weights).
//
// Layout "TN", same convention as the hand-written GEMM: A [M,K] row-major, B [N,K] row-major
// (column-major KxN for CUTLASS), C [M,N] row-major; fp16 (bf16 with -DCTUNE_BF16=1) in and
// out, fp32 accumulate, C = A @ B^T. TMA needs 16-byte aligned rows: K % 8 == 0 and N % 8 == 0.
// Build: nvcc --generate-code=arch=compute_90a,code=sm_90a -shared -Xcompiler -fPIC -std=c++17
//        --expt-relaxed-constexpr -I<nvidia-cutlass include> (wgmma needs the sm_90a target).

#ifndef NDEBUG
#define NDEBUG  // CUTLASS release build: no device-side asserts
#endif

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/device/gemv.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/gemv.h"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"

// ---- genes (plain compile = default build) ------------------------------------------------
#ifndef TILE_M
#define TILE_M 128
#endif
#ifndef TILE_N
#define TILE_N 256
#endif
#ifndef TILE_K
#define TILE_K 64
#endif
#ifndef CLUSTER_M
#define CLUSTER_M 2
#endif
#ifndef CLUSTER_N
#define CLUSTER_N 1
#endif
// 0 = cooperative (2 consumer warpgroups share a tile), 1 = ping-pong (consumer warpgroups
// alternate tiles, epilogue overlaps the other's mainloop), 2 = non-persistent warp-specialized.
#ifndef SCHEDULE
#define SCHEDULE 0
#endif
// 0 = as many mainloop stages as shared memory holds, else that many.
#ifndef STAGES
#define STAGES 0
#endif
// 0 = TMA store epilogue through shared memory, 1 = direct stores (frees smem for stages).
#ifndef EPILOGUE
#define EPILOGUE 0
#endif
// Tile scheduler: 0 = persistent data-parallel, 1 = stream-K (cooperative only).
#ifndef TILE_SCHED
#define TILE_SCHED 0
#endif
// 1 = swap A and B: the kernel computes C^T = B A^T (C^T column-major is C row-major), so the
// weights' N rows fill the tile's M side and the few tokens of a decode step (M = 1..128) its
// N side, where a 16- or 32-wide tile wastes less than a 64-row M tile does.
#ifndef SWAP_AB
#define SWAP_AB 0
#endif
// 1 = CUTLASS's SIMT GEMV (no tensor cores, no TMA): each weight row [K] is dotted with each
// token by GEMV_ROW_THREADS threads of a GEMV_THREADS block, 16-byte loads, a warp-shuffle
// sum. A decode step of one token is a pure weight stream, which this serves without the
// 64-row tensor-core tile a GEMM fills with one row; M > 1 runs as M batches (weights re-read).
#ifndef GEMV
#define GEMV 0
#endif
#ifndef GEMV_THREADS
#define GEMV_THREADS 128
#endif
#ifndef GEMV_ROW_THREADS
#define GEMV_ROW_THREADS 16
#endif
// The scheduler's settings are launcher arguments, not macros (runtime genes: one build
// serves every value): splits (stream-K only: 1 = CUTLASS's stream-K heuristic, > 1 = split-K
// into that many slices), raster (0 heuristic, 1 along M, 2 along N) and swizzle (max swizzle
// size: tiles grouped for L2 reuse).

using namespace cute;

#if CTUNE_BF16
using Element = cutlass::bfloat16_t;
#else
using Element = cutlass::half_t;
#endif
using Accum = float;
constexpr int kAlign = 16 / sizeof(Element);  // elements per 16-byte TMA access

namespace {

// The launcher's arguments, in the order of the spec's `args`.
struct LaunchArgs {
  const Element* a;
  const Element* b;
  Element* c;
  int m, n, k, splits, raster, swizzle;
};

LaunchArgs read_args(void* const* params) {
  const auto scalar = [params](int i) { return *static_cast<const int*>(params[i]); };
  return {*static_cast<const Element* const*>(params[0]),
          *static_cast<const Element* const*>(params[1]),
          *static_cast<Element* const*>(params[2]),
          scalar(3), scalar(4), scalar(5), scalar(6), scalar(7), scalar(8)};
}

}  // namespace

#if GEMV
// CUTLASS's GEMV computes D[n] = W[n, :] . x for row-major W: here W is B [N, K] and each token
// (row of A) is one batch, its outputs row m of C.
static_assert(GEMV_THREADS % 32 == 0 && 32 % GEMV_ROW_THREADS == 0,
              "a row's threads share one warp (the sum is a warp shuffle)");
using GemvEpilogue = cutlass::epilogue::thread::LinearCombination<Element, 1, Accum, Accum>;
using GemvKernel = cutlass::gemm::kernel::Gemv<Element, cutlass::layout::RowMajor, Element, Element,
                                               Accum, GemvEpilogue, kAlign, GEMV_THREADS,
                                               GEMV_ROW_THREADS>;
using Gemv = cutlass::gemm::device::Gemv<GemvKernel>;

extern "C" int ctune_launch(void* const* params, cudaStream_t stream) {
  // the scheduler's settings (splits, raster, swizzle) do not reach the GEMV
  const auto [A, B, C, M, N, K, splits, raster, swizzle] = read_args(params);
  // A warp holds 32 / GEMV_ROW_THREADS whole rows only if N is a multiple of that (the
  // shuffle needs the full warp); the grid's z (one token per batch) is 16 bits.
  if (M < 1 || M >= 65536 || N % (32 / GEMV_ROW_THREADS) != 0) return cudaErrorInvalidValue;
  typename Gemv::Arguments args(
      cutlass::MatrixCoord(N, K), M, {1.0f, 0.0f},
      cutlass::TensorRef<Element, cutlass::layout::RowMajor>(const_cast<Element*>(B),
                                                             cutlass::layout::RowMajor(K)),
      A, C, C, /*batch_stride_A (weights, shared)=*/0, /*x=*/K, /*C=*/N, /*D=*/N);
  Gemv op;
  if (op.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  if (op.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  // run() has read (and so cleared) the launch error already: report a failure as one
  return op.run(stream) == cutlass::Status::kSuccess ? cudaSuccess : cudaErrorLaunchFailure;
}

#else  // the CUTLASS 3.x GEMM

using TileShape = Shape<Int<TILE_M>, Int<TILE_N>, Int<TILE_K>>;
using ClusterShape = Shape<Int<CLUSTER_M>, Int<CLUSTER_N>, _1>;

#if SCHEDULE == 0
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using TmaEpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
#elif SCHEDULE == 1
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using TmaEpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
#else
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecialized;
using TmaEpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
#endif
// EpilogueScheduleAuto is NoSmemWarpSpecialized (EPILOGUE 1) and KernelScheduleAuto is
// cooperative for TILE_M >= 128, else ping-pong (SCHEDULE 0 / 1): the builders' Auto choices add
// no kernel of their own. EPILOGUE 2 gives the ping-pong kernel the cooperative TMA epilogue
// (128-row subtiles); the cooperative kernel with the 64-row one does not compile.
#if EPILOGUE == 0
using EpilogueSchedule = TmaEpilogueSchedule;
#elif EPILOGUE == 1
using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
#else
static_assert(SCHEDULE == 1, "EPILOGUE 2 is the ping-pong kernel's (see the YAML)");
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
#endif

#if TILE_SCHED == 0
using TileScheduler = cutlass::gemm::PersistentScheduler;
#else
using TileScheduler = cutlass::gemm::StreamKScheduler;
#endif

// Swapped, the kernel's D is C^T: column-major [N, M], the same bytes as row-major C [M, N].
#if SWAP_AB
using LayoutD = cutlass::layout::ColumnMajor;
#else
using LayoutD = cutlass::layout::RowMajor;
#endif

// ElementC = void: beta is always 0, so C is never read and needs no smem.
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, Accum, Accum,
    void, LayoutD, kAlign,
    Element, LayoutD, kAlign,
    EpilogueSchedule>::CollectiveOp;

#if STAGES == 0
using StageCount = cutlass::gemm::collective::StageCountAutoCarveout<
    static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>;
#else
using StageCount = cutlass::gemm::collective::StageCount<STAGES>;
#endif

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, cutlass::layout::RowMajor, kAlign,
    Element, cutlass::layout::ColumnMajor, kAlign,
    Accum, TileShape, ClusterShape, StageCount, MainloopSchedule>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue, TileScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

// The YAML's smem restriction mirrors this; failing here beats failing at launch.
static_assert(GemmKernel::SharedStorageSize <=
                  cutlass::gemm::collective::detail::sm90_smem_capacity_bytes,
              "tiles x stages exceed the 227 KiB of shared memory per block");

namespace {

// The last problem's operator: re-launching it skips argument checks and TMA-descriptor encoding.
struct Cache {
  Gemm op;
  typename Gemm::Arguments args;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int m = -1, n = -1, k = -1, device = -1, sm_count = 0;
  int splits = -1, raster = -1, swizzle = -1;
  bool ready = false;
  size_t workspace_needed = 0;
  void* workspace = nullptr;  // grow-only, on cache.device
  size_t workspace_bytes = 0;
};
Cache cache;

cudaError_t to_error(cutlass::Status s) {
  if (s == cutlass::Status::kSuccess) return cudaSuccess;
  cudaError_t e = cudaGetLastError();  // a CUDA failure inside CUTLASS, if any
  return e != cudaSuccess ? e : cudaErrorInvalidValue;
}

// Stream-K keeps barrier counters in the workspace; they must be zero at every launch.
cudaError_t launch(cudaStream_t stream) {
  if (cache.workspace_needed > 0) {
    cudaError_t err = to_error(GemmKernel::initialize_workspace(cache.args, cache.workspace, stream));
    if (err != cudaSuccess) return err;
  }
  return to_error(cache.op.run(stream));
}

}  // namespace

extern "C" int ctune_launch(void* const* params, cudaStream_t stream) {
  const auto [A, B, C, M, N, K, splits, raster, swizzle] = read_args(params);

  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;

  if (cache.ready && cache.a == A && cache.b == B && cache.c == C && cache.m == M &&
      cache.n == N && cache.k == K && cache.device == device && cache.splits == splits &&
      cache.raster == raster && cache.swizzle == swizzle) {
    return launch(stream);
  }

  cache.ready = false;
  if (cache.device != device) {
    if (cache.workspace) cudaFree(cache.workspace);
    cache.workspace = nullptr;
    cache.workspace_bytes = 0;
    cache.device = -1;
    err = cudaDeviceGetAttribute(&cache.sm_count, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) return err;
    cache.device = device;
  }

  // The kernel's own problem: swapped, its A is B [N, K] and its B is A [M, K] (both K-major
  // either way), and its D [N, M] is column-major C.
#if SWAP_AB
  const int km = N, kn = M;
  const Element* ka = B;
  const Element* kb = A;
#else
  const int km = M, kn = N;
  const Element* ka = A;
  const Element* kb = B;
#endif
  using StrideA = typename GemmKernel::StrideA;
  using StrideB = typename GemmKernel::StrideB;
  using StrideD = typename GemmKernel::StrideD;
  // Packed strides; the batch (L) stride is unused with L = 1.
  const StrideA stride_a{int64_t(K), _1{}, int64_t(km) * K};
  const StrideB stride_b{int64_t(K), _1{}, int64_t(kn) * K};
#if SWAP_AB
  const StrideD stride_d{_1{}, int64_t(km), int64_t(km) * kn};
#else
  const StrideD stride_d{int64_t(kn), _1{}, int64_t(km) * kn};
#endif

  typename Gemm::Arguments& args = cache.args;
  args = typename Gemm::Arguments{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {km, kn, K, 1},
      {ka, stride_a, kb, stride_b},
      {{1.0f, 0.0f}, nullptr, stride_d, C, stride_d}};
  args.hw_info.device_id = device;
  args.hw_info.sm_count = cache.sm_count;
  args.scheduler.raster_order =
      static_cast<cutlass::gemm::kernel::detail::RasterOrderOptions>(raster);
  args.scheduler.max_swizzle_size = swizzle;
#if TILE_SCHED == 1
  args.scheduler.splits = splits;
#endif

  if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;

  cache.workspace_needed = Gemm::get_workspace_size(args);
  if (cache.workspace_needed > cache.workspace_bytes) {
    // Synchronous on purpose: rare (warm-up), and safe whichever stream used the old buffer.
    if (cache.workspace) cudaFree(cache.workspace);
    cache.workspace = nullptr;
    cache.workspace_bytes = 0;
    err = cudaMalloc(&cache.workspace, cache.workspace_needed);
    if (err != cudaSuccess) return err;
    cache.workspace_bytes = cache.workspace_needed;
  }

  // initialize() also zeroes the stream-K barriers, so the first launch runs directly.
  err = to_error(cache.op.initialize(args, cache.workspace, stream));
  if (err != cudaSuccess) return err;
  cache.a = A;
  cache.b = B;
  cache.c = C;
  cache.m = M;
  cache.n = N;
  cache.k = K;
  cache.splits = splits;
  cache.raster = raster;
  cache.swizzle = swizzle;
  cache.ready = true;
  return to_error(cache.op.run(stream));
}

#endif  // GEMV
