// A templated block reduction: each block sums BLOCK_SIZE * ITEMS elements in shared
// memory and adds its partial sum to *out. The template is never instantiated here; a
// library would instantiate it where it launches it.
template <int BLOCK_SIZE, int ITEMS, typename T>
__global__ void block_sum(const T* __restrict__ in, T* __restrict__ out, int n) {
  __shared__ T partial[BLOCK_SIZE];
  int base = blockIdx.x * BLOCK_SIZE * ITEMS + threadIdx.x;
  T sum = T(0);
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    int i = base + j * BLOCK_SIZE;
    if (i < n) sum += in[i];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = BLOCK_SIZE / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
