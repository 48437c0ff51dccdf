// What 10-12 take from 09_vectorized_lookback unchanged: 4-element vector types, the warp's
// scans over its lanes, and the warp-wide look-back over the tile status words.
#ifndef PMPP_SCAN_LOOKBACK_CUH
#define PMPP_SCAN_LOOKBACK_CUH

#include "tile_status.cuh"

#ifndef FULL_MASK
#define FULL_MASK 0xffffffffu
#endif

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

template <typename T>
__device__ T warpInclusiveScan(T value, unsigned int lane) {        // Kogge-Stone across the lanes
    // BEGIN SOLUTION scan/09_vectorized_lookback
    for (unsigned int offset = 1; offset < 32; offset *= 2) {
        T below = __shfl_up_sync(FULL_MASK, value, offset);
        if (lane >= offset) {
            value += below;
        }
    }
    // END SOLUTION scan/09_vectorized_lookback
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

#endif
