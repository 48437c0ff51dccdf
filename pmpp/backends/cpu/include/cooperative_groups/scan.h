// cooperative_groups/scan.h shim for pmpp's CPU engine: cg::inclusive_scan and
// cg::exclusive_scan over a thread_block_tile or a coalesced_group, in rank order (op defaults to
// cg::plus). Rank 0 of an exclusive scan gets a value-initialized result (0 for numbers), as
// CUDA's does.
#ifndef PMPP_COOPERATIVE_GROUPS_SCAN_SHIM
#define PMPP_COOPERATIVE_GROUPS_SCAN_SHIM

#include "../cooperative_groups.h"
#include "details/functional.h"

namespace cooperative_groups {

namespace __pmpp_cg {
// Hillis and Steele's scan: after the step of distance d each rank holds the fold of the 2d
// ranks up to it.
template <class _Result, class _Group, class _Op>
inline _Result __inclusive(const _Group &__g, _Result __v, _Op &__op, const char *__file, int __line) {
    const unsigned __n = __g.__members(), __r = unsigned(__g.thread_rank());
    const unsigned __mask = __g.__member_mask();
    for (unsigned __d = 1; __d < __n; __d <<= 1) {
        const unsigned __src = __g.__lane_of(__r >= __d ? __r - __d : __r);
        const _Result __earlier = __from_lane(__file, __line, __mask, __v, __src);
        if (__r >= __d) __v = __op(__earlier, __v);
    }
    return __v;
}
template <class _Tp>
using __plain = std::remove_cv_t<std::remove_reference_t<_Tp>>;
}  // namespace __pmpp_cg

template <class _Group, class _Tp, class _Op>
inline auto inclusive_scan(const _Group &__g, _Tp &&__value, _Op &&__op, PMPP_CG_CALLER)
    -> __pmpp_cg::__plain<decltype(__op(__value, __value))> {
    PMPP_CG_WARP_GROUP_ONLY(_Group) {
        using _Result = __pmpp_cg::__plain<decltype(__op(__value, __value))>;
        return __pmpp_cg::__inclusive<_Result>(__g, __value, __op, __file, __line);
    }
}
template <class _Group, class _Tp>
inline __pmpp_cg::__plain<_Tp> inclusive_scan(const _Group &__g, _Tp &&__value, PMPP_CG_CALLER) {
    return inclusive_scan(__g, __value, plus<__pmpp_cg::__plain<_Tp>>(), __file, __line);
}

template <class _Group, class _Tp, class _Op>
inline auto exclusive_scan(const _Group &__g, _Tp &&__value, _Op &&__op, PMPP_CG_CALLER)
    -> __pmpp_cg::__plain<decltype(__op(__value, __value))> {
    PMPP_CG_WARP_GROUP_ONLY(_Group) {
        using _Result = __pmpp_cg::__plain<decltype(__op(__value, __value))>;
        const _Result __inc = __pmpp_cg::__inclusive<_Result>(__g, __value, __op, __file, __line);
        const unsigned __r = unsigned(__g.thread_rank());
        const unsigned __src = __g.__lane_of(__r > 0 ? __r - 1 : 0);
        const _Result __before =
            __pmpp_cg::__from_lane(__file, __line, __g.__member_mask(), __inc, __src);
        return __r > 0 ? __before : _Result{};
    }
}
template <class _Group, class _Tp>
inline __pmpp_cg::__plain<_Tp> exclusive_scan(const _Group &__g, _Tp &&__value, PMPP_CG_CALLER) {
    return exclusive_scan(__g, __value, plus<__pmpp_cg::__plain<_Tp>>(), __file, __line);
}

}  // namespace cooperative_groups

#endif
