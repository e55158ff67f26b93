// A test kernel whose runtime gene reaches it as a scalar argument: y = a * x + y, each
// thread handling `items` elements, where `items` (the ITEMS gene) is passed at launch.
// Candidates differing only in ITEMS share one cubin; every value computes the same y.
extern "C" __global__ void rt_items(const float* x, float* y, float a, int n, int items) {
  const int base = blockIdx.x * blockDim.x * items + threadIdx.x;
  for (int u = 0; u < items; ++u) {
    const int i = base + u * blockDim.x;
    if (i < n) y[i] = a * x[i] + y[i];
  }
}
