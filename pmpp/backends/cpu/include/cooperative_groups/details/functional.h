// cooperative_groups/details/functional.h shim for pmpp's CPU engine: the operators that
// cg::reduce and the scans take (CUDA Programming Guide, "Cooperative Groups", reduce).
// cg::less and cg::greater give the smaller and the larger of the two values.
#ifndef PMPP_COOPERATIVE_GROUPS_FUNCTIONAL_SHIM
#define PMPP_COOPERATIVE_GROUPS_FUNCTIONAL_SHIM

#include <type_traits>
#include <utility>

#include "../../cooperative_groups.h"

namespace cooperative_groups {

template <class _Tp>
struct plus {
    _Tp operator()(_Tp __a, _Tp __b) const { return __a + __b; }
};
template <class _Tp>
struct less {
    _Tp operator()(_Tp __a, _Tp __b) const { return __b < __a ? __b : __a; }
};
template <class _Tp>
struct greater {
    _Tp operator()(_Tp __a, _Tp __b) const { return __a < __b ? __b : __a; }
};
template <class _Tp>
struct bit_and {
    _Tp operator()(_Tp __a, _Tp __b) const { return __a & __b; }
};
template <class _Tp>
struct bit_or {
    _Tp operator()(_Tp __a, _Tp __b) const { return __a | __b; }
};
template <class _Tp>
struct bit_xor {
    _Tp operator()(_Tp __a, _Tp __b) const { return __a ^ __b; }
};

namespace __pmpp_cg {
// Groups of lanes of one warp (thread_block_tile<N> with N <= 32, coalesced_group): those that
// CUDA's reduce and scans take.
template <class _Group, class = void>
struct __is_warp_group : std::false_type {};
template <class _Group>
struct __is_warp_group<_Group, decltype((void)std::declval<const _Group &>().__members())>
    : std::true_type {};
}  // namespace __pmpp_cg

// In the body of reduce and the scans, which go on only for a group they take (so that this is
// the one error).
#define PMPP_CG_WARP_GROUP_ONLY(_Group)                                                         \
    static_assert(__pmpp_cg::__is_warp_group<_Group>::value,                                    \
                  "cg::reduce and cg::inclusive_scan/exclusive_scan take a thread_block_tile or a " \
                  "coalesced_group (a group of one warp's lanes): for a whole block, reduce each "  \
                  "tiled_partition<32>(block) and combine the tiles' results through __shared__ "   \
                  "memory");                                                                    \
    if constexpr (!__pmpp_cg::__is_warp_group<_Group>::value) return {};                        \
    else

}  // namespace cooperative_groups

#endif
