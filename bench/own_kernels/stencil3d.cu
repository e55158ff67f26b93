// A 7-point Jacobi step on a 3-D grid in the style Kernel Tuner kernels are written:
// extern "C", 3-D thread blocks whose sizes are the bare macros block_size_x/y/z that the
// tuner defines (this file does not compile alone), and tile_size_z cells per thread in z.
extern "C" __global__ void stencil7(float* out, const float* in, int nx, int ny, int nz) {
  int x = blockIdx.x * block_size_x + threadIdx.x;
  int y = blockIdx.y * block_size_y + threadIdx.y;
  int z0 = (blockIdx.z * block_size_z + threadIdx.z) * tile_size_z;
  if (x < 1 || y < 1 || x >= nx - 1 || y >= ny - 1) return;
  for (int t = 0; t < tile_size_z; ++t) {
    int z = z0 + t;
    if (z < 1 || z >= nz - 1) continue;
    long i = ((long)z * ny + y) * nx + x;
    out[i] = 0.5f * in[i] + (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx] +
                             in[i - (long)nx * ny] + in[i + (long)nx * ny]) / 12.0f;
  }
}
