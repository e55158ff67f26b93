// A small test kernel: y = a * x + y, with tunable block size and unroll.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

extern "C" __global__ void __launch_bounds__(BLOCK) saxpy(const float* x, float* y, float a, int n) {
  int base = (blockIdx.x * BLOCK * UNROLL) + threadIdx.x;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    int i = base + u * BLOCK;
    if (i < n) y[i] = a * x[i] + y[i];
  }
}
