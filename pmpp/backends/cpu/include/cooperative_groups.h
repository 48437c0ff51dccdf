// cooperative_groups.h shim for pmpp's CPU engine: the thread-block and warp-tile groups of the
// CUDA C++ Programming Guide's "Cooperative Groups" chapter, built on the prelude's barrier and
// warp primitives.
//   thread_block / this_thread_block(), thread_block_tile<1..32> / tiled_partition<N>(),
//   tiled_partition(parent, n) (a thread_group), coalesced_group / coalesced_threads(),
//   labeled_partition / binary_partition, this_thread(), cg::sync / thread_rank / group_size.
// cg::reduce is in <cooperative_groups/reduce.h>, the scans in <cooperative_groups/scan.h>, and
// memcpy_async / wait in <cooperative_groups/memcpy_async.h>, as in CUDA.
// Grid and cluster groups need a cooperative (or cluster) launch, which pmpp does not make: they
// are compile errors that say what to use instead.
//
// Lanes are those of the prelude (linear thread index % 32). Collectives pass their caller's
// file and line (__builtin_FILE/__builtin_LINE) to the runtime, so a divergence error names the
// kernel's own line. Every name here is reserved (_Np, __v, ...): a kernel's macros come before
// this header.
#ifndef PMPP_COOPERATIVE_GROUPS_SHIM
#define PMPP_COOPERATIVE_GROUPS_SHIM

#include "pmpp_cuda.h"

#define PMPP_CG_CALLER const char *__file = __builtin_FILE(), int __line = __builtin_LINE()

namespace cooperative_groups {

namespace __pmpp_cg {
enum : unsigned { __block_id = 1, __coalesced_id = 2 };

inline unsigned __block_size() { return blockDim.x * blockDim.y * blockDim.z; }
inline unsigned __block_rank() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
inline unsigned __lane() { return __block_rank() & 31u; }
inline unsigned __lanes_below() { return (1u << __lane()) - 1u; }

// The lane of the __r-th set bit of __mask (32 when there is none).
inline unsigned __nth_lane(unsigned __mask, unsigned __r) {
    for (; __mask; __mask &= __mask - 1, --__r)
        if (__r == 0) return unsigned(__builtin_ctz(__mask));
    return 32u;
}
// The bits of __lanes (lanes of the warp) renumbered by their rank in __mask.
inline unsigned __pack(unsigned __mask, unsigned __lanes) {
    unsigned __out = 0, __r = 0;
    for (; __mask; __mask &= __mask - 1, ++__r)
        if (__lanes & __mask & -__mask) __out |= 1u << __r;
    return __out;
}

// A warp shuffle of any trivially copyable value, 8 bytes at a time (CUDA's groups take up to
// 32-byte values). __arg, __width: as for __shfl*_sync.
template <class _Tp>
inline _Tp __shuffle(int __op, const char *__file, int __line, unsigned __mask, const _Tp &__v,
                     int __arg, int __width) {
    static_assert(std::is_trivially_copyable<_Tp>::value,
                  "cooperative groups shuffle trivially copyable values only");
    static_assert(sizeof(_Tp) <= 32, "cooperative groups collectives take values of at most 32 bytes");
    if constexpr (sizeof(_Tp) <= 8) {
        return ::pmpp::shfl(__op, __file, __line, __mask, __v, __arg, __width);
    } else {
        unsigned char __bytes[sizeof(_Tp)];
        __builtin_memcpy(__bytes, &__v, sizeof(_Tp));
        for (size_t __at = 0; __at < sizeof(_Tp); __at += 8) {
            uint64_t __word = 0;
            const size_t __n = sizeof(_Tp) - __at < 8 ? sizeof(_Tp) - __at : 8;
            __builtin_memcpy(&__word, __bytes + __at, __n);
            __word = ::pmpp::shfl(__op, __file, __line, __mask, __word, __arg, __width);
            __builtin_memcpy(__bytes + __at, &__word, __n);
        }
        _Tp __out;
        __builtin_memcpy(&__out, __bytes, sizeof(_Tp));
        return __out;
    }
}
// Every lane of __mask reads __v of its own __src_lane.
template <class _Tp>
inline _Tp __from_lane(const char *__file, int __line, unsigned __mask, const _Tp &__v,
                       unsigned __src_lane) {
    return __shuffle(PMPP_W_SHFL_IDX, __file, __line, __mask, __v, int(__src_lane), 32);
}
}  // namespace __pmpp_cg

// ---- thread_group: the run-time typed group (a block, or lanes of one warp) -----------------
class thread_group {
  protected:
    unsigned __type_;
    unsigned __mask_ = 0;  // the lanes, for warp-level groups
    unsigned __meta_rank_ = 0, __meta_size_ = 1;
    bool __tiled_ = false;

