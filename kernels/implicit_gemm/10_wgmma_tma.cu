// Implicit GEMM, step 10: Hopper's warpgroup MMA (wgmma) fed by the tensor memory accelerator (TMA)
// Changed from 08_tf32_mma: the same 128 x 128 block tile and TF32 arithmetic, but nothing of the
// main loop goes through registers or ordinary loads any more.
// * Loads: a single thread asks the TMA for each stage's two tiles (cp.async.bulk.tensor, PTX
//   ISA "Data Movement and Conversion Instructions"), and they land in shared memory by
//   themselves; an mbarrier counts the bytes and tells the block when a stage is full. Three
//   stages are in flight.
// * Products: the block is one warpgroup (4 warps, 128 threads) that issues wgmma.mma_async
//   m64n128k8 (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions"):
//   a 64 x 128 x 8 product per instruction, 64x the work of 08's m16n8k8 (65,536 multiply-adds
//   against 1,024), with both operands read straight from shared memory through "matrix
//   descriptors" (start address, stride between 8-row groups, swizzle mode).
// * Layouts: TF32 wgmma takes both operands K-major, i.e. the reduction index contiguous. So the
//   filter is rearranged to (r, s) x K x C and the input to NHWC (channels contiguous) by two
//   cheap kernels first - part of the timed run, as cuDNN's own NCHW -> NHWC transform is. Both
//   round to TF32 (cvt.rna) on the way. One stage holds 32 channels of one filter tap (r, s):
//   exactly one 128-byte row per filter and per pixel, stored with the TMA's 128-byte swizzle
//   (16-byte chunk j of row i lands at chunk j ^ (i % 8)), which is the layout wgmma reads
//   without bank conflicts.
// * The im2col gather is a box: the block's 128 pixels are TH output rows x TW output columns
//   of one image, and for tap (r, s) they read the input box shifted by (r - pad, s - pad). A 4D
//   tensor map (C, W, H, N) fetches it; where the box hangs over the image's edge the TMA fills
//   zeros, which is the padding. Strides > 1 are reduced to stride 1 by the transform: it splits
//   the image into stride x stride phases (input row stride * h' + b goes to phase b, row h'),
//   and tap r reads phase (r - pad) mod stride at row offset floor((r - pad) / stride).
// The model: 2 N K Oh Ow C R S FLOP at the H100's dense TF32 rate; the transforms move the input
// twice more (read NCHW, write NHWC). Channels are padded to a multiple of 4 (a TMA row stride
// must be a multiple of 16 bytes), zeros past C; filters and pixels past the tile's edge are
// loaded as zeros or computed and not stored.
// Needs sm_90a (wgmma is not part of plain sm_90): compile with -arch=sm_90a.
// Expect: well past 08 (wgmma keeps the tensor cores busy with operands from shared memory, and
// the TMA frees the threads of all address arithmetic), about cuDNN TF32 or better. Recorded:
// 1.50x 08_tf32_mma on the H100, 1.49x on the H200; 0.85x cuDNN TF32 (torch conv2d) on the H100,
// 0.88x on the H200.
#define TILE_M 128      // filters per block (GEMM rows): two m64 wgmma halves
#define TILE_N 128      // output pixels per block (GEMM columns): TH rows x TW columns
#define TILE_C 32       // channels per stage: 32 TF32 values = one 128-byte swizzled row
#ifndef STAGES
#define STAGES 3        // tiles in flight; 3 x 32 KB lets two blocks share an SM
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2    // resident blocks per SM the registers are budgeted for
#endif
#define THREADS 128     // one warpgroup
#define STAGE_BYTES (TILE_M * TILE_C * 4)             // 16 KB for each operand

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL) && defined(WGMMA_REQUIRED)
#error "wgmma needs the sm_90a target: compile with -arch=sm_90a"
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HAS_WGMMA 1
#endif

// A CUtensorMap (cuda.h): 128 opaque bytes that cuTensorMapEncodeTiled fills on the host.
struct __align__(64) TensorMap {
    unsigned long long words[16];
};

__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned t;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(t) : "f"(x));
    return t;
}

// filter_k[((r * S + s) * K + k) * Cp + c] = tf32(filter[k][c][r][s]), 0 for C <= c < Cp.
extern "C" __global__ void FilterToRSKCKernel(const float* filter, unsigned* filter_k, int K, int C, int RS, int Cp) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < RS * K * Cp) {
        int c = i % Cp, k = i / Cp % K, rs = i / (Cp * K);
        filter_k[i] = c < C ? to_tf32(filter[(k * C + c) * RS + rs]) : 0u;
    }
}

