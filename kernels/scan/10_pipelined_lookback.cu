// Beyond the book: the look-back hidden behind the next tile's loads
// Changed from 09_vectorized_lookback: a block no longer scans one tile and exits. In 09 a block
// holds its tile in registers while warp 0 looks back, and while it waits for a predecessor the
// SM's registers hold data that is not moving. Here a block keeps two tiles: it takes the next
// tile's index and issues that tile's loads, then looks back for the current tile and stores it;
// by the time the look-back is done, the next tile's data is arriving. Blocks stay resident
// (the grid is what fits on the GPU at once, BLOCKS_PER_SM per SM) and take tiles from the
// counter until none are left.
// Still deadlock-free in any schedule: a block publishes a tile's aggregate before it waits on
// anything for that tile, and the lowest tile without an inclusive prefix is always some block's
// current tile, whose look-back needs only lower tiles - which all have theirs.
// Expect: near the copy bandwidth counting 2n * 4 bytes. The recorded run says otherwise: slower
// than 09 (the notebook prints both and counts why: two tiles a block take registers, so fewer
// blocks fit on an SM).
#ifndef BLOCK_DIM
#define BLOCK_DIM 256           // launch with blockDim.x == BLOCK_DIM, a multiple of 32
#endif
#ifndef VECS_PER_THREAD
#define VECS_PER_THREAD 8       // 4-element vectors per thread, per tile (two tiles in flight)
#endif
#ifndef BLOCKS_PER_SM
#define BLOCKS_PER_SM 2         // resident blocks per SM the registers are budgeted for
#endif
#define WARPS (BLOCK_DIM / 32)
#define TILE_SIZE (BLOCK_DIM * VECS_PER_THREAD * 4)
#define FULL_MASK 0xffffffffu

#include "lookback.cuh"   // from 09: vector types, warp scans, the warp-wide look-back (and the status word)

// A tile in registers: vector r of thread t holds elements 4 * (r * BLOCK_DIM + t) .. + 3.
template <typename T>
struct Tile {
    T v[VECS_PER_THREAD][4];
    T laneExclusive[VECS_PER_THREAD];   // per vector: the sum of the lanes below in its warp
};

template <typename T>
__device__ __forceinline__ void loadTile(const T* X, unsigned int n, unsigned int tile, Tile<T>& a) {
    typedef typename Vec4<T>::type V;
#pragma unroll
    for (int r = 0; r < VECS_PER_THREAD; ++r) {
        unsigned int e = tile * TILE_SIZE + 4 * (r * BLOCK_DIM + threadIdx.x);
        if (e + 4 <= n) {
            V q = __ldcs(reinterpret_cast<const V*>(X + e));           // streamed: read once
            a.v[r][0] = q.x;
            a.v[r][1] = q.y;
            a.v[r][2] = q.z;
            a.v[r][3] = q.w;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                a.v[r][j] = (e + j < n) ? X[e + j] : T(0);
            }
        }
    }
}

// Each thread scans its vectors, each warp the vectors' totals; lane 31 leaves the warp's total
// for row r in warpPrefix_s[r * WARPS + warp].
template <typename T>
__device__ __forceinline__ void scanTile(Tile<T>& a, T* warpPrefix_s) {
    unsigned int lane = threadIdx.x % 32;
    unsigned int warp = threadIdx.x / 32;
#pragma unroll
    for (int r = 0; r < VECS_PER_THREAD; ++r) {
        a.v[r][1] += a.v[r][0];
        a.v[r][2] += a.v[r][1];
        a.v[r][3] += a.v[r][2];
        T inclusive = warpInclusiveScan(a.v[r][3], lane);
        a.laneExclusive[r] = warpExclusive(inclusive, lane);
        if (lane == 31) {
            warpPrefix_s[r * WARPS + warp] = inclusive;
        }
    }
}

// Warp 0: turn the warps' totals into what comes before each, in tile order, and publish the
// tile's aggregate (tile 0: its inclusive prefix). Returns the aggregate, in every lane.
template <typename T>
__device__ __forceinline__ T publishAggregate(unsigned long long* tileStatus, unsigned int tile,
                                              T* warpPrefix_s, unsigned int lane) {
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
    if (lane == 0) {
        storeStatus(&tileStatus[tile], packStatus(tile == 0 ? STATUS_P : STATUS_A, aggregate));
    }
    return aggregate;
}

