// Global -> shared copies with the pipeline primitives (cp.async): one float4 per thread, then
// `size` bytes of it again from `offset` floats in - for the checks of size and alignment.
#include <cuda_pipeline.h>

extern "C" __global__ void stage_through_shared(const float* in, float* out, int size, int offset) {
    __shared__ float4 in_s[64];
    unsigned int t = threadIdx.x;
    __pipeline_memcpy_async(&in_s[t], in + 4 * t, sizeof(float4));
    __pipeline_commit();
    __pipeline_wait_prior(0);
    float4 v = in_s[t];
    out[4 * t] = v.x;
    out[4 * t + 1] = v.y;
    out[4 * t + 2] = v.z;
    out[4 * t + 3] = v.w;
    if (size) {
        __pipeline_memcpy_async(&in_s[t], in + offset, size);
        __pipeline_wait_prior(0);
    }
}
