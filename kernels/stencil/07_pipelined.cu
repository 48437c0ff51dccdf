// Beyond the book: a software pipeline - loads issued PREFETCH planes ahead, one barrier per plane
// Changed from 06_vectorized: in 06 every plane's step loads plane i + 1 and its halo and then
// waits for them before the barrier and the arithmetic, so each step pays a full memory latency
// and only other blocks' loads fill it. Here the loads for plane i + 1 + PREFETCH are issued at
// the start of step i and used PREFETCH steps later, kept meanwhile in a small queue of
// registers, ahead[]. With PREFETCH = 2 each thread has two planes' float4s (32 bytes) in flight:
// at 4 blocks of 256 threads per SM (60 registers each) that is 32 KiB per SM, what the copy
// kernel keeps in flight (one float4 for each of 2048 threads) - Little's law: bytes in flight =
// bandwidth x latency, the amount the memory system needs to run at full speed.
// The current plane is double-buffered in shared memory: step i reads buffer i % 2 while the
// threads write plane i + 1 into the other one, so the second barrier of 04-06 (wait until
// everyone has read the plane before overwriting it) is gone: one __syncthreads() per plane.
// A block walks 64 planes instead of 32: the two planes it reads beyond its own (z - 1 before the
// first, z + 1 after the last) are re-read from DRAM by the neighbouring block, 6% more reads at
// 32 planes, 3% at 64; at 512^3 that still leaves 2048 blocks, about 4 rounds of 4 blocks per SM.
// Book's model (loads only): a 128 x 8 x 64 tile loads 1.30 inputs per output: 2.51 OP/B.
// Expect: the best of the chapter, near the copy roof (the target: at least 0.85x copy, counting
// 8 bytes - one read, one write - per point). Recorded: 0.90x copy on the H100, 0.81x on the H200.
#ifndef BLOCK_X
#define BLOCK_X 32   // threads in x, a power of two in [2, 32]; the tile is 4 * BLOCK_X points wide
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8    // threads (rows) in y, at least 2; launch with blockDim = (BLOCK_X, BLOCK_Y, 1)
#endif
#ifndef Z_TILE
#define Z_TILE 64    // planes each block walks through
#endif
#ifndef PREFETCH
#define PREFETCH 2   // steps between issuing a plane's loads and using them (1 or more)
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

