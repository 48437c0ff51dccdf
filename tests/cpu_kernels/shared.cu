// Static and dynamic shared memory.
#ifndef TILE
#define TILE 16
#endif

// PMPP 5.4 tiled matrix multiplication, with boundary checks (any Width).
extern "C" __global__ void matmul_tiled(const float* M, const float* N, float* P, int Width) {
    __shared__ float Mds[TILE][TILE];
    __shared__ float Nds[TILE][TILE];
    int bx = blockIdx.x, by = blockIdx.y, tx = threadIdx.x, ty = threadIdx.y;
    int Row = by * TILE + ty, Col = bx * TILE + tx;
    float Pvalue = 0;
    for (int ph = 0; ph < (Width + TILE - 1) / TILE; ++ph) {
        Mds[ty][tx] = (Row < Width && ph * TILE + tx < Width) ? M[Row * Width + ph * TILE + tx] : 0.0f;
        Nds[ty][tx] = (ph * TILE + ty < Width && Col < Width) ? N[(ph * TILE + ty) * Width + Col] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) Pvalue += Mds[ty][k] * Nds[k][tx];
        __syncthreads();
    }
    if (Row < Width && Col < Width) P[Row * Width + Col] = Pvalue;
}

// Reverse each block's segment through dynamic shared memory; the second extern array aliases
// the first (as in CUDA): the kernel writes floats through `buf` and reads their bits via `bits`.
extern "C" __global__ void reverse_blocks(const float* in, float* out, unsigned* out_bits, int n) {
    extern __shared__ float buf[];
    extern __shared__ unsigned bits[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);
    if (j < n) {
        out[j] = buf[threadIdx.x];
        out_bits[j] = bits[threadIdx.x];
    }
}

// A shared scalar and a shared counter.
extern "C" __global__ void block_max_count(const int* in, int* block_max, int* count_pos, int n) {
    __shared__ int best;
    __shared__ int positives;
    if (threadIdx.x == 0) { best = -2147483647 - 1; positives = 0; }
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicMax(&best, in[i]);
        if (in[i] > 0) atomicAdd(&positives, 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) { block_max[blockIdx.x] = best; count_pos[blockIdx.x] = positives; }
}

// extern __shared__ at namespace scope, as many CUDA samples write it.
extern __shared__ float stage[];
extern "C" __global__ void scale_staged(const float* in, float* out, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    stage[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    float* p = stage;
    if (i < n) out[i] = p[blockDim.x - 1 - threadIdx.x] * s;
}
