// cooperative_groups/reduce.h shim for pmpp's CPU engine: cg::reduce(group, value, op) over a
// thread_block_tile or a coalesced_group; every thread of the group gets the result. A tree of
// shuffles between the group's ranks (op must be associative, as CUDA requires); in a block's
// partial last warp, a tile reduces over the lanes that exist.
#ifndef PMPP_COOPERATIVE_GROUPS_REDUCE_SHIM
#define PMPP_COOPERATIVE_GROUPS_REDUCE_SHIM

#include "../cooperative_groups.h"
#include "details/functional.h"

namespace cooperative_groups {

template <class _Group, class _Tp, class _Op>
inline auto reduce(const _Group &__g, _Tp &&__value, _Op &&__op, PMPP_CG_CALLER)
    -> std::remove_cv_t<std::remove_reference_t<decltype(__op(__value, __value))>> {
    PMPP_CG_WARP_GROUP_ONLY(_Group) {
        using _Result = std::remove_cv_t<std::remove_reference_t<decltype(__op(__value, __value))>>;
        _Result __v = __value;
        const unsigned __n = __g.__members(), __r = unsigned(__g.thread_rank());
        const unsigned __mask = __g.__member_mask();
        for (unsigned __d = 1; __d < __n; __d <<= 1) {
            const bool __pairs = __r % (2 * __d) == 0 && __r + __d < __n;
            const unsigned __src = __g.__lane_of(__r + __d < __n ? __r + __d : __r);
            const _Result __other = __pmpp_cg::__from_lane(__file, __line, __mask, __v, __src);
            if (__pairs) __v = __op(__v, __other);
        }
        return __pmpp_cg::__from_lane(__file, __line, __mask, __v, __g.__lane_of(0));
    }
}

}  // namespace cooperative_groups

#endif
