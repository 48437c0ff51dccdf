// The tile status word of decoupled look-back (Merrill & Garland, NVIDIA NVR-2016-002), shared
// by 08-12: a flag and a 4-byte value in one 64-bit word, written together by one store, so a
// reader that sees the flag also sees the value (no fences needed).
#ifndef PMPP_SCAN_TILE_STATUS_CUH
#define PMPP_SCAN_TILE_STATUS_CUH

// A tile's status: flag in the high 32 bits, the value's bits in the low 32.
#define STATUS_X 0u   // no value yet (what the memset before the launch leaves)
#define STATUS_A 1u   // the tile's aggregate
#define STATUS_P 2u   // the tile's inclusive prefix

template <typename T>
__device__ unsigned long long packStatus(unsigned int flag, T value) {
    static_assert(sizeof(T) == 4, "a status word holds a 4-byte value");
    union { T value; unsigned int bits; } u;
    u.value = value;
    return ((unsigned long long)flag << 32) | u.bits;
}

__device__ unsigned int statusFlag(unsigned long long status) {
    return (unsigned int)(status >> 32);
}

template <typename T>
__device__ T statusValue(unsigned long long status) {
    union { unsigned int bits; T value; } u;
    u.bits = (unsigned int)status;
    return u.value;
}

// One 64-bit access each: flag and value are read and written together. volatile: every read
// goes to L2, where other blocks' writes land, and is never served from a stale L1 line.
__device__ unsigned long long loadStatus(const unsigned long long* p) {
    return *(const volatile unsigned long long*)p;
}

__device__ void storeStatus(unsigned long long* p, unsigned long long status) {
    *(volatile unsigned long long*)p = status;
}

#endif
