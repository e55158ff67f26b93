// A Kernel Tuner-style kernel for the ctune.tune tests: C++ linkage, a template entry,
// the block size read as the bare macro block_size_x.
template <typename T>
__global__ void scale(T* y, const T* x, T alpha, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}
