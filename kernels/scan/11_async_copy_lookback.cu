// Beyond the book: a larger tile, half of it copied straight into shared memory (cp.async)
// Changed from 09_vectorized_lookback: a thread's vectors are split. VECS_PER_THREAD - SMEM_VECS
// of them are loaded into registers as in 09; the other SMEM_VECS go from global to shared
// memory with __pipeline_memcpy_async (cp.async on sm_80 and later), which needs no register while
// the copy is in flight. The tile doubles to 16384 elements (64 KB) at 64 registers a thread:
// 4 blocks of 256 threads per SM hold 256 KB of tile, against 160 KB for 09's 5 blocks of 128.
// Why that should help: a block of 09 holds its tile while it waits for its look-back, and the
// SM can only keep loading with the room the waiting blocks leave. A vector in shared memory is
// scanned in place (each thread its own
// column of in_s, no barrier), turned into what its output needs, and read again to be stored;
// a vector in registers is turned into it the same way, so no lane offsets are kept aside.
// The look-back, its status words and the deadlock argument are 09's.
// Loads and stores are plain, not streaming (__ldcs/__stcs) as in 09: here the evict-first hint
// did not help.
// x and y must be 16-byte aligned (Python checks). Any n: vectors that run past the end are
// loaded and stored element by element.
// Expect: closer to copy speed than 09; the notebook (11b_scan_single_pass) prints the recorded
// times.
#include <cuda_pipeline.h>

#ifndef BLOCK_DIM
#define BLOCK_DIM 256           // launch with blockDim.x == BLOCK_DIM, a multiple of 32
#endif
#ifndef VECS_PER_THREAD
#define VECS_PER_THREAD 16      // 4-element vectors per thread, in registers and shared memory
#endif
#ifndef SMEM_VECS
#define SMEM_VECS 8             // of them, copied straight into shared memory (cp.async)
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 4            // resident blocks per SM the registers are budgeted for
#endif
#define REG_VECS (VECS_PER_THREAD - SMEM_VECS)
#define WARPS (BLOCK_DIM / 32)
#define TILE_SIZE (BLOCK_DIM * VECS_PER_THREAD * 4)
#define FULL_MASK 0xffffffffu

#include "lookback.cuh"   // from 09: vector types, warp scans, the warp-wide look-back (and the status word)

