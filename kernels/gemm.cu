// ctune GEMM, layout "TN": C[M,N] = A[M,K] @ B[N,K]^T, all row-major.
// fp16 (default) or bf16 (-DCTUNE_BF16=1) in and out, fp32 accumulate.
// mma.sync m16n8k16 fed by ldmatrix from a multistage cp.async pipeline.
// Correct for any M, N, K >= 0: rows, columns and the K tail are zero-filled
// on load and guarded on store; K % 8 != 0 (rows not 16-byte aligned) takes
// a scalar load path chosen once per launch.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#ifndef CTUNE_BF16
#define CTUNE_BF16 0
#endif
#ifndef BLOCK_M
#define BLOCK_M 128
#endif
#ifndef BLOCK_N
#define BLOCK_N 256
#endif
#ifndef BLOCK_K
#define BLOCK_K 32
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 4
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef SWIZZLE
#define SWIZZLE 1
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

#if CTUNE_BF16
typedef __nv_bfloat16 elem_t;
#define CTUNE_MMA_TYPE "bf16"
#else
typedef __half elem_t;
#define CTUNE_MMA_TYPE "f16"
#endif

namespace {

constexpr int BM = BLOCK_M, BN = BLOCK_N, BK = BLOCK_K;
constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int WM = BM / WARPS_M;          // warp tile rows
constexpr int WN = BN / WARPS_N;          // warp tile cols
constexpr int MT = WM / 16;               // m16 tiles per warp
constexpr int NT = WN / 8;                // n8 tiles per warp
constexpr int KSTEPS = BK / 16;           // k16 steps per k-tile
constexpr int CPR = BK / 8;               // 16-byte chunks per smem row
constexpr int LDS = SWIZZLE ? BK : BK + 8;  // smem row pitch (elements); +16 B pad breaks bank conflicts
constexpr int A_STAGE_BYTES = BM * LDS * 2;
constexpr int B_STAGE_BYTES = BN * LDS * 2;

static_assert(BK == 32 || BK == 64, "BLOCK_K must be 32 or 64");
static_assert(BM % (WARPS_M * 16) == 0, "warp tile M must be a multiple of 16");
static_assert(BN % (WARPS_N * 16) == 0, "warp tile N must be a multiple of 16 (ldmatrix.x4 loads two n8 tiles)");
static_assert(STAGES >= 2, "need at least double buffering");
// The k-tile loop's single barrier per tile protects the stage being
// overwritten only if fragments of the last k16 step are loaded before it.
static_assert(KSTEPS >= 2, "need at least two k16 steps per k-tile");
static_assert(THREADS % CPR == 0, "loader assumes a fixed chunk column per thread");
static_assert(GROUP_M >= 1, "GROUP_M must be positive");

// Byte offset of 16-byte chunk `chunk` of smem row `row` within a stage.
__device__ __forceinline__ uint32_t soff(int row, int chunk) {
#if SWIZZLE
  // XOR the chunk index with row bits so the 8 rows one ldmatrix phase reads
  // (or 8 consecutive loader threads write) land in 8 distinct 16-byte bank
  // groups of a 128-byte line. With 64-byte rows (CPR 4) two rows share a
  // line, so the row bits start one position higher.
  return (uint32_t)(row * LDS + ((chunk ^ ((row / (8 / CPR)) % CPR)) << 3)) * 2u;
#else
  return (uint32_t)(row * LDS + (chunk << 3)) * 2u;
#endif
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  // src_bytes 0 zero-fills the destination without reading src.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." CTUNE_MMA_TYPE "." CTUNE_MMA_TYPE ".f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
#if CTUNE_BF16
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
#else
  __half2 v = __floats2half2_rn(lo, hi);
#endif
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint16_t pack1(float x) {
#if CTUNE_BF16
  __nv_bfloat16 v = __float2bfloat16_rn(x);
#else
  __half v = __float2half_rn(x);
#endif
  return *reinterpret_cast<uint16_t*>(&v);
}

// Copies the ROWS x BK tile at (row 0 of g, column k0) into one smem stage.
// g points at the tile's first row; rows >= rows_valid and columns >= K read
// as zero. `vec`: every row start and k0 are 16-byte aligned (K % 8 == 0).
template <int ROWS>
__device__ __forceinline__ void load_tile(uint32_t s_stage, const uint16_t* g, const uint16_t* g_safe,
                                          int rows_valid, int K, int k0, bool vec, int tid) {
  constexpr int CHUNKS = ROWS * CPR;
  constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
  const int chunk = tid % CPR;
  const int kc = k0 + chunk * 8;
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int row = tid / CPR + it * (THREADS / CPR);
    if (CHUNKS % THREADS != 0 && row >= ROWS) break;
    const uint32_t dst = s_stage + soff(row, chunk);
    const bool row_ok = row < rows_valid;
    if (vec) {
      const bool ok = row_ok && kc < K;
      cp_async16(dst, ok ? (const void*)(g + (size_t)row * K + kc) : (const void*)g_safe, ok ? 16 : 0);
    } else {
      uint32_t v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = kc + 2 * j;
        const uint32_t lo = (row_ok && k < K) ? g[(size_t)row * K + k] : 0u;
        const uint32_t hi = (row_ok && k + 1 < K) ? g[(size_t)row * K + k + 1] : 0u;
        v[j] = lo | (hi << 16);
      }
      asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst), "r"(v[0]), "r"(v[1]), "r"(v[2]),
                   "r"(v[3])
                   : "memory");
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    ctune_gemm(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C, int M, int N,
               int K) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp % WARPS_M;
  const int warp_n = warp / WARPS_M;

