// Beyond the book: temporal blocking - TIME_STEPS sweeps per pass over memory
// Changed from 07_pipelined: 07 is bound by one sweep's traffic (read the grid, write it); a time
// loop of T sweeps moves the grid through DRAM 2T times. Here a block reads its tile once and
// applies the stencil TIME_STEPS times before writing: PMPP's register tiling (8.5) carried
// over T steps, as in the 2.5D/3.5D blocking of Nguyen et al. (SC'10). Each thread owns 4 points
// of a row, in every level t = 0..T (level 0: the input, level t: after t sweeps). Walking z, the
// step that loads input plane s computes level t's plane s - t from level t - 1's planes s - t - 1,
// s - t and s - t + 1, all three in the thread's registers (z neighbours, as in 04); the x
// neighbours come by shuffles, the y neighbours from level t - 1's plane in shared memory. Every
// level's y neighbours were computed in the previous step, so one barrier per step serves all
// levels (the planes are double-buffered, as in 07).
// The price is a halo: level t is right only where its inputs were, one point less on each side
// per level, so a block reads a tile T points wider on every side than the one it writes (x: one
// lane of 4 points each side, so T <= 4; y: T rows each side; z: T planes before and after).
// Warps outside a level's valid rows skip it; the x halo and the tiles that overhang the grid
// are computed for nothing (at 512^3 with the defaults about 1.5x the useful work). Boundary
// points keep their value at every step; only threads on the grid's faces pay for that test.
// The defaults, 16 x 32 threads (a 64 x 32 tile, 2 rows per warp) and T = 4, were the fastest
// tried on an H100 within the 64 KiB of shared memory every targeted GPU allows: 32 rows halve
// the y halo's share of 16 rows, and 8-wide rows (BLOCK_X = 8) lose more to the x halo.
// Book's model (loads only): a 64 x 32 tile writing 56 x 24 x 128 outputs per T = 4 steps loads
// 0.40 inputs per output and step: 8.0 OP/B, beyond the 3.25 no single sweep can exceed.
// Expect: DRAM no longer the limit (a third of its bandwidth used); the SM's instruction issue
// is: 103 registers a thread leave 16 warps per SM, too few to hide the shared-memory and
// shuffle latencies. The target: an effective bandwidth (T sweeps' 8 bytes per point over the
// time) of at least 1.8x copy on the H100, where the defaults were tuned. Recorded: 1.85x copy
// on the H100, 1.34x on the H200 - the same time on both (the SMs set it), against the H200's
// faster memory.
#ifndef BLOCK_X
#define BLOCK_X 16       // threads in x, a power of two in [4, 32]; the tile is 4 * BLOCK_X points wide
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 32       // rows of the tile (its outputs: BLOCK_Y - 2 * TIME_STEPS); blockDim = (BLOCK_X, BLOCK_Y, 1)
#endif
#ifndef Z_TILE
#define Z_TILE 128       // planes each block writes
#endif
#ifndef TIME_STEPS
#define TIME_STEPS 4     // sweeps per pass, 1 to 4; launch with TIME_STEPS * 2 * BLOCK_Y * BLOCK_X * 16 bytes of shared memory
#endif
#ifndef PREFETCH
#define PREFETCH 2       // steps between issuing an input plane's load and using it (1 or more)
#endif
#define FULL_MASK 0xffffffffu

// in[offset .. offset + 3], of which the first `count` exist: one 16-byte load when `vec`, else
// up to four scalar ones; points that do not exist read as 0.
__device__ __forceinline__ float4 load4(const float* in, unsigned int offset, int count, bool vec) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (count == 4 && vec) {
        return *reinterpret_cast<const float4*>(in + offset);
    }
    if (count > 0) v.x = in[offset];
    if (count > 1) v.y = in[offset + 1];
    if (count > 2) v.z = in[offset + 2];
    if (count > 3) v.w = in[offset + 3];
    return v;
}

__device__ __forceinline__ void store4(float* out, unsigned int offset, int count, bool vec, float4 v) {
    if (count == 4 && vec) {
        *reinterpret_cast<float4*>(out + offset) = v;
        return;
    }
    if (count > 0) out[offset] = v.x;
    if (count > 1) out[offset + 1] = v.y;
    if (count > 2) out[offset + 2] = v.z;
    if (count > 3) out[offset + 3] = v.w;
}