template <typename T>
__device__ void storeVector(T* Y, unsigned int e, unsigned int n, const T* out) {
    if (e + 4 <= n) {
        typename Vec4<T>::type q;
        q.x = out[0];
        q.y = out[1];
        q.z = out[2];
        q.w = out[3];
        *reinterpret_cast<typename Vec4<T>::type*>(Y + e) = q;
    } else {
        for (int j = 0; j < 4; ++j) {
            if (e + j < n) {
                Y[e + j] = out[j];
            }
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(BLOCK_DIM, MIN_BLOCKS)
AsyncCopyLookbackScan(const T* __restrict__ X, T* __restrict__ Y, unsigned long long* tileStatus,
                       unsigned long long* tileCounter, unsigned int n, int exclusive) {
    static_assert(BLOCK_DIM % 32 == 0 && BLOCK_DIM <= 1024, "BLOCK_DIM must be a multiple of 32, at most 1024");
    static_assert(SMEM_VECS >= 1 && SMEM_VECS < VECS_PER_THREAD, "SMEM_VECS must be in [1, VECS_PER_THREAD)");
    typedef typename Vec4<T>::type V;
    __shared__ unsigned int tile_s;
    __shared__ T warpPrefix_s[VECS_PER_THREAD * WARPS];   // per (row, warp): its total, then what comes before it
    __shared__ T tilePrefix_s;
    __shared__ V in_s[SMEM_VECS * BLOCK_DIM];              // rows REG_VECS.. of the tile; thread t owns column t
    unsigned int t = threadIdx.x;
    unsigned int lane = t % 32;
    unsigned int warp = t / 32;
    if (t == 0) {
        tile_s = (unsigned int)atomicAdd(tileCounter, 1ull);            // dynamic tile index
    }
    __syncthreads();
    unsigned int tile = tile_s;

#pragma unroll
    for (int s = 0; s < SMEM_VECS; ++s) {                               // shared-memory rows: copies in flight
        unsigned int e = tile * TILE_SIZE + 4 * ((REG_VECS + s) * BLOCK_DIM + t);
        if (e + 4 <= n) {
            __pipeline_memcpy_async(&in_s[s * BLOCK_DIM + t], X + e, sizeof(V));
        } else {
            T* q = reinterpret_cast<T*>(&in_s[s * BLOCK_DIM + t]);
            for (int j = 0; j < 4; ++j) {
                q[j] = (e + j < n) ? X[e + j] : T(0);
            }
        }
    }
    __pipeline_commit();

    T v[REG_VECS][4];                                                   // register rows: loads in flight
#pragma unroll
    for (int r = 0; r < REG_VECS; ++r) {
        unsigned int e = tile * TILE_SIZE + 4 * (r * BLOCK_DIM + t);
        if (e + 4 <= n) {
            V q = *reinterpret_cast<const V*>(X + e);
            v[r][0] = q.x;
            v[r][1] = q.y;
            v[r][2] = q.z;
            v[r][3] = q.w;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                v[r][j] = (e + j < n) ? X[e + j] : T(0);
            }
        }
    }

#pragma unroll
    for (int r = 0; r < REG_VECS; ++r) {                                // scan the register rows, in place
        T a = v[r][0], b = a + v[r][1], c = b + v[r][2], d = c + v[r][3];
        T inclusive = warpInclusiveScan(d, lane);
        T below = warpExclusive(inclusive, lane);
        if (lane == 31) {
            warpPrefix_s[r * WARPS + warp] = inclusive;
        }
        if (exclusive) {
            v[r][0] = below; v[r][1] = below + a; v[r][2] = below + b; v[r][3] = below + c;
        } else {
            v[r][0] = below + a; v[r][1] = below + b; v[r][2] = below + c; v[r][3] = below + d;
        }
    }
    __pipeline_wait_prior(0);                                           // scan the shared rows, in place
#pragma unroll
    for (int s = 0; s < SMEM_VECS; ++s) {
        V q = in_s[s * BLOCK_DIM + t];
        T a = q.x, b = a + q.y, c = b + q.z, d = c + q.w;
        T inclusive = warpInclusiveScan(d, lane);
        T below = warpExclusive(inclusive, lane);
        if (lane == 31) {
            warpPrefix_s[(REG_VECS + s) * WARPS + warp] = inclusive;
        }
        if (exclusive) {
            q.x = below; q.y = below + a; q.z = below + b; q.w = below + c;
        } else {
            q.x = below + a; q.y = below + b; q.z = below + c; q.w = below + d;
        }
        in_s[s * BLOCK_DIM + t] = q;
    }
    __syncthreads();

    if (warp == 0) {                                                    // the tile's totals, in tile order
        T aggregate = T(0);
        for (unsigned int first = 0; first < VECS_PER_THREAD * WARPS; first += 32) {
            unsigned int j = first + lane;
            T total = (j < VECS_PER_THREAD * WARPS) ? warpPrefix_s[j] : T(0);
            T inclusive = warpInclusiveScan(total, lane);
            T before = warpExclusive(inclusive, lane);
            if (j < VECS_PER_THREAD * WARPS) {
                warpPrefix_s[j] = aggregate + before;
            }
            aggregate += __shfl_sync(FULL_MASK, inclusive, 31);
        }
        T tilePrefix = T(0);                                            // publish, look back, publish
        if (tile == 0) {
            if (lane == 0) {
                storeStatus(&tileStatus[0], packStatus(STATUS_P, aggregate));
            }
        } else {
            if (lane == 0) {
                storeStatus(&tileStatus[tile], packStatus(STATUS_A, aggregate));
            }
            tilePrefix = lookBack<T>(tileStatus, tile, lane);
            if (lane == 0) {
                storeStatus(&tileStatus[tile], packStatus(STATUS_P, tilePrefix + aggregate));
            }
        }
        if (lane == 0) {
            tilePrefix_s = tilePrefix;
        }
    }
    __syncthreads();

    T tilePrefix = tilePrefix_s;                                        // store
#pragma unroll
    for (int r = 0; r < REG_VECS; ++r) {
        T before = tilePrefix + warpPrefix_s[r * WARPS + warp];
        T out[4] = {before + v[r][0], before + v[r][1], before + v[r][2], before + v[r][3]};
        storeVector(Y, tile * TILE_SIZE + 4 * (r * BLOCK_DIM + t), n, out);
    }
#pragma unroll
    for (int s = 0; s < SMEM_VECS; ++s) {
        T before = tilePrefix + warpPrefix_s[(REG_VECS + s) * WARPS + warp];
        V q = in_s[s * BLOCK_DIM + t];
        T out[4] = {before + q.x, before + q.y, before + q.z, before + q.w};
        storeVector(Y, tile * TILE_SIZE + 4 * ((REG_VECS + s) * BLOCK_DIM + t), n, out);
    }
}
