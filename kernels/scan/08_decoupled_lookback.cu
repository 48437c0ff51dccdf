// Single-pass scan with decoupled look-back (Merrill & Garland, NVIDIA NVR-2016-002)
// Changed from 07_stream_based: the chain is no longer serial. Each tile (a block's section) has
// one 64-bit status word in tileStatus: a flag and a value, written together by one store, so a
// reader that sees the flag also sees the value (no fences needed):
//   X (0, the memset): nothing yet;  A: the tile's own total ("aggregate");
//   P: the inclusive prefix, the total of tiles 0 .. this one.
// Tile b publishes A as soon as its own total is known - without waiting for anyone - then thread
// 0 LOOKS BACK: it reads the status of tile b-1, b-2, ..., adding aggregates, until it meets an
// inclusive prefix P; that sum is tile b's exclusive prefix, and it publishes P = prefix + own
// total. A tile rarely waits for its predecessor to FINISH: their aggregates are enough.
// Tile indices come from an atomic counter (as 07), so a tile only ever looks back at tiles that
// are running or done, and every one of those publishes A without waiting: no deadlock, whatever
// order the hardware starts blocks in. Python zeroes tileStatus and tileCounter before each launch.
// Expect: 2n of traffic and no serial chain: far faster than 07. But one thread walks back one
// tile per L2 round trip, and the more tiles start per round trip, the further back the nearest P
// is (about half of those that start in one round trip); with that, and the per-element work of
// 05's block (scalar loads, 13 barriers a tile), 08 stays well short of copy speed. 09 fixes both.
#ifndef BLOCK_DIM
#define BLOCK_DIM 512       // launch with blockDim.x == BLOCK_DIM
#endif
#ifndef COARSE_FACTOR
#define COARSE_FACTOR 8     // elements per thread
#endif
#define SECTION_SIZE (BLOCK_DIM * COARSE_FACTOR)
#define PADDED(i) ((i) + (i) / 32)   // shared-memory index of section element i: no bank conflicts

// Element i of the sequence this kernel scans: x[i] for an inclusive scan; x[i - 1] (0 at i = 0)
// for an exclusive scan, which is the inclusive scan of the input shifted right by one. 0 past
// the end, the identity of +, so padding changes no sum.
template <typename T>
__device__ T loadInput(const T* X, unsigned int i, unsigned int n, int exclusive) {
    if (i >= n || (exclusive && i == 0)) {
        return T(0);
    }
    return X[exclusive ? i - 1 : i];
}

#include "tile_status.cuh"   // the tile status word: a flag and a value in one 64-bit store

template <typename T>
__global__ void DecoupledLookbackScan(const T* X, T* Y, unsigned long long* tileStatus,
                                      unsigned long long* tileCounter, unsigned int n, int exclusive) {
    __shared__ T XY[PADDED(SECTION_SIZE)];
    __shared__ T sums[2][BLOCK_DIM];
    __shared__ unsigned int tile_s;
    __shared__ T previousSum_s;
    unsigned int t = threadIdx.x;
    if (t == 0) {
        tile_s = (unsigned int)atomicAdd(tileCounter, 1ull);            // dynamic tile index
    }
    __syncthreads();
    unsigned int tile = tile_s;
    unsigned int base = tile * SECTION_SIZE;
    for (unsigned int k = t; k < SECTION_SIZE; k += BLOCK_DIM) {        // coalesced load
        XY[PADDED(k)] = loadInput(X, base + k, n, exclusive);
    }
    __syncthreads();

    unsigned int first = t * COARSE_FACTOR;                             // phase 1
    for (unsigned int j = 1; j < COARSE_FACTOR; ++j) {
        XY[PADDED(first + j)] += XY[PADDED(first + j - 1)];
    }

    T* in = sums[0];                                                    // phase 2
    T* out = sums[1];
    in[t] = XY[PADDED(first + COARSE_FACTOR - 1)];
    for (unsigned int stride = 1; stride < BLOCK_DIM; stride *= 2) {
        __syncthreads();
        out[t] = (t >= stride) ? in[t] + in[t - stride] : in[t];
        T* swap = in;
        in = out;
        out = swap;
    }
    __syncthreads();

    if (t == 0) {                                                       // the look-back
        T aggregate = in[BLOCK_DIM - 1];
        T previousSum = T(0);
        if (tile == 0) {
            storeStatus(&tileStatus[0], packStatus(STATUS_P, aggregate));
        } else {
            storeStatus(&tileStatus[tile], packStatus(STATUS_A, aggregate));
            // BEGIN SOLUTION
            for (unsigned int predecessor = tile - 1;; --predecessor) {
                unsigned long long status;
                do {
                    status = loadStatus(&tileStatus[predecessor]);
                } while (statusFlag(status) == STATUS_X);               // no total published yet: wait
                previousSum += statusValue<T>(status);
                if (statusFlag(status) == STATUS_P) {
                    break;                                              // an inclusive prefix: done
                }
            }
            // END SOLUTION
            storeStatus(&tileStatus[tile], packStatus(STATUS_P, previousSum + aggregate));
        }
        previousSum_s = previousSum;
    }

    if (t > 0) {                                                        // phase 3
        T before = in[t - 1];
        for (unsigned int j = 0; j < COARSE_FACTOR; ++j) {
            XY[PADDED(first + j)] += before;
        }
    }
    __syncthreads();

    T previousSum = previousSum_s;
    for (unsigned int k = t; k < SECTION_SIZE; k += BLOCK_DIM) {        // coalesced store
        if (base + k < n) {
            Y[base + k] = previousSum + XY[PADDED(k)];
        }
    }
}
