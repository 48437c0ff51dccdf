// Implicit GEMM, step 9: 16 x 8 outputs per thread, 128 threads, tiles brought in by cp.async
// Changed from 07_rsc_order (same RSCK filter, same (r, s) outer and c inner reduction):
//  * register blocking: a block of 128 threads (2 x 2 warps, each a 64 x 64 warp tile of 4 x 8
//    lanes) computes the same 128 x 128 outputs, so each thread computes 16 filters x 8 pixels:
//    128 independent FFMAs per channel from 24 values read from shared memory (07: 64 from 16).
//    Up to 255 registers and 2 blocks (8 warps) per SM: fewer warps, each with more independent
//    FFMAs to issue back to back - the shape of cuDNN's SIMT FP32 implicit GEMM.
//  * the fragments are read as float4s: a thread's filters are 4 consecutive ones every 16, its
//    pixels 4 consecutive ones every 32 (lane offsets below): per instruction a warp reads 4 (broadcast) or 8 distinct 16-byte pieces, one
//    shared-memory wavefront each, no bank conflicts (the thread-tile layout of CUTLASS's
//    "Efficient GEMM in CUDA").
//  * loads go straight from global to shared memory with asynchronous copies (cp.async through
//    the cuda_pipeline.h primitives, CUDA Programming Guide "Asynchronous Data Copies"), STAGES
//    steps in flight: no staging registers, no load latency in the FFMA stream. Input outside the
//    image and channels past C are zero-filled by the copy itself (zfill = its size).
//  * each thread loads one pixel of the im2col tile (its own column: one bounds test per (r, s))
//    for TILE_K channels, and TILE_K / 4 float4s of the filter tile.
// Model: per channel and warp, 6 LDS.128 for 128 FFMAs per thread; one __syncthreads per
// TILE_K channels.
// Expect: the FMA pipe busier than in 07, with half the warps: at or past cuDNN FP32. The defines
// are the knobs to try: STAGES 2 to 6, TILE_K 8, 16 or 32 (launch with STAGES x TILE_K x 1 KB of
// shared memory), THREAD_M 8 (8 x 16 per thread), MIN_BLOCKS 3 (at most 168 registers, 12 warps per SM).
#include <cuda_pipeline.h>

#ifndef TILE_K
#define TILE_K 16       // channels per step, for one (r, s)
#endif
#ifndef STAGES
#define STAGES 3        // steps whose tiles are in shared memory or on their way
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2    // blocks per SM the registers must allow: 2 x 128 threads x 255 registers
#endif
#define TILE_M 128      // filters per block (GEMM rows)
#define TILE_N 128      // output pixels per block (GEMM columns)
#define THREADS 128     // 2 x 2 warps, each a 64 x 64 warp tile
#ifndef THREAD_M
#define THREAD_M 16     // filters per thread; 8 gives 8 x 16 (lanes 8 x 4 instead of 4 x 8)
#endif
#define THREAD_N (128 / THREAD_M)     // pixels per thread
#define LANES_M (64 / THREAD_M)       // a warp's lanes along the filters (x LANES_N along pixels)
#define LANES_N (32 / LANES_M)