template <typename T>
__device__ __forceinline__ void storeTile(T* Y, unsigned int n, unsigned int tile, const Tile<T>& a,
                                          const T* warpPrefix_s, T tilePrefix, int exclusive) {
    typedef typename Vec4<T>::type V;
    unsigned int warp = threadIdx.x / 32;
#pragma unroll
    for (int r = 0; r < VECS_PER_THREAD; ++r) {
        T before = tilePrefix + (warpPrefix_s[r * WARPS + warp] + a.laneExclusive[r]);
        T out[4];
        out[0] = exclusive ? before : before + a.v[r][0];
        out[1] = before + (exclusive ? a.v[r][0] : a.v[r][1]);
        out[2] = before + (exclusive ? a.v[r][1] : a.v[r][2]);
        out[3] = before + (exclusive ? a.v[r][2] : a.v[r][3]);
        unsigned int e = tile * TILE_SIZE + 4 * (r * BLOCK_DIM + threadIdx.x);
        if (e + 4 <= n) {
            V q;
            q.x = out[0];
            q.y = out[1];
            q.z = out[2];
            q.w = out[3];
            __stcs(reinterpret_cast<V*>(Y + e), q);                    // streamed: never read back
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

struct BlockState {
    unsigned int tile;      // the current tile: loaded, scanned, its aggregate published
    unsigned int tiles;
};

// One round: take the next tile and issue its loads; look back for the current tile and store
// it; scan the next tile and publish its aggregate. False when there was no next tile.
template <typename T>
__device__ __forceinline__ bool step(const T* X, T* Y, unsigned long long* tileStatus,
                                     unsigned long long* tileCounter, unsigned int n, int exclusive,
                                     Tile<T>& current, Tile<T>& next, T* currentPrefix_s,
                                     T* nextPrefix_s, unsigned int* tile_s, T* tilePrefix_s,
                                     BlockState& s, T& aggregate) {
    unsigned int lane = threadIdx.x % 32;
    unsigned int warp = threadIdx.x / 32;
    if (threadIdx.x == 0) {
        *tile_s = (unsigned int)atomicAdd(tileCounter, 1ull);
    }
    __syncthreads();
    unsigned int following = *tile_s;
    bool more = following < s.tiles;
    if (more) {
        loadTile(X, n, following, next);                                 // in flight from here on
    }
    if (warp == 0) {
        T prefix = T(0);
        if (s.tile > 0) {
            prefix = lookBack<T>(tileStatus, s.tile, lane);
            if (lane == 0) {
                storeStatus(&tileStatus[s.tile], packStatus(STATUS_P, prefix + aggregate));
            }
        }
        if (lane == 0) {
            *tilePrefix_s = prefix;
        }
    }
    __syncthreads();
    storeTile(Y, n, s.tile, current, currentPrefix_s, *tilePrefix_s, exclusive);
    if (!more) {
        return false;
    }
    scanTile(next, nextPrefix_s);
    __syncthreads();
    if (warp == 0) {
        aggregate = publishAggregate(tileStatus, following, nextPrefix_s, lane);
    }
    s.tile = following;
    return true;
}

template <typename T>
__global__ void __launch_bounds__(BLOCK_DIM, BLOCKS_PER_SM)
PipelinedLookbackScan(const T* __restrict__ X, T* __restrict__ Y, unsigned long long* tileStatus,
                      unsigned long long* tileCounter, unsigned int n, int exclusive) {
    static_assert(BLOCK_DIM % 32 == 0 && BLOCK_DIM <= 1024, "BLOCK_DIM must be a multiple of 32, at most 1024");
    __shared__ unsigned int tile_s;
    __shared__ T warpPrefix_s[2][VECS_PER_THREAD * WARPS];    // one per tile in flight
    __shared__ T tilePrefix_s;
    BlockState s;
    s.tiles = (n + TILE_SIZE - 1) / TILE_SIZE;
    if (threadIdx.x == 0) {
        tile_s = (unsigned int)atomicAdd(tileCounter, 1ull);
    }
    __syncthreads();
    s.tile = tile_s;
    if (s.tile >= s.tiles) {
        return;                                                          // the whole block
    }
    Tile<T> a, b;
    loadTile(X, n, s.tile, a);
    scanTile(a, warpPrefix_s[0]);
    __syncthreads();
    T aggregate = T(0);
    if (threadIdx.x / 32 == 0) {
        aggregate = publishAggregate(tileStatus, s.tile, warpPrefix_s[0], threadIdx.x % 32);
    }
    // Two rounds per iteration, the tiles' roles swapped, so that every register array is
    // indexed by constants and stays in registers.
    while (step(X, Y, tileStatus, tileCounter, n, exclusive, a, b, warpPrefix_s[0], warpPrefix_s[1],
                &tile_s, &tilePrefix_s, s, aggregate) &&
           step(X, Y, tileStatus, tileCounter, n, exclusive, b, a, warpPrefix_s[1], warpPrefix_s[0],
                &tile_s, &tilePrefix_s, s, aggregate)) {
    }
}