    explicit thread_group(unsigned __type) : __type_(__type) {}
    thread_group(unsigned __mask, unsigned __meta_rank, unsigned __meta_size, bool __tiled)
        : __type_(__pmpp_cg::__coalesced_id), __mask_(__mask), __meta_rank_(__meta_rank),
          __meta_size_(__meta_size), __tiled_(__tiled) {}
    friend thread_group tiled_partition(const thread_group &, unsigned);

  public:
    unsigned get_type() const { return __type_; }
    unsigned long long num_threads() const {
        return __type_ == __pmpp_cg::__block_id ? __pmpp_cg::__block_size()
                                                 : unsigned(__builtin_popcount(__mask_));
    }
    unsigned long long size() const { return num_threads(); }
    unsigned long long thread_rank() const {
        return __type_ == __pmpp_cg::__block_id
                   ? __pmpp_cg::__block_rank()
                   : unsigned(__builtin_popcount(__mask_ & __pmpp_cg::__lanes_below()));
    }
    void sync(PMPP_CG_CALLER) const {
        if (__type_ == __pmpp_cg::__block_id) pmpp_syncthreads(__file, __line);
        else ::pmpp::syncwarp(__file, __line, __mask_);
    }
};

// ---- thread_block ---------------------------------------------------------------------------
class thread_block : public thread_group {
    thread_block() : thread_group(__pmpp_cg::__block_id) {}
    friend thread_block this_thread_block();

  public:
    struct arrival_token {};
    static void sync(PMPP_CG_CALLER) { pmpp_syncthreads(__file, __line); }
    // A split barrier: arriving does nothing, waiting is the whole barrier.
    arrival_token barrier_arrive() const { return arrival_token(); }
    void barrier_wait(arrival_token &&, PMPP_CG_CALLER) const { pmpp_syncthreads(__file, __line); }
    static unsigned size() { return __pmpp_cg::__block_size(); }
    static unsigned num_threads() { return __pmpp_cg::__block_size(); }
    static unsigned thread_rank() { return __pmpp_cg::__block_rank(); }
    static dim3 group_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    static dim3 thread_index() { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    static dim3 group_dim() { return blockDim; }
    static dim3 dim_threads() { return blockDim; }
};

inline thread_block this_thread_block() { return thread_block(); }

// ---- thread_block_tile<N>: N consecutive lanes of a warp ------------------------------------
template <unsigned _Np, class _Parent = void>
class thread_block_tile;

namespace __pmpp_cg {
template <unsigned _Np>
class __tile : public thread_group {
    static_assert(_Np != 0 && _Np <= 32 && (_Np & (_Np - 1)) == 0,
                  "pmpp's CPU engine has thread_block_tile<N> for N = 1, 2, 4, 8, 16 and 32 only: "
                  "for more threads use the thread_block (this_thread_block()) and __syncthreads()");

  protected:
    static unsigned __first_lane() { return __lane() & ~(_Np - 1); }
    static unsigned __tile_mask() {
        return _Np == 32 ? ~0u : ((1u << (_Np & 31u)) - 1u) << __first_lane();
    }
    __tile(unsigned __meta_rank, unsigned __meta_size)
        : thread_group(__tile_mask(), __meta_rank, __meta_size, true) {}
    template <class _Tp>
    _Tp __shfl_op(int __op, const char *__file, int __line, const _Tp &__v, int __arg) const {
        return __shuffle(__op, __file, __line, __tile_mask(), __v, __arg, int(_Np));
    }

  public:
    static constexpr unsigned num_threads() { return _Np; }
    static constexpr unsigned size() { return _Np; }
    static unsigned thread_rank() { return __block_rank() & (_Np - 1); }
    unsigned meta_group_rank() const { return __meta_rank_; }
    unsigned meta_group_size() const { return __meta_size_; }
    static void sync(PMPP_CG_CALLER) { ::pmpp::syncwarp(__file, __line, __tile_mask()); }

