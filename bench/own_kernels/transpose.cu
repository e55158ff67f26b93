// Matrix transpose, two kernels in one file: a naive one and a coalesced one through a
// padded shared-memory tile. The matrix size is fixed at compile time, as in many
// benchmarks; the tile is TILE_DIM x TILE_DIM, covered by TILE_DIM x BLOCK_ROWS threads.
#define WIDTH 4096
#define HEIGHT 4096
#ifndef TILE_DIM
#define TILE_DIM 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif

__global__ void transpose_naive(float* odata, const float* idata) {
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < WIDTH && y + j < HEIGHT) odata[x * HEIGHT + (y + j)] = idata[(y + j) * WIDTH + x];
  }
}

__global__ void transpose_coalesced(float* odata, const float* idata) {
  __shared__ float tile[TILE_DIM][TILE_DIM + 1];
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < WIDTH && y + j < HEIGHT) tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * WIDTH + x];
  }
  __syncthreads();
  x = blockIdx.y * TILE_DIM + threadIdx.x;
  y = blockIdx.x * TILE_DIM + threadIdx.y;
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < HEIGHT && y + j < WIDTH) odata[(y + j) * HEIGHT + x] = tile[threadIdx.x][threadIdx.y + j];
  }
}
