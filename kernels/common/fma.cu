// Device ceiling: FP32 arithmetic (the roofline's flat roof).
// Each thread runs CHAINS independent chains x = a * x + b, one fused multiply-add (2 flops)
// per step, so the FMA units always have independent work while earlier FMAs are in flight.
// Flops per run = 2 * CHAINS * iters * threads. a and b arrive at run time and every chain
// ends up in out[], so the compiler can neither fold the chains nor drop them; pmpp.ceilings
// checks out[] against the closed form x_n = a^n (x_0 - L) + L, L = b / (1 - a).

#ifndef BLOCK_DIM
#define BLOCK_DIM 256
#endif
#ifndef CHAINS
#define CHAINS 8
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_DIM)
fma_kernel(float* out, float a, float b, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        x[c] = (float)c + 0.125f * (float)(i & 15);   // x_0: differs per chain and per thread
    }
#pragma unroll 16
    for (int k = 0; k < iters; ++k) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) {
            x[c] = fmaf(x[c], a, b);
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        sum += x[c];
    }
    out[i] = sum;
}