    template <class _Tp>
    _Tp shfl(const _Tp &__v, int __src_rank, PMPP_CG_CALLER) const {
        return __shfl_op(PMPP_W_SHFL_IDX, __file, __line, __v, __src_rank);
    }
    template <class _Tp>
    _Tp shfl_down(const _Tp &__v, unsigned __delta, PMPP_CG_CALLER) const {
        return __shfl_op(PMPP_W_SHFL_DOWN, __file, __line, __v, int(__delta));
    }
    template <class _Tp>
    _Tp shfl_up(const _Tp &__v, unsigned __delta, PMPP_CG_CALLER) const {
        return __shfl_op(PMPP_W_SHFL_UP, __file, __line, __v, int(__delta));
    }
    template <class _Tp>
    _Tp shfl_xor(const _Tp &__v, unsigned __lane_mask, PMPP_CG_CALLER) const {
        return __shfl_op(PMPP_W_SHFL_XOR, __file, __line, __v, int(__lane_mask));
    }
    int any(int __pred, PMPP_CG_CALLER) const {
        return ::pmpp::vote(PMPP_W_BALLOT, __file, __line, __tile_mask(), __pred) != 0;
    }
    int all(int __pred, PMPP_CG_CALLER) const {
        return ::pmpp::vote(PMPP_W_BALLOT, __file, __line, __tile_mask(), __pred) ==
               (__tile_mask() & pmpp_activemask());
    }
    unsigned ballot(int __pred, PMPP_CG_CALLER) const {
        return ::pmpp::vote(PMPP_W_BALLOT, __file, __line, __tile_mask(), __pred) >> __first_lane();
    }
    template <class _Tp>
    unsigned match_any(_Tp __v, PMPP_CG_CALLER) const {
        return ::pmpp::match_any(__file, __line, __tile_mask(), __v) >> __first_lane();
    }
    template <class _Tp>
    unsigned match_all(_Tp __v, int &__pred, PMPP_CG_CALLER) const {
        return ::pmpp::match_all(__file, __line, __tile_mask(), __v, &__pred) >> __first_lane();
    }

    // For reduce and scan: the lanes of the tile that exist (a block's last warp may be partial).
    unsigned __members() const {
        const unsigned __first = __block_rank() & ~(_Np - 1), __total = __block_size();
        return __total - __first < _Np ? __total - __first : _Np;
    }
    unsigned __lane_of(unsigned __rank) const { return __first_lane() + __rank; }
    unsigned __member_mask() const { return __tile_mask(); }
};
}  // namespace __pmpp_cg

template <unsigned _Np>
class thread_block_tile<_Np, void> : public __pmpp_cg::__tile<_Np> {
    template <unsigned, class>
    friend class thread_block_tile;

  protected:
    thread_block_tile(unsigned __meta_rank, unsigned __meta_size)
        : __pmpp_cg::__tile<_Np>(__meta_rank, __meta_size) {}
};

template <unsigned _Np, class _Parent>
class thread_block_tile : public thread_block_tile<_Np, void> {
    template <unsigned _Mp, class _Of>
    friend thread_block_tile<_Mp, _Of> tiled_partition(const _Of &);
    friend thread_block_tile<1, void> this_thread();
    thread_block_tile(unsigned __meta_rank, unsigned __meta_size)
        : thread_block_tile<_Np, void>(__meta_rank, __meta_size) {}
};

template <unsigned _Np, class _Parent>
thread_block_tile<_Np, _Parent> tiled_partition(const _Parent &__parent) {
    if constexpr (!std::is_same<_Parent, thread_block>::value) {
        static_assert(std::is_base_of<__pmpp_cg::__tile<_Parent::num_threads()>, _Parent>::value,
                      "tiled_partition<N>() partitions a thread_block or a thread_block_tile");
        static_assert(_Np < _Parent::num_threads(), "Tile size bigger or equal to the parent group size");
    }
    const unsigned __rank = unsigned(__parent.thread_rank()), __size = unsigned(__parent.size());
    return thread_block_tile<_Np, _Parent>(__rank / _Np, (__size + _Np - 1) / _Np);
}

inline thread_block_tile<1, void> this_thread() {
    return thread_block_tile<1, thread_block>(0, 1);
}

// ---- coalesced_group: the lanes of a warp that arrive together --------------------------------
class coalesced_group : public thread_group {
    friend coalesced_group coalesced_threads(const char *, int);
    friend coalesced_group tiled_partition(const coalesced_group &, unsigned);
    friend coalesced_group __pmpp_labeled(unsigned, int, const char *, int);

    coalesced_group(unsigned __mask, unsigned __meta_rank = 0, unsigned __meta_size = 1,
                    bool __tiled = false)
        : thread_group(__mask, __meta_rank, __meta_size, __tiled) {}
    template <class _Tp>
    _Tp __from_rank_or_own(const char *__file, int __line, const _Tp &__v, long __rank) const {
        const bool __inside = __rank >= 0 && __rank < long(size());
        const unsigned __src = __inside ? __lane_of(unsigned(__rank)) : __pmpp_cg::__lane();
        return __pmpp_cg::__from_lane(__file, __line, __mask_, __v, __src);
    }