// x_t[((n * stride + bh) * stride + bw) * Hq + h'][w'][c] = tf32(x[n][c][stride h' + bh][stride w' + bw]):
// a 32 x 32 (pixels x channels) tile transposed through shared memory, so that reads run along
// W and writes along C. Block 32 x 8; grid (ceil(W / 32), N * H, ceil(Cp / 32)). Entries no pixel
// maps to (phases past the edge) must be zero beforehand.
extern "C" __global__ void InputToNHWCKernel(const float* x, unsigned* x_t, int N, int C, int H, int W,
                                              int Cp, int stride, int Hq, int Wq) {
    __shared__ unsigned tile[32][33];
    const int w0 = blockIdx.x * 32, n = blockIdx.y / H, h = blockIdx.y % H, c0 = blockIdx.z * 32;
    for (int i = threadIdx.y; i < 32; i += 8) {
        int c = c0 + i, w = w0 + threadIdx.x;
        tile[i][threadIdx.x] = c < C && w < W ? to_tf32(x[((n * C + c) * H + h) * W + w]) : 0u;
    }
    __syncthreads();
    const int plane = (n * stride + h % stride) * stride, row = h / stride;
    for (int i = threadIdx.y; i < 32; i += 8) {
        int w = w0 + i, c = c0 + threadIdx.x;
        if (w < W && c < Cp) {
            x_t[(((plane + w % stride) * Hq + row) * Wq + w / stride) * Cp + c] = tile[threadIdx.x][i];
        }
    }
}

// ---- The Hopper instructions, one small function each ----

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}

// One arrival, and the number of bytes the copies completing on this barrier will bring.
__device__ __forceinline__ void barrier_expect_bytes(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Waits until the barrier's phase with this parity has completed. A copy that never arrives (a
// tensor map that does not match the kernel) ends the kernel with an error instead of a hang.
__device__ __forceinline__ void barrier_wait(unsigned bar, unsigned phase) {
    unsigned done;
    for (unsigned tries = 0;; ++tries) {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(bar), "r"(phase) : "memory");
        if (done) {
            return;
        }
        if (tries == (1u << 24)) {
            __trap();
        }
    }
}

__device__ __forceinline__ void tma_load_3d(unsigned dst, const TensorMap* map, int x, int y, int z, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];"
                 ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar) : "memory");
}

__device__ __forceinline__ void tma_load_4d(unsigned dst, const TensorMap* map, int x, int y, int z, int w,
                                            unsigned bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];"
                 ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(w), "r"(bar) : "memory");
}

