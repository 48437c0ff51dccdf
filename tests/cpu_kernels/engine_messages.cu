// Planted bugs and their fixes for tests/test_engine_messages.py. Line numbers matter: the tests name them.
extern "C" __global__ void sum_without_atomic(const float* x, float* total, int n) {
    __shared__ float partial[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        __syncthreads();
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    }
    if (threadIdx.x == 0) *total += partial[0];  // every block: a plain read-modify-write
}

extern "C" __global__ void sum_with_atomic(const float* x, float* total, int n) {
    __shared__ float partial[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        __syncthreads();
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    }
    if (threadIdx.x == 0) atomicAdd(total, partial[0]);
}

extern "C" __global__ void last_block_wins(int* out) {
    if (threadIdx.x == 0) out[0] = blockIdx.x;  // every block writes the same element
}

extern "C" __global__ void read_next_blocks_element(float* x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float next = x[(i + blockDim.x) % (gridDim.x * blockDim.x)];  // another block writes it
    x[i] = 2.0f * x[i] + next;
}

// Correct: each block writes elements of its own, reads and writes its own elements in place.
extern "C" __global__ void per_block_partials(float* x, float* partials) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    x[i] = x[i] * 2.0f;
    if (threadIdx.x == 0) partials[blockIdx.x] = x[i];
}

// Correct: block b waits for block b - 1's flag (an atomic), reads its value through a volatile
// pointer, then publishes its own value (a plain store) and raises its flag.
extern "C" __global__ void chain_through_flags(const float* x, float* running, unsigned int* flags) {
    if (threadIdx.x != 0) return;
    unsigned int b = blockIdx.x;
    float before = 0.0f;
    if (b > 0) {
        while (atomicAdd(&flags[b - 1], 0u) == 0u) {
        }
        __threadfence();
        before = ((volatile float*)running)[b - 1];
    }
    running[b] = before + x[b];
    __threadfence();
    atomicExch(&flags[b], 1u);
}

extern "C" __global__ void shared_index_below_zero(const float* x, float* y) {
    __shared__ float s[64];
    unsigned int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    y[t] = s[t - 1];  // t == 0: an unsigned index that wraps around
}

extern "C" __global__ void global_index_below_zero(const float* x, float* y) {
    int t = threadIdx.x;
    y[t] = x[t - 1];
}

extern "C" __global__ void global_unsigned_index_below_zero(const float* x, float* y) {
    unsigned int t = threadIdx.x;
    y[t] = x[t - 1];
}

extern "C" __global__ void global_index_far_past_end(const float* x, float* y, int offset) {
    int t = threadIdx.x;
    y[t] = x[t + offset];
}

// Correct: as chain_through_flags, with the L2 load and store of CUDA's cache hints.
extern "C" __global__ void chain_through_cache_hints(const float* x, float* running, unsigned int* flags) {
    if (threadIdx.x != 0) return;
    unsigned int b = blockIdx.x;
    float before = 0.0f;
    if (b > 0) {
        while (atomicAdd(&flags[b - 1], 0u) == 0u) {
        }
        __threadfence();
        before = __ldcg(&running[b - 1]);
    }
    __stcg(&running[b], before + x[b]);
    __threadfence();
    atomicExch(&flags[b], 1u);
}
