// __half arithmetic and float4 loads.
#include <cuda_fp16.h>

extern "C" __global__ void half_ops(const __half* a, const __half* b, const __half* c, __half* add,
                                    __half* mul, __half* fma, __half* sub, __half* ops, float* widened, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    add[i] = __hadd(a[i], b[i]);
    mul[i] = __hmul(a[i], b[i]);
    fma[i] = __hfma(a[i], b[i], c[i]);
    sub[i] = __hsub(a[i], b[i]);
    ops[i] = a[i] * b[i] + c[i];  // operators: two roundings, like the GPU without contraction
    widened[i] = __half2float(a[i]) + __low2float(__halves2half2(b[i], c[i]));
}

extern "C" __global__ void half2_ops(const __half2* a, const __half2* b, __half2* add2, __half2* mul2,
                                     float2* as_float2, __half* from_float, const float* f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    add2[i] = __hadd2(a[i], b[i]);
    mul2[i] = __hmul2(a[i], b[i]);
    as_float2[i] = __half22float2(a[i]);
    from_float[i] = __float2half(f[i]);
}

extern "C" __global__ void layout(int* out) {
    out[0] = sizeof(__half);   out[1] = sizeof(__half2);  out[2] = alignof(float4);
    out[3] = sizeof(float4);   out[4] = alignof(float2);  out[5] = sizeof(float3);
    out[6] = alignof(double2); out[7] = sizeof(uchar4);   out[8] = alignof(int4);
}

extern "C" __global__ void sum4(const float* in, float* out, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = reinterpret_cast<const float4*>(in)[i];
        out[i] = v.x + v.y + v.z + v.w;
    }
}
