// Static shared memory sized by a gene: large values exceed the 48 KiB static limit,
// which ptxas rejects (a resource limit, not a compile error).
#ifndef SMEM_FLOATS
#define SMEM_FLOATS 1024
#endif

extern "C" __global__ void smem_hog(const float* x, float* y, int n) {
  __shared__ float buf[SMEM_FLOATS];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x % SMEM_FLOATS] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) y[i] = buf[(threadIdx.x + 1) % SMEM_FLOATS];
}

#if BROKEN
// a candidate-specific compile error (the default build is fine)
static_assert(BROKEN == 0, "BROKEN candidates do not compile");
#endif