  // Grouped rasterization: GROUP_M row-tiles sweep N together so the B tiles
  // they share stay in L2 (grid is 1-D: ceil(M/BM) * ceil(N/BN) blocks).
  const int grid_m = (M + BM - 1) / BM;
  const int grid_n = (N + BN - 1) / BN;
  const int width = GROUP_M * grid_n;
  const int pid = blockIdx.x;
  const int first_m = (pid / width) * GROUP_M;
  const int gsize = min(grid_m - first_m, GROUP_M);
  const int pid_m = first_m + (pid % width) % gsize;
  const int pid_n = (pid % width) / gsize;
  const int m0 = pid_m * BM;
  const int n0 = pid_n * BN;

  const uint16_t* A16 = reinterpret_cast<const uint16_t*>(A);
  const uint16_t* B16 = reinterpret_cast<const uint16_t*>(B);
  const uint16_t* gA = A16 + (size_t)m0 * K;
  const uint16_t* gB = B16 + (size_t)n0 * K;
  const int a_rows = M - m0;
  const int b_rows = N - n0;
  const bool vec = (K % 8 == 0) && (((uintptr_t)A | (uintptr_t)B) % 16 == 0);
  const int KT = (K + BK - 1) / BK;

  const uint32_t sA = (uint32_t)__cvta_generic_to_shared(smem);
  const uint32_t sB = sA + STAGES * A_STAGE_BYTES;

