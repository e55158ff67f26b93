// Row-wise softmax in a namespace: one block per row, dynamic shared memory for the
// per-warp partial results, warp shuffles, and __launch_bounds__ on the thread count.
#ifndef THREADS
#define THREADS 256
#endif

namespace nn {

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void __launch_bounds__(THREADS) softmax_rows(float* y, const float* x, int cols) {
  extern __shared__ float scratch[];  // one float per warp
  const float* row = x + (long)blockIdx.x * cols;
  float* out = y + (long)blockIdx.x * cols;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = THREADS / 32;

  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, row[c]);
  m = warp_max(m);
  if (lane == 0) scratch[warp] = m;
  __syncthreads();
  m = lane < warps ? scratch[lane] : -INFINITY;
  m = warp_max(m);
  __syncthreads();

  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += THREADS) s += __expf(row[c] - m);
  s = warp_sum(s);
  if (lane == 0) scratch[warp] = s;
  __syncthreads();
  s = lane < warps ? scratch[lane] : 0.0f;
  s = warp_sum(s);

  for (int c = threadIdx.x; c < cols; c += THREADS) out[c] = __expf(row[c] - m) / s;
}

}  // namespace nn
