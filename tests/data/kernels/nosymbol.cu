// Compiles, but the entry named in the spec is none of the kernels here.
__global__ void other_kernel(float* y) { y[0] = 1.f; }
extern "C" __global__ void another(float* y) { y[0] = 2.f; }
