// Flash-attention-2 style forward pass: O = softmax(Q K^T * scale) V for each
// (batch, head), with Q, K, V, O of shape [B, H, S, HEAD_DIM] (row-major, one dtype).
//
// One CTA owns BLOCK_M query rows; each warp owns BLOCK_M / WARPS of them (one or
// two m16 tiles) and keeps its O accumulator and softmax state in registers.
// K/V tiles of BLOCK_N keys stream through shared memory with cp.async; both
// products are mma.sync m16n8k16 with fp32 accumulation; the softmax is online
// (running max and sum, base 2 with log2(e) folded into the scale).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

// Problem defines.
#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef CAUSAL
#define CAUSAL 1
#endif
#ifndef CTUNE_BF16
#define CTUNE_BF16 0
#endif

// Tunable genes.
#ifndef BLOCK_M
#define BLOCK_M 128  // query rows per CTA
#endif
#ifndef BLOCK_N
#define BLOCK_N 64  // keys per K/V tile
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef STAGES
// 1: one K and one V buffer, each load overlapping the other product; 2-3: ring of K/V tiles
#define STAGES 2
#endif
#ifndef SWIZZLE
#define SWIZZLE 1  // 1: XOR-swizzled 16-byte chunks; 0: rows padded by 16 bytes
#endif
#ifndef Q_REGS
#define Q_REGS 0  // 1: Q fragments stay in registers; 0: re-read from shared memory per tile
#endif

#if CTUNE_BF16
typedef __nv_bfloat16 elem_t;
#define MMA_AB "bf16"
#else
typedef __half elem_t;
#define MMA_AB "f16"
#endif

constexpr int THREADS = WARPS * 32;
constexpr int WARP_M = BLOCK_M / WARPS;  // query rows per warp
constexpr int MT = WARP_M / 16;          // m16 tiles per warp
constexpr int NT = BLOCK_N / 8;          // n8 tiles of the score block
constexpr int DT = HEAD_DIM / 8;         // n8 tiles of the output block
constexpr int KD = HEAD_DIM / 16;        // k16 steps of Q K^T
constexpr int KN = BLOCK_N / 16;         // k16 steps of P V
constexpr int CHUNKS = HEAD_DIM / 8;     // 16-byte chunks per row
constexpr int ROW = HEAD_DIM + (SWIZZLE ? 0 : 8);  // shared-memory row pitch in elements
constexpr int TILE_BYTES = BLOCK_N * ROW * 2;

static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "HEAD_DIM must be 64 or 128");
static_assert(BLOCK_M % (WARPS * 16) == 0 && MT >= 1 && MT <= 2, "each warp owns 16 or 32 rows");
static_assert(BLOCK_N % 16 == 0, "BLOCK_N must be a multiple of 16");
static_assert(STAGES >= 1 && STAGES <= 3, "STAGES must be 1..3");

__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
#if CTUNE_BF16
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
#else
    __half2 v = __floats2half2_rn(lo, hi);
#endif
    return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_AB "." MMA_AB ".f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// src_bytes 0 zero-fills the 16 bytes: out-of-range rows become zeros, never garbage
// (a NaN in a padded V row would survive its zero probability).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ex2.approx directly, so the softmax costs the same with or without --use_fast_math.
__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a [rows][ROW] tile. Both layouts
// put the 8 rows an ldmatrix phase reads in 8 different bank groups.
__device__ __forceinline__ uint32_t smem_off(int row, int chunk) {
#if SWIZZLE
    return (uint32_t)(row * ROW + ((chunk ^ (row & 7)) << 3)) * 2;
#else
    return (uint32_t)(row * ROW + (chunk << 3)) * 2;
#endif
}

