// Does not compile with its default genes: the baseline itself is broken.
extern "C" __global__ void broken(float* y) { y[0] = undefined_name; }
