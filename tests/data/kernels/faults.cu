// Fault-injection test kernel: the define gene MODE selects what it does.
//   0 correct: y = 2 * x           4 wrong result: y = 2 * x + 1
//   1 illegal-address write         5 launch error (the spec's block rule gives 2048 threads)
//   2 __trap()                      6 device-side assert
//   3 hangs (spins forever)
// Modes 1, 2, 3 and 6 are sticky faults or hangs: the measurement worker must
// be replaced, and the run must go on (tests/gpu/test_worker_faults.py).
#include <cassert>
#include <cstdint>

#ifndef MODE
#define MODE 0
#endif

extern "C" __global__ void faults(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#if MODE == 1
  if (i == 0) {
    // 1 TiB past the output, through an explicit global store so the compiler
    // cannot route it through the generic (shared/local) windows.
    uintptr_t bad = reinterpret_cast<uintptr_t>(y) + (static_cast<uintptr_t>(1) << 40);
    asm volatile("st.global.f32 [%0], %1;" ::"l"(bad), "f"(1.0f) : "memory");
  }
#elif MODE == 2
  if (i == 0) __trap();
#elif MODE == 3
  // Spin for ~146 years on the GPU's ns timer: the reads are volatile asm, so the
  // loop cannot be optimised away, and __nanosleep keeps the spin cheap.
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < (1ull << 62));
#elif MODE == 6
  assert(i != 0);
#endif
  if (i < n) {
#if MODE == 4
    y[i] = 2.0f * x[i] + 1.0f;
#else
    y[i] = 2.0f * x[i];
#endif
  }
}
