// Indexing in 1, 2 and 3 dimensions; the tests use sizes that are not multiples of the block.
extern "C" __global__ void vec_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void mat_axpy_2d(const float* a, const float* b, float* c, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) c[row * cols + col] = a[row * cols + col] + 2.0f * b[row * cols + col];
}

// out[z][y][x] = x + 1000 y + 1000000 z, and which block and thread wrote it.
extern "C" __global__ void coords_3d(int* out, unsigned* who, int nx, int ny, int nz) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz) {
        unsigned i = (z * ny + y) * nx + x;
        out[i] = x + 1000 * y + 1000000 * z;
        unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
        who[i] = block * 1024 + thread;
    }
}

// Warps are formed from the linear thread index x + y Bx + z Bx By: lane 0 of each thread's warp.
extern "C" __global__ void warp_leader_3d(unsigned* leader) {
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    leader[t] = __shfl_sync(0xffffffff, t, 0);
}
