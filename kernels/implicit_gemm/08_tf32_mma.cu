// Implicit GEMM, step 8: TF32 tensor cores, mma.sync ("Efficient GEMM in CUDA", CUTLASS docs:
// warp-level GEMMs "may be implemented either by TensorCores issuing mma.sync or wmma instructions")
// Changed from 07_rsc_order: the same tiles, loads and double buffering, but the multiply-adds
// run on the tensor cores. mma.sync.m16n8k8 (TF32 in, FP32 accumulate) has a warp multiply a
// 16 x 8 tile of filter by an 8 x 8 tile of im2col and add the 16 x 8 product into accumulators
// that live in its 32 threads' registers - 1024 multiply-adds per instruction (an FFMA does 32).
// Each thread holds fixed pieces of the operands ("fragments", PTX ISA 9.7.13.4.9): with
// g = lane / 4, t = lane % 4, a: A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4];
// b: B[t][g], B[t + 4][g]; accumulators: D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1].
// A warp computes a 64 x 32 piece of the 128 x 128 block tile: 4 x 4 mma tiles, 16 per k8 step.
// TF32 keeps float32's 8 exponent bits but only 10 of its 23 mantissa bits: the inputs are
// rounded (cvt.rna.tf32.f32) when they are stored to shared memory, so results carry a relative
// error of about 2^-10 per product (~1e-3), not float32's 2^-24: a different tolerance.
// The shared rows are padded by 8 words so that each fragment load (lanes t * row + g) hits 32
// different banks. Inline PTX needs no header (NVRTC compiles it as is); the CPU engine cannot
// run it, so this variant is GPU-only (the tests run it on the CPU engine with mma emulated).
// Expect: well past the FP32 variants (the H100's dense TF32 peak is ~7x its FP32 peak); at
// least 0.5x cuDNN TF32 (torch conv2d). Recorded: about twice the FP32 variant before it, 1.96x
// 07_rsc_order on the H100 and 2.13x on the H200; 0.57x cuDNN TF32 (torch conv2d) on the H100,
// 0.59x on the H200.
#define TILE_M 128      // filters per block (GEMM rows)
#define TILE_N 128      // output pixels per block (GEMM columns)
#define TILE_K 16       // channels per step, for one (r, s): two mma k8 steps
#define THREADS 256     // 8 warps: 2 (filters) x 4 (pixels), each 64 x 32
#define PAD 8           // shared row pad: conflict-free fragment loads

// The two PTX instructions this kernel needs.
__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned t;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(t) : "f"(x));   // round to nearest, ties away from 0
    return t;
}

// d += a * b for a 16 x 8 (a) by 8 x 8 (b) tile; a and b hold TF32 bit patterns, fragments as above.
__device__ __forceinline__ void mma_16x8x8(float* d, const unsigned* a, const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// As in 07: filter_t[((r * S + s) * C + c) * Kp + k] = filter[k][c][r][s], 0 for K <= k < Kp.
extern "C" __global__ void FilterToRSCKKernel(const float* filter, float* filter_t, int K, int C, int RS, int Kp) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < RS * C * Kp) {
        int k = i % Kp, c = i / Kp % C, rs = i / (Kp * C);
        filter_t[i] = k < K ? filter[(k * C + c) * RS + rs] : 0.0f;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)
