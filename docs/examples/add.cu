// The example of docs/own-kernel.md: one kernel name, two overloads. `ctune init add.cu`
// asks which to draft; `--entry "add(float*, const float*, int)"` picks one.
__global__ void add(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void add(double* y, const double* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}
