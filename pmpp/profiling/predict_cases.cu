// Kernels the workbook's chapters do not contain, for checking the time model (pmpp.predict) on
// code it was not fitted to: each is timed on a GPU (python -m pmpp.profiling.predict_cases) and
// predicted from the CPU engine's counts of the same launch (pmpp.profiling.predict_validation).

// y = a x + y: two reads and a write per element, coalesced.
extern "C" __global__ void saxpy(const float *x, float *y, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// Every second element: half of each 32-byte sector read is thrown away.
extern "C" __global__ void strided_copy(const float *in, float *out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[2 * i];
}

// out[i] = in[idx[i]]: random reads, one sector per lane.
extern "C" __global__ void gather(const float *in, const unsigned *idx, float *out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[idx[i]];
}

// Transpose, reading rows and writing columns: each warp's store touches 32 sectors.
extern "C" __global__ void transpose_naive(const float *in, float *out, unsigned n) {
    unsigned col = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) out[col * n + row] = in[row * n + col];
}

// Transpose through a 32 x 32 tile in shared memory: coalesced both ways, but reading a column of
// the tile puts all 32 lanes in one bank.
extern "C" __global__ void transpose_tiled_conflicts(const float *in, float *out, unsigned n) {
    __shared__ float tile[32][32];
    unsigned x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (unsigned j = 0; j < 32; j += blockDim.y)
        if (x < n && y + j < n) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x, y = blockIdx.x * 32 + threadIdx.y;
    for (unsigned j = 0; j < 32; j += blockDim.y)
        if (x < n && y + j < n) out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

// The same with one padding column: a column of the tile spreads over the 32 banks.
extern "C" __global__ void transpose_tiled(const float *in, float *out, unsigned n) {
    __shared__ float tile[32][33];
    unsigned x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (unsigned j = 0; j < 32; j += blockDim.y)
        if (x < n && y + j < n) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x, y = blockIdx.x * 32 + threadIdx.y;
    for (unsigned j = 0; j < 32; j += blockDim.y)
        if (x < n && y + j < n) out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

// y = A x with a thread per row: lanes walk rows n floats apart (uncoalesced).
extern "C" __global__ void matvec_row_per_thread(const float *a, const float *x, float *y, unsigned n) {
    unsigned row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n) return;
    float sum = 0.0f;
    for (unsigned k = 0; k < n; ++k) sum += a[row * n + k] * x[k];
    y[row] = sum;
}

// y = A x with a warp per row: lanes read consecutive floats, then add up with shuffles.
extern "C" __global__ void matvec_warp_per_row(const float *a, const float *x, float *y, unsigned n) {
    unsigned row = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (row >= n) return;
    float sum = 0.0f;
    for (unsigned k = lane; k < n; k += 32) sum += a[row * n + k] * x[k];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[row] = sum;
}

// A dot product where every thread adds its product to one address.
extern "C" __global__ void dot_atomic_each(const float *x, const float *y, float *result, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(result, x[i] * y[i]);
}

// The same with a block's products added up in shared memory first: one atomic per block.
extern "C" __global__ void dot_block_reduce(const float *x, const float *y, float *result, unsigned n) {
    __shared__ float partial[256];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] * y[i] : 0.0f;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(result, partial[0]);
}

// Nothing: what a launch costs by itself.
extern "C" __global__ void empty() {}