// filter_t[((r * S + s) * C + c) * Kp + k] = filter[((k * C + c) * R + r) * S + s] for k < K, 0 for
// K <= k < Kp (the row length, a multiple of 4). One thread per element of filter_t.
extern "C" __global__ void FilterToRSCKKernel(const float* filter, float* filter_t, int K, int C, int RS, int Kp) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < RS * C * Kp) {
        int k = i % Kp, c = i / Kp % C, rs = i / (Kp * C);
        filter_t[i] = k < K ? filter[(k * C + c) * RS + rs] : 0.0f;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
ImplicitGemmRegisterBlockingKernel(const float* __restrict__ input, const float* __restrict__ filter_t,
                                   float* __restrict__ output, int N, int C, int H, int W, int K, int R,
                                   int S, int stride, int pad, int Oh, int Ow, int Kp) {
    static_assert(TILE_N == THREADS && TILE_M == 32 * 4 && TILE_K % 4 == 0,
                  "per step a thread copies one pixel's TILE_K channels and TILE_K / 4 filter float4s");
    // Dynamic shared memory, STAGES x TILE_K x (TILE_M + TILE_N) floats: past 48 KB when the
    // stages or the channels per step grow (the launch opts in).
    extern __shared__ float4 tiles_s[];
    float (*filter_s)[TILE_K][TILE_M] = reinterpret_cast<float (*)[TILE_K][TILE_M]>(tiles_s);  // [stage][c][k]
    float (*input_s)[TILE_K][TILE_N] =                                                         // [stage][c][npq]
        reinterpret_cast<float (*)[TILE_K][TILE_N]>(reinterpret_cast<float*>(tiles_s) + STAGES * TILE_K * TILE_M);
    const int HW = H * W, PQ = Oh * Ow, NPQ = N * PQ;
    const int k0 = blockIdx.y * TILE_M, npq0 = blockIdx.x * TILE_N;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

    // The thread's pixel of the im2col tile: npq0 + tid, whose window's corner is (h0, w0).
    const int npq = npq0 + tid, pq = npq % PQ;
    const int h0 = npq < NPQ ? (pq / Ow) * stride - pad : H;      // past the end: never inside
    const int w0 = (pq % Ow) * stride - pad;
    const int image = npq / PQ * C * HW + h0 * W + w0;            // input index of (n, 0, h0, w0)
    const bool k_inside = k0 + 4 * lane < Kp;

    int r = 0, s = 0, c0 = 0;                     // the step that load_tiles copies next
    int offset = 0;                               // input index of (n, 0, h0 + r, w0 + s)
    bool inside = false;
    auto at_rs = [&]() {
        offset = image + r * W + s;
        inside = (unsigned)(h0 + r) < (unsigned)H && (unsigned)(w0 + s) < (unsigned)W;
    };
    auto advance = [&]() {
        c0 += TILE_K;
        if (c0 >= C) {
            c0 = 0;
            if (++s == S) {
                s = 0;
                ++r;
            }
            at_rs();
        }
    };
    // Copies filter_t[r][s][c0 + warp + 4 i][k0 + 4 lane .. + 3] and im2col[c0 + i][npq0 + tid]:
    // a copy of 0 bytes (zfill = size) where the value is 0.
    auto load_tiles = [&](int stage) {
        const int c_left = C - c0;
        const float* f = filter_t + ((r * S + s) * C + c0 + warp) * Kp + k0 + 4 * lane;
#pragma unroll
        for (int i = 0; i < TILE_K / 4; ++i) {
            bool ok = k_inside && warp + 4 * i < c_left;
            __pipeline_memcpy_async(&filter_s[stage][warp + 4 * i][4 * lane], ok ? f + 4 * i * Kp : filter_t,
                                    16, ok ? 0 : 16);
        }
        const float* x = input + c0 * HW + offset;
#pragma unroll
        for (int i = 0; i < TILE_K; ++i) {
            bool ok = inside && i < c_left;
            __pipeline_memcpy_async(&input_s[stage][i][tid], ok ? x + i * HW : input, 4, ok ? 0 : 4);
        }
    };

    // The thread's filters: k0 + ty + 4 LANES_M m + i; its pixels: npq0 + tx + 4 LANES_N m + j.
    const int ty = (warp / 2) * 64 + lane / LANES_N * 4;
    const int tx = (warp % 2) * 64 + lane % LANES_N * 4;
    float acc[THREAD_M][THREAD_N] = {};
    const int steps = R * S * ((C + TILE_K - 1) / TILE_K);
    at_rs();
#pragma unroll
    for (int stage = 0; stage < STAGES - 1; ++stage) {
        if (stage < steps) {
            load_tiles(stage);
            advance();
        }
        __pipeline_commit();
    }
    for (int step = 0; step < steps; ++step) {
        __pipeline_wait_prior(STAGES - 2);        // this step's copies have landed (this thread's)
        __syncthreads();                          // ... and every thread's; stage (step - 1) is free
        if (step + STAGES - 1 < steps) {
            load_tiles((step + STAGES - 1) % STAGES);
            advance();
        }
        __pipeline_commit();                      // an empty group past the end keeps the count
        const int stage = step % STAGES;
#pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            float a[THREAD_M], b[THREAD_N];
#pragma unroll
            for (int m = 0; m < THREAD_M / 4; ++m) {
                *reinterpret_cast<float4*>(&a[4 * m]) =
                    *reinterpret_cast<const float4*>(&filter_s[stage][kk][ty + 4 * LANES_M * m]);
            }
#pragma unroll
            for (int m = 0; m < THREAD_N / 4; ++m) {
                *reinterpret_cast<float4*>(&b[4 * m]) = *reinterpret_cast<const float4*>(&input_s[stage][kk][tx + 4 * LANES_N * m]);
            }
#pragma unroll
            for (int i = 0; i < THREAD_M; ++i) {
#pragma unroll
                for (int j = 0; j < THREAD_N; ++j) {
                    acc[i][j] += a[i] * b[j];
                }
            }
        }
    }

    // Epilogue: output[n][k][p][q], four consecutive pixels at once where they are in one image
    // (PQ a multiple of 4) and all exist.
#pragma unroll
    for (int m = 0; m < THREAD_N / 4; ++m) {
        const int first = npq0 + tx + 4 * LANES_N * m;
        const bool whole = PQ % 4 == 0 && first + 3 < NPQ;
#pragma unroll
        for (int i = 0; i < THREAD_M; ++i) {
            const int k = k0 + ty + 4 * LANES_M * (i / 4) + i % 4;
            if (k >= K) {
                continue;
            }
            const float* v = &acc[i][4 * m];
            if (whole) {
                *reinterpret_cast<float4*>(&output[(first / PQ * K + k) * PQ + first % PQ]) =
                    make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (first + j < NPQ) {
                        output[((first + j) / PQ * K + k) * PQ + (first + j) % PQ] = v[j];
                    }
                }
            }
        }
    }
}