  // Prologue: k-tiles 0..STAGES-2 in flight, one commit group per k-tile
  // (empty groups past the end keep the wait counts uniform).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      load_tile<BM>(sA + s * A_STAGE_BYTES, gA, A16, a_rows, K, s * BK, vec, tid);
      load_tile<BN>(sB + s * B_STAGE_BYTES, gB, B16, b_rows, K, s * BK, vec, tid);
    }
    cp_async_commit();
  }

  // Per-lane ldmatrix.x4 coordinates.
  // A (16x16 at m, k): lanes 0-15 address rows 0-15 at k 0-7, lanes 16-31 the
  // same rows at k 8-15 -> regs {a0,a1,a2,a3} of the m16n8k16 A fragment.
  // B (two n8 tiles at n, k; B is N x K so no transpose): lanes 0-7 rows 0-7
  // k 0-7, 8-15 rows 0-7 k 8-15, 16-23 rows 8-15 k 0-7, 24-31 rows 8-15
  // k 8-15 -> {b0,b1} of n-tile 0, then {b0,b1} of n-tile 1.
  const int a_row = warp_m * WM + (lane & 15);
  const int a_chk = lane >> 4;
  const int b_row = warp_n * WN + (lane & 7) + ((lane >> 4) << 3);
  const int b_chk = (lane >> 3) & 1;

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

  uint32_t fa[2][MT][4];
  uint32_t fb[2][NT][2];

  auto load_frags = [&](int buf, int stage, int kk) {
    const uint32_t a_base = sA + stage * A_STAGE_BYTES;
    const uint32_t b_base = sB + stage * B_STAGE_BYTES;
#pragma unroll
    for (int i = 0; i < MT; ++i) ldmatrix_x4(fa[buf][i], a_base + soff(a_row + i * 16, kk * 2 + a_chk));
#pragma unroll
    for (int j = 0; j < NT / 2; ++j) {
      uint32_t r[4];
      ldmatrix_x4(r, b_base + soff(b_row + j * 16, kk * 2 + b_chk));
      fb[buf][2 * j][0] = r[0];
      fb[buf][2 * j][1] = r[1];
      fb[buf][2 * j + 1][0] = r[2];
      fb[buf][2 * j + 1][1] = r[3];
    }
  };

  cp_async_wait<STAGES - 2>();
  __syncthreads();
  int rd = 0;           // stage holding k-tile kt
  int wr = STAGES - 1;  // stage receiving k-tile kt + STAGES - 1 (the one read during kt - 1)
  load_frags(0, 0, 0);

  for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      if (kk == KSTEPS - 1) {
        // k-tile kt + 1 has landed for every thread, and every warp has
        // finished its ldmatrix reads of tile kt - 1's stage (overwritten next).
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        rd = (rd + 1 == STAGES) ? 0 : rd + 1;
      }
      // Fragments for the next k16 step (the next stage's first one at the
      // end of the tile) load while this step's MMAs run.
      load_frags((kk + 1) & 1, rd, (kk + 1) % KSTEPS);
      if (kk == 0) {
        const int kn = kt + STAGES - 1;
        if (kn < KT) {
          load_tile<BM>(sA + wr * A_STAGE_BYTES, gA, A16, a_rows, K, kn * BK, vec, tid);
          load_tile<BN>(sB + wr * B_STAGE_BYTES, gB, B16, b_rows, K, kn * BK, vec, tid);
        }
        cp_async_commit();
        wr = (wr + 1 == STAGES) ? 0 : wr + 1;
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          // Serpentine over n so consecutive MMAs share a B fragment.
          const int jj = (i & 1) ? NT - 1 - j : j;
          mma16816(acc[i][jj], fa[kk & 1][i], fb[kk & 1][jj][0], fb[kk & 1][jj][1]);
        }
    }
  }

  // Epilogue. Accumulator fragment: c0,c1 at (row lane/4, cols 2*(lane%4)+{0,1}),
  // c2,c3 eight rows below. Pairs go out as one 32-bit store when aligned.
  uint16_t* C16 = reinterpret_cast<uint16_t*>(C);
  const bool pair_ok = (N % 2 == 0) && ((uintptr_t)C % 4 == 0);
  const int row0 = m0 + warp_m * WM + (lane >> 2);
  const int col0 = n0 + warp_n * WN + (lane & 3) * 2;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + i * 16 + h * 8;
      if (r >= M) continue;
      uint16_t* crow = C16 + (size_t)r * N;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int c = col0 + j * 8;
        const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        if (pair_ok && c + 1 < N) {
          *reinterpret_cast<uint32_t*>(crow + c) = pack2(v0, v1);
        } else {
          if (c < N) crow[c] = pack1(v0);
          if (c + 1 < N) crow[c + 1] = pack1(v1);
        }
      }
    }
}