// Address of chunk pair `kp` (chunks 2kp, 2kp+1) from the address of pair 0, same row.
// With the swizzle, chunk (2kp + x) ^ s == 2kp ^ (x ^ s), and the XOR only touches
// address bits 5 .. log2(ROW * 2) - 1, which hold nothing but the chunk: swizzled rows
// are 128 or 256 bytes and every tile starts 1024-byte aligned (aligned shared memory,
// tile sizes multiples of 1024). So one XOR per pair, and row offsets stay immediates.
__device__ __forceinline__ uint32_t chunk_pair(uint32_t addr0, int kp) {
#if SWIZZLE
    return addr0 ^ (uint32_t)(kp << 5);
#else
    return addr0 + kp * 32;
#endif
}

// Copy rows [row0, row0 + ROWS) of a [S, HEAD_DIM] head into a shared tile. A thread
// copies one chunk column every RSTEP rows; RSTEP is a multiple of 8, so the swizzle
// phase is the same for all its rows and destinations differ by constants.
template <int ROWS>
__device__ __forceinline__ void load_tile(uint32_t dst, const elem_t* head, int row0, int S,
                                          int tid) {
    constexpr int RSTEP = THREADS / CHUNKS;
    static_assert(RSTEP % 8 == 0 && ROWS % RSTEP == 0, "tile rows must split evenly");
    const int r = tid / CHUNKS, ch = tid % CHUNKS;
    const elem_t* src = head + (size_t)(row0 + r) * HEAD_DIM + ch * 8;
    dst += smem_off(r, ch);
#pragma unroll
    for (int i = 0; i < ROWS / RSTEP; ++i) {
        const bool ok = row0 + r + i * RSTEP < S;
        // Rows past S read nothing (zero-filled); their address is the head start so
        // that no formed address leaves the tensor.
        cp_async16(dst + i * RSTEP * ROW * 2, ok ? src + i * RSTEP * HEAD_DIM : head, ok);
    }
}

// S = Q K^T for this warp's rows, then the online-softmax update; leaves P packed as
// the A operand of P V (the m16n8 C layout of two adjacent n-tiles is the m16k16 A layout).
template <bool MASK>
__device__ __forceinline__ void scores_softmax(uint32_t (&p)[MT][KN][4], float (&o)[MT][DT][4],
                                               float (&m)[MT][2], float (&l)[MT][2],
                                               const uint32_t (&qf)[MT][KD][4], uint32_t qA,
                                               uint32_t kB, int lane, int row0, int n0, int S,
                                               float scale_log2) {
    float s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;

#pragma unroll
    for (int ks = 0; ks < KD; ++ks) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#if Q_REGS
#pragma unroll
            for (int e = 0; e < 4; ++e) a[mt][e] = qf[mt][ks][e];
#else
            ldsm_x4(a[mt], chunk_pair(qA, ks) + mt * 16 * ROW * 2);
#endif
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            // Matrices: keys 0-7/d 0-7, keys 0-7/d 8-15, keys 8-15/d 0-7, keys 8-15/d 8-15.
            uint32_t b[4];
            ldsm_x4(b, chunk_pair(kB, ks) + np * 16 * ROW * 2);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(s[mt][2 * np], a[mt], b[0], b[1]);
                mma16816(s[mt][2 * np + 1], a[mt], b[2], b[3]);
            }
        }
    }

    const int g = lane >> 2, t = lane & 3;
    if (MASK) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int row = row0 + mt * 16 + g + (e >> 1) * 8;
                    const int col = n0 + nt * 8 + 2 * t + (e & 1);
                    const bool ok = col < S && (!CAUSAL || col <= row);
                    if (!ok) s[mt][nt][e] = -INFINITY;
                }
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
                mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
            // The four lanes of a quad hold one row.
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m[mt][r], mx * scale_log2);
            // A row with no unmasked key so far keeps m = -inf: offset by 0 so that
            // exp2(-inf - offset) is 0, never exp2(-inf + inf) = NaN.
            const float off = m_new == -INFINITY ? 0.f : m_new;
            const float alpha = exp2_approx(m[mt][r] - off);
            m[mt][r] = m_new;
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 2 * r; e < 2 * r + 2; ++e) {
                    s[mt][nt][e] = exp2_approx(fmaf(s[mt][nt][e], scale_log2, -off));
                    sum += s[mt][nt][e];
                }
            // Per-lane partial sum; the quad reduction waits for the epilogue.
            l[mt][r] = l[mt][r] * alpha + sum;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                o[mt][dt][2 * r] *= alpha;
                o[mt][dt][2 * r + 1] *= alpha;
            }
        }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < KN; ++kk) {
            p[mt][kk][0] = pack2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            p[mt][kk][1] = pack2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            p[mt][kk][2] = pack2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            p[mt][kk][3] = pack2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
}