  public:
    unsigned num_threads() const { return unsigned(__builtin_popcount(__mask_)); }
    unsigned size() const { return num_threads(); }
    unsigned thread_rank() const {
        return unsigned(__builtin_popcount(__mask_ & __pmpp_cg::__lanes_below()));
    }
    unsigned meta_group_rank() const { return __meta_rank_; }
    unsigned meta_group_size() const { return __meta_size_; }
    void sync(PMPP_CG_CALLER) const { ::pmpp::syncwarp(__file, __line, __mask_); }

    template <class _Tp>
    _Tp shfl(const _Tp &__v, int __src_rank, PMPP_CG_CALLER) const {
        return __pmpp_cg::__from_lane(__file, __line, __mask_, __v,
                                      __lane_of(unsigned(__src_rank) % size()));
    }
    template <class _Tp>
    _Tp shfl_down(const _Tp &__v, unsigned __delta, PMPP_CG_CALLER) const {
        return __from_rank_or_own(__file, __line, __v, long(thread_rank()) + long(__delta));
    }
    template <class _Tp>
    _Tp shfl_up(const _Tp &__v, unsigned __delta, PMPP_CG_CALLER) const {
        return __from_rank_or_own(__file, __line, __v, long(thread_rank()) - long(__delta));
    }
    int any(int __pred, PMPP_CG_CALLER) const {
        return ::pmpp::vote(PMPP_W_BALLOT, __file, __line, __mask_, __pred) != 0;
    }
    int all(int __pred, PMPP_CG_CALLER) const {
        return ::pmpp::vote(PMPP_W_BALLOT, __file, __line, __mask_, __pred) ==
               (__mask_ & pmpp_activemask());
    }
    unsigned ballot(int __pred, PMPP_CG_CALLER) const {
        return __pmpp_cg::__pack(__mask_, ::pmpp::vote(PMPP_W_BALLOT, __file, __line, __mask_, __pred));
    }
    template <class _Tp>
    unsigned match_any(_Tp __v, PMPP_CG_CALLER) const {
        return __pmpp_cg::__pack(__mask_, ::pmpp::match_any(__file, __line, __mask_, __v));
    }
    template <class _Tp>
    unsigned match_all(_Tp __v, int &__pred, PMPP_CG_CALLER) const {
        return __pmpp_cg::__pack(__mask_, ::pmpp::match_all(__file, __line, __mask_, __v, &__pred));
    }

