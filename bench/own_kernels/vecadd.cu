// Vector addition written the way most CUDA code is: C++ linkage (no extern "C"), a
// grid-stride loop over blockDim/gridDim, restrict-qualified pointers. Nothing in it is
// there for a tuner.
#include <cstddef>

__global__ void vecadd(const float* __restrict__ a, const float* __restrict__ b,
                       float* __restrict__ c, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    c[i] = a[i] + b[i];
  }
}
