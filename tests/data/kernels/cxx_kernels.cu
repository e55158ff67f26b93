// C++ kernels as authors write them: no extern "C", overloads, a namespace, a template
// that the file never instantiates, whose parameter has a gene's name (TILE).
__global__ void scale(float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] *= a;
}

__global__ void add(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void add(double* y, const double* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

namespace blas {
__global__ void axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
}  // namespace blas

template <int TILE, typename T>
__global__ void tiled_copy(T* out, const T* in, int n) {
  __shared__ T buf[TILE];
  int i = blockIdx.x * TILE + threadIdx.x;
  buf[threadIdx.x] = i < n ? in[i] : T(0);
  __syncthreads();
  if (i < n) out[i] = buf[threadIdx.x];
}