// The seven-point stencil at one point, boundary or not (boundary points are put back after).
__device__ __forceinline__ float seven(float center, float xm, float xp, float ym, float yp, float zm, float zp,
                                       float c0, float c1, float c2, float c3, float c4, float c5, float c6) {
    return c0*center + c1*xm + c2*xp + c3*ym + c4*yp + c5*zm + c6*zp;
}

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
TemporalBlockingStencilKernel(const float* __restrict__ in, float* __restrict__ out, unsigned int N,
                              float c0, float c1, float c2, float c3, float c4, float c5, float c6) {
    static_assert(BLOCK_X >= 4 && BLOCK_X <= 32 && (BLOCK_X & (BLOCK_X - 1)) == 0,
                  "BLOCK_X must be a power of two in [4, 32]");
    static_assert(BLOCK_X * BLOCK_Y % 32 == 0, "the block must be whole warps (the shuffles use every lane)");
    static_assert(TIME_STEPS >= 1 && TIME_STEPS <= 4, "TIME_STEPS must be 1 to 4: the x halo is one lane of 4 points");
    static_assert(BLOCK_Y > 2 * TIME_STEPS, "BLOCK_Y must exceed 2 * TIME_STEPS: the tile keeps T halo rows on each side");
    constexpr int T = TIME_STEPS;
    constexpr int ROWS_PER_WARP = 32 / BLOCK_X;
    constexpr int PLANE_S = BLOCK_Y * BLOCK_X;      // float4s in one level's plane
    // planes_s[buffer][level][row][lane]: level L's plane, for the y neighbours of level L + 1
    extern __shared__ float4 planes_s[];

    const int n = (int)N;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int k = (int)blockIdx.x * (4 * BLOCK_X - 8) - 4 + 4 * tx;   // first of this thread's 4 points
    const int j = (int)blockIdx.y * (BLOCK_Y - 2 * T) - T + ty;
    const int zStart = (int)blockIdx.z * Z_TILE;
    const int zEnd = zStart + Z_TILE < n ? zStart + Z_TILE : n;
    const unsigned int plane = N * N;
    const bool inPlane = j >= 0 && j < n && k >= 0 && k < n;
    const int count = inPlane ? (n - k < 4 ? n - k : 4) : 0;          // how many of the 4 points exist
    const unsigned int p = inPlane ? (unsigned int)j * N + (unsigned int)k : 0u;
    const bool vec = N % 4 == 0 && (size_t)in % 16 == 0 && (size_t)out % 16 == 0;
    const bool interiorJ = j >= 1 && j < n - 1;
    // Whether each of the 4 points (k, k + 1, k + 2, k + 3) is inside in x and y.
    const bool inside0 = interiorJ && k >= 1 && k < n - 1;
    const bool inside1 = interiorJ && k + 1 >= 1 && k + 1 < n - 1;
    const bool inside2 = interiorJ && k + 2 >= 1 && k + 2 < n - 1;
    const bool inside3 = interiorJ && k + 3 >= 1 && k + 3 < n - 1;
    const bool allInside = inside0 && inside1 && inside2 && inside3;
    const bool writes = tx >= 1 && tx < BLOCK_X - 1 && ty >= T && ty < BLOCK_Y - T && count > 0;
    // Row 0 and the last row are halo, never right after level 0: their missing neighbour is
    // replaced by their own row.
    float4* const mine_s = planes_s + ty * BLOCK_X + tx;
    const float4* const above_s = planes_s + (ty > 0 ? ty - 1 : ty) * BLOCK_X + tx;
    const float4* const below_s = planes_s + (ty < BLOCK_Y - 1 ? ty + 1 : ty) * BLOCK_X + tx;
    const int warpFirstRow = (ty * BLOCK_X + tx) / 32 * ROWS_PER_WARP;
    const int warpLastRow = warpFirstRow + ROWS_PER_WARP - 1;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    // Level t is right on rows [t, BLOCK_Y - t) and planes [zStart - T + t, zEnd + T - t): the
    // steps [firstStep[t], endStep[t]) compute those planes (level t's plane i in step i + t),
    // none for a warp with none of those rows.
    bool warpComputes[T + 1];
    int firstStep[T + 1], endStep[T + 1];
#pragma unroll
    for (int t = 0; t <= T; ++t) {
        warpComputes[t] = warpLastRow >= t && warpFirstRow < BLOCK_Y - t;
        const int first = zStart - T + t > 0 ? zStart - T + t : 0;
        const int end = zEnd + T - t < n ? zEnd + T - t : n;
        firstStep[t] = first + t;
        endStep[t] = warpComputes[t] ? end + t : first + t;
    }
    auto loadPlane = [&](int i) { return i < n ? load4(in, (unsigned int)i * plane + p, count, vec) : zero; };

    // Level L's planes s - L - 2, s - L - 1 and s - L in the step that loads input plane s.
    float4 zm[T], center[T], zp[T + 1];
#pragma unroll
    for (int level = 0; level < T; ++level) {
        zm[level] = zero;
        center[level] = zero;
    }
    const int sFirst = zStart - T > 0 ? zStart - T : 0;
    const int sEnd = zEnd + T;         // the step that computes level T's plane zEnd - 1, plus one
    float4 ahead[PREFETCH + 1];
#pragma unroll
    for (int d = 0; d <= PREFETCH; ++d) {
        ahead[d] = loadPlane(sFirst + d);
    }

    // The step that loads input plane s, its planes in shared buffer b (a constant where called).
    auto step = [&](int s, int b) {
        float4 fresh = loadPlane(s + PREFETCH + 1);      // in flight for the next PREFETCH steps
#pragma unroll
        for (int level = 0; level < T; ++level) {
            if (warpComputes[level]) {
                mine_s[(b * T + level) * PLANE_S] = center[level];
            }
        }
        __syncthreads();   // this step's planes are in buffer b; nobody reads buffer 1 - b any more
        zp[0] = ahead[0];
#pragma unroll
        for (int t = 1; t <= T; ++t) {
            if (s >= firstStep[t] && s < endStep[t]) {
                const int i = s - t;                     // the plane level t computes
                const float4 c = center[t - 1], below = zm[t - 1], above = zp[t - 1];
                const float4 ym = above_s[(b * T + t - 1) * PLANE_S];
                const float4 yp = below_s[(b * T + t - 1) * PLANE_S];
                const float fromLeft = __shfl_up_sync(FULL_MASK, c.w, 1, BLOCK_X);
                const float fromRight = __shfl_down_sync(FULL_MASK, c.x, 1, BLOCK_X);
                float4 r;
                r.x = seven(c.x, fromLeft, c.y, ym.x, yp.x, below.x, above.x, c0, c1, c2, c3, c4, c5, c6);
                r.y = seven(c.y, c.x, c.z, ym.y, yp.y, below.y, above.y, c0, c1, c2, c3, c4, c5, c6);
                r.z = seven(c.z, c.y, c.w, ym.z, yp.z, below.z, above.z, c0, c1, c2, c3, c4, c5, c6);
                r.w = seven(c.w, c.z, fromRight, ym.w, yp.w, below.w, above.w, c0, c1, c2, c3, c4, c5, c6);
                // Boundary points keep their value: only threads on the grid's faces and the
                // planes 0 and n - 1 take this branch, not one select per point and level.
                if (!allInside || i == 0 || i == n - 1) {
                    const bool interiorI = i >= 1 && i < n - 1;
                    r.x = interiorI && inside0 ? r.x : c.x;
                    r.y = interiorI && inside1 ? r.y : c.y;
                    r.z = interiorI && inside2 ? r.z : c.z;
                    r.w = interiorI && inside3 ? r.w : c.w;
                }
                zp[t] = r;
                if (t == T && writes) {
                    store4(out, (unsigned int)i * plane + p, count, vec, r);
                }
            }
        }
#pragma unroll
        for (int level = 0; level < T; ++level) {
            zm[level] = center[level];
            center[level] = zp[level];
        }
#pragma unroll
        for (int d = 0; d < PREFETCH; ++d) {
            ahead[d] = ahead[d + 1];
        }
        ahead[PREFETCH] = fresh;
    };

    int s = sFirst;
    for (; s + 1 < sEnd; s += 2) {     // two steps per iteration: each buffer's offsets are constants
        step(s, 0);
        step(s + 1, 1);
    }
    if (s < sEnd) {
        step(s, 0);
    }
}