// A K-major operand in shared memory, 128-byte rows swizzled as the TMA wrote them (PTX ISA,
// "Matrix Descriptor Format"): start address / 16 in bits 0-13, stride between 8-row groups
// (8 x 128 bytes) / 16 in bits 32-45, swizzle mode 1 (128 bytes) in bits 62-63. The leading
// byte offset is not used by swizzled K-major layouts. Moving along K within the row moves the
// start address: the swizzle is applied to the address bits, so the tile must sit on 1024 bytes.
__device__ __forceinline__ unsigned long long smem_descriptor(unsigned address) {
    return (unsigned long long)((address & 0x3FFFF) >> 4) | (1ull << 16) |
           ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

// d (64 x 128, this thread's 64 accumulators) += A (64 x 8) * B (8 x 128), both from shared memory.
__device__ __forceinline__ void wgmma_64x128x8(float* d, unsigned long long desc_a, unsigned long long desc_b) {
#ifdef HAS_WGMMA
    asm volatile("{\n .reg .pred accumulate;\n setp.ne.b32 accumulate, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, accumulate, 1, 1;\n}"
                 :
                   "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(desc_a), "l"(desc_b), "r"(1));
#endif
}

__device__ __forceinline__ void wgmma_fence() {
#ifdef HAS_WGMMA
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#ifdef HAS_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

template <int pending>
__device__ __forceinline__ void wgmma_wait() {
#ifdef HAS_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(pending) : "memory");
#endif
}

// ---- The kernel ----

// Block (pixel tile, filter tile): pixel tile = (image n, output rows p0 + [0, TH), columns
// q0 + [0, TW)), TH * TW = TILE_N; grid (N * ceil(Oh / TH) * ceil(Ow / TW), ceil(K / TILE_M)).
// Dynamic shared memory: STAGES x (filter tile, pixel tile) + barriers + 1 KB for alignment.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
ImplicitGemmWgmmaKernel(const __grid_constant__ TensorMap filter_map, const __grid_constant__ TensorMap input_map,
                        float* __restrict__ output, int K, int Cp, int R, int S, int stride, int pad,
                        int Oh, int Ow, int TW) {
    extern __shared__ unsigned char raw_shared[];
    unsigned char* shared = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<unsigned long long>(raw_shared) + 1023) & ~1023ull);  // swizzle atoms: 1 KB
    const unsigned filter_s = shared_address(shared);                          // [STAGES][TILE_M][TILE_C]
    const unsigned pixels_s = filter_s + STAGES * STAGE_BYTES;                  // [STAGES][TILE_N][TILE_C]
    const unsigned full = pixels_s + STAGES * STAGE_BYTES;                      // STAGES mbarriers
    const int tid = threadIdx.x;

    const int TH = TILE_N / TW, tiles_w = (Ow + TW - 1) / TW, tiles_h = (Oh + TH - 1) / TH;
    const int q0 = blockIdx.x % tiles_w * TW, p0 = blockIdx.x / tiles_w % tiles_h * TH;
    const int n = blockIdx.x / (tiles_w * tiles_h), k0 = blockIdx.y * TILE_M;
    const int chunks = (Cp + TILE_C - 1) / TILE_C, steps = R * S * chunks;

    // Step i: tap (r, s) = i / chunks, channels (i % chunks) * TILE_C. The input tap reads phase
    // (b_h, b_w) of the transformed image at (p + a_h, q + a_w), where r - pad = stride a_h + b_h.
    auto issue = [&](int i, int stage) {
        int rs = i / chunks, c0 = i % chunks * TILE_C;
        int dr = rs / S - pad, ds = rs % S - pad;
        int ah = dr >= 0 ? dr / stride : -((-dr + stride - 1) / stride), bh = dr - ah * stride;
        int aw = ds >= 0 ? ds / stride : -((-ds + stride - 1) / stride), bw = ds - aw * stride;
        unsigned bar = full + 8 * stage;
        barrier_expect_bytes(bar, 2 * STAGE_BYTES);     // out-of-bounds zeros count as bytes too
        tma_load_3d(filter_s + stage * STAGE_BYTES, &filter_map, c0, k0, rs, bar);
        tma_load_4d(pixels_s + stage * STAGE_BYTES, &input_map, c0, q0 + aw, p0 + ah,
                    (n * stride + bh) * stride + bw, bar);
    };

    if (tid == 0) {
        for (int stage = 0; stage < STAGES; ++stage) {
            barrier_init(full + 8 * stage, 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");   // visible to the TMA
        for (int i = 0; i < STAGES && i < steps; ++i) {
            issue(i, i);
        }
    }
    __syncthreads();

    // Warp w of the warpgroup holds rows 16 w + g and 16 w + g + 8 of each 64-row half; entry
    // 4 j + e of a half is column 8 j + 2 t + e % 2, row + 8 (e / 2) (g = lane / 4, t = lane % 4).
    float acc[2][64];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int j = 0; j < 64; ++j) {
            acc[h][j] = 0.0f;
        }
    }
    for (int i = 0; i < steps; ++i) {
        const int stage = i % STAGES;
        barrier_wait(full + 8 * stage, (i / STAGES) & 1);
        const unsigned a = filter_s + stage * STAGE_BYTES, b = pixels_s + stage * STAGE_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < TILE_C / 8; ++kk) {             // 8 TF32 values = 32 bytes per k8 step
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                wgmma_64x128x8(acc[h], smem_descriptor(a + h * 64 * 128 + kk * 32), smem_descriptor(b + kk * 32));
            }
        }
        wgmma_commit();
        wgmma_wait<1>();                  // step i - 1's products are done: its stage is free
        __syncthreads();                  // ... in every warp, before the TMA overwrites it
        if (tid == 0 && i >= 1 && i - 1 + STAGES < steps) {
            issue(i - 1 + STAGES, (i - 1) % STAGES);
        }
    }
    wgmma_wait<0>();

    // Epilogue: straight from the accumulators to output[n][k][p][q].
    const int warp = tid / 32, g = tid % 32 / 4, t = tid % 4;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            int column = 8 * j + 2 * t + e % 2;
            int p = p0 + column / TW, q = q0 + column % TW;
            if (p >= Oh || q >= Ow) {
                continue;
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int k = k0 + h * 64 + warp * 16 + g + 8 * (e / 2);
                if (k < K) {
                    output[((n * K + k) * Oh + p) * Ow + q] = acc[h][4 * j + e];
                }
            }
        }
    }
}
