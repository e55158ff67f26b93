// A test kernel with runtime genes: y = a * x + y, where the block size (BLOCK) and the
// elements per thread (ITEMS) are runtime values that reach the kernel only through its
// launch: it reads blockDim.x and derives its items per thread from gridDim.x, so
// candidates differing in them share one cubin; only UNROLL is compiled in. A launch that
// covers too few elements leaves them unwritten (the correctness check fails).
#ifndef UNROLL
#define UNROLL 1
#endif
constexpr int kUnroll = UNROLL;  // #pragma unroll takes a constant expression, not a macro

extern "C" __global__ void rt_saxpy(const float* x, float* y, float a, int n) {
  const int step = blockDim.x;
  const int threads = gridDim.x * step;
  const int items = (n + threads - 1) / threads;
  const int base = blockIdx.x * step * items + threadIdx.x;
#pragma unroll kUnroll
  for (int u = 0; u < items; ++u) {
    const int i = base + u * step;
    if (i < n) y[i] = a * x[i] + y[i];
  }
}