// O += P V. V is [key][d] in shared memory, so B comes through ldmatrix.trans.
__device__ __forceinline__ void accumulate_pv(float (&o)[MT][DT][4],
                                              const uint32_t (&p)[MT][KN][4], uint32_t vA) {
#pragma unroll
    for (int kk = 0; kk < KN; ++kk)
#pragma unroll
        for (int dp = 0; dp < DT / 2; ++dp) {
            // Matrices: keys 0-7/d 0-7, keys 8-15/d 0-7, keys 0-7/d 8-15, keys 8-15/d 8-15.
            uint32_t b[4];
            ldsm_x4_trans(b, chunk_pair(vA, dp) + kk * 16 * ROW * 2);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(o[mt][2 * dp], p[mt][kk], b[0], b[1]);
                mma16816(o[mt][2 * dp + 1], p[mt][kk], b[2], b[3]);
            }
        }
}

// No __launch_bounds__: it would override the maxrregcount flag gene.
extern "C" __global__ void ctune_attention(const elem_t* __restrict__ Q,
                                           const elem_t* __restrict__ K,
                                           const elem_t* __restrict__ V, elem_t* __restrict__ O,
                                           int B, int H, int S, float scale) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const uint32_t sQ = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t sK = sQ + BLOCK_M * ROW * 2;
    const uint32_t sV = sK + STAGES * TILE_BYTES;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    // Causal: launch the longest query blocks first so the short ones fill the tail.
    const int q0 = (CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BLOCK_M;
    const size_t head = ((size_t)blockIdx.z * H + blockIdx.y) * (size_t)S * HEAD_DIM;
    const elem_t* q = Q + head;
    const elem_t* k = K + head;
    const elem_t* v = V + head;

    const int kv_end = CAUSAL ? min(S, q0 + BLOCK_M) : S;
    const int n_tiles = (kv_end + BLOCK_N - 1) / BLOCK_N;
    const int row0 = q0 + warp * WARP_M;  // this warp's first query row
    // Per-lane ldmatrix row/chunk offsets. A: rows lane % 16, chunk lane / 16 (Q as the
    // A operand, V through .trans). B: keys (lane / 16) * 8 + lane % 8, chunk (lane / 8) % 2
    // (K as the "col" B operand: matrices are n0-7/k0-7, n0-7/k8-15, n8-15/k0-7, n8-15/k8-15).
    const uint32_t ldsA = smem_off(lane & 15, lane >> 4);
    const uint32_t ldsB = smem_off(((lane >> 4) << 3) + (lane & 7), (lane >> 3) & 1);
    const uint32_t qA = sQ + warp * WARP_M * ROW * 2 + ldsA;
    const float scale_log2 = scale * 1.4426950408889634f;

    float o[MT][DT][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }
    uint32_t qf[MT][KD][4];  // filled and read only under Q_REGS
    uint32_t p[MT][KN][4];

    load_tile<BLOCK_M>(sQ, q, q0, S, tid);
    cp_async_commit();
#if STAGES == 1
    load_tile<BLOCK_N>(sK, k, 0, S, tid);
    cp_async_commit();
#else
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        if (st < n_tiles) {
            load_tile<BLOCK_N>(sK + st * TILE_BYTES, k, st * BLOCK_N, S, tid);
            load_tile<BLOCK_N>(sV + st * TILE_BYTES, v, st * BLOCK_N, S, tid);
        }
        cp_async_commit();  // empty groups keep the wait counts uniform
    }
