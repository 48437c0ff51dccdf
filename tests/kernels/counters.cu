// Kernels whose counters are known by hand, for the CPU engine's counters (tests/test_counters.py)
// and their check against Nsight Compute on a GPU (pmpp.validate). One access pattern each.
// Launch them with whole warps: n a multiple of 32, blocks of 32..1024 threads.

// Global loads at a stride: a warp's 32 lanes read 32 floats `stride` apart.
// Sectors per request: 4 (stride 1), 8 (stride 2), 32 (stride >= 8).
extern "C" __global__ void StridedLoad(const float* in, float* out, int stride) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i * stride];
}

// 128-bit loads and stores: 16 sectors per request each.
extern "C" __global__ void Float4Copy(const float4* in, float4* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i];
}

// Every lane reads the same float: one sector per request.
extern "C" __global__ void BroadcastLoad(const float* in, float* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[0];
}

// Only the even lanes load and store: 16 active lanes, still 4 sectors per request.
extern "C" __global__ void EvenLanes(const float* in, float* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x % 2 == 0) out[i] = in[i];
}

// Only the lower half of each warp loops: 16 active lanes in the loop, 2 sectors per request.
extern "C" __global__ void HalfWarpLoop(const float* in, float* out, int iterations) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x % 32 < 16) {
        float sum = 0.0f;
        for (int k = 0; k < iterations; ++k) sum += in[i + k];
        out[i] = sum;
    }
}

// Shared memory read at a stride, one float per lane: a `stride`-way bank conflict for
// stride = 1, 2, 4, ..., 32 (lane l reads word l * stride: bank (l * stride) % 32).
extern "C" __global__ void SharedStride(float* out, int stride) {
    __shared__ float s[32 * 32];
    for (int j = threadIdx.x; j < 32 * 32; j += blockDim.x) s[j] = float(j);
    __syncthreads();
    const int lane = threadIdx.x % 32;
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[(lane * stride) % (32 * 32)];
}

// Shared memory written at a stride: the same conflicts for stores.
extern "C" __global__ void SharedStoreStride(float* out, int stride) {
    __shared__ float s[32 * 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (warp == 0) s[(lane * stride) % (32 * 32)] = float(lane);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x % 32];
}

// Every lane reads the same shared word: a broadcast, one wavefront, no conflict.
extern "C" __global__ void SharedBroadcast(float* out) {
    __shared__ float s[32];
    if (threadIdx.x < 32) s[threadIdx.x] = float(threadIdx.x);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[0];
}

// 64-bit shared loads, served per half-warp: 2 wavefronts with consecutive lanes (stride 1),
// 4 with stride 2 (two lanes of a half-warp on each bank pair).
extern "C" __global__ void SharedFloat2(float2* out, int stride) {
    __shared__ float2 s[32 * 2];
    for (int j = threadIdx.x; j < 32 * 2; j += blockDim.x) s[j] = make_float2(float(j), 1.0f);
    __syncthreads();
    const int lane = threadIdx.x % 32;
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[(lane * stride) % 64];
}

// 128-bit shared loads, served per quarter-warp: 4 wavefronts with stride 1, 8 with stride 2.
extern "C" __global__ void SharedFloat4(float4* out, int stride) {
    __shared__ float4 s[32 * 2];
    for (int j = threadIdx.x; j < 32 * 2; j += blockDim.x) s[j] = make_float4(float(j), 1.0f, 2.0f, 3.0f);
    __syncthreads();
    const int lane = threadIdx.x % 32;
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[(lane * stride) % 64];
}

// Global atomics on `bins` addresses (lane % bins): every lane of a warp on one address for
// bins = 1; the old value is not used (a RED instruction on a GPU).
extern "C" __global__ void AtomicBins(unsigned int* counts, int bins) {
    atomicAdd(&counts[threadIdx.x % bins], 1u);
}

// Shared-memory atomics into `bins` private bins, then one global atomic per bin and block.
extern "C" __global__ void SharedAtomicBins(unsigned int* counts, int bins) {
    __shared__ unsigned int s[32];
    if (threadIdx.x < 32) s[threadIdx.x] = 0;
    __syncthreads();
    atomicAdd(&s[threadIdx.x % bins], 1u);
    __syncthreads();
    if (threadIdx.x < bins) atomicAdd(&counts[threadIdx.x], s[threadIdx.x]);
}
