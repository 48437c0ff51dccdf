// Planted bugs for the checks. Line numbers matter: the tests name them.
extern "C" __global__ void read_past_end(const float* input, float* output, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    output[i] = input[i] * 2.0f;  // no `if (i < n)`: the last block reads past both arrays
}

extern "C" __global__ void write_past_end(const float* input, float* output, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) output[i + 1] = input[i];
}

extern "C" __global__ void shared_off_by_one(const float* input, float* output) {
    __shared__ float partialSum[256];
    unsigned t = threadIdx.x;
    partialSum[t] = input[blockIdx.x * blockDim.x + t];
    __syncthreads();
    output[blockIdx.x * blockDim.x + t] = partialSum[t + 1];
}

extern "C" __global__ void early_return(const float* input, float* output, int n) {
    __shared__ float tile[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    tile[threadIdx.x] = input[i];
    __syncthreads();
    output[i] = tile[threadIdx.x];
}

extern "C" __global__ void two_barriers(float* output) {
    if (threadIdx.x % 2 == 0) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    output[threadIdx.x] = 1.0f;
}

extern "C" __global__ void wild_write(float* output, long long offset) {
    output[offset + threadIdx.x] = 1.0f;
}

extern "C" __global__ void spin_forever(const int* flag, int* out) {
    volatile const int* f = flag;
    while (f[0] == 0) { }
    out[threadIdx.x] = 1;
}

extern "C" __global__ void shfl_half_warp(float* out) {
    if (threadIdx.x < 16) out[threadIdx.x] = __shfl_down_sync(0xffffffff, 1.0f, 1);
    __syncthreads();
}

extern "C" __global__ void shared_histogram_bad_bin(const int* data, unsigned* bins) {
    __shared__ unsigned hist[16];
    if (threadIdx.x < 16) hist[threadIdx.x] = 0;
    __syncthreads();
    atomicAdd(&hist[data[threadIdx.x]], 1u);
    __syncthreads();
    if (threadIdx.x < 16) bins[threadIdx.x] = hist[threadIdx.x];
}
