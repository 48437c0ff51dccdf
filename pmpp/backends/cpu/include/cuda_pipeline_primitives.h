// cuda_pipeline_primitives.h shim for pmpp's CPU engine: the primitives interface of
// asynchronous copies from global to shared memory (cp.async on sm_80 and later).
// A copy is done when __pipeline_memcpy_async returns, so every wait is already satisfied: a
// kernel that reads a copy before waiting for it is wrong on a GPU and still right here.
// The GPU's requirements are checked: size 4, 8 or 16 bytes, both addresses aligned to it,
// zfill (bytes zero-filled at the end instead of copied) at most the size.
#ifndef PMPP_CUDA_PIPELINE_PRIMITIVES_H
#define PMPP_CUDA_PIPELINE_PRIMITIVES_H

#include "pmpp_cuda.h"

namespace pmpp {
// Byte by byte, so that the checks see every access; not counted in count builds (on a GPU the
// copy is an LDGSTS, which Nsight Compute counts apart from loads and stores).
PMPP_UNCOUNTED inline void async_copy_bytes(void *dst_shared, const void *src_global, size_t size,
                                            size_t zfill) {
    unsigned char *dst = (unsigned char *)dst_shared;
    const unsigned char *src = (const unsigned char *)src_global;
    for (size_t i = 0; i < size; ++i) dst[i] = i < size - zfill ? src[i] : 0;
}
}  // namespace pmpp

static inline void __pipeline_memcpy_async(void *__restrict__ dst_shared,
                                           const void *__restrict__ src_global,
                                           size_t size_and_align, size_t zfill = 0) {
    if (size_and_align != 4 && size_and_align != 8 && size_and_align != 16) {
        pmpp_trap("__pipeline_memcpy_async with a size other than 4, 8 or 16 bytes", __FILE__, __LINE__);
    }
    if (((uintptr_t)dst_shared | (uintptr_t)src_global) % size_and_align != 0) {
        pmpp_trap("__pipeline_memcpy_async with an address not aligned to the size", __FILE__, __LINE__);
    }
    if (zfill > size_and_align) {
        pmpp_trap("__pipeline_memcpy_async with zfill larger than the size", __FILE__, __LINE__);
    }
    ::pmpp::async_copy_bytes(dst_shared, src_global, size_and_align, zfill);
}
static inline void __pipeline_commit() {}
static inline void __pipeline_wait_prior(size_t) {}

#endif
