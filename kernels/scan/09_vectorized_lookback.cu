// Beyond the book: decoupled look-back at copy speed - 16-byte accesses, the tile in registers
// Changed from 08_decoupled_lookback: the same single pass and the same tile status words; what
// changed is the work of a block per element, so that DRAM, not the block, sets the pace.
//  * Loads and stores are float4/int4 (16 bytes: LDG.E.128 / STG.E.128), VECS_PER_THREAD per
//    thread, all issued before the first is used: 32 KB in flight per block of 128 threads.
//    Marked streaming (__ldcs/__stcs): each byte is touched once. Large tiles pay: 8192-element
//    tiles (128 threads x 16 vectors) mean half the tiles, counter draws and look-backs of
//    4096-element ones.
//  * The tile never visits shared memory. Vector r of thread t holds the tile's elements
//    4 * (r * BLOCK_DIM + t) .. + 3 (row r of the tile, coalesced). Each thread scans its vectors
//    (3 additions each); each warp scans the vectors' totals across its lanes with
//    __shfl_up_sync (Kogge-Stone over 32 lanes: no barrier); warp 0 scans the warps' totals.
//    Three __syncthreads() per tile (one for the tile index), against 13 in 08.
//  * A whole warp looks back: it reads 32 predecessors' status words in one round trip, finds
//    the nearest inclusive prefix with a ballot, adds the aggregates before it with shuffles, and
//    moves 32 tiles further back only if there is none.
//  * Exclusive scans are computed in the registers (no shifted, misaligned load).
// x and y must be 16-byte aligned (fresh arrays are; Python checks). Any n: vectors that run past
// the end are loaded and stored element by element.
// Expect: copy speed - at 2^28, near the measured copy bandwidth counting 2n * 4 bytes, where 08
// is limited by its per-element instructions and barriers. Recorded: 0.84x copy on the H100,
// 0.76x on the H200. The notebook (11b_scan_single_pass) prints what the recorded run measured.
#ifndef BLOCK_DIM
#define BLOCK_DIM 128           // launch with blockDim.x == BLOCK_DIM, a multiple of 32
#endif
#ifndef VECS_PER_THREAD
#define VECS_PER_THREAD 16      // 4-element vectors per thread
#endif
#define WARPS (BLOCK_DIM / 32)
#define TILE_SIZE (BLOCK_DIM * VECS_PER_THREAD * 4)
#define FULL_MASK 0xffffffffu

template <typename T>
struct Vec4;
template <>
struct Vec4<float> {
    typedef float4 type;
};
template <>
struct Vec4<int> {
    typedef int4 type;
};

#include "tile_status.cuh"   // the tile status word: a flag and a value in one 64-bit store

template <typename T>
__device__ T warpInclusiveScan(T value, unsigned int lane) {        // Kogge-Stone across the lanes
    // BEGIN SOLUTION
    for (unsigned int offset = 1; offset < 32; offset *= 2) {
        T below = __shfl_up_sync(FULL_MASK, value, offset);
        if (lane >= offset) {
            value += below;
        }
    }
    // END SOLUTION
    return value;
}

template <typename T>
__device__ T warpExclusive(T inclusive, unsigned int lane) {          // the lane below's inclusive value
    T below = __shfl_up_sync(FULL_MASK, inclusive, 1);
    return lane == 0 ? T(0) : below;
}

template <typename T>
__device__ T warpSum(T value) {                                       // in every lane
    for (unsigned int offset = 16; offset > 0; offset /= 2) {
        value += __shfl_xor_sync(FULL_MASK, value, offset);
    }
    return value;
}

