// cooperative_groups/memcpy_async.h shim for pmpp's CPU engine: cg::memcpy_async, cg::wait and
// cg::wait_prior. Each thread of the group copies its share of the bytes when it calls
// memcpy_async, and wait / wait_prior<N> synchronize the group, so after the wait every
// thread sees the whole copy, as on a GPU. (On the GPU the copy may still be in flight before the
// wait: a kernel that reads it earlier is wrong there; check=True reports such a read as a race.)
#ifndef PMPP_COOPERATIVE_GROUPS_MEMCPY_ASYNC_SHIM
#define PMPP_COOPERATIVE_GROUPS_MEMCPY_ASYNC_SHIM

#include "../cooperative_groups.h"
#include "../cuda_pipeline_primitives.h"

namespace cooperative_groups {

namespace __pmpp_cg {
template <class _Group>
inline void __copy_share(const _Group &__g, void *__dst, const void *__src, size_t __bytes) {
    const size_t __n = size_t(__g.size()), __r = size_t(__g.thread_rank());
    const size_t __share = (__bytes + __n - 1) / __n;
    const size_t __begin = __r * __share < __bytes ? __r * __share : __bytes;
    const size_t __end = __begin + __share < __bytes ? __begin + __share : __bytes;
    ::pmpp::async_copy_bytes((unsigned char *)__dst + __begin,
                             (const unsigned char *)__src + __begin, __end - __begin, 0);
}
}  // namespace __pmpp_cg

// count: bytes.
template <class _Group, class _Elem, class _Size>
inline void memcpy_async(const _Group &__g, _Elem *__dst, const _Elem *__src, const _Size &__count) {
    __pmpp_cg::__copy_share(__g, __dst, __src, size_t(__count));
}
// dst_count, src_count: elements; the smaller is copied.
template <class _Group, class _Elem, class _DstCount, class _SrcCount>
inline void memcpy_async(const _Group &__g, _Elem *__dst, const _DstCount &__dst_count,
                         const _Elem *__src, const _SrcCount &__src_count) {
    const size_t __d = size_t(__dst_count), __s = size_t(__src_count);
    __pmpp_cg::__copy_share(__g, __dst, __src, (__d < __s ? __d : __s) * sizeof(_Elem));
}

template <class _Group>
inline void wait(const _Group &__g, PMPP_CG_CALLER) { __g.sync(__file, __line); }
template <unsigned _Stage, class _Group>
inline void wait_prior(const _Group &__g, PMPP_CG_CALLER) { __g.sync(__file, __line); }

}  // namespace cooperative_groups

#endif
