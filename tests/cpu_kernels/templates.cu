// Template kernels, launched through name_expressions.
template <unsigned BLOCK>
__global__ void reduce_sum(const float* in, float* out, unsigned n) {
    __shared__ float sdata[BLOCK];  // size depends on the template argument
    unsigned t = threadIdx.x, i = blockIdx.x * BLOCK + t;
    sdata[t] = i < n ? in[i] : 0.0f;
    for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
        __syncthreads();
        if (t < s) sdata[t] += sdata[t + s];
    }
    if (t == 0) out[blockIdx.x] = sdata[0];
}

template <typename T, int K>
__global__ void scale_add(const T* in, T* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * T(K) + T(1);
}
