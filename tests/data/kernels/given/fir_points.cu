// A kernel as its author wrote it: constant-memory taps, a float2 input and a struct input.
#define TAPS 16

__constant__ float coeffs[TAPS];

struct Point {
    float x;
    float y;
};

#ifndef BLOCK
#define BLOCK 128
#endif

__global__ void fir_points(const float2* __restrict__ in, const Point* __restrict__ pts,
                           float* __restrict__ out, int n) {
    __shared__ float staged[BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    staged[threadIdx.x] = i < n ? pts[i].x * pts[i].y : 0.0f;
    __syncthreads();
    if (i < n) {
        float2 v = in[i];
        float sum = 0.0f;
        for (int t = 0; t < TAPS; ++t) sum += coeffs[t] * (v.x + t * v.y);
        out[i] = sum + staged[threadIdx.x];
    }
}