// What one thread loads of one plane: its 4 points, its 4 points of a halo row (threads of the
// tile's first and last rows) and one point past the tile's left or right end (first and last
// lane of a row). Loads that are not needed, or past the grid, are not made: 0.
struct PlaneLoads {
    float4 center;
    float4 halo;
    float edge;
};

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
PipelinedStencilKernel(const float* __restrict__ in, float* __restrict__ out, unsigned int N,
                       float c0, float c1, float c2, float c3, float c4, float c5, float c6) {
    static_assert(BLOCK_X >= 2 && BLOCK_X <= 32 && (BLOCK_X & (BLOCK_X - 1)) == 0,
                  "BLOCK_X must be a power of two in [2, 32]");
    static_assert(BLOCK_Y >= 2, "BLOCK_Y must be at least 2 (a thread loads at most one halo row)");
    static_assert(BLOCK_X * BLOCK_Y % 32 == 0, "the block must be whole warps (the shuffles use every lane)");
    __shared__ float4 inCurr_s[2][BLOCK_Y + 2][BLOCK_X];   // plane i in buffer i % 2, halo rows 0 and BLOCK_Y + 1
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
    unsigned int haloRow = ty == 0 ? 0 : BLOCK_Y + 1;
    unsigned int haloP = ty == 0 ? p - N : p + N;
    bool xLeft = tx == 0 && k >= 1 && j < N;               // point k - 1
    bool xRight = tx == BLOCK_X - 1 && k + 4 < N && j < N;  // point k + 4
    unsigned int edgeP = tx == 0 ? p - 1 : p + 4;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    // Plane i's loads: the centre up to plane iEnd (the last one is only the z + 1 neighbour),
    // halo and edge only for the planes this block computes.
    auto loadPlane = [&](unsigned int i) {
        PlaneLoads l = {zero, zero, 0.0f};
        if (inPlane && i <= iEnd && i < N) {
            l.center = load4(in, i * plane + p, count, vec);
        }
        if (i < iEnd) {
            if (top || bottom) {
                l.halo = load4(in, i * plane + haloP, count, vec);
            }
            if (xLeft || xRight) {
                l.edge = in[i * plane + edgeP];
            }
        }
        return l;
    };

    // ahead[d] holds plane i + d: ahead[0] is the plane computed in this step, ahead[1] its z + 1
    // neighbour (and the plane written to shared memory for the next step), the rest in flight.
    float4 inPrev = (inPlane && iStart >= 1) ? load4(in, (iStart - 1) * plane + p, count, vec) : zero;
    PlaneLoads ahead[PREFETCH + 1];
#pragma unroll
    for (int d = 0; d <= PREFETCH; ++d) {
        ahead[d] = loadPlane(iStart + d);
    }
    inCurr_s[0][ty + 1][tx] = ahead[0].center;
    if (ty == 0 || ty == BLOCK_Y - 1) {
        inCurr_s[0][haloRow][tx] = ahead[0].halo;
    }
    unsigned int b = 0;   // the buffer that holds plane i
    for (unsigned int i = iStart; i < iEnd; ++i) {
        PlaneLoads fresh = loadPlane(i + PREFETCH + 1);   // in flight for the next PREFETCH steps
        __syncthreads();   // plane i is in buffer b, and nobody reads buffer 1 - b (plane i - 1) any more
        inCurr_s[1 - b][ty + 1][tx] = ahead[1].center;     // plane i + 1, for the next step
        if (ty == 0 || ty == BLOCK_Y - 1) {
            inCurr_s[1 - b][haloRow][tx] = ahead[1].halo;
        }
        float4 c = ahead[0].center, zm = inPrev, zp = ahead[1].center;
        float fromLeft = __shfl_up_sync(FULL_MASK, c.w, 1, BLOCK_X);     // lane - 1's last point
        float fromRight = __shfl_down_sync(FULL_MASK, c.x, 1, BLOCK_X);  // lane + 1's first point
        if (tx == 0) fromLeft = ahead[0].edge;
        if (tx == BLOCK_X - 1) fromRight = ahead[0].edge;
        if (inPlane) {
            float4 ym = inCurr_s[b][ty][tx], yp = inCurr_s[b][ty + 2][tx];
            bool interiorIJ = interiorJ && i >= 1 && i < N - 1;
            float4 r;
            r.x = point(interiorIJ && k >= 1 && k + 0 < N - 1, c.x, fromLeft, c.y, ym.x, yp.x, zm.x, zp.x,
                        c0, c1, c2, c3, c4, c5, c6);
            r.y = point(interiorIJ && k + 1 < N - 1, c.y, c.x, c.z, ym.y, yp.y, zm.y, zp.y,
                        c0, c1, c2, c3, c4, c5, c6);
            r.z = point(interiorIJ && k + 2 < N - 1, c.z, c.y, c.w, ym.z, yp.z, zm.z, zp.z,
                        c0, c1, c2, c3, c4, c5, c6);
            r.w = point(interiorIJ && k + 3 < N - 1, c.w, c.z, fromRight, ym.w, yp.w, zm.w, zp.w,
                        c0, c1, c2, c3, c4, c5, c6);
            store4(out, i * plane + p, count, vec, r);
        }
        inPrev = c;
#pragma unroll
        for (int d = 0; d < PREFETCH; ++d) {
            ahead[d] = ahead[d + 1];
        }
        ahead[PREFETCH] = fresh;
        b = 1 - b;
    }
}
