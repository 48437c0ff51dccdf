// Beyond the book: vectorized loads and stores, four points per thread
// Changed from 05_aligned_tiles: each thread owns 4 consecutive points of a row and moves them with
// one 16-byte load or store (float4) instead of four 4-byte ones, so a warp covers 128 floats
// (512 bytes) of a row per instruction: a quarter of 05's load and store instructions, and four
// times the bytes in flight per thread while a plane's step waits on memory. The x neighbours
// are in the thread's own registers, except the left of its first point and the right of its
// last: the neighbouring lanes hold those, and hand them over with a warp shuffle; the lanes at
// the tile's two ends load them from global memory. Only the y neighbours still go through
// shared memory (one float4 per thread, conflict-free).
// A float4 needs a 16-byte aligned address: when N is not a multiple of 4 (or an array is not
// aligned) each thread falls back to up to four scalar loads and stores - same kernel, any N.
// Book's model (loads only): a 128 x 8 x 32 tile loads 1.33 inputs per output: 2.45 OP/B.
// Expect: close to the copy roof; what is left is each plane's step waiting for its own loads.
#ifndef BLOCK_X
#define BLOCK_X 32   // threads in x, a power of two <= 32; the tile is 4 * BLOCK_X points wide
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8    // threads (rows) in y; launch with blockDim = (BLOCK_X, BLOCK_Y, 1)
#endif
#ifndef Z_TILE
#define Z_TILE 32    // planes each block walks through
#endif
#define FULL_MASK 0xffffffffu

// in[offset .. offset + 3], of which the first `count` exist (the rest of the row is shorter):
// one 16-byte load when `vec`, else up to four scalar ones; points that do not exist read as 0.
__device__ __forceinline__ float4 load4(const float* in, unsigned int offset, unsigned int count, bool vec) {
    if (vec) {
        return *reinterpret_cast<const float4*>(in + offset);
    }
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (count > 0) v.x = in[offset];
    if (count > 1) v.y = in[offset + 1];
    if (count > 2) v.z = in[offset + 2];
    if (count > 3) v.w = in[offset + 3];
    return v;
}

__device__ __forceinline__ void store4(float* out, unsigned int offset, unsigned int count, bool vec, float4 v) {
    if (vec) {
        *reinterpret_cast<float4*>(out + offset) = v;
        return;
    }
    if (count > 0) out[offset] = v.x;
    if (count > 1) out[offset + 1] = v.y;
    if (count > 2) out[offset + 2] = v.z;
    if (count > 3) out[offset + 3] = v.w;
}

