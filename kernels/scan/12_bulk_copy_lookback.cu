// Beyond the book: the shared-memory rows move by bulk copy (the Hopper TMA), both ways
// Changed from 11_async_copy_lookback: the SMEM_VECS rows that 11 copies into shared memory one
// 16-byte cp.async per thread per row now arrive as one bulk copy, issued by thread 0 and tracked
// by a cuda::barrier (cp.async.bulk with an mbarrier, sm_90), and leave the same way after the
// prefix is added in place (cp.async.bulk from shared to global). The register rows are 11's.
// The tile grows to 20480 elements (80 KB): 9 rows in registers (64 registers a thread, as 11)
// and 11 rows (44 KB) in shared memory, 4 blocks of 256 threads per SM.
// Why that might help (a hypothesis, not measured here): a tile whose loads come late holds up
// the look-back of every tile after it, and a block's loads may queue behind the 16 store
// instructions per thread of its neighbours in the SM's load/store path. A bulk copy is one
// instruction, carried out by the TMA unit beside that path, so half of each tile's loads and
// stores no longer wait in it, and the larger tile fits because the shared rows need no
// registers at all. Needs compute capability 9.0 (the H100): older GPUs have no bulk copy.
// in_s starts on a 128-byte boundary, as global memory's lines do (a bulk copy needs only 16).
// The look-back, its status words and the deadlock argument are 09's.
// x and y must be 16-byte aligned (Python checks). Any n: a tile whose shared rows run past the
// end loads and stores them per thread, element by element where a vector runs past it.
// Expect: closer to copy speed than 11; see the notebook for the measurement.
#include <cuda/barrier>

#ifndef BLOCK_DIM
#define BLOCK_DIM 256           // launch with blockDim.x == BLOCK_DIM, a multiple of 32
#endif
#ifndef VECS_PER_THREAD
#define VECS_PER_THREAD 20      // 4-element vectors per thread, in registers and shared memory
#endif
#ifndef SMEM_VECS
#define SMEM_VECS 11            // of them, in shared memory: one bulk copy in, one out
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 4            // resident blocks per SM the registers are budgeted for
#endif
#define REG_VECS (VECS_PER_THREAD - SMEM_VECS)
#define WARPS (BLOCK_DIM / 32)
#define TILE_SIZE (BLOCK_DIM * VECS_PER_THREAD * 4)
#define FULL_MASK 0xffffffffu

typedef cuda::barrier<cuda::thread_scope_block> barrier;
namespace cde = cuda::device::experimental;

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
BulkCopyLookbackScan(const T* __restrict__ X, T* __restrict__ Y, unsigned long long* tileStatus,
                       unsigned long long* tileCounter, unsigned int n, int exclusive) {
    static_assert(BLOCK_DIM % 32 == 0 && BLOCK_DIM <= 1024, "BLOCK_DIM must be a multiple of 32, at most 1024");
    static_assert(SMEM_VECS >= 1 && SMEM_VECS < VECS_PER_THREAD, "SMEM_VECS must be in [1, VECS_PER_THREAD)");
    typedef typename Vec4<T>::type V;
    __shared__ unsigned int tile_s;
    __shared__ T warpPrefix_s[VECS_PER_THREAD * WARPS];   // per (row, warp): its total, then what comes before it
    __shared__ T tilePrefix_s;
    __shared__ __align__(128) V in_s[SMEM_VECS * BLOCK_DIM];   // rows REG_VECS.. of the tile; thread t owns column t
#pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ barrier inArrived_s;                         // completes when the bulk copy has landed
    unsigned int t = threadIdx.x;
    unsigned int lane = t % 32;
    unsigned int warp = t / 32;
    if (t == 0) {
        init(&inArrived_s, 1);                                          // thread 0's arrival + the bytes
        cde::fence_proxy_async_shared_cta();                            // visible to the copy engine
        tile_s = (unsigned int)atomicAdd(tileCounter, 1ull);            // dynamic tile index
    }
    __syncthreads();
    unsigned int tile = tile_s;

    unsigned int sharedFirst = tile * TILE_SIZE + 4 * REG_VECS * BLOCK_DIM;   // first element of the shared rows
    bool bulk = sharedFirst + 4 * SMEM_VECS * BLOCK_DIM <= n;          // the same in every thread of the block
    if (bulk) {                                                         // shared-memory rows: one copy in flight
        if (t == 0) {
            cde::cp_async_bulk_global_to_shared(in_s, X + sharedFirst, sizeof(in_s), inArrived_s);
        }
    } else {
#pragma unroll
        for (int s = 0; s < SMEM_VECS; ++s) {
            unsigned int e = sharedFirst + 4 * (s * BLOCK_DIM + t);
            T* q = reinterpret_cast<T*>(&in_s[s * BLOCK_DIM + t]);
            for (int j = 0; j < 4; ++j) {
                q[j] = (e + j < n) ? X[e + j] : T(0);
            }
        }
    }

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
    if (bulk && t == 0) {                                               // scan the shared rows, in place
        inArrived_s.wait(cuda::device::barrier_arrive_tx(inArrived_s, 1, sizeof(in_s)));   // arrive: expect the bytes
    }
    __syncthreads();
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
        if (bulk) {
            q.x = out[0]; q.y = out[1]; q.z = out[2]; q.w = out[3];
            in_s[s * BLOCK_DIM + t] = q;
        } else {
            storeVector(Y, sharedFirst + 4 * (s * BLOCK_DIM + t), n, out);
        }
    }
    if (bulk) {                                                         // and out again in one copy
        cde::fence_proxy_async_shared_cta();                            // the writes above, to the copy engine
        __syncthreads();
        if (t == 0) {
            cde::cp_async_bulk_shared_to_global(Y + sharedFirst, in_s, sizeof(in_s));
            cde::cp_async_bulk_commit_group();
            cde::cp_async_bulk_wait_group_read<0>();                    // in_s must outlive the copy's reads
        }
    }
}