#endif

#if Q_REGS
    cp_async_wait<(STAGES > 1 ? STAGES - 1 : 1)>();  // the Q group, not the K/V behind it
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int ks = 0; ks < KD; ++ks)
            ldsm_x4(qf[mt][ks], chunk_pair(qA, ks) + mt * 16 * ROW * 2);
#endif

    for (int it = 0; it < n_tiles; ++it) {
        const int n0 = it * BLOCK_N;
        // Warp-uniform: a warp skips tiles wholly above its diagonal, and all of them
        // when its rows are all padding (>= S).
        const bool active = row0 < S && (!CAUSAL || n0 <= row0 + WARP_M - 1);
        const bool masked = n0 + BLOCK_N > S || (CAUSAL && n0 + BLOCK_N - 1 > row0);
#if STAGES == 1
        cp_async_wait<0>();
        __syncthreads();  // K[it] landed; every warp is done reading V[it-1]
        load_tile<BLOCK_N>(sV, v, n0, S, tid);
        cp_async_commit();
        if (active) {
            if (masked)
                scores_softmax<true>(p, o, m, l, qf, qA, sK + ldsB, lane, row0, n0, S,
                                     scale_log2);
            else
                scores_softmax<false>(p, o, m, l, qf, qA, sK + ldsB, lane, row0, n0, S,
                                      scale_log2);
        }
        cp_async_wait<0>();
        __syncthreads();  // V[it] landed; every warp is done reading K[it]
        if (it + 1 < n_tiles) load_tile<BLOCK_N>(sK, k, n0 + BLOCK_N, S, tid);
        cp_async_commit();
        if (active) accumulate_pv(o, p, sV + ldsA);
#else
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // tile it landed; every warp is done with tile it-1, refilled below
        const int nxt = it + STAGES - 1;
        if (nxt < n_tiles) {
            const int sl = nxt % STAGES;
            load_tile<BLOCK_N>(sK + sl * TILE_BYTES, k, nxt * BLOCK_N, S, tid);
            load_tile<BLOCK_N>(sV + sl * TILE_BYTES, v, nxt * BLOCK_N, S, tid);
        }
        cp_async_commit();
        if (active) {
            const uint32_t off = (it % STAGES) * TILE_BYTES;
            if (masked)
                scores_softmax<true>(p, o, m, l, qf, qA, sK + off + ldsB, lane, row0, n0, S,
                                     scale_log2);
            else
                scores_softmax<false>(p, o, m, l, qf, qA, sK + off + ldsB, lane, row0, n0, S,
                                      scale_log2);
            accumulate_pv(o, p, sV + off + ldsA);
        }
#endif
    }

    // Epilogue: normalise, stage through this warp's own Q rows (no other warp reads
    // them), then write whole 16-byte chunks of rows below S.
    const int g = lane >> 2, t = lane & 3;
    __syncwarp();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float sum = l[mt][r];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            const float inv = sum > 0.f ? 1.f / sum : 0.f;
            const int row = warp * WARP_M + mt * 16 + g + r * 8;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt)
                *reinterpret_cast<uint32_t*>(smem + smem_off(row, dt) + t * 4) =
                    pack2(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
        }
    __syncwarp();
    elem_t* out = O + head;
#pragma unroll
    for (int i = 0; i < WARP_M * CHUNKS / 32; ++i) {
        const int c = lane + i * 32;
        const int row = warp * WARP_M + c / CHUNKS, ch = c % CHUNKS;
        if (q0 + row < S)
            *reinterpret_cast<uint4*>(out + (size_t)(q0 + row) * HEAD_DIM + ch * 8) =
                *reinterpret_cast<const uint4*>(smem + smem_off(row, ch));
    }
}