// One output point: the seven-point stencil if it is interior, else its unchanged value.
__device__ __forceinline__ float point(bool interior, float center, float xm, float xp, float ym, float yp,
                                       float zm, float zp, float c0, float c1, float c2, float c3,
                                       float c4, float c5, float c6) {
    return interior ? c0*center + c1*xm + c2*xp + c3*ym + c4*yp + c5*zm + c6*zp : center;
}

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
VectorizedStencilKernel(const float* __restrict__ in, float* __restrict__ out, unsigned int N,
                        float c0, float c1, float c2, float c3, float c4, float c5, float c6) {
    static_assert(BLOCK_X <= 32 && (BLOCK_X & (BLOCK_X - 1)) == 0, "BLOCK_X must be a power of two <= 32");
    static_assert(BLOCK_X * BLOCK_Y % 32 == 0, "the block must be whole warps (the shuffles use every lane)");
    __shared__ float4 inCurr_s[BLOCK_Y + 2][BLOCK_X];   // the plane's rows, halo rows 0 and BLOCK_Y + 1
    unsigned int tx = threadIdx.x, ty = threadIdx.y;
    unsigned int k = (blockIdx.x * BLOCK_X + tx) * 4;     // this thread's first point in x
    unsigned int j = blockIdx.y * BLOCK_Y + ty;
    unsigned int iStart = blockIdx.z * Z_TILE;
    unsigned int iEnd = iStart + Z_TILE < N ? iStart + Z_TILE : N;
    unsigned int plane = N * N;
    unsigned int p = j * N + k;
    bool vec = N % 4 == 0 && (size_t)in % 16 == 0 && (size_t)out % 16 == 0;
    bool inPlane = j < N && k < N;
    unsigned int count = inPlane ? (N - k < 4 ? N - k : 4) : 0;   // how many of the 4 points exist
    bool interiorJ = j >= 1 && j < N - 1;
    // Halo duties (a missing neighbour is only needed by a boundary point, which ignores it).
    bool top = ty == 0 && j >= 1 && k < N;                 // row j - 1, this thread's columns
    bool bottom = ty == BLOCK_Y - 1 && j + 1 < N && k < N;  // row j + 1
    bool xLeft = tx == 0 && k >= 1 && j < N;               // point k - 1
    bool xRight = tx == BLOCK_X - 1 && k + 4 < N && j < N;  // point k + 4
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    float4 inPrev = zero, inCurr = zero, inNext = zero;
    if (inPlane) {
        if (iStart >= 1) {
            inPrev = load4(in, (iStart - 1) * plane + p, count, vec);
        }
        inCurr = load4(in, iStart * plane + p, count, vec);
    }
    for (unsigned int i = iStart; i < iEnd; ++i) {
        if (inPlane && i + 1 < N) {
            inNext = load4(in, (i + 1) * plane + p, count, vec);
        }
        const float* in_i = in + i * plane;
        float left = xLeft ? in_i[p - 1] : 0.0f;
        float right = xRight ? in_i[p + 4] : 0.0f;
        inCurr_s[ty + 1][tx] = inCurr;
        if (ty == 0) {
            inCurr_s[0][tx] = top ? load4(in_i, p - N, count, vec) : zero;
        }
        if (ty == BLOCK_Y - 1) {
            inCurr_s[BLOCK_Y + 1][tx] = bottom ? load4(in_i, p + N, count, vec) : zero;
        }
        __syncthreads();   // (A) the plane and its halo rows are in inCurr_s
        float fromLeft = 0.0f, fromRight = 0.0f;   // x - 1 of the first point, x + 1 of the last
        // BEGIN SOLUTION
        fromLeft = __shfl_up_sync(FULL_MASK, inCurr.w, 1, BLOCK_X);     // lane - 1's last point
        fromRight = __shfl_down_sync(FULL_MASK, inCurr.x, 1, BLOCK_X);  // lane + 1's first point
        if (tx == 0) fromLeft = left;
        if (tx == BLOCK_X - 1) fromRight = right;
        // END SOLUTION
        if (inPlane) {
            float4 ym = inCurr_s[ty][tx], yp = inCurr_s[ty + 2][tx];
            bool interiorIJ = interiorJ && i >= 1 && i < N - 1;
            float4 r;
            r.x = point(interiorIJ && k >= 1 && k + 0 < N - 1, inCurr.x, fromLeft, inCurr.y, ym.x, yp.x,
                        inPrev.x, inNext.x, c0, c1, c2, c3, c4, c5, c6);
            r.y = point(interiorIJ && k + 1 < N - 1, inCurr.y, inCurr.x, inCurr.z, ym.y, yp.y,
                        inPrev.y, inNext.y, c0, c1, c2, c3, c4, c5, c6);
            r.z = point(interiorIJ && k + 2 < N - 1, inCurr.z, inCurr.y, inCurr.w, ym.z, yp.z,
                        inPrev.z, inNext.z, c0, c1, c2, c3, c4, c5, c6);
            r.w = point(interiorIJ && k + 3 < N - 1, inCurr.w, inCurr.z, fromRight, ym.w, yp.w,
                        inPrev.w, inNext.w, c0, c1, c2, c3, c4, c5, c6);
            store4(out, i * plane + p, count, vec, r);
        }
        __syncthreads();   // (B) everyone has read inCurr_s before it is overwritten
        inPrev = inCurr;
        inCurr = inNext;
    }
}
