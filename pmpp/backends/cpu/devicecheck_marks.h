// Force-included after pmpp_cuda.h by the device-code check (devicecheck.py) only: a function the
// source declares __device__ or __global__ gets no patchable entry, every other one gets one, so
// the compiler's assembly says which functions are device code.
#undef __device__
#define __device__ __attribute__((patchable_function_entry(0, 0)))
#undef __global__
#define __global__ __attribute__((patchable_function_entry(0, 0)))