// The exclusive prefix of tile `tile` > 0, in every lane of the calling warp. Lane l looks at
// tile - 1 - l, then 32 further back each round. A round ends when every lane nearer than the
// nearest inclusive prefix has at least an aggregate.
template <typename T>
__device__ T lookBack(const unsigned long long* tileStatus, unsigned int tile, unsigned int lane) {
    T prefix = T(0);
    int predecessor = (int)tile - 1 - (int)lane;
    while (true) {
        unsigned long long status;
        unsigned int inclusive;
        unsigned int notReady;
        do {
            status = predecessor >= 0 ? loadStatus(&tileStatus[predecessor]) : packStatus(STATUS_P, T(0));
            inclusive = __ballot_sync(FULL_MASK, statusFlag(status) == STATUS_P);
            notReady = __ballot_sync(FULL_MASK, statusFlag(status) == STATUS_X);
        } while (notReady & (inclusive ? (inclusive & (0u - inclusive)) - 1u : FULL_MASK));
        unsigned int stop = inclusive ? __ffs((int)inclusive) - 1 : 32;   // the nearest P's lane
        prefix += warpSum(lane < stop ? statusValue<T>(status) : T(0));    // aggregates before it
        if (inclusive) {
            return prefix + __shfl_sync(FULL_MASK, statusValue<T>(status), stop);
        }
        predecessor -= 32;
    }
}

template <typename T>
__global__ void __launch_bounds__(BLOCK_DIM)
VectorizedLookbackScan(const T* __restrict__ X, T* __restrict__ Y, unsigned long long* tileStatus,
                       unsigned long long* tileCounter, unsigned int n, int exclusive) {
    static_assert(BLOCK_DIM % 32 == 0 && BLOCK_DIM <= 1024, "BLOCK_DIM must be a multiple of 32, at most 1024");
    typedef typename Vec4<T>::type V;
    __shared__ unsigned int tile_s;
    __shared__ T warpPrefix_s[VECS_PER_THREAD * WARPS];   // per (row, warp): its total, then what comes before it
    __shared__ T tilePrefix_s;
    unsigned int t = threadIdx.x;
    unsigned int lane = t % 32;
    unsigned int warp = t / 32;
    if (t == 0) {
        tile_s = (unsigned int)atomicAdd(tileCounter, 1ull);            // dynamic tile index
    }
    __syncthreads();
    unsigned int tile = tile_s;

    T v[VECS_PER_THREAD][4];                                            // load: all vectors in flight
#pragma unroll
    for (int r = 0; r < VECS_PER_THREAD; ++r) {
        unsigned int e = tile * TILE_SIZE + 4 * (r * BLOCK_DIM + t);
        if (e + 4 <= n) {
            V q = __ldcs(reinterpret_cast<const V*>(X + e));
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

    T laneExclusive[VECS_PER_THREAD];                                   // scan in registers
#pragma unroll
    for (int r = 0; r < VECS_PER_THREAD; ++r) {
        v[r][1] += v[r][0];
        v[r][2] += v[r][1];
        v[r][3] += v[r][2];
        T inclusive = warpInclusiveScan(v[r][3], lane);
        laneExclusive[r] = warpExclusive(inclusive, lane);
        if (lane == 31) {
            warpPrefix_s[r * WARPS + warp] = inclusive;                 // the warp's total for row r
        }
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
    for (int r = 0; r < VECS_PER_THREAD; ++r) {
        T before = tilePrefix + (warpPrefix_s[r * WARPS + warp] + laneExclusive[r]);
        T out[4];
        out[0] = exclusive ? before : before + v[r][0];
        out[1] = before + (exclusive ? v[r][0] : v[r][1]);
        out[2] = before + (exclusive ? v[r][1] : v[r][2]);
        out[3] = before + (exclusive ? v[r][2] : v[r][3]);
        unsigned int e = tile * TILE_SIZE + 4 * (r * BLOCK_DIM + t);
        if (e + 4 <= n) {
            V q;
            q.x = out[0];
            q.y = out[1];
            q.z = out[2];
            q.w = out[3];
            __stcs(reinterpret_cast<V*>(Y + e), q);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (e + j < n) {
                    Y[e + j] = out[j];
                }
            }
        }
    }
}
