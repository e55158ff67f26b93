// ctune's own tiled matmul, fp32: C[M,N] = A[M,K] @ B[K,N], all row-major.
// A CTA of BLOCK_X x BLOCK_Y threads computes a (BLOCK_Y * WORK_Y) x (BLOCK_X * WORK_X)
// tile of C; each thread WORK_Y x WORK_X outputs strided by the block shape (coalesced
// stores). K is walked in TILE_K slices staged in shared memory (A transposed, so both
// operands are read along the thread's fast index); PAD adds one column to each staged row.
// Correct for any M, N, K >= 0 (loads zero-filled, stores guarded). The tuning space
// resembles Kernel Tuner's matmul example: block shape, work per thread, K tile.
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
#ifndef WORK_X
#define WORK_X 1
#endif
#ifndef WORK_Y
#define WORK_Y 1
#endif
#ifndef TILE_K
#define TILE_K 16
#endif
#ifndef PAD
#define PAD 0
#endif

#define TILE_M (BLOCK_Y * WORK_Y)
#define TILE_N (BLOCK_X * WORK_X)
#define THREADS (BLOCK_X * BLOCK_Y)

extern "C" __global__ void __launch_bounds__(THREADS)
tiled_matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE_K][TILE_M + PAD];  // As[k][m] = A[row0 + m][k0 + k]
  __shared__ float Bs[TILE_K][TILE_N + PAD];  // Bs[k][n] = B[k0 + k][col0 + n]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * BLOCK_X + tx;
  const int row0 = blockIdx.y * TILE_M, col0 = blockIdx.x * TILE_N;
  float acc[WORK_Y][WORK_X];
#pragma unroll
  for (int i = 0; i < WORK_Y; ++i)
#pragma unroll
    for (int j = 0; j < WORK_X; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    for (int i = tid; i < TILE_M * TILE_K; i += THREADS) {
      const int m = i / TILE_K, k = i % TILE_K;
      const int r = row0 + m, c = k0 + k;
      As[k][m] = (r < M && c < K) ? A[(long long)r * K + c] : 0.0f;
    }
    for (int i = tid; i < TILE_K * TILE_N; i += THREADS) {
      const int k = i / TILE_N, n = i % TILE_N;
      const int r = k0 + k, c = col0 + n;
      Bs[k][n] = (r < K && c < N) ? B[(long long)r * N + c] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE_K; ++k) {
      float a[WORK_Y], b[WORK_X];
#pragma unroll
      for (int i = 0; i < WORK_Y; ++i) a[i] = As[k][ty + i * BLOCK_Y];
#pragma unroll
      for (int j = 0; j < WORK_X; ++j) b[j] = Bs[k][tx + j * BLOCK_X];
#pragma unroll
      for (int i = 0; i < WORK_Y; ++i)
#pragma unroll
        for (int j = 0; j < WORK_X; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < WORK_Y; ++i) {
    const int r = row0 + ty + i * BLOCK_Y;
#pragma unroll
    for (int j = 0; j < WORK_X; ++j) {
      const int c = col0 + tx + j * BLOCK_X;
      if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];
    }
  }
}