ImplicitGemmTf32Kernel(const float* __restrict__ input, const float* __restrict__ filter_t,
                       float* __restrict__ output, int N, int C, int H, int W, int K, int R, int S,
                       int stride, int pad, int Oh, int Ow, int Kp) {
    static_assert(TILE_M == 4 * 32 && TILE_K == 2 * (THREADS / 32) && TILE_K * TILE_N == 8 * THREADS,
                  "per step a thread loads 2 float4s of the filter tile and 8 floats of the im2col tile");
    __shared__ __align__(16) unsigned filter_s[2][TILE_K][TILE_M + PAD];   // TF32 bits, [buffer][c][k]
    __shared__ __align__(16) unsigned input_s[2][TILE_K][TILE_N + PAD];    // TF32 bits, [buffer][c][npq]
    __shared__ int4 pixel_s[TILE_N];
    const int HW = H * W, PQ = Oh * Ow, NPQ = N * PQ;
    const int k0 = blockIdx.y * TILE_M, npq0 = blockIdx.x * TILE_N;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (tid < TILE_N) {
        int npq = npq0 + tid, pq = npq % PQ;
        int h0 = npq < NPQ ? (pq / Ow) * stride - pad : H;
        int w0 = (pq % Ow) * stride - pad;
        pixel_s[tid] = make_int4(npq / PQ * C * HW + h0 * W + w0, h0, w0, 0);
    }
    __syncthreads();

    // Loading: exactly as in 07, except that store_tiles rounds to TF32.
    int r = 0, s = 0, c0 = 0;
    int offset[4];
    unsigned inside = 0;
    auto at_rs = [&]() {
        inside = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int4 pixel = pixel_s[lane + 32 * j];
            offset[j] = pixel.x + r * W + s;
            bool in = r < R && (unsigned)(pixel.y + r) < (unsigned)H && (unsigned)(pixel.z + s) < (unsigned)W;
            inside |= (unsigned)in << j;
        }
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
    const bool k_inside = k0 + 4 * lane < Kp;
    float4 a_next[2];
    float b_next[8];
    auto load_tiles = [&]() {
        int c_left = r < R ? C - c0 : 0;
        const float4* f = reinterpret_cast<const float4*>(filter_t + ((r * S + s) * C + c0 + warp) * Kp + k0) + lane;
        const float* x = input + (c0 + warp) * HW;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            a_next[i] = (k_inside && warp + 8 * i < c_left) ? f[8 * i * (Kp / 4)] : make_float4(0, 0, 0, 0);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                bool ok = (inside >> j & 1) && warp + 8 * i < c_left;
                b_next[i * 4 + j] = ok ? x[offset[j] + 8 * i * HW] : 0.0f;
            }
        }
    };
    auto store_tiles = [&](int buffer) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            *reinterpret_cast<uint4*>(&filter_s[buffer][warp + 8 * i][4 * lane]) =
                make_uint4(to_tf32(a_next[i].x), to_tf32(a_next[i].y), to_tf32(a_next[i].z), to_tf32(a_next[i].w));
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                input_s[buffer][warp + 8 * i][lane + 32 * j] = to_tf32(b_next[i * 4 + j]);
            }
        }
    };

    // Computing: warp (wm, wn) covers filters wm * 64 + [0, 64) and pixels wn * 32 + [0, 32) of
    // the tile: mma tiles (mi, nj), mi < 4, nj < 4, with accumulators acc[mi][nj][0..3].
    const int wm = warp / 4, wn = warp % 4, g = lane / 4, t = lane % 4;
    float acc[4][4][4] = {};
    const int steps = R * S * ((C + TILE_K - 1) / TILE_K);
    at_rs();
    load_tiles();
    store_tiles(0);
    __syncthreads();
    advance();
    int buffer = 0;
    for (int step = 0; step < steps; ++step) {
        load_tiles();                             // the next step's, unconditionally (see 06)
#pragma unroll
        for (int kk = 0; kk < TILE_K; kk += 8) {
            unsigned a[4][4], b[4][2];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
                int m = wm * 64 + mi * 16 + g;
                a[mi][0] = filter_s[buffer][kk + t][m];
                a[mi][1] = filter_s[buffer][kk + t][m + 8];
                a[mi][2] = filter_s[buffer][kk + t + 4][m];
                a[mi][3] = filter_s[buffer][kk + t + 4][m + 8];
            }
#pragma unroll
            for (int nj = 0; nj < 4; ++nj) {
                int n = wn * 32 + nj * 8 + g;
                b[nj][0] = input_s[buffer][kk + t][n];
                b[nj][1] = input_s[buffer][kk + t + 4][n];
            }
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
                for (int nj = 0; nj < 4; ++nj) {
                    mma_16x8x8(acc[mi][nj], a[mi], b[nj]);
                }
            }
        }
        store_tiles(buffer ^ 1);
        __syncthreads();
        buffer ^= 1;
        advance();
    }

    // Epilogue: accumulator e of tile (mi, nj) is D[g + 8 (e / 2)][2t + e % 2] of that tile.
#pragma unroll
    for (int nj = 0; nj < 4; ++nj) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            int npq = npq0 + wn * 32 + nj * 8 + 2 * t + e;
            if (npq >= NPQ) {
                continue;
            }
            int out = npq / PQ * K * PQ + npq % PQ;                     // output[n][0][p][q]
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    int k = k0 + wm * 64 + mi * 16 + g + 8 * half;
                    if (k < K) {
                        output[out + k * PQ] = acc[mi][nj][2 * half + e];
                    }
                }
            }
        }
    }
}