    unsigned __members() const { return size(); }
    unsigned __lane_of(unsigned __rank) const { return __pmpp_cg::__nth_lane(__mask_, __rank); }
    unsigned __member_mask() const { return __mask_; }
};

// The lanes that reach a coalesced_threads() call together. __activemask() on the engine is the
// warp's non-exited lanes, so the group is found by a rendezvous of those lanes: the ones at a
// coalesced_threads() call (of this line: an if and its else are two groups) form it, the others
// must have exited. A lane that waits at another warp primitive instead cannot be told apart
// from one a GPU would have left out, so that is an error rather than a wrong group.
inline coalesced_group coalesced_threads(PMPP_CG_CALLER) {
    constexpr uint64_t __at_coalesced_threads = 0x70cc'c0a1'e5ce'0001ull;
    const unsigned __live = pmpp_activemask();
    const unsigned __here = ::pmpp::match_any(__file, __line, __live, __at_coalesced_threads);
    if (pmpp_activemask() & ~__here) {
        pmpp_trap("cooperative_groups::coalesced_threads() while other lanes of its warp waited at "
                  "another warp primitive (the CPU engine cannot tell which lanes a GPU would "
                  "have converged; make the whole warp, or one branch whose other lanes return, "
                  "call it, or use tiled_partition)",
                  __file, __line);
    }
    const uint64_t __site = uint64_t(uintptr_t(__file)) * 0x9e37'79b9'7f4a'7c15ull + unsigned(__line);
    return coalesced_group(::pmpp::match_any(__file, __line, __here, __site));
}

// ---- labeled_partition / binary_partition: the group's lanes with the same label -------------
// A rendezvous of the parent's lanes (every one must call it, as on a GPU), each learning which
// lanes hold its label: __match_any_sync over the parent's mask.
inline coalesced_group __pmpp_labeled(unsigned __parent_mask, int __label, const char *__file, int __line) {
    return coalesced_group(::pmpp::match_any(__file, __line, __parent_mask, __label));
}
inline coalesced_group labeled_partition(const coalesced_group &__parent, int __label, PMPP_CG_CALLER) {
    return __pmpp_labeled(__parent.__member_mask(), __label, __file, __line);
}
template <unsigned _Np, class _Parent>
coalesced_group labeled_partition(const thread_block_tile<_Np, _Parent> &__parent, int __label, PMPP_CG_CALLER) {
    return __pmpp_labeled(__parent.__member_mask(), __label, __file, __line);
}
inline coalesced_group binary_partition(const coalesced_group &__parent, bool __pred, PMPP_CG_CALLER) {
    return __pmpp_labeled(__parent.__member_mask(), int(__pred), __file, __line);
}
template <unsigned _Np, class _Parent>
coalesced_group binary_partition(const thread_block_tile<_Np, _Parent> &__parent, bool __pred, PMPP_CG_CALLER) {
    return __pmpp_labeled(__parent.__member_mask(), int(__pred), __file, __line);
}

// ---- dynamic tiled_partition: tiles of n = 1, 2, 4, 8, 16 or 32 threads -----------------------
namespace __pmpp_cg {
inline void __check_tile_size(unsigned __n, const char *__file, int __line) {
    if (__n == 0 || __n > 32 || (__n & (__n - 1)))
        pmpp_trap("cooperative_groups::tiled_partition(parent, n) with n other than 1, 2, 4, 8, 16 "
                  "or 32", __file, __line);
}
}  // namespace __pmpp_cg

inline coalesced_group tiled_partition(const coalesced_group &__parent, unsigned __n) {
    __pmpp_cg::__check_tile_size(__n, __builtin_FILE(), __builtin_LINE());
    const unsigned __rank = __parent.thread_rank(), __size = __parent.size();
    if (__size <= __n) return __parent;
    const unsigned __first = __rank - __rank % __n;
    unsigned __mask = 0;
    for (unsigned __r = __first; __r < __first + __n && __r < __size; ++__r)
        __mask |= 1u << __parent.__lane_of(__r);
    return coalesced_group(__mask, __rank / __n, (__size + __n - 1) / __n, __parent.__tiled_);
}

inline thread_group tiled_partition(const thread_group &__parent, unsigned __n) {
    __pmpp_cg::__check_tile_size(__n, __builtin_FILE(), __builtin_LINE());
    if (__parent.get_type() == __pmpp_cg::__coalesced_id)
        return tiled_partition(static_cast<const coalesced_group &>(__parent), __n);
    const unsigned __rank = __pmpp_cg::__block_rank(), __size = __pmpp_cg::__block_size();
    const unsigned __first = __rank & ~(__n - 1);
    const unsigned __count = __size - __first < __n ? __size - __first : __n;
    const unsigned __mask = (__count == 32 ? ~0u : (1u << __count) - 1u)
                            << (__pmpp_cg::__lane() & ~(__n - 1));
    return thread_group(__mask, __rank / __n, (__size + __n - 1) / __n, true);
}

// ---- free functions -----------------------------------------------------------------------
template <class _Group>
inline void sync(const _Group &__g, PMPP_CG_CALLER) { __g.sync(__file, __line); }
template <class _Group>
inline auto thread_rank(const _Group &__g) -> decltype(__g.thread_rank()) { return __g.thread_rank(); }
template <class _Group>
inline auto group_size(const _Group &__g) -> decltype(__g.num_threads()) { return __g.num_threads(); }

// ---- what needs a launch pmpp does not make -------------------------------------------------
class grid_group {
  public:
    template <class _Tp = void>
    void sync() const {
        static_assert(::pmpp::unsupported<_Tp>, "grid_group::sync() is not supported");
    }
};
template <class _Tp = void>
inline grid_group this_grid() {
    static_assert(::pmpp::unsupported<_Tp>,
                  "cooperative_groups::this_grid() needs a cooperative launch "
                  "(cudaLaunchCooperativeKernel), which pmpp does not make: end the kernel where the "
                  "grid must synchronize and launch a second kernel for the rest");
    return grid_group();
}
class cluster_group {};
template <class _Tp = void>
inline cluster_group this_cluster() {
    static_assert(::pmpp::unsupported<_Tp>,
                  "cooperative_groups::this_cluster() needs a thread-block-cluster launch, which "
                  "pmpp's CPU engine does not make: share data between blocks through global memory");
    return cluster_group();
}

}  // namespace cooperative_groups

#endif
