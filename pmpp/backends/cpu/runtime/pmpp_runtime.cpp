// pmpp_runtime.cpp: the CPU engine's execution model for CUDA kernels.
//
// A launch spreads the grid's blocks over a pool of OS threads (one per core), which pull
// linear block indices from an atomic counter; a block never migrates. Inside a block every
// CUDA thread is a user-level fiber with its own stack, and a small round-robin scheduler of
// our own runs the fibers of the block one after another on its OS thread: a fiber runs until
// it reaches __syncthreads() or a warp primitive, or polls a flag (see note_poll), then switches
// to the next fiber.
//
// Why fcontext and our own scheduler: a barrier costs one switch into and one out of every
// fiber. Measured on the 2-core development machine for a 2^20-float shared-memory tree
// reduction with 1024-thread blocks: Boost.Context fcontext (make_fcontext/jump_fcontext, a
// few register moves, no system call) with this scheduler 9-13 ns per thread per barrier;
// Boost.Fiber 42-103 ns (its scheduler and synchronisation are general-purpose); glibc
// swapcontext ~390 ns (it saves and restores the signal mask with a system call on every
// switch); one OS thread per CUDA thread ~1 us (kernel futex wake-ups).
//
// Checked builds are compiled with g++'s ThreadSanitizer instrumentation but without its runtime
// library (see toolchain.py): kernel code then calls __tsan_{read,write}N(addr) before every
// load and store of memory that may be shared. The definitions at the end of this file turn those
// calls into bounds checks against the launch's known regions (argument arrays with red zones,
// __shared__ arrays with red zones, the module's globals, the fiber's own stack), into a
// happens-before race detector for shared memory, and into a record of which blocks read and
// wrote each element of the argument arrays, for races between blocks on global memory.
// (AddressSanitizer's call instrumentation, -fsanitize=kernel-address, would do for bounds, but it
// skips the check of an address already checked in the same basic block: the store of
// `sdata[tid] += x` is never reported, and a race detector needs every write.)
//
// This file is compiled without instrumentation into its own shared library, loaded once per
// worker process; every kernel module links against it.

#include "pmpp_abi.h"

#include <boost/context/detail/fcontext.hpp>
#include <dlfcn.h>
#include <sys/mman.h>
#ifdef __APPLE__
#include <mach-o/dyld.h>
#include <mach-o/loader.h>
#include <mach-o/nlist.h>
#else
#include <link.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace bctx = boost::context::detail;

extern "C" {
__thread pmpp_thread_ctx *pmpp_cur __attribute__((tls_model("initial-exec"))) = nullptr;
}

namespace {

constexpr uint32_t kMaxThreads = 1024;
constexpr size_t kStaticSharedLimit = 48 * 1024;  // CUDA's limit for static __shared__
constexpr size_t kSharedLimit = 227 * 1024;       // most shared memory a block can have (H100)
constexpr const char *kOwnTarget = "sm_90 (H100)"; // whose limits those are
constexpr size_t kRedZone = 128;                  // checked builds: gap around __shared__ arrays
constexpr size_t kArenaCap = 512 * 1024;
constexpr int kMaxSlots = 256;
constexpr size_t kGlobalShadowCap = size_t(1) << 30;  // bytes of GlobalShadow per launch, at most

// How kernel code touched memory: volatile and atomic accesses are how blocks pass values to each
// other, so they never race with another block's accesses; within a block, volatile ones are
// ordinary accesses (volatile orders nothing between threads).
enum AccessKind : uint8_t { ACCESS_PLAIN, ACCESS_VOLATILE, ACCESS_ATOMIC };

enum State : uint8_t { RUNNABLE, AT_BARRIER, AT_WARP, DONE };

struct Worker;
struct Launch;

struct Fiber {
    pmpp_thread_ctx c;  // must be first: pmpp_cur points here
    bctx::fcontext_t fctx;
    Worker *w;
    State state;
    uint32_t lin, lane, warp;
    const char *bar_file;
    int bar_line;
    int wop;
    uint32_t wmask;
    uint64_t wval;
    int warg, wwidth;
    const char *wfile;
    int wline;
    uint64_t wres;
    int32_t stack;  // index of the stack it runs on; -1: not started yet
    char *stack_lo, *stack_hi;
    // Count builds (see "counters"): this lane's events since the last barrier are the first pos
    // of a trace of its warp's, or, once it went apart (apart), all in a log of its own.
    struct WarpTrace *trace;  // null: not counting
    struct EvLog *log;
    uint32_t pos;
    bool apart;
};

struct Stack {
    char *lo, *hi;
};

struct Warp {
    uint32_t live;     // lanes that exist and have not exited
    uint32_t arrived;  // lanes waiting in a warp primitive
    uint32_t exist;    // lanes that exist
    uint32_t ndone;    // count builds: lanes that exited
    uint32_t parked;   // count builds: lanes that exited or wait at __syncthreads()
};

struct Count;

struct ShRegion {
    char *base;
    size_t size, elem;
    const char *name, *type;
    int rank;
    uint32_t ext[4];
    bool dynamic;
};

struct Site {
    const void *key;
    char *ptr;
};

// Race detector shadow: per byte of the shared arena, the last write and up to two reads, each
// with the barrier epoch and the thread's own lane clock (see LaneClocks) when it was made.
struct Acc {
    uintptr_t pc;
    uint32_t epoch, clock, tid;
    // A write that is an update (x += v: its thread read the byte before, in the epoch): 1 + the low
    // 32 bits of that read's pc; kAtomicWrite for an atomic (atomicAdd and its kin); else 0.
    uint32_t update;
};
constexpr uint32_t kAtomicWrite = UINT32_MAX;
struct Shadow {
    Acc w, r1, r2;
};

// Race detector: how far each lane of a warp is ordered after its warp-mates, within the present
// barrier epoch (a vector clock per lane). own[k] counts the warp-level synchronisations lane k took
// part in: its accesses are stamped with own[k] + 1. Lane l is ordered after lane k's accesses
// stamped up to the larger of of[l][k] (what synchronisations of some lanes taught it, valid while
// row_epoch[l] is the epoch) and all[k] (the last synchronisation of the whole warp, valid while
// all_epoch is). Only the lanes in a primitive's mask are ordered by it (CUDA's memory model, as
// racecheck has it): lanes 0-15 meeting in a __syncwarp(0xffff) order nothing for lane 16.
struct LaneClocks {
    uint32_t own[32], all[32], all_epoch;
    uint32_t row_epoch[32], of[32][32];
};

// Races between blocks (checked builds): per element ("granule") of each writable argument array,
// the two lowest-numbered blocks that wrote it with plain stores and the lowest code offset of
// those stores, and the same for plain loads (see with_access). These are functions of the set of
// accesses, not of the order in which OS threads happened to run the blocks, so a launch reports
// the same race every run.
struct GlobalShadow {
    std::atomic<uint64_t> wrote, read;
};

struct GlobalRegion {
    GlobalShadow *shadow = nullptr;  // null: not tracked (read-only arrays, __constant__ variables)
    uintptr_t base = 0;
    uint32_t shift = 0;  // log2 of the granule: the element size where it is a power of two
    std::atomic<uint64_t> first_conflict{UINT64_MAX};  // lowest granule that two blocks race on
};

struct Launch {
    pmpp_launch_desc *d;
    uint32_t bx, by, bz, gx, gy, gz, nthr;
    uint64_t nblocks;
    bool check, count;
    std::atomic<uint64_t> next{0};
    // Block index of the error being reported (UINT64_MAX: none). When several blocks fail, the
    // lowest-numbered one is reported, so that the message is the same from run to run.
    std::atomic<uint64_t> fail_block{UINT64_MAX};
    std::mutex mu;
    std::vector<std::pair<uintptr_t, uintptr_t>> segs;  // module's loaded segments
    std::unique_ptr<GlobalRegion[]> global;  // checked builds: per region of d, see GlobalShadow
    void *global_map = nullptr;
    size_t global_map_bytes = 0;
    uintptr_t code_base = 0;  // the module's load address: code offsets are relative to it
};

struct Worker {
    int slot = 0;
    Fiber *fibers = nullptr;
    bctx::fcontext_t sched = nullptr;
    bctx::fcontext_t dead_slot = nullptr;  // where a finished fiber's context goes (never resumed)
    Stack *stacks = nullptr;
    std::vector<uint32_t> free_stacks;  // LIFO: the most recently used (cache-warm) stack first
    Launch *L = nullptr;
    uint32_t n = 0, ndone = 0, nbar = 0, nwarp = 0;
    Warp warps[32];
    pmpp_dim bid{};
    uint64_t cur_block = 0;
    char *arena = nullptr;
    size_t arena_used = 0, static_bytes = 0;
    char *dyn_base = nullptr;
    size_t dyn_size = 0;
    bool dyn_registered = false;
    std::vector<Site> sites;
    std::vector<ShRegion> regions;
    int bar_pending = 0, bar_result = 0, bar_arrived = 0;
    Shadow *shadow = nullptr;
    LaneClocks *clocks = nullptr;  // checked builds: per warp
    uint32_t epoch = 1;
    Count *cnt = nullptr;  // count builds
    struct SiteRegion {  // count builds: per code address, where its accesses land (see site_region)
        uint64_t tag;     // the event key without the space (0: none)
        uintptr_t base;   // the array's start, and the offset of the last access of tag's size in it
        uintptr_t last;
        int space;
    };
    static constexpr size_t kSiteRegions = 256;
    SiteRegion site_regions[kSiteRegions] = {};
};

Worker *g_workers[kMaxSlots];
size_t g_stack_size = 0;
size_t g_page = 4096;

const char *const kWarpOpNames[PMPP_W_NUM_OPS] = {
    "__syncwarp",        "__shfl_sync",       "__shfl_up_sync",    "__shfl_down_sync",
    "__shfl_xor_sync",   "__ballot_sync",     "__any_sync",        "__all_sync",
    "__match_any_sync",  "__match_all_sync",  "__reduce_add_sync", "__reduce_min_sync",
    "__reduce_max_sync", "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync",
    "__reduce_or_sync",  "__reduce_xor_sync"};

inline Fiber *cur_fiber() { return reinterpret_cast<Fiber *>(pmpp_cur); }

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

std::string coord(const pmpp_dim &d) { return fmt("(%u,%u,%u)", d.x, d.y, d.z); }

// A code address as a marker the Python side turns into "file.cu:line" (lines.py).
std::string pc_marker(uintptr_t pc) {
    Dl_info info;
    if (pc && dladdr(reinterpret_cast<void *>(pc - 1), &info) && info.dli_fname)
        return fmt("{{pc:%s:0x%lx}}", info.dli_fname,
                   (unsigned long)(pc - 1 - reinterpret_cast<uintptr_t>(info.dli_fbase)));
    return "an unknown location";
}

const char *kname(const Launch *L) { return L->d->kernel_name ? L->d->kernel_name : "?"; }

void report(Launch *L, int kind, const std::string &msg, uint64_t block = 0) {
    std::lock_guard<std::mutex> lock(L->mu);
    if (L->d->error_kind == PMPP_OK || block < L->fail_block.load(std::memory_order_relaxed)) {
        L->d->error_kind = kind;
        snprintf(L->d->error_msg, PMPP_ERROR_MSG_LEN, "%s", msg.c_str());
        L->fail_block.store(block, std::memory_order_relaxed);
    }
}

// Stop the launch from inside a fiber: record the error and switch back to the scheduler,
// never to be resumed (the block and the launch are abandoned).
[[noreturn]] void fiber_fail(Fiber *f, int kind, const std::string &msg) {
    Worker *w = f->w;
    report(w->L, kind, msg, w->cur_block);
    f->state = DONE;
    bctx::jump_fcontext(w->sched, &w->dead_slot);
    __builtin_unreachable();
}

// Context switches go straight from one fiber to the next runnable one in the sweep (one jump,
// not two through the scheduler). The jump carries the address where the resumed side stores
// the context of whoever jumped to it.
inline void switch_to(bctx::fcontext_t *my_slot, bctx::fcontext_t target) {
    bctx::transfer_t t = bctx::jump_fcontext(target, my_slot);
    *static_cast<bctx::fcontext_t *>(t.data) = t.fctx;
}

// The next runnable fiber after ``from`` in this sweep, or null at the end of the sweep.
inline Fiber *next_runnable(Worker *w, uint32_t from) {
    for (uint32_t i = from; i < w->n; ++i)
        if (w->fibers[i].state == RUNNABLE) return &w->fibers[i];
    return nullptr;
}

void fiber_entry(bctx::transfer_t t);

// Give a fiber that has not started yet a stack of its own, and its initial context.
inline void start_on_free_stack(Worker *w, Fiber *g) {
    const uint32_t k = w->free_stacks.back();
    w->free_stacks.pop_back();
    g->stack = int32_t(k);
    g->stack_lo = w->stacks[k].lo;
    g->stack_hi = w->stacks[k].hi;
    g->fctx = bctx::make_fcontext(g->stack_hi, size_t(g->stack_hi - g->stack_lo), fiber_entry);
}

inline bool block_failed(Worker *w) {
    return w->L->fail_block.load(std::memory_order_relaxed) <= w->cur_block;
}

// The current fiber waits: continue with the next runnable fiber of the sweep, or return to the
// scheduler at the end of the sweep.
inline void switch_away(Worker *w, Fiber *f) {
    Fiber *g = block_failed(w) ? nullptr : next_runnable(w, f->lin + 1);
    if (!g) {
        switch_to(&f->fctx, w->sched);
        return;
    }
    if (g->stack < 0) start_on_free_stack(w, g);
    pmpp_cur = &g->c;
    switch_to(&f->fctx, g->fctx);
}

inline void yield(Worker *w) { switch_away(w, cur_fiber()); }

// A volatile load, or an atomic that left memory as it was, of address a: after
// PMPP_POLLS_BEFORE_YIELD of them in a row the thread is taken to wait for another thread of its
// block, and lets the others run (the prelude's atomics do the same inline, see note_poll there).
inline void note_poll(const void *a) {
    Fiber *f = cur_fiber();
    if (!f) return;
    if (f->c.poll_addr != a) {
        f->c.poll_addr = a;
        f->c.poll_count = 0;
    } else if (++f->c.poll_count >= PMPP_POLLS_BEFORE_YIELD) {
        f->c.poll_count = 0;
        yield(f->w);
    }
}

// "(0,0,0)-(99,0,0) (100 threads)" for a set of linear thread indices.
std::string describe_threads(Worker *w, const std::vector<uint32_t> &ids) {
    std::string out;
    size_t i = 0, shown = 0;
    while (i < ids.size() && shown < 3) {
        size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
        if (!out.empty()) out += ", ";
        out += coord(w->fibers[ids[i]].c.thread_idx);
        if (j > i) out += "-" + coord(w->fibers[ids[j]].c.thread_idx);
        ++shown;
        i = j + 1;
    }
    if (i < ids.size()) out += ", ...";
    out += fmt(" (%zu thread%s)", ids.size(), ids.size() == 1 ? "" : "s");
    return out;
}

// ---- warps ------------------------------------------------------------------------------

uint32_t shfl_source(int op, uint32_t lane, uint32_t b, int width) {
    if (width <= 0 || width > 32 || (width & (width - 1))) width = 32;
    const uint32_t lo = lane & ~uint32_t(width - 1) & 31u, hi = lo + uint32_t(width) - 1;
    b &= 31u;
    switch (op) {
        case PMPP_W_SHFL_IDX: return lo | (b & uint32_t(width - 1));
        case PMPP_W_SHFL_UP: return (int(lane) - int(b) >= int(lo)) ? lane - b : lane;
        case PMPP_W_SHFL_DOWN: return (lane + b <= hi) ? lane + b : lane;
        default: {  // xor (butterfly): earlier groups may be read, later ones give own value
            uint32_t j = lane ^ b;
            return j <= hi ? j : lane;
        }
    }
}

// How far lane l is ordered after lane k's accesses in barrier epoch E (see LaneClocks).
inline uint32_t lane_known(const LaneClocks &C, uint32_t l, uint32_t k, uint32_t E) {
    return std::max(C.row_epoch[l] == E ? C.of[l][k] : 0u, C.all_epoch == E ? C.all[k] : 0u);
}

// A warp-level synchronisation of the lanes `need` in barrier epoch E: each of them is ordered
// after what every one of them (and every lane that exited, which no longer holds a primitive up)
// did before it. No lane knows more of lane k than own[k] + 1, so a synchronisation of the whole
// warp orders every lane after that (the common case, 32 stores); one of some lanes joins their rows.
void join_lane_clocks(LaneClocks &C, uint32_t need, uint32_t exited, uint32_t exist, uint32_t E) {
    const uint32_t joining = need | exited;
    if (joining == exist) {
        for (uint32_t k = 0; k < 32; ++k) C.all[k] = C.own[k] + 1;
        C.all_epoch = E;
    } else {
        uint32_t joined[32];
        for (uint32_t k = 0; k < 32; ++k) joined[k] = C.all_epoch == E ? C.all[k] : 0u;
        for (uint32_t m = joining; m; m &= m - 1) {
            const uint32_t r = __builtin_ctz(m);
            if (C.row_epoch[r] == E)
                for (uint32_t k = 0; k < 32; ++k) joined[k] = std::max(joined[k], C.of[r][k]);
            joined[r] = C.own[r] + 1;
        }
        for (uint32_t m = need; m; m &= m - 1) {
            const uint32_t l = __builtin_ctz(m);
            memcpy(C.of[l], joined, sizeof joined);
            C.row_epoch[l] = E;
        }
    }
    for (uint32_t m = need; m; m &= m - 1) C.own[__builtin_ctz(m)]++;
}

// The last lane of a group to arrive computes every lane's result into its own slot, so a fast
// lane starting the next primitive cannot overwrite a value a slow lane has not read yet.
void warp_complete(Worker *w, uint32_t wi, uint32_t need) {
    Fiber *lanes = &w->fibers[wi * 32];
    uint32_t ballot = 0;
    uint32_t sum = 0, and_ = ~0u, or_ = 0, xor_ = 0, minu = ~0u, maxu = 0;
    int32_t mini = INT32_MAX, maxi = INT32_MIN;
    for (uint32_t m = need; m; m &= m - 1) {
        const Fiber &f = lanes[__builtin_ctz(m)];
        const uint32_t v = uint32_t(f.wval);
        if (f.wval) ballot |= m & -m;
        sum += v, and_ &= v, or_ |= v, xor_ ^= v;
        minu = std::min(minu, v), maxu = std::max(maxu, v);
        mini = std::min(mini, int32_t(v)), maxi = std::max(maxi, int32_t(v));
    }
    for (uint32_t m = need; m; m &= m - 1) {
        const uint32_t l = __builtin_ctz(m);
        Fiber &f = lanes[l];
        switch (f.wop) {
            case PMPP_W_SHFL_IDX:
            case PMPP_W_SHFL_UP:
            case PMPP_W_SHFL_DOWN:
            case PMPP_W_SHFL_XOR: {
                const uint32_t j = shfl_source(f.wop, l, uint32_t(f.warg), f.wwidth);
                f.wres = ((need >> j) & 1u) ? lanes[j].wval : f.wval;
                break;
            }
            case PMPP_W_BALLOT: f.wres = ballot; break;
            case PMPP_W_ANY: f.wres = ballot != 0; break;
            case PMPP_W_ALL: f.wres = ballot == need; break;
            case PMPP_W_MATCH_ANY:
            case PMPP_W_MATCH_ALL: {
                uint32_t same = 0;
                for (uint32_t k = need; k; k &= k - 1)
                    if (lanes[__builtin_ctz(k)].wval == f.wval) same |= k & -k;
                f.wres = (f.wop == PMPP_W_MATCH_ANY) ? same : (same == need ? need : 0);
                break;
            }
            case PMPP_W_REDUCE_ADD: f.wres = sum; break;
            case PMPP_W_REDUCE_MIN_U: f.wres = minu; break;
            case PMPP_W_REDUCE_MAX_U: f.wres = maxu; break;
            case PMPP_W_REDUCE_MIN_I: f.wres = uint32_t(mini); break;
            case PMPP_W_REDUCE_MAX_I: f.wres = uint32_t(maxi); break;
            case PMPP_W_REDUCE_AND: f.wres = and_; break;
            case PMPP_W_REDUCE_OR: f.wres = or_; break;
            case PMPP_W_REDUCE_XOR: f.wres = xor_; break;
            default: f.wres = 0; break;
        }
    }
    Warp &W = w->warps[wi];
    W.arrived &= ~need;
    if (w->L->check) join_lane_clocks(w->clocks[wi], need, W.exist & ~W.live, W.exist, w->epoch);
    for (uint32_t m = need; m; m &= m - 1) {
        Fiber &f = lanes[__builtin_ctz(m)];
        if (f.state == AT_WARP) {
            f.state = RUNNABLE;
            w->nwarp--;
        }
    }
}

// An exited lane no longer holds up the warp primitives its warp-mates wait in.
void warp_lane_exit(Worker *w, Fiber *f) {
    Warp &W = w->warps[f->warp];
    W.live &= ~(1u << f->lane);
    Fiber *lanes = &w->fibers[f->warp * 32];
    bool progress = true;
    while (progress && W.arrived) {
        progress = false;
        for (uint32_t m = W.arrived; m; m &= m - 1) {
            const uint32_t need = lanes[__builtin_ctz(m)].wmask & W.live;
            if (need && (W.arrived & need) == need) {
                warp_complete(w, f->warp, need);
                progress = true;
                break;
            }
        }
    }
}

// ---- counters (count builds) ----------------------------------------------------------------
//
// What Nsight Compute counts per warp instruction, counted from the same instrumentation the
// checks use: every load and store of kernel code reaches on_access() with its address and code
// address (pc), every atomic reaches it through pmpp_check_atomic, and in count builds g++'s
// -fsanitize-coverage=trace-pc calls __sanitizer_cov_trace_pc() at the start of every basic block.
//
// The lanes of a warp run one after another, so each lane's events (the basic blocks it entered,
// the accesses it made) are logged (once for lanes that make the same ones, see WarpTrace), and
// once all lanes of the warp have exited or wait at a barrier, the warp's execution is put back
// together (count_flush) as a GPU runs it (lanes that made the same events as one, see Unit): with a
// reconvergence stack, lanes that branch apart run one path after the other and meet again at the
// branch's immediate post-dominator (the first block every path from the branch must reach), which
// is what the compiler arranges on a GPU. The control-flow graph is the one the lanes of the block
// were seen to take. Lanes that enter a block together execute its accesses together: the i-th
// access of each is one warp instruction. Each is then costed as the load/store unit does:
//   global memory: one request, and the distinct 32-byte sectors its lanes touch;
//   shared memory: wavefronts, from the banks (4-byte word index mod 32) of the words touched:
//     lanes on the same word share it (broadcast); 8-byte accesses are served per half-warp and
//     16-byte ones per quarter-warp, each part taking as many wavefronts as the most distinct
//     words one bank must deliver; a conflict is a wavefront beyond one per part that takes part;
//   atomics: as their memory space (global: a sector once per lane on its busiest address, see
//     cost_global_atomic), plus distinct addresses and same-address lanes, and over the launch
//     (global) or the block (shared) the updates of each address;
//   basic blocks: the lanes that execute them (control divergence).

// An event of a lane is a key, bytes << 52 | pc << 4 | space << 2 | op (bytes: 0 for a basic block),
// and for an access its address.

inline bool is_block(uint64_t key) { return (key & 3) == PMPP_OP_BLOCK; }

// A lane's own events since the last barrier, once it went apart from its warp's trace: the keys,
// and the addresses of the accesses among them, in plain growing arrays (appending is on the path
// of every event, so it is kept to a compare and a store or two).
struct EvLog {
    uint64_t *key = nullptr, *addr = nullptr;
    size_t n = 0, cap = 0, naddr = 0, addr_cap = 0;
    ~EvLog() {
        free(key);
        free(addr);
    }
    bool empty() const { return n == 0; }
    size_t size() const { return n; }
    void clear() { n = naddr = 0; }
    void push(uint64_t k, uint64_t a) {
        const size_t i = n;
        if (i == cap) grow();
        key[i] = k;
        n = i + 1;
        if (is_block(k)) return;
        const size_t j = naddr;
        if (j == addr_cap) grow_addr();
        addr[j] = a;
        naddr = j + 1;
    }
    void grow() {
        cap = cap ? 2 * cap : 256;
        key = static_cast<uint64_t *>(realloc(key, cap * sizeof(uint64_t)));
        if (!key) abort();
    }
    void grow_addr() {
        addr_cap = addr_cap ? 2 * addr_cap : 64;
        addr = static_cast<uint64_t *>(realloc(addr, addr_cap * sizeof(uint64_t)));
        if (!addr) abort();
    }
};

constexpr uint64_t kSiteMask = (uint64_t(1) << 52) - 1;  // the key without the bytes
constexpr uint64_t kStopKey = ~uint64_t(0);               // "the lane stops here" (barrier, exit)
inline uint64_t site_of(uint64_t key) { return key & kSiteMask; }
inline uint32_t bytes_of(uint64_t key) { return uint32_t(key >> 52); }

// Set bits of a lane mask, without the library call __builtin_popcount is where the compiler may
// not assume a popcnt instruction.
inline uint32_t lanes_in(uint32_t m) {
    m = m - ((m >> 1) & 0x55555555u);
    m = (m & 0x33333333u) + ((m >> 2) & 0x33333333u);
    return (((m + (m >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24;
}

// The events that lanes of a warp made in step since the last barrier, kept once for all of them.
// Lanes run one after another; the first to make its i-th event writes the event's key, and the
// others only compare theirs with it (the usual case: lanes alike) and, for an access, write their
// address into the event's column, so that the addresses of one warp instruction lie together
// (addr[col * 32 + lane]). Logging lanes alike thus costs a compare per lane and event instead of
// a log entry written and read back, and their replay is done once for all of them.
// A lane whose event differs from its trace branches off: it joins the trace that other lanes
// started when they branched off there with the same event, or starts one (its first events are
// the trace's up to there), so that lanes that go apart at a bounds check or a loop's end still
// share one; once a warp has kMostTraces traces, a lane that branches off logs on its own (EvLog).
struct WarpTrace {
    uint64_t *key = nullptr;   // the events' keys, in order
    uint32_t *col = nullptr;   // accesses: the event's column of addr
    uint64_t *addr = nullptr;  // 32 per column
    uint32_t n = 0, cap = 0, ncols = 0, colcap = 0;
    const WarpTrace *parent = nullptr;  // a branch: the trace it branched off, after event at - 1
    uint32_t at = 0;

    ~WarpTrace() {
        free(key);
        free(col);
        free(addr);
    }
    uint64_t address(uint32_t i, uint32_t lane) const {
        return is_block(key[i]) ? 0 : addr[size_t(col[i]) * 32 + lane];
    }
    void append(uint64_t k) {
        if (n == cap) grow();
        key[n] = k;
        if (!is_block(k)) {
            if (ncols == colcap) grow_columns();
            col[n] = ncols++;
        }
        n++;
    }
    void grow() {
        cap = cap ? 2 * cap : 1024;
        key = static_cast<uint64_t *>(realloc(key, cap * sizeof(uint64_t)));
        col = static_cast<uint32_t *>(realloc(col, cap * sizeof(uint32_t)));
        if (!key || !col) abort();
    }
    void grow_columns() {
        colcap = colcap ? 2 * colcap : 256;
        addr = static_cast<uint64_t *>(realloc(addr, size_t(colcap) * 32 * sizeof(uint64_t)));
        if (!addr) abort();
    }
    // Start as a branch of ``from`` after its first ``i`` events.
    void branch(const WarpTrace &from, uint32_t i) {
        clear();
        parent = &from, at = i;
        for (uint32_t j = 0; j < i; ++j) append(from.key[j]);
    }
    void clear() {
        n = ncols = at = 0;
        parent = nullptr;
    }
};

// Traces per warp, at most: a warp whose lanes go apart where their data differ (a histogram's
// bins) would otherwise start ever more of them, each a copy of what came before.
constexpr size_t kMostTraces = 8;

// Lanes of a warp whose events since the last barrier are the same (the same trace, as far, or one
// lane's own log), replayed as one.
struct Unit {
    uint32_t lanes = 0;
    const WarpTrace *trace = nullptr;
    const EvLog *own = nullptr;  // a lane that logged on its own
    const uint64_t *keys = nullptr;
    size_t n = 0;
    size_t size() const { return n; }
    uint64_t key(size_t i) const { return keys[i]; }
    // The addresses of the lanes' access i, their j-th, into addr[lane].
    void addresses(size_t i, size_t j, uint64_t *addr) const {
        if (own) {
            addr[__builtin_ctz(lanes)] = own->addr[j];
            return;
        }
        const uint64_t *column = &trace->addr[size_t(trace->col[i]) * 32];
        for (uint32_t m = lanes; m; m &= m - 1) addr[__builtin_ctz(m)] = column[__builtin_ctz(m)];
    }
};

struct CInst {        // one warp-level execution of a memory access
    uint32_t mask;
    const uint64_t *addr;  // per lane (32)
};

struct Row {          // the totals of one code address
    pmpp_count_row r;
    uint64_t diverged_block;  // 1 + the block whose warps in diverged_mask diverged here
    uint32_t diverged_mask;
};

// A small map from 64-bit keys (addresses, sectors, words of one warp instruction: at most a few
// dozen) to counts, emptied in time proportional to what it held: costing an instruction needs
// distinct values and how often each occurs, which sorting would make the most expensive step.
struct SmallMap {
    static constexpr size_t kSlots = 256, kMost = 160;  // past kMost the caller falls back
    uint64_t key[kSlots];
    uint32_t value[kSlots];
    uint8_t used[kSlots] = {};
    uint16_t order[kSlots];
    size_t n = 0;
    uint32_t &at(uint64_t k, bool &inserted) {
        size_t h = (k * 0x9E3779B97F4A7C15ull) >> 56;
        while (used[h] && key[h] != k) h = (h + 1) & (kSlots - 1);
        inserted = !used[h];
        if (inserted) used[h] = 1, key[h] = k, value[h] = 0, order[n++] = uint16_t(h);
        return value[h];
    }
    uint32_t add(uint64_t k) {  // the count of k, after counting it once more
        bool inserted;
        return ++at(k, inserted);
    }
    bool full() const { return n >= kMost; }
    void clear() {
        for (size_t i = 0; i < n; ++i) used[order[i]] = 0;
        n = 0;
    }
};

inline uint64_t mix(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 20; }

// Atomic updates per address: an open-addressing hash map, emptied in time proportional to what it
// held (one lookup per lane's atomic, where sorting a log of them cost more than the rest).
struct AddressCounts {
    std::vector<std::pair<uint64_t, uint64_t>> slot = std::vector<std::pair<uint64_t, uint64_t>>(64);
    std::vector<uint32_t> used;  // the occupied slots: (address + 1, updates); 0: empty
    void add(uint64_t a, uint64_t updates) {
        if (2 * (used.size() + 1) > slot.size()) grow();
        size_t h = mix(a) & (slot.size() - 1);
        while (slot[h].first && slot[h].first != a + 1) h = (h + 1) & (slot.size() - 1);
        if (!slot[h].first) slot[h].first = a + 1, used.push_back(uint32_t(h));
        slot[h].second += updates;
    }
    void grow() {
        std::vector<std::pair<uint64_t, uint64_t>> old(2 * slot.size());
        old.swap(slot);
        std::vector<uint32_t> held;
        held.swap(used);
        for (uint32_t h : held) add(old[h].first - 1, old[h].second);
    }
    void clear() {
        for (uint32_t h : used) slot[h] = {0, 0};
        used.clear();
    }
    template <class F> void each(F f) const {
        for (uint32_t h : used) f(slot[h].first - 1, slot[h].second);
    }
};

// The totals of each code address (see event keys), found by key.
struct RowTable {
    std::deque<std::pair<uint64_t, Row>> list;  // references stay valid
    std::vector<uint64_t> index;                // open addressing over list: key -> position + 1
    Row &at(uint64_t key);
    void clear() {
        list.clear();
        index.clear();
    }
};

struct Count {
    WarpTrace trace[32];         // per warp: the trace its lanes start in after a barrier
    std::vector<WarpTrace *> branches[32];     // per warp: the traces lanes branched off into
    std::vector<std::unique_ptr<WarpTrace>> branch_store;
    std::vector<WarpTrace *> free_branches;    // those not in use, the most recently used last
    std::vector<std::unique_ptr<EvLog>> logs;  // for lanes that log on their own
    std::vector<EvLog *> free_logs;
    RowTable rows;
    std::pair<uint64_t, Row *> row_cache[256] = {};  // the rows used last, by key
    std::vector<pmpp_count_sample> samples;
    std::vector<std::pair<uint64_t, uint32_t>> sample_k;  // sampled warp: executions per key
    AddressCounts atom_global;                   // updates per global address
    AddressCounts atom_shared;                   // updates per shared address, in this block
    std::vector<uint64_t> scratch;
    SmallMap small[2];
    pmpp_count_summary sum{};
    // The control-flow graph the lanes were seen to take: node 0 is where lanes resume after a
    // barrier (or start), node 1 where they stop (a barrier, or exit); the others are basic blocks.
    std::vector<uint64_t> node_key;                 // node -> block key
    std::vector<std::pair<uint64_t, int>> node_of;  // open addressing: block key -> node
    std::vector<std::vector<int>> succ, pred;
    std::vector<uint64_t> edges;                    // open addressing: from << 32 | to, + 1
    size_t nedges = 0;
    bool cfg_changed = false;
    std::vector<int> ipdom;                         // node -> immediate post-dominator
    std::pair<uint64_t, uint64_t> known_edges[512] = {};  // a cache of edges added: (from, to) keys
    bool cfg_used = false;                          // this block's lanes went apart: the graph is not empty
    struct Entry {                                  // replay_apart's reconvergence stack
        uint64_t node, rejoin;  // block keys
        uint32_t mask;          // a set of units
    };
    std::vector<Entry> stack;
    uint64_t resume[32] = {};                       // per warp: the barrier it resumed from (0: start)
};

// The nodes every lane ends at (a barrier, or exit) and starts from (a placeholder: each barrier,
// and the kernel's start, is a node of its own, see resume_node).
constexpr int kStop = 1;

Row &RowTable::at(uint64_t key) {
    if (index.size() < 2 * (list.size() + 1)) {  // keep it at most half full
        std::vector<uint64_t> grown(std::max<size_t>(64, 2 * index.size()), 0);
        for (size_t i = 0; i < list.size(); ++i) {
            size_t h = mix(list[i].first) & (grown.size() - 1);
            while (grown[h]) h = (h + 1) & (grown.size() - 1);
            grown[h] = i + 1;
        }
        index.swap(grown);
    }
    size_t h = mix(key) & (index.size() - 1);
    while (index[h]) {
        if (list[index[h] - 1].first == key) return list[index[h] - 1].second;
        h = (h + 1) & (index.size() - 1);
    }
    Row row{};
    row.r.pc = key >> 4;
    row.r.space = int32_t((key >> 2) & 3);
    row.r.op = int32_t(key & 3);
    list.emplace_back(key, row);
    index[h] = list.size();
    return list.back().second;
}

inline uint64_t event_key(uintptr_t pc, int space, int op) {
    return (uint64_t(pc) << 4 | uint64_t(space) << 2 | uint64_t(op)) & kSiteMask;
}

template <class T> T *take(std::vector<T *> &pool, std::vector<std::unique_ptr<T>> &store) {
    if (pool.empty()) {
        store.push_back(std::make_unique<T>());
        pool.push_back(store.back().get());
    }
    T *x = pool.back();
    pool.pop_back();
    return x;
}

// The trace the lane's event at i (key) continues in, having branched off ``t`` there: the one other
// lanes started there with the same event, or a new one; null once the warp has kMostTraces.
WarpTrace *branch_for(Count &C, const Fiber *f, const WarpTrace &t, uint32_t i, uint64_t key) {
    std::vector<WarpTrace *> &mine = C.branches[f->warp];
    for (WarpTrace *b : mine)
        if (b->parent == &t && b->at == i && b->key[i] == key) return b;
    if (mine.size() + 1 >= kMostTraces) return nullptr;
    WarpTrace *b = take(C.free_branches, C.branch_store);
    b->branch(t, i);
    b->append(key);
    mine.push_back(b);
    return b;
}

// The lane's event (key, a) differs from its trace's: it goes on in a branch (see WarpTrace),
// taking its addresses so far along, or else on its own.
__attribute__((noinline)) void branch_off(Fiber *f, uint64_t key, uintptr_t a) {
    Count &C = *f->w->cnt;
    const WarpTrace &t = *f->trace;
    const uint32_t i = f->pos, lane = f->lane;
    if (WarpTrace *b = branch_for(C, f, t, i, key)) {
        for (uint32_t j = 0; j < i; ++j)
            if (!is_block(t.key[j])) b->addr[size_t(b->col[j]) * 32 + lane] = t.address(j, lane);
        if (!is_block(key)) b->addr[size_t(b->col[i]) * 32 + lane] = a;
        f->trace = b;
        f->pos = i + 1;
        return;
    }
    f->log = take(C.free_logs, C.logs);
    for (uint32_t j = 0; j < i; ++j) f->log->push(t.key[j], t.address(j, lane));
    f->log->push(key, a);
    f->apart = true;
}

// The event of a lane that went apart (see branch_off), and one where the lane's trace has none
// yet (it is the first lane there) or another: out of line, so that the usual path (count_event)
// needs no registers saved.
__attribute__((noinline)) void log_event(Fiber *f, uint64_t key, uintptr_t a) { f->log->push(key, a); }

__attribute__((noinline)) void count_event_slow(Fiber *f, uint64_t key, uintptr_t a) {
    WarpTrace &t = *f->trace;
    const uint32_t i = f->pos;
    if (i != t.n) return branch_off(f, key, a);
    t.append(key);
    if (!is_block(key)) t.addr[size_t(t.col[i]) * 32 + f->lane] = a;
    f->pos = i + 1;
}

// (Inlined into the hooks, as is everything on their path: they run for every event of every lane.)
// The usual case is a lane making the event its trace holds at its position: a compare, and for an
// access a store of its address.
__attribute__((always_inline)) inline void count_event(Fiber *f, uint64_t key, uintptr_t a) {
    if (__builtin_expect(f->apart, 0)) return log_event(f, key, a);
    const WarpTrace &t = *f->trace;
    const uint32_t i = f->pos;
    if (__builtin_expect(i >= t.n || t.key[i] != key, 0)) return count_event_slow(f, key, a);
    if (!is_block(key)) t.addr[size_t(t.col[i]) * 32 + f->lane] = a;
    f->pos = i + 1;
}

__attribute__((always_inline)) inline void count_block(Fiber *f, uintptr_t pc) {
    count_event(f, event_key(pc, PMPP_SPACE_CODE, PMPP_OP_BLOCK), 0);
}

// Distinct values of v (sorted in place): the fallback for instructions that touch very many.
size_t distinct(uint64_t *v, size_t n) {
    std::sort(v, v + n);
    return size_t(std::unique(v, v + n) - v);
}

void cost_global(Count &C, pmpp_count_row &r, const CInst &in) {
    const uint64_t width = std::max<uint32_t>(r.width, 1);
    if (in.mask == ~0u) {  // a whole warp at consecutive elements (the usual case): no branch per lane
        uint64_t off = 0;
        for (uint32_t l = 1; l < 32; ++l) off |= in.addr[l] - in.addr[0] - l * width;
        if (!off) {
            r.sectors += ((in.addr[31] + width - 1) >> 5) - (in.addr[0] >> 5) + 1;
            return;
        }
    }
    uint64_t last = 0, sectors = 0;
    bool ascending = true;  // lanes at rising addresses (the usual case): count sectors in one pass
    for (uint32_t m = in.mask; m && ascending; m &= m - 1) {
        const uint64_t a = in.addr[__builtin_ctz(m)], first = a >> 5, end = (a + width - 1) >> 5;
        if (m != in.mask && a < last) ascending = false;
        else if (m == in.mask || first > (last + width - 1) >> 5) sectors += end - first + 1;
        else if (end > (last + width - 1) >> 5) sectors += end - ((last + width - 1) >> 5);
        last = a;
    }
    if (ascending) {
        r.sectors += sectors;
        return;
    }
    SmallMap &seen = C.small[0];
    seen.clear();
    for (uint32_t m = in.mask; m && !seen.full(); m &= m - 1) {
        const uint64_t a = in.addr[__builtin_ctz(m)];
        for (uint64_t s = a >> 5; s <= (a + width - 1) >> 5 && !seen.full(); ++s) seen.add(s);
    }
    if (!seen.full()) {
        r.sectors += seen.n;
        return;
    }
    std::vector<uint64_t> &v = C.scratch;
    v.clear();
    for (uint32_t m = in.mask; m; m &= m - 1) {
        const uint64_t a = in.addr[__builtin_ctz(m)];
        for (uint64_t s = a >> 5; s <= (a + width - 1) >> 5; ++s) v.push_back(s);
    }
    r.sectors += distinct(v.data(), v.size());
}

// Atomics: lanes on the same address are served one after another, each pass touching the sectors
// that still have an update waiting, so a sector costs as many passes as the most lanes on one of
// its addresses (on an H100, 32 lanes adding to one address count 32 sectors).
void cost_global_atomic(Count &C, pmpp_count_row &r, const CInst &in) {
    SmallMap &lanes_on = C.small[0], &passes = C.small[1];
    lanes_on.clear();
    passes.clear();
    for (uint32_t m = in.mask; m; m &= m - 1) lanes_on.add(in.addr[__builtin_ctz(m)]);
    for (size_t i = 0; i < lanes_on.n; ++i) {
        const size_t slot = lanes_on.order[i];
        bool inserted;
        uint32_t &most = passes.at(lanes_on.key[slot] >> 5, inserted);
        most = std::max(most, lanes_on.value[slot]);
    }
    for (size_t i = 0; i < passes.n; ++i) r.sectors += passes.value[passes.order[i]];
}

void cost_addresses(Count &C, pmpp_count_row &r, const CInst &in) {
    const uint64_t first = in.addr[__builtin_ctz(in.mask)];
    bool one = true;  // every lane at one address (the usual case: a broadcast of __constant__ data)
    for (uint32_t m = in.mask; m && one; m &= m - 1) one = in.addr[__builtin_ctz(m)] == first;
    if (one) {
        r.max_same_address = std::max<uint64_t>(r.max_same_address, lanes_in(in.mask));
        r.addresses += 1;
        return;
    }
    SmallMap &lanes_on = C.small[0];
    lanes_on.clear();
    uint64_t most = 0;
    for (uint32_t m = in.mask; m; m &= m - 1) most = std::max<uint64_t>(most, lanes_on.add(in.addr[__builtin_ctz(m)]));
    r.max_same_address = std::max(r.max_same_address, most);
    r.addresses += lanes_on.n;
}

void cost_shared(Count &C, pmpp_count_row &r, const CInst &in, uintptr_t window) {
    const uint32_t width = std::max<uint32_t>(r.width, 1);
    const uint32_t lanes = width <= 4 ? 32 : width <= 8 ? 16 : 8;  // lanes served together
    SmallMap &words = C.small[0];
    for (uint32_t g = 0; g < 32; g += lanes) {
        const uint32_t part = in.mask & uint32_t((uint64_t(1) << lanes) - 1) << g;
        if (!part) continue;
        r.ideal_wavefronts += 1;
        uint64_t lo = UINT64_MAX, hi = 0;  // the words the part touches
        if (part == uint32_t((uint64_t(1) << lanes) - 1) << g) {  // all its lanes: a loop without branches
            for (uint32_t l = g; l < g + lanes; ++l) lo = std::min(lo, in.addr[l]), hi = std::max(hi, in.addr[l]);
            lo = (lo - window) >> 2, hi = (hi - window + width - 1) >> 2;
        } else {
            for (uint32_t m = part; m; m &= m - 1) {
                const uint64_t off = in.addr[__builtin_ctz(m)] - window;
                lo = std::min(lo, off >> 2), hi = std::max(hi, (off + width - 1) >> 2);
            }
        }
        if (hi - lo < 32) {  // each bank holds at most one of them: one wavefront
            r.wavefronts += 1;
            continue;
        }
        words.clear();
        uint32_t per_bank[32] = {};
        uint32_t worst = 0;
        for (uint32_t m = part; m; m &= m - 1) {
            const uint64_t off = in.addr[__builtin_ctz(m)] - window;
            for (uint64_t word = off >> 2; word <= (off + width - 1) >> 2; ++word)
                if (words.add(word) == 1) worst = std::max(worst, ++per_bank[word & 31]);
        }
        r.wavefronts += worst;
    }
}

// The sampled warp's execution number of ``key`` (counted over the whole launch).
uint32_t next_sample_k(Count &C, uint64_t key) {
    for (auto &kc : C.sample_k)
        if (kc.first == key) return kc.second++;
    C.sample_k.emplace_back(key, 1);
    return 0;
}

void keep_sample(Worker *w, uint64_t key, uint32_t width, const CInst *in, uint32_t mask) {
    Count &C = *w->cnt;
    Launch *L = w->L;
    const uint32_t k = next_sample_k(C, key);
    if (k >= PMPP_SAMPLES_PER_PC) return;
    pmpp_count_sample x{};
    x.pc = key >> 4;
    x.space = int32_t((key >> 2) & 3);
    x.op = int32_t(key & 3);
    x.k = k;
    x.mask = mask;
    x.width = width;
    x.region = -1;
    if (in) {
        const uint64_t first = in->addr[__builtin_ctz(mask)];
        uint64_t base = 0;
        if (x.space == PMPP_SPACE_GLOBAL || x.space == PMPP_SPACE_CONSTANT) {
            for (int i = 0; i < L->d->nregions; ++i) {
                const pmpp_region_desc &g = L->d->regions[i];
                if (first - uintptr_t(g.base) < g.size) {
                    x.region = i, base = uintptr_t(g.base);
                    snprintf(x.array, sizeof x.array, "%s", g.name ? g.name : "");
                }
            }
        } else if (x.space == PMPP_SPACE_SHARED) {
            base = uintptr_t(w->arena);
            for (const ShRegion &sr : w->regions)
                if (first - uintptr_t(sr.base) < sr.size) {
                    x.array_offset = int64_t(uintptr_t(sr.base) - base);
                    snprintf(x.array, sizeof x.array, "%s", sr.name ? sr.name : "");
                }
        }
        for (uint32_t m = mask; m; m &= m - 1) {
            const uint32_t l = __builtin_ctz(m);
            x.offset[l] = int64_t(in->addr[l] - base);
        }
    }
    C.samples.push_back(x);
}

// One warp-level execution: its totals, and the lanes that took part.
void cost_execution(Worker *w, uint32_t wi, uint64_t key, uint32_t width, const CInst *in, uint32_t mask) {
    Count &C = *w->cnt;
    auto &cached = C.row_cache[(key >> 4) & 255];
    if (cached.first != key || !cached.second) cached = {key, &C.rows.at(key)};
    Row &row = *cached.second;
    pmpp_count_row &r = row.r;
    const int op = int(key & 3), space = int((key >> 2) & 3);
    r.width = std::max(r.width, width);
    r.executed++;
    r.threads += lanes_in(mask);
    if (mask != w->warps[wi].exist) {
        r.partial++;
        if (row.diverged_block != w->cur_block + 1) row.diverged_block = w->cur_block + 1, row.diverged_mask = 0;
        if (!(row.diverged_mask >> wi & 1)) row.diverged_mask |= 1u << wi, r.diverged_warps++;
    }
    if (space == PMPP_SPACE_GLOBAL && op == PMPP_OP_ATOM) cost_global_atomic(C, r, *in);
    else if (space == PMPP_SPACE_GLOBAL) cost_global(C, r, *in);
    if (space == PMPP_SPACE_SHARED) cost_shared(C, r, *in, uintptr_t(w->arena));
    if (op == PMPP_OP_ATOM || space == PMPP_SPACE_CONSTANT) cost_addresses(C, r, *in);
    if (op == PMPP_OP_ATOM) {
        for (uint32_t m = mask; m; m &= m - 1) {
            const uintptr_t a = in->addr[__builtin_ctz(m)];
            (space == PMPP_SPACE_SHARED ? C.atom_shared : C.atom_global).add(a, 1);
        }
    }
    if (w->cur_block == w->L->d->sample_block && wi == w->L->d->sample_warp)
        keep_sample(w, key, r.width, in, mask);
}

// The warp's units (see Unit) in the order of their first lane, and sets of them as bit masks.
struct Units {
    Unit u[32];
    uint32_t n = 0;
    uint32_t every() const { return n == 32 ? ~0u : (1u << n) - 1; }  // the set of all units
    uint32_t lanes(uint32_t set) const {  // the lanes of a set of units
        uint32_t m = 0;
        for (; set; set &= set - 1) m |= u[__builtin_ctz(set)].lanes;
        return m;
    }
};

// Where each unit is in its events during count_flush's replay.
struct Cursors {
    const Units &units;
    size_t at[32] = {}, accesses[32] = {};  // per unit: events and accesses so far
    uint64_t next[32];  // the key of each unit's next event; kStopKey past its last
    explicit Cursors(const Units &all) : units(all) {
        for (uint32_t k = 0; k < units.n; ++k) next[k] = units.u[k].key(0);
    }
    void advance(uint32_t k) { next[k] = ++at[k] < units.u[k].size() ? units.u[k].key(at[k]) : kStopKey; }
};

// The accesses the units of ``set`` make from their cursors up to their next basic block, together:
// the i-th access of each is one warp instruction (lanes in a block run the same straight-line code).
void run_together(Worker *w, uint32_t wi, Cursors &c, uint32_t set) {
    for (;;) {
        uint32_t left = 0;  // units with an access still to make in this block
        for (uint32_t m = set; m; m &= m - 1)
            if (!is_block(c.next[__builtin_ctz(m)])) left |= m & -m;
        if (!left) return;
        while (left) {  // normally one pass: all at the same access
            const uint64_t key = site_of(c.next[__builtin_ctz(left)]);
            uint64_t addr[32];
            CInst in{0, addr};
            uint32_t width = 0, done = 0;
            for (uint32_t m = left; m; m &= m - 1) {
                const uint32_t k = __builtin_ctz(m);
                if (site_of(c.next[k]) != key) continue;
                const Unit &u = c.units.u[k];
                done |= 1u << k;
                in.mask |= u.lanes;
                u.addresses(c.at[k], c.accesses[k]++, addr);
                width = std::max(width, bytes_of(c.next[k]));
                c.advance(k);
            }
            left &= ~done;
            cost_execution(w, wi, key, width, &in, in.mask);
        }
    }
}

// ---- the control-flow graph and its post-dominators

int cfg_node(Count &C, uint64_t key) {
    if (C.node_of.size() < 2 * (C.node_key.size() + 1)) {
        std::vector<std::pair<uint64_t, int>> grown(std::max<size_t>(64, 2 * C.node_of.size()), {0, -1});
        for (int n = 0; n < int(C.node_key.size()); ++n) {
            size_t h = mix(C.node_key[n]) & (grown.size() - 1);
            while (grown[h].second >= 0) h = (h + 1) & (grown.size() - 1);
            grown[h] = {C.node_key[n], n};
        }
        C.node_of.swap(grown);
    }
    size_t h = mix(key) & (C.node_of.size() - 1);
    while (C.node_of[h].second >= 0) {
        if (C.node_of[h].first == key) return C.node_of[h].second;
        h = (h + 1) & (C.node_of.size() - 1);
    }
    const int n = int(C.node_key.size());
    C.node_of[h] = {key, n};
    C.node_key.push_back(key);
    C.succ.emplace_back();
    C.pred.emplace_back();
    return n;
}

void cfg_edge(Count &C, int from, int to) {
    const uint64_t e = (uint64_t(uint32_t(from)) << 32 | uint32_t(to)) + 1;
    if (C.edges.size() < 2 * (C.nedges + 1)) {
        std::vector<uint64_t> grown(std::max<size_t>(256, 2 * C.edges.size()), 0);
        for (uint64_t x : C.edges) {
            if (!x) continue;
            size_t h = mix(x) & (grown.size() - 1);
            while (grown[h]) h = (h + 1) & (grown.size() - 1);
            grown[h] = x;
        }
        C.edges.swap(grown);
    }
    size_t h = mix(e) & (C.edges.size() - 1);
    while (C.edges[h]) {
        if (C.edges[h] == e) return;
        h = (h + 1) & (C.edges.size() - 1);
    }
    C.edges[h] = e;
    C.nedges++;
    C.succ[from].push_back(to);
    C.pred[to].push_back(from);
    C.cfg_changed = true;
}

// Immediate post-dominators: dominators of the reversed graph rooted at kStop (Cooper, Harvey and
// Kennedy, "A Simple, Fast Dominance Algorithm", 2001).
void cfg_post_dominators(Count &C) {
    const int n = int(C.node_key.size());
    std::vector<int> order, number(n, -1);  // reverse post-order of the reversed graph
    std::vector<std::pair<int, size_t>> stack{{kStop, 0}};
    std::vector<char> seen(n, 0);
    seen[kStop] = 1;
    while (!stack.empty()) {
        auto &[v, i] = stack.back();
        if (i < C.pred[v].size()) {
            const int u = C.pred[v][i++];
            if (!seen[u]) seen[u] = 1, stack.push_back({u, 0});
        } else {
            order.push_back(v);
            stack.pop_back();
        }
    }
    std::reverse(order.begin(), order.end());
    for (size_t i = 0; i < order.size(); ++i) number[order[i]] = int(i);
    std::vector<int> &idom = C.ipdom;
    idom.assign(n, -1);
    idom[kStop] = kStop;
    auto intersect = [&](int a, int b) {
        while (a != b) {
            while (number[a] > number[b]) a = idom[a];
            while (number[b] > number[a]) b = idom[b];
        }
        return a;
    };
    for (bool changed = true; changed;) {
        changed = false;
        for (int v : order) {
            if (v == kStop) continue;
            int best = -1;
            for (int u : C.succ[v])  // predecessors in the reversed graph
                if (idom[u] >= 0) best = best < 0 ? u : intersect(u, best);
            if (best >= 0 && idom[v] != best) idom[v] = best, changed = true;
        }
    }
    for (int v = 0; v < n; ++v)
        if (idom[v] < 0) idom[v] = kStop;  // not seen to reach a stop: reconverge there
    C.cfg_changed = false;
}

// Add the edge from -> to (block keys) to the graph, unless it is known to be there already.
inline void cfg_add_edge(Count &C, uint64_t from, uint64_t to) {
    auto &known = C.known_edges[((from >> 4) ^ (to >> 7)) & 511];  // (cheap: done per lane and block)
    if (known.first == from && known.second == to) return;
    cfg_edge(C, cfg_node(C, from), to == kStopKey ? kStop : cfg_node(C, to));
    known = {from, to};
}

// Add the paths the warp's lanes took since the last barrier to the block's control-flow graph.
void cfg_add_warp(Count &C, const Units &units, uint64_t resume_key) {
    cfg_node(C, resume_key);
    for (uint32_t k = 0; k < units.n; ++k) {
        const Unit &u = units.u[k];
        uint64_t from = resume_key;
        for (size_t i = 0; i < u.size(); ++i) {
            const uint64_t key = u.key(i);
            if (!is_block(key) || key == from) continue;  // a block that loops to itself: in already
            cfg_add_edge(C, from, key);
            from = key;
        }
        cfg_add_edge(C, from, kStopKey);
    }
    if (C.cfg_changed) cfg_post_dominators(C);
}

// Every lane made the same events (the same blocks, the same accesses, in the same order; the units
// differ at most in access sizes), so the warp never went apart: its i-th events are one warp
// instruction.
bool replay_converged(Worker *w, uint32_t wi, const Units &units) {
    const Unit &first = units.u[0];
    const size_t n = first.size();
    for (uint32_t k = 1; k < units.n; ++k) {
        const Unit &other = units.u[k];
        if (other.size() != n) return false;
        for (size_t i = 0; i < n; ++i)
            if (site_of(other.key(i)) != site_of(first.key(i))) return false;
    }
    const uint32_t all = units.lanes(units.every());
    for (size_t i = 0, j = 0; i < n; ++i) {  // j: accesses so far, the same for every lane
        const uint64_t key = site_of(first.key(i));
        if (is_block(key)) {
            cost_execution(w, wi, key, 0, nullptr, all);
            continue;
        }
        uint64_t addr[32];
        uint32_t width = 0;
        for (uint32_t k = 0; k < units.n; ++k) {
            units.u[k].addresses(i, j, addr);
            width = std::max(width, bytes_of(units.u[k].key(i)));
        }
        const CInst in{all, addr};
        cost_execution(w, wi, key, width, &in, all);
        j++;
    }
    return true;
}

// The fast path: the lanes ``all`` made the first n events of trace t and no others, so each of
// them is one warp instruction of those lanes, its addresses already together.
void replay_trace(Worker *w, uint32_t wi, const WarpTrace &t, size_t n, uint32_t all) {
    for (uint32_t i = 0; i < n; ++i) {
        const uint64_t key = t.key[i];
        if (is_block(key)) {
            cost_execution(w, wi, key, 0, nullptr, all);
            continue;
        }
        const CInst in{all, &t.addr[size_t(t.col[i]) * 32]};
        cost_execution(w, wi, site_of(key), bytes_of(key), &in, all);
    }
}

// Lanes went apart: replay the warp block by block with a reconvergence stack (see the top of this
// section). Nodes of the replay are block keys; the control-flow graph is only needed where the
// warp's lanes go apart.
void replay_apart(Worker *w, uint32_t wi, const Units &units) {
    Count &C = *w->cnt;
    C.cfg_used = true;
    if (C.node_key.empty()) cfg_node(C, kStopKey - 1), cfg_node(C, kStopKey);  // 0 (unused), kStop
    // Where the lanes resumed: a node of its own per barrier (code after different barriers must
    // not look like branches of one node); its key cannot be a basic block's (op is not BLOCK).
    const uint64_t resume_key = event_key(uintptr_t(C.resume[wi]), PMPP_SPACE_CODE, PMPP_OP_ST);
    Cursors c(units);
    const uint32_t all = units.every();  // stack entries hold sets of units
    bool in_graph = false;
    run_together(w, wi, c, all);  // from where the lanes resumed to their first block: together
    std::vector<Count::Entry> &stack = C.stack;
    stack.assign(1, {resume_key, kStopKey, all});
    while (!stack.empty()) {
        const Count::Entry e = stack.back();
        if (e.node == e.rejoin || e.node == kStopKey) {
            stack.pop_back();
            continue;
        }
        if (e.node != resume_key) {  // the units of e.mask run block e.node together
            cost_execution(w, wi, e.node, 0, nullptr, units.lanes(e.mask));
            bool access = false;  // a unit's next event is an access
            for (uint32_t m = e.mask; m; m &= m - 1) {
                c.advance(__builtin_ctz(m));
                access |= !is_block(c.next[__builtin_ctz(m)]);
            }
            if (access) run_together(w, wi, c, e.mask);
        }
        const uint64_t first = c.next[__builtin_ctz(e.mask)];
        bool diverged = false;
        for (uint32_t m = e.mask & (e.mask - 1); m && !diverged; m &= m - 1)
            diverged = c.next[__builtin_ctz(m)] != first;
        if (!diverged) {
            stack.back().node = first;
            continue;
        }
        if (!in_graph) cfg_add_warp(C, units, resume_key), in_graph = true;
        const uint64_t rejoin = C.node_key[C.ipdom[cfg_node(C, e.node)]];
        stack.back().node = rejoin;  // the lanes wait there for each other
        uint32_t left = e.mask;
        while (left) {
            const uint64_t to = c.next[__builtin_ctz(left)];
            uint32_t group = 0;
            for (uint32_t m = left; m; m &= m - 1)
                if (c.next[__builtin_ctz(m)] == to) group |= m & -m;
            left &= ~group;
            if (to != rejoin) stack.push_back({to, rejoin, group});
        }
    }
}

void clear_warp(Worker *w, uint32_t wi);

// Put the warp's execution since the last barrier back together (see the top of this section),
// cost it, and start afresh.
void count_flush(Worker *w, uint32_t wi) {
    const Fiber *lane = &w->fibers[wi * 32];
    Units units;
    for (uint32_t m = w->warps[wi].exist; m; m &= m - 1) {
        const Fiber &f = lane[__builtin_ctz(m)];
        const size_t n = f.apart ? f.log->size() : f.pos;
        if (!n) continue;
        uint32_t k = 0;  // a unit of lanes with the same events as this one, or a new one
        while (k < units.n && (f.apart || units.u[k].own || units.u[k].trace != f.trace || units.u[k].n != n))
            ++k;
        if (k == units.n)
            units.u[units.n++] = f.apart ? Unit{0, nullptr, f.log, f.log->key, n}
                                         : Unit{0, f.trace, nullptr, f.trace->key, n};
        units.u[k].lanes |= m & -m;
    }
    const Unit &first = units.u[0];
    if (units.n == 1 && !first.own) replay_trace(w, wi, *first.trace, first.n, first.lanes);
    else if (units.n && !replay_converged(w, wi, units)) replay_apart(w, wi, units);
    clear_warp(w, wi);
}

// The warp's lanes start afresh in its first trace.
void clear_warp(Worker *w, uint32_t wi) {
    Count &C = *w->cnt;
    C.trace[wi].clear();
    for (WarpTrace *b : C.branches[wi]) C.free_branches.push_back(b);
    C.branches[wi].clear();
    Fiber *lane = &w->fibers[wi * 32];
    for (uint32_t m = w->warps[wi].exist; m; m &= m - 1) {
        Fiber &f = lane[__builtin_ctz(m)];
        f.trace = &C.trace[wi];
        f.pos = 0;
        if (f.apart) {
            f.apart = false;
            f.log->clear();
            C.free_logs.push_back(f.log);
        }
    }
}

// A lane exited or waits at __syncthreads(): once the whole warp has, its executions are complete.
inline void count_park(Worker *w, Fiber *f) {
    Warp &W = w->warps[f->warp];
    if (++W.parked == lanes_in(W.exist)) count_flush(w, f->warp);
}

// The control-flow graph is the block's own: what its lanes were seen to take. (One graph for the
// launch would see more paths, but which ones depends on the order in which OS threads run blocks,
// and counts must not change from run to run.)
void cfg_clear(Count &C) {
    if (!C.cfg_used) return;
    C.cfg_used = false;
    std::fill(std::begin(C.known_edges), std::end(C.known_edges), std::pair<uint64_t, uint64_t>{0, 0});
    C.node_key.clear();
    C.node_of.clear();
    C.succ.clear();
    C.pred.clear();
    C.edges.clear();
    C.nedges = 0;
    C.ipdom.clear();
}

void count_block_start(Worker *w, uint32_t nwarps) {
    std::fill(std::begin(w->site_regions), std::end(w->site_regions), Worker::SiteRegion{});  // __shared__ arrays are the block's
    w->cnt->atom_shared.clear();
    for (uint32_t i = 0; i < nwarps; ++i) w->cnt->resume[i] = 0;
    cfg_clear(*w->cnt);
}

void count_block_end(Worker *w, uint32_t nwarps) {
    Count &C = *w->cnt;
    C.sum.blocks++;
    C.sum.warps += nwarps;
    C.atom_shared.each([&](uint64_t, uint64_t updates) {
        C.sum.atom_shared_addresses++;
        C.sum.atom_shared_max_updates = std::max(C.sum.atom_shared_max_updates, updates);
    });
}

void count_reset(Worker *w) {
    if (!w->cnt) w->cnt = new Count;
    Count &C = *w->cnt;
    C.free_logs.clear();
    for (auto &log : C.logs) log->clear(), C.free_logs.push_back(log.get());
    for (WarpTrace &t : C.trace) t.clear();
    C.free_branches.clear();
    for (auto &b : C.branch_store) C.free_branches.push_back(b.get());
    for (auto &mine : C.branches) mine.clear();
    C.rows.clear();
    for (auto &cached : C.row_cache) cached = {0, nullptr};
    C.samples.clear();
    C.sample_k.clear();
    C.atom_global.clear();
    C.atom_shared.clear();
    C.sum = pmpp_count_summary{};
    cfg_clear(C);
}

// The last counted launch, merged over the OS threads that ran it.
struct CountResult {
    std::vector<pmpp_count_row> rows;
    std::vector<pmpp_count_sample> samples;
    pmpp_count_summary sum{};
} g_count;

uint64_t module_offset(uint64_t pc) {
    Dl_info info;
    if (pc && dladdr(reinterpret_cast<void *>(pc - 1), &info) && info.dli_fbase)
        return pc - reinterpret_cast<uintptr_t>(info.dli_fbase);
    return pc;
}

// Code addresses as offsets into the module: those in the segments of the kernel's own module
// (all of them, normally) without a dladdr each.
struct ModuleOffsets {
    const Launch *L;
    uintptr_t base = 0;
    explicit ModuleOffsets(const Launch *launch) : L(launch) {
        Dl_info info;
        if (dladdr(reinterpret_cast<void *>(L->d->thunk), &info) && info.dli_fbase)
            base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    }
    uint64_t operator()(uint64_t pc) const {
        for (const auto &seg : L->segs)
            if (base && pc && pc - 1 >= seg.first && pc - 1 < seg.second) return pc - base;
        return module_offset(pc);
    }
};

void count_merge(const Launch *L, int nworkers) {
    CountResult out;
    RowTable merged;
    AddressCounts atoms;
    for (int s = 0; s < nworkers; ++s) {
        Worker *w = g_workers[s];
        if (!w || !w->cnt) continue;
        Count &C = *w->cnt;
        for (auto &kr : C.rows.list) {
            pmpp_count_row &m = merged.at(kr.first).r;
            const pmpp_count_row &r = kr.second.r;
            m.width = std::max(m.width, r.width);
            m.executed += r.executed, m.threads += r.threads, m.partial += r.partial;
            m.diverged_warps += r.diverged_warps, m.sectors += r.sectors;
            m.wavefronts += r.wavefronts, m.ideal_wavefronts += r.ideal_wavefronts;
            m.addresses += r.addresses;
            m.max_same_address = std::max(m.max_same_address, r.max_same_address);
        }
        out.samples.insert(out.samples.end(), C.samples.begin(), C.samples.end());
        C.atom_global.each([&](uint64_t a, uint64_t updates) { atoms.add(a, updates); });
        out.sum.blocks += C.sum.blocks, out.sum.warps += C.sum.warps;
        out.sum.barriers += C.sum.barriers;
        out.sum.atom_shared_addresses += C.sum.atom_shared_addresses;
        out.sum.atom_shared_max_updates =
            std::max(out.sum.atom_shared_max_updates, C.sum.atom_shared_max_updates);
    }
    atoms.each([&](uint64_t, uint64_t updates) {
        out.sum.atom_global_addresses++;
        out.sum.atom_global_max_updates = std::max(out.sum.atom_global_max_updates, updates);
    });
    const ModuleOffsets offset(L);
    for (auto &kr : merged.list) {
        kr.second.r.pc = offset(kr.second.r.pc);
        out.rows.push_back(kr.second.r);
    }
    for (pmpp_count_sample &x : out.samples) x.pc = offset(x.pc);
    std::vector<uint32_t> order(out.samples.size());  // sorted through indices: samples are large
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        const pmpp_count_sample &x = out.samples[a], &y = out.samples[b];
        return x.pc != y.pc ? x.pc < y.pc : x.k < y.k;
    });
    std::vector<pmpp_count_sample> sorted;
    sorted.reserve(order.size());
    for (uint32_t i : order) sorted.push_back(out.samples[i]);
    out.samples.swap(sorted);
    out.sum.nrows = out.rows.size();
    out.sum.nsamples = out.samples.size();
    g_count = std::move(out);
}

// ---- fibers and the block scheduler ------------------------------------------------------

// A fiber's stack runs CUDA threads until one of them has to wait: when a thread finishes and
// the next one of the sweep has not started yet, that one simply runs next on the same stack
// (a function call, no context switch), so a kernel without barriers costs no switches at all.
void fiber_entry(bctx::transfer_t t) {
    *static_cast<bctx::fcontext_t *>(t.data) = t.fctx;
    Fiber *f = cur_fiber();
    Worker *w = f->w;
    for (;;) {
        w->L->d->thunk(w->L->d->args);
        f = cur_fiber();
        f->state = DONE;
        w->ndone++;
        if (w->L->count) {
            w->warps[f->warp].ndone++;
            count_park(w, f);
        }
        warp_lane_exit(w, f);
        Fiber *g = block_failed(w) ? nullptr : next_runnable(w, f->lin + 1);
        if (g && g->stack < 0) {  // adopt the stack
            g->stack = f->stack;
            g->stack_lo = f->stack_lo;
            g->stack_hi = f->stack_hi;
            pmpp_cur = &g->c;
            continue;
        }
        w->free_stacks.push_back(uint32_t(f->stack));  // free once we have jumped off it
        if (g) {
            pmpp_cur = &g->c;
            switch_to(&w->dead_slot, g->fctx);
        } else {
            switch_to(&w->dead_slot, w->sched);
        }
        __builtin_unreachable();
    }
}

std::string site_str(const char *file, int line) { return fmt("%s:%d", file ? file : "?", line); }

// Group the waiting threads by where they wait: "threads A wait at __syncthreads() at f:12".
struct Group {
    std::string where;
    std::vector<uint32_t> ids;
};
std::vector<Group> group_waiters(Worker *w, State st) {
    std::vector<Group> groups;
    for (uint32_t i = 0; i < w->n; ++i) {
        const Fiber &f = w->fibers[i];
        if (f.state != st) continue;
        std::string where =
            st == AT_BARRIER
                ? "__syncthreads() at " + site_str(f.bar_file, f.bar_line)
                : std::string(kWarpOpNames[f.wop]) + "() at " + site_str(f.wfile, f.wline);
        auto it = std::find_if(groups.begin(), groups.end(),
                               [&](const Group &g) { return g.where == where; });
        if (it == groups.end()) {
            groups.push_back({where, {}});
            it = groups.end() - 1;
        }
        it->ids.push_back(i);
    }
    return groups;
}

std::vector<uint32_t> exited_threads(Worker *w) {
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < w->n; ++i)
        if (w->fibers[i].state == DONE) ids.push_back(i);
    return ids;
}

// Do all waiting fibers wait at the same __syncthreads() (file and line)?
bool same_barrier(Worker *w) {
    const Fiber *first = nullptr;
    for (uint32_t i = 0; i < w->n; ++i) {
        const Fiber &f = w->fibers[i];
        if (f.state != AT_BARRIER) continue;
        if (!first) {
            first = &f;
        } else if (f.bar_line != first->bar_line ||
                   (f.bar_file != first->bar_file && strcmp(f.bar_file, first->bar_file) != 0)) {
            return false;
        }
    }
    return true;
}

// Every live fiber waits at a __syncthreads(). Checked builds insist that all threads of the
// block wait at the same one; otherwise (like the hardware) exited threads do not count.
bool release_barrier(Worker *w) {
    Launch *L = w->L;
    if (L->check && (w->ndone > 0 || !same_barrier(w))) {
        std::vector<Group> groups = group_waiters(w, AT_BARRIER);
        std::vector<uint32_t> exited = exited_threads(w);
        {
            std::string msg = fmt("barrier divergence in kernel '%s', block %s: ", kname(L),
                                  coord(w->bid).c_str());
            for (size_t g = 0; g < groups.size(); ++g) {
                if (g) msg += " while ";
                msg += "threads " + describe_threads(w, groups[g].ids) + " wait at " +
                       groups[g].where;
            }
            if (!exited.empty())
                msg += ", but threads " + describe_threads(w, exited) +
                       " exited without reaching it";
            msg += ". Every thread of a block must reach the same __syncthreads() (move it out "
                   "of the condition, or make the early exit a guarded body instead of a "
                   "return)";
            report(L, PMPP_ERR_DIVERGENCE, msg, w->cur_block);
            return false;
        }
    }
    if (L->count) {
        const Fiber *waiting = nullptr;
        for (uint32_t i = 0; i < w->n && !waiting; ++i)
            if (w->fibers[i].state == AT_BARRIER) waiting = &w->fibers[i];
        const uint64_t where = (uintptr_t(waiting->bar_file) * 0x9E3779B1u) ^ uint64_t(waiting->bar_line);
        for (uint32_t i = 0; i < (w->n + 31) / 32; ++i) {
            Warp &W = w->warps[i];
            if (W.parked > W.ndone) w->cnt->sum.barriers++;  // the warp executed this barrier
            W.parked = W.ndone;
            w->cnt->resume[i] = (where & ((uint64_t(1) << 59) - 1)) | 1;  // never 0, the start
        }
    }
    w->bar_result = w->bar_pending;
    w->bar_arrived = int(w->nbar);
    w->bar_pending = 0;
    for (uint32_t i = 0; i < w->n; ++i)
        if (w->fibers[i].state == AT_BARRIER) w->fibers[i].state = RUNNABLE;
    w->nbar = 0;
    w->epoch++;
    return true;
}

void report_deadlock(Worker *w) {
    Launch *L = w->L;
    std::string msg = fmt("kernel '%s' cannot continue in block %s: ", kname(L),
                          coord(w->bid).c_str());
    std::vector<Group> warp_groups = group_waiters(w, AT_WARP);
    for (size_t g = 0; g < warp_groups.size(); ++g) {
        if (g) msg += "; ";
        msg += "threads " + describe_threads(w, warp_groups[g].ids) + " wait at " +
               warp_groups[g].where;
    }
    msg += " for lanes of their warp that never arrive";
    std::vector<Group> bar_groups = group_waiters(w, AT_BARRIER);
    for (const Group &g : bar_groups)
        msg += "; threads " + describe_threads(w, g.ids) + " wait at " + g.where;
    msg += ". Every lane named in a warp primitive's mask must call it (and no lane may wait at "
           "__syncthreads() meanwhile)";
    report(L, PMPP_ERR_DEADLOCK, msg, w->cur_block);
}

void run_block(Worker *w, uint64_t b) {
    Launch *L = w->L;
    const pmpp_dim bid{unsigned(b % L->gx), unsigned((b / L->gx) % L->gy),
                       unsigned(b / (uint64_t(L->gx) * L->gy))};
    const pmpp_dim bdim{L->bx, L->by, L->bz}, gdim{L->gx, L->gy, L->gz};
    const uint32_t n = L->nthr;
    w->cur_block = b;
    w->bid = bid;
    w->n = n;
    w->ndone = w->nbar = w->nwarp = 0;
    w->bar_pending = 0;
    w->sites.clear();
    w->regions.clear();
    const size_t rz = L->check ? kRedZone : 0;
    w->dyn_base = w->arena + rz;
    w->dyn_size = L->d->shared_mem;
    w->dyn_registered = false;
    w->arena_used = rz + ((w->dyn_size + 15) & ~size_t(15));
    w->static_bytes = 0;
    w->epoch++;
    for (uint32_t i = 0; i < (n + 31) / 32; ++i) {
        const uint32_t lanes = std::min<uint32_t>(32, n - 32 * i);
        Warp &W = w->warps[i];
        W.live = W.exist = lanes == 32 ? ~0u : (1u << lanes) - 1;
        W.arrived = W.ndone = W.parked = 0;
    }
    if (L->count) count_block_start(w, (n + 31) / 32);
    for (uint32_t i = 0; i < n; ++i) {
        Fiber &f = w->fibers[i];
        f.c.thread_idx = {i % L->bx, (i / L->bx) % L->by, i / (L->bx * L->by)};
        f.c.block_idx = bid;
        f.c.block_dim = bdim;
        f.c.grid_dim = gdim;
        f.c.poll_addr = nullptr;
        f.c.poll_count = 0;
        f.state = RUNNABLE;
        f.stack = -1;
    }
    w->free_stacks.clear();
    for (uint32_t k = n; k-- > 0;) w->free_stacks.push_back(k);
    for (;;) {
        // One sweep: the fibers hand over to each other in index order and the last one of the
        // sweep switches back here.
        if (Fiber *f = next_runnable(w, 0)) {
            if (f->stack < 0) start_on_free_stack(w, f);
            pmpp_cur = &f->c;
            switch_to(&w->sched, f->fctx);
        }
        pmpp_cur = nullptr;
        if (L->fail_block.load(std::memory_order_relaxed) <= w->cur_block) return;
        if (w->ndone == n) {
            if (L->count) count_block_end(w, (n + 31) / 32);
            return;
        }
        if (n - w->ndone - w->nbar - w->nwarp) continue;  // lanes released during the sweep
        if (w->nwarp == 0) {
            if (!release_barrier(w)) return;
            continue;
        }
        report_deadlock(w);
        return;
    }
}

// ---- per-OS-thread resources ---------------------------------------------------------------

size_t stack_size() {
    if (!g_stack_size) {
        size_t kb = 256;
        if (const char *e = getenv("PMPP_CPU_STACK_KB")) kb = std::max(16L, atol(e));
        g_page = size_t(sysconf(_SC_PAGESIZE));
        g_stack_size = (kb * 1024 + g_page - 1) / g_page * g_page;
    }
    return g_stack_size;
}

// Linux's hint that a mapping is a stack; macOS has none (a plain anonymous mapping serves).
#ifdef MAP_STACK
constexpr int kStackMapFlag = MAP_STACK;
#else
constexpr int kStackMapFlag = 0;
#endif

// Fiber stacks: one mapping per OS-thread slot, reused by every block, lazily committed
// (MAP_NORESERVE), with a PROT_NONE guard page below each stack so an overflow faults.
// A switch touches the top of the next fiber's stack; stacks a power-of-two apart would put all
// those tops in the same cache sets, so the stride is an odd number of pages and each top is
// moved down by a different multiple of the cache line size ("colouring").
bool prepare(Worker *w, Launch *L) {
    w->L = L;
    if (!w->fibers) {
        const size_t ss = stack_size();
        size_t pages = ss / g_page + 1;
        if (pages % 2 == 0) ++pages;
        const size_t stride = pages * g_page;
        w->fibers = static_cast<Fiber *>(calloc(kMaxThreads, sizeof(Fiber)));
        void *a = mmap(nullptr, kArenaCap, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        void *st = mmap(nullptr, stride * kMaxThreads, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | kStackMapFlag, -1, 0);
        if (!w->fibers || a == MAP_FAILED || st == MAP_FAILED) return false;
        w->arena = static_cast<char *>(a);
        w->sites.reserve(64);
        w->regions.reserve(64);
        w->stacks = static_cast<Stack *>(calloc(kMaxThreads, sizeof(Stack)));
        if (!w->stacks) return false;
        w->free_stacks.reserve(kMaxThreads);
        for (uint32_t i = 0; i < kMaxThreads; ++i) {
            char *base = static_cast<char *>(st) + size_t(i) * stride;
            mprotect(base, g_page, PROT_NONE);  // may fail near the mapping-count limit: no guard
            w->stacks[i].lo = base + g_page;
            w->stacks[i].hi = base + stride - ((i / 32) % 64) * 64;
        }
    }
    if (L->count) count_reset(w);
    for (uint32_t i = 0; i < L->nthr; ++i) {
        Fiber &f = w->fibers[i];
        f.w = w;
        f.lin = i;
        f.lane = i % 32;
        f.warp = i / 32;
        f.trace = L->count ? &w->cnt->trace[f.warp] : nullptr;
        f.log = nullptr;
        f.pos = 0;
        f.apart = false;
    }
    if (L->check && !w->shadow) {
        void *s = mmap(nullptr, kArenaCap * sizeof(Shadow), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (s == MAP_FAILED) return false;
        w->shadow = static_cast<Shadow *>(s);
    }
    if (L->check && !w->clocks) {
        w->clocks = static_cast<LaneClocks *>(calloc(kMaxThreads / 32, sizeof(LaneClocks)));
        if (!w->clocks) return false;
    }
    return true;
}

void worker_main(Launch *L, int slot) {
    Worker *&w = g_workers[slot];
    if (!w) {
        w = new Worker;
        w->slot = slot;
    }
    if (!prepare(w, L)) {
        report(L, PMPP_ERR_LIMIT, "out of memory for fiber stacks (set PMPP_CPU_STACK_KB lower)");
        return;
    }
    for (;;) {
        const uint64_t b = L->next.fetch_add(1, std::memory_order_relaxed);
        if (b >= L->nblocks || b >= L->fail_block.load(std::memory_order_relaxed)) break;
        run_block(w, b);
    }
    pmpp_cur = nullptr;
}

// The kernel module's loaded segments (its code, constants and globals), for the bounds checks
// and for code offsets: program headers on ELF, segment load commands on Mach-O.
#ifndef __APPLE__
int collect_segment(struct dl_phdr_info *info, size_t, void *data) {
    auto *L = static_cast<Launch *>(data);
    Dl_info di;
    if (!dladdr(reinterpret_cast<void *>(L->d->thunk), &di) || !info->dlpi_name ||
        strcmp(info->dlpi_name, di.dli_fname) != 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto &ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD)
            L->segs.emplace_back(info->dlpi_addr + ph.p_vaddr,
                                 info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
    }
    return 1;
}

void collect_segments(Launch *L) { dl_iterate_phdr(collect_segment, L); }
#else
// A loaded Mach-O image (macOS is 64-bit only): its header and the slide dyld loaded it at.
struct MachImage {
    const mach_header_64 *header = nullptr;
    intptr_t slide = 0;
};

MachImage image_containing(const void *addr) {
    Dl_info info;
    if (!addr || !dladdr(addr, &info)) return {};
    for (uint32_t i = 0, n = _dyld_image_count(); i < n; ++i)
        if (_dyld_get_image_header(i) == info.dli_fbase)
            return {static_cast<const mach_header_64 *>(info.dli_fbase), _dyld_get_image_vmaddr_slide(i)};
    return {};
}

template <class Visit>
void for_each_load_command(const mach_header_64 *h, Visit visit) {
    const char *p = reinterpret_cast<const char *>(h + 1);
    for (uint32_t i = 0; i < h->ncmds; ++i) {
        const auto *lc = reinterpret_cast<const load_command *>(p);
        visit(lc);
        p += lc->cmdsize;
    }
}

bool segment_named(const segment_command_64 &seg, const char *name) {
    return strncmp(seg.segname, name, sizeof seg.segname) == 0;
}

void collect_segments(Launch *L) {
    const MachImage img = image_containing(reinterpret_cast<void *>(L->d->thunk));
    if (!img.header) return;
    for_each_load_command(img.header, [&](const load_command *lc) {
        if (lc->cmd != LC_SEGMENT_64) return;
        const auto &seg = *reinterpret_cast<const segment_command_64 *>(lc);
        // __PAGEZERO maps nothing; __LINKEDIT holds the symbol tables, no program data
        if (seg.initprot == VM_PROT_NONE || segment_named(seg, SEG_LINKEDIT)) return;
        L->segs.emplace_back(seg.vmaddr + img.slide, seg.vmaddr + img.slide + seg.vmsize);
    });
}

// Mach-O's symbol table has no sizes (nlist_64 is name, type, section and address). A variable's
// size is taken as the distance from its address to the next symbol of the image that follows it
// in the same section, or to the section's end: exact for variables laid out back to back, and
// an upper bound, by the next variable's alignment padding, otherwise.
uint64_t symbol_extent(const MachImage &img, uintptr_t addr) {
    const symtab_command *symtab = nullptr;
    const segment_command_64 *linkedit = nullptr;
    uintptr_t end = 0;
    for_each_load_command(img.header, [&](const load_command *lc) {
        if (lc->cmd == LC_SYMTAB) symtab = reinterpret_cast<const symtab_command *>(lc);
        if (lc->cmd != LC_SEGMENT_64) return;
        const auto *seg = reinterpret_cast<const segment_command_64 *>(lc);
        if (segment_named(*seg, SEG_LINKEDIT)) linkedit = seg;
        const auto *sect = reinterpret_cast<const section_64 *>(seg + 1);
        for (uint32_t k = 0; k < seg->nsects; ++k) {
            const uintptr_t lo = sect[k].addr + img.slide;
            if (addr >= lo && addr < lo + sect[k].size) end = lo + sect[k].size;
        }
    });
    if (!symtab || !linkedit || !end) return 0;
    const char *linkedit_base =
        reinterpret_cast<const char *>(linkedit->vmaddr + img.slide - linkedit->fileoff);
    const auto *syms = reinterpret_cast<const nlist_64 *>(linkedit_base + symtab->symoff);
    for (uint32_t i = 0; i < symtab->nsyms; ++i) {
        if ((syms[i].n_type & N_STAB) || (syms[i].n_type & N_TYPE) != N_SECT) continue;
        const uintptr_t a = syms[i].n_value + img.slide;
        if (a > addr && a < end) end = a;
    }
    return end - addr;
}
#endif

// ---- checked builds: bounds and races -------------------------------------------------------

std::string elem_desc(size_t count, const char *type, size_t elem) {
    if (type && *type) return fmt("%zu %s element%s", count, type, count == 1 ? "" : "s");
    return fmt("%zu %zu-byte element%s", count, elem, count == 1 ? "" : "s");
}

std::string shared_index(const ShRegion &r, size_t off) {
    size_t idx = off / std::max<size_t>(r.elem, 1);
    if (r.rank <= 1) return fmt("[%zu]", idx);
    std::string s;
    for (int k = r.rank - 1; k >= 0; --k) {
        const size_t e = std::max<uint32_t>(r.ext[k], 1);
        s = fmt("[%zu]", idx % e) + s;
        idx /= e;
    }
    return s;
}

// Where an out-of-bounds address lies relative to one array: the element index, how far outside
// the array that is, and whether the index looks like an unsigned 32-bit one that went below 0
// (`S[t - 1]` with t == 0 reads S[4294967295]).
struct Outside {
    long long index = 0;
    uint64_t distance = UINT64_MAX;  // bytes outside the array; UINT64_MAX: not a plausible index
    bool before = false, wrapped = false;
};

Outside outside(uintptr_t a, size_t access, uintptr_t base, uint64_t size, size_t elem) {
    Outside o;
    const int64_t off = int64_t(a - base), e = int64_t(std::max<size_t>(elem, 1));
    if (off < 0) {
        o.index = -((-off + e - 1) / e);
        o.distance = uint64_t(-off);
        o.before = true;
    } else {
        o.index = off / e;
        o.distance = uint64_t(off) - std::min<uint64_t>(size, uint64_t(off));
        for (const int64_t unit : {e, int64_t(std::max<size_t>(access, 1))}) {
            const int64_t k = off / unit;
            if (off % unit == 0 && k >= (int64_t(1) << 31) && k < (int64_t(1) << 32)) {
                o.index = -((int64_t(1) << 32) - k) * unit / e;
                o.distance = uint64_t(-o.index * e);
                o.before = o.wrapped = true;
                break;
            }
        }
    }
    const uint64_t limit = uint64_t(1) << 32;  // an index no 32-bit int could have made
    if (uint64_t(o.index < 0 ? -o.index : o.index) >= limit) o.distance = UINT64_MAX;
    return o;
}

// Which array an out-of-bounds address most likely belongs to: the nearest, where an overrun past
// the end of one array counts 8 times less than the same distance before the start of the next
// (overruns by whole rows or tiles are common; negative indices are small: S[t - 1], x[i - k]).
inline uint64_t likelihood_rank(const Outside &o) {
    return o.distance == UINT64_MAX ? UINT64_MAX : o.before ? o.distance * 8 : o.distance;
}

[[noreturn]] void out_of_bounds(Fiber *f, uintptr_t a, size_t size, bool write, uintptr_t pc) {
    Worker *w = f->w;
    Launch *L = w->L;
    std::string what;
    Outside best;
    uint64_t best_rank = UINT64_MAX;
    auto consider = [&](const Outside &o, const std::string &array) {
        if (likelihood_rank(o) < best_rank) {
            best_rank = likelihood_rank(o);
            best = o;
            what = fmt("element [%lld] of ", o.index) + array;
        }
    };
    for (int i = 0; i < L->d->nregions; ++i) {
        const pmpp_region_desc &r = L->d->regions[i];
        const std::string elems = elem_desc(r.size / std::max<uint32_t>(r.elem_size, 1), r.type_name, r.elem_size);
        Outside o = outside(a, size, uintptr_t(r.base), r.size, r.elem_size);
        if (r.view_offset == 0) {
            consider(o, fmt("%s '%s' (%s)", r.is_const == PMPP_REGION_CONSTANT ? "__constant__" : "argument",
                            r.name, elems.c_str()));
            continue;
        }
        // A view into an allocation (a[k:]): the allocation is in bounds, as on a GPU; the index is the
        // view's, as the kernel wrote it.
        const int64_t first = r.view_offset / std::max<int64_t>(r.elem_size, 1);
        if (!o.wrapped) o.index -= first;
        consider(o, fmt("argument '%s' (a view from element %lld of its allocation of %s)", r.name,
                        (long long)first, elems.c_str()));
    }
    for (const ShRegion &r : w->regions) {
        std::string shape;
        if (r.rank > 1) {
            for (int k = 0; k < r.rank; ++k) shape += fmt("%s%u", k ? "x" : "", r.ext[k]);
            shape += " = ";
        }
        consider(outside(a, size, uintptr_t(r.base), r.size, r.elem),
                 fmt("%s__shared__ '%s' (%s%s)", r.dynamic ? "extern " : "", r.name, shape.c_str(),
                     elem_desc(r.size / std::max<size_t>(r.elem, 1), r.type, r.elem).c_str()));
    }
    std::string at;
    if (a < 4096)
        at = fmt("at address 0x%lx (a null pointer)", (unsigned long)a);
    else if (what.empty())
        at = fmt("at address 0x%lx, which is not inside any argument array, __shared__ array or "
                 "global variable",
                 (unsigned long)a);
    else
        at = "at " + what;
    std::string msg =
        fmt("kernel '%s' at %s, block %s thread %s: %s of %zu byte%s ", kname(L), pc_marker(pc).c_str(),
            coord(w->bid).c_str(), coord(f->c.thread_idx).c_str(), write ? "write" : "read", size,
            size == 1 ? "" : "s") +
        at + " is out of bounds";
    if (a >= 4096 && best.wrapped)
        msg += fmt(": its index is unsigned and went below 0, wrapping around to %llu (make the index "
                   "a signed int, or test it before subtracting)",
                   (unsigned long long)((uint64_t(1) << 32) + best.index));
    fiber_fail(f, PMPP_ERR_OUT_OF_BOUNDS, msg);
}

// Two lanes of one warp: since Volta they do not run in lockstep, so legacy warp-synchronous code
// (a volatile shared-memory tail with no __syncwarp()) races, as compute-sanitizer's racecheck says.
std::string same_warp_advice(uint32_t tid_a, uint32_t tid_b) {
    return fmt(". They are lanes %u and %u of warp %u, and the lanes of a warp do not run in lockstep "
               "(independent thread scheduling, since Volta; volatile does not order them): add "
               "__syncwarp() between the two accesses where only this warp shares the data (between "
               "the steps of a warp-synchronous reduction), __syncthreads() where other warps do too, "
               "or atomics if both lanes update the value",
               tid_a % 32, tid_b % 32, tid_a / 32);
}

// Updates (x += v, x++, a histogram's bin: a read, then a write of the same element) by two
// threads with nothing ordering them: one update can undo the other whatever barrier is added, so
// the message leads with the fix, an atomic. ``certain``: this thread's write follows its own read;
// else this thread reads what another thread updated (it may be starting an update of its own).
[[noreturn]] void report_update_race(Fiber *f, const ShRegion &r, uintptr_t a, const Acc &prev, uintptr_t pc,
                                     bool certain) {
    Worker *w = f->w;
    const std::string where = fmt("%s__shared__ '%s'%s", r.dynamic ? "extern " : "", r.name,
                                  shared_index(r, size_t(a - uintptr_t(r.base))).c_str());
    const std::string who = fmt("thread %s", coord(w->fibers[prev.tid].c.thread_idx).c_str());
    const std::string me = fmt("thread %s", coord(f->c.thread_idx).c_str());
    if (certain)
        fiber_fail(f, PMPP_ERR_RACE,
                   fmt("shared-memory race in kernel '%s': %s and %s both update %s (read, then write) at %s "
                       "and %s with nothing ordering them, so one update can undo the other (block %s). "
                       "Make the update atomic (atomicAdd and its kin): no barrier fixes it",
                       kname(w->L), who.c_str(), me.c_str(), where.c_str(), pc_marker(prev.pc).c_str(),
                       pc_marker(pc).c_str(), coord(w->bid).c_str()));
    fiber_fail(f, PMPP_ERR_RACE,
               fmt("shared-memory race in kernel '%s': %s updated %s (read, then write) at %s and %s read it "
                   "at %s with nothing ordering them (block %s). If both update it (x += v, x++), make the "
                   "update atomic (atomicAdd and its kin): no barrier fixes that; if %s only reads the "
                   "result, put __syncthreads() (or __syncwarp() within a warp) between them",
                   kname(w->L), who.c_str(), where.c_str(), pc_marker(prev.pc).c_str(), me.c_str(),
                   pc_marker(pc).c_str(), coord(w->bid).c_str(), me.c_str()));
}

[[noreturn]] void report_race(Fiber *f, const ShRegion &r, uintptr_t a, const Acc &prev,
                              bool prev_write, bool write, uintptr_t pc, bool update = false) {
    if (update) report_update_race(f, r, a, prev, pc, write);
    Worker *w = f->w;
    const bool same_warp = prev.tid / 32 == f->lin / 32;
    std::string msg = fmt(
        "shared-memory race in kernel '%s' on %s__shared__ '%s'%s: thread %s %s at %s and "
        "thread %s %s at %s with no barrier%s between them (block %s)",
        kname(w->L), r.dynamic ? "extern " : "", r.name,
        shared_index(r, size_t(a - uintptr_t(r.base))).c_str(),
        coord(w->fibers[prev.tid].c.thread_idx).c_str(), prev_write ? "wrote" : "read",
        pc_marker(prev.pc).c_str(), coord(f->c.thread_idx).c_str(), write ? "wrote" : "read",
        pc_marker(pc).c_str(), same_warp ? " or __syncwarp()" : "", coord(w->bid).c_str());
    if (same_warp) msg += same_warp_advice(prev.tid, f->lin);
    fiber_fail(f, PMPP_ERR_RACE, msg);
}

// An atomic and a plain access of one element by two threads with nothing ordering them: atomics
// order nothing against plain loads and stores (a shared histogram zeroed, counted into with
// atomicAdd and read out, with a __syncthreads() missing between two of those steps).
[[noreturn]] void report_atomic_race(Fiber *f, const ShRegion &r, uintptr_t a, const Acc &prev, bool prev_atomic,
                                     bool prev_write, bool write, uintptr_t pc) {
    Worker *w = f->w;
    auto what = [](bool atomic, bool wrote) {
        return atomic ? (wrote ? "atomic update" : "atomic read") : (wrote ? "plain store" : "plain load");
    };
    fiber_fail(f, PMPP_ERR_RACE,
               fmt("shared-memory race in kernel '%s': __syncthreads() missing between thread %s's %s of "
                   "%s__shared__ '%s'%s at %s and thread %s's %s at %s (block %s). Atomics order nothing "
                   "against plain loads and stores: a barrier must separate them (zeroing a shared histogram, "
                   "counting into it, reading it out), or both must be atomic",
                   kname(w->L), coord(w->fibers[prev.tid].c.thread_idx).c_str(), what(prev_atomic, prev_write),
                   r.dynamic ? "extern " : "", r.name, shared_index(r, size_t(a - uintptr_t(r.base))).c_str(),
                   pc_marker(prev.pc).c_str(), coord(f->c.thread_idx).c_str(), what(!prev_atomic, write),
                   pc_marker(pc).c_str(), coord(w->bid).c_str()));
}

// Happens-before within a block: __syncthreads() starts a new epoch for everyone; between lanes of
// one warp, a warp-level synchronisation (__syncwarp, a shuffle, a vote, ...) with both in its mask
// orders what came before it (LaneClocks). Volatile accesses are ordinary ones here: volatile
// orders nothing between threads.
// Atomics (``atomic``) race only with plain accesses: an atomic write is kept as the byte's write,
// marked kAtomicWrite; an atomic read only checks the write before it.
void race_check(Fiber *f, const ShRegion &r, uintptr_t a, size_t size, bool write, uintptr_t pc,
                bool atomic = false) {
    Worker *w = f->w;
    const uint32_t E = w->epoch, tid = f->lin, wi = f->warp;
    const LaneClocks &C = w->clocks[wi];
    auto conflict = [&](const Acc &x) {
        if (x.epoch != E || x.tid == tid) return false;
        return x.tid / 32 != wi || lane_known(C, f->lane, x.tid % 32, E) < x.clock;
    };
    Acc me{pc, E, C.own[f->lane] + 1, tid, 0};
    Shadow *sh = w->shadow + (a - uintptr_t(w->arena));
    for (size_t i = 0; i < size; ++i) {
        Shadow &s = sh[i];
        const bool after_atomic = s.w.update == kAtomicWrite;
        if (atomic) {
            if (!after_atomic && conflict(s.w)) report_atomic_race(f, r, a + i, s.w, false, true, write, pc);
            if (!write) continue;
            if (conflict(s.r1)) report_atomic_race(f, r, a + i, s.r1, false, false, true, pc);
            if (conflict(s.r2)) report_atomic_race(f, r, a + i, s.r2, false, false, true, pc);
            me.update = kAtomicWrite;
            s.w = me;
            s.r1.epoch = s.r2.epoch = 0;
            continue;
        }
        if (after_atomic && conflict(s.w)) report_atomic_race(f, r, a + i, s.w, true, true, write, pc);
        // An update (x += v): this thread's write after its own read. Reading another thread's
        // update, or updating after it, is said as such (report_update_race).
        const Acc *mine = s.r1.epoch == E && s.r1.tid == tid ? &s.r1 : s.r2.epoch == E && s.r2.tid == tid ? &s.r2
                                                                                                          : nullptr;
        // Reading, with the very load the other thread's update read it by, what it updated (x++ in
        // both): the start of a second update. Writing after its own read, what another updated.
        const bool same_load = !write && s.w.update == uint32_t(pc) + 1;
        if (conflict(s.w)) report_race(f, r, a + i, s.w, true, write, pc, s.w.update && (same_load || (write && mine)));
        if (write) {
            if (conflict(s.r1)) report_race(f, r, a + i, s.r1, false, true, pc);
            if (conflict(s.r2)) report_race(f, r, a + i, s.r2, false, true, pc);
            me.update = mine ? uint32_t(mine->pc) + 1 : 0;
            s.w = me;
            s.r1.epoch = s.r2.epoch = 0;
        } else if (s.r1.epoch != E || s.r1.tid == tid) {
            s.r1 = me;
        } else if (s.r2.epoch != E || s.r2.tid == tid) {
            s.r2 = me;
        }
    }
}

// ---- checked builds: races between blocks on global memory ----------------------------------
//
// Blocks of one launch run in no fixed order and, on a GPU, at the same time: a plain store by one
// block and a plain load or store of the same element by another, in the same launch, is a race
// (the classic one: `*sum += partial;` where an atomicAdd is needed). Atomics and volatile accesses
// are how blocks pass values to each other (look-back scans' flags), so they take no part. See
// GlobalShadow for why the outcome does not depend on the order the blocks ran in.

// The accesses of one kind to one granule, in a word: the lowest block + 1 (bits 0-19), the next
// lowest (bits 20-39), 0 for none, and the lowest code offset (bits 40-63, 0: none). Launches of
// more blocks than kMaxTrackedBlocks are not checked for races between blocks.
constexpr int kBlockBits = 20;
constexpr uint64_t kBlockMask = (uint64_t(1) << kBlockBits) - 1;
constexpr uint64_t kMaxTrackedBlocks = kBlockMask - 1;
constexpr uint64_t kCodeMask = (uint64_t(1) << (64 - 2 * kBlockBits)) - 1;

inline uint32_t lowest(uint64_t word) { return uint32_t(word & kBlockMask); }
inline uint32_t second(uint64_t word) { return uint32_t(word >> kBlockBits & kBlockMask); }
inline uint32_t code_of(uint64_t word) { return uint32_t(word >> (2 * kBlockBits)); }

inline uint64_t with_access(uint64_t word, uint32_t b, uint32_t code) {
    uint32_t lo = lowest(word), hi = second(word), c = code_of(word);
    if (!lo || b < lo) {
        hi = lo ? lo : hi;
        lo = b;
    } else if (b != lo && (!hi || b < hi)) {
        hi = b;
    }
    if (!c || code < c) c = code;
    return uint64_t(c) << (2 * kBlockBits) | uint64_t(hi) << kBlockBits | lo;
}

// Apply ``f`` to an atomic word; true if that changed it.
template <class F>
bool update(std::atomic<uint64_t> &word, F f) {
    uint64_t old = word.load(std::memory_order_relaxed);
    for (;;) {
        const uint64_t next = f(old);
        if (next == old) return false;
        if (word.compare_exchange_weak(old, next)) return true;
    }
}

// Two blocks race on the granule: one wrote it, and another wrote or read it.
bool races(const GlobalShadow &g) {
    const uint64_t wrote = g.wrote.load(), read = g.read.load();
    if (!lowest(wrote)) return false;
    return second(wrote) || second(read) || (lowest(read) && lowest(read) != lowest(wrote));
}

void note_global(Fiber *f, int region, uintptr_t a, size_t size, bool write, uintptr_t pc) {
    Launch *L = f->w->L;
    GlobalRegion &R = L->global[region];
    if (!R.shadow) return;
    const uint32_t block = uint32_t(f->w->cur_block + 1);
    const uint32_t code = uint32_t(std::min<uint64_t>(pc - L->code_base, kCodeMask));
    for (uint64_t k = (a - R.base) >> R.shift; k <= (a + size - 1 - R.base) >> R.shift; ++k) {
        GlobalShadow &g = R.shadow[k];
        // Sequentially consistent: of two blocks that make a race between them, at least one sees
        // the other's entry when it checks.
        auto add = [&](uint64_t word) { return with_access(word, block, code); };
        if (update(write ? g.wrote : g.read, add) && races(g)) {
            uint64_t first = R.first_conflict.load();
            while (k < first && !R.first_conflict.compare_exchange_weak(first, k)) {
            }
        }
    }
}

// Records for the writable argument arrays of a checked launch (and none if they would take more
// than kGlobalShadowCap; the pages are committed only where the kernel touches them).
void setup_global_shadow(Launch *L) {
    const pmpp_launch_desc *d = L->d;
    if (L->nblocks > kMaxTrackedBlocks || d->nregions <= 0) return;
    std::vector<size_t> offsets(size_t(d->nregions), SIZE_MAX);
    std::vector<uint32_t> shifts(size_t(d->nregions), 0);
    size_t total = 0;
    for (int i = 0; i < d->nregions; ++i) {
        const pmpp_region_desc &r = d->regions[i];
        if (r.is_const != PMPP_REGION_WRITABLE || !r.size) continue;
        const uint32_t e = r.elem_size;
        const uint32_t shift = (e && e <= 16 && !(e & (e - 1))) ? uint32_t(__builtin_ctz(e)) : 0;
        shifts[i] = shift;
        offsets[i] = total;
        total += ((r.size + (uint64_t(1) << shift) - 1) >> shift) * sizeof(GlobalShadow);
    }
    if (!total || total > kGlobalShadowCap) return;
    void *map = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) return;
    L->global_map = map;
    L->global_map_bytes = total;
    L->global.reset(new GlobalRegion[size_t(d->nregions)]);
    for (int i = 0; i < d->nregions; ++i) {
        if (offsets[i] == SIZE_MAX) continue;
        GlobalRegion &R = L->global[i];
        R.shadow = reinterpret_cast<GlobalShadow *>(static_cast<char *>(map) + offsets[i]);
        R.base = uintptr_t(d->regions[i].base);
        R.shift = shifts[i];
    }
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(d->thunk), &info)) L->code_base = uintptr_t(info.dli_fbase);
}

std::string block_coord(const Launch *L, uint64_t b) {
    return coord(pmpp_dim{unsigned(b % L->gx), unsigned((b / L->gx) % L->gy),
                          unsigned(b / (uint64_t(L->gx) * L->gy))});
}

std::string code_at(const Launch *L, uint64_t word) {
    const uint32_t offset = code_of(word);  // of a return address, as pc_marker expects
    return offset && offset < kCodeMask ? pc_marker(L->code_base + offset) : "an unknown location";
}

// The race on the lowest granule of the first array that has one: two blocks, what they did,
// where, and what to do instead.
std::string describe_global_race(const Launch *L, int region, uint64_t granule) {
    const pmpp_region_desc &r = L->d->regions[region];
    const GlobalShadow &g = L->global[region].shadow[granule];
    const uint64_t wrote = g.wrote, read = g.read;
    const uint32_t x = lowest(wrote);
    const uint32_t reader = lowest(read) != x ? lowest(read) : second(read);
    const uint32_t y = second(wrote) && (!reader || second(wrote) < reader) ? second(wrote) : reader;
    const std::string stored = code_at(L, wrote), loaded = code_at(L, read);
    std::string what, advice;
    if (second(wrote) && read) {
        what = "a plain read-modify-write: read at " + loaded + ", written at " + stored;
        advice = "when several blocks update one location, use atomicAdd (or another atomic operation)";
    } else if (second(wrote)) {
        what = "both write it: written at " + stored;
        advice = "which value is left depends on which block runs last: let each block write elements "
                 "of its own (index them with blockIdx), or use an atomic operation";
    } else {
        what = "one writes it, the other reads it: written at " + stored + ", read at " + loaded;
        advice = "blocks run in no fixed order, so the read may come before or after the write: pass "
                 "the value on to a later launch, or publish it with __threadfence() and an atomic "
                 "flag and read it through a volatile pointer or an atomic";
    }
    const uint64_t index = (granule << L->global[region].shift) / std::max<uint32_t>(r.elem_size, 1);
    return fmt("race between blocks in kernel '%s': blocks %s and %s both access %s[%llu] (argument "
               "'%s', %s) without synchronization (",
               kname(L), block_coord(L, x - 1).c_str(), block_coord(L, y - 1).c_str(), r.name,
               (unsigned long long)index, r.name,
               elem_desc(r.size / std::max<uint32_t>(r.elem_size, 1), r.type_name, r.elem_size).c_str()) +
           what + "); " + advice;
}

void finish_global_shadow(Launch *L) {
    if (!L->global) return;
    if (L->d->error_kind == PMPP_OK) {
        for (int i = 0; i < L->d->nregions; ++i) {
            const uint64_t granule = L->global[i].first_conflict.load();
            if (granule != UINT64_MAX) {
                report(L, PMPP_ERR_RACE, describe_global_race(L, i, granule));
                break;
            }
        }
    }
    munmap(L->global_map, L->global_map_bytes);
    L->global.reset();
    L->global_map = nullptr;
}

// Where an access of kernel code lands: PMPP_SPACE_* (reporting it if out of bounds), or -1 for
// the fiber's own stack (local variables: not counted). ``array``, if given, gets the start and size
// of the argument or __shared__ array it is in (left alone for a __device__ variable).
struct ArrayBounds {
    uintptr_t base = 0, size = 0;
};
int classify(Fiber *f, uintptr_t a, size_t size, bool write, uintptr_t pc, AccessKind kind,
             ArrayBounds *array = nullptr) {
    if (a - uintptr_t(f->stack_lo) < uintptr_t(f->stack_hi - f->stack_lo)) return -1;
    Worker *w = f->w;
    Launch *L = w->L;
    if (a - uintptr_t(w->arena) < kArenaCap) {
        for (const ShRegion &r : w->regions) {
            if (a - uintptr_t(r.base) < r.size) {
                if (a + size > uintptr_t(r.base) + r.size) break;
                if (L->check) race_check(f, r, a, size, write, pc, kind == ACCESS_ATOMIC);
                if (array) *array = {uintptr_t(r.base), r.size};
                return PMPP_SPACE_SHARED;
            }
        }
        out_of_bounds(f, a, size, write, pc);
    }
    for (int i = 0; i < L->d->nregions; ++i) {
        const pmpp_region_desc &r = L->d->regions[i];
        if (a - uintptr_t(r.base) < r.size) {
            if (a + size > uintptr_t(r.base) + r.size) out_of_bounds(f, a, size, write, pc);
            if (kind == ACCESS_PLAIN && L->global) note_global(f, i, a, size, write, pc);
            if (array) *array = {uintptr_t(r.base), r.size};
            return r.is_const == PMPP_REGION_CONSTANT ? PMPP_SPACE_CONSTANT : PMPP_SPACE_GLOBAL;
        }
    }
    for (const auto &s : L->segs)
        if (a >= s.first && a + size <= s.second) return PMPP_SPACE_GLOBAL;  // __device__ variables
    out_of_bounds(f, a, size, write, pc);
}

// Count builds: an access of a code address lands where the last one of that address did, as a rule
// (each access in the source names one array), so each address keeps the argument or __shared__
// array it last landed in (SiteRegion) and the rest of its event key; only an access outside it goes
// through classify. (Not a __device__ variable's segment: __constant__ arrays lie inside segments.)
inline uint64_t access_tag(uintptr_t pc, int op, size_t size) {
    return std::min<uint64_t>(size, 4095) << 52 | event_key(pc, 0, op);
}

inline Worker::SiteRegion &site_region(Worker *w, uintptr_t pc) {
    return w->site_regions[(pc ^ pc >> 8) & (Worker::kSiteRegions - 1)];
}

__attribute__((noinline)) void count_access_slow(Fiber *f, uintptr_t a, size_t size, bool write, uintptr_t pc,
                                                 AccessKind kind, uint64_t tag) {
    ArrayBounds array;
    const int space = classify(f, a, size, write, pc, kind, &array);
    if (space < 0) return;
    if (array.size >= size) site_region(f->w, pc) = {tag, array.base, array.size - size, space};
    count_event(f, tag | uint64_t(space) << 2, a);
}

// Count builds: count the access unless it is to the lane's own stack (a local variable). The usual
// path is a compare with what this code address found last time and count_event's own.
__attribute__((always_inline)) inline void count_memory_access(Fiber *f, uintptr_t a, size_t size,
                                                               bool write, uintptr_t pc, AccessKind kind) {
    if (a - uintptr_t(f->stack_lo) < uintptr_t(f->stack_hi - f->stack_lo)) return;
    const int op = kind == ACCESS_ATOMIC ? PMPP_OP_ATOM : write ? PMPP_OP_ST : PMPP_OP_LD;
    const uint64_t tag = access_tag(pc, op, size);
    const Worker::SiteRegion &known = site_region(f->w, pc);
    if (__builtin_expect(known.tag != tag || a - known.base > known.last, 0))
        return count_access_slow(f, a, size, write, pc, kind, tag);
    count_event(f, tag | uint64_t(known.space) << 2, a);
}

__attribute__((always_inline)) inline void check_access(uintptr_t a, size_t size, bool write, uintptr_t pc,
                                                       AccessKind kind) {
    Fiber *f = cur_fiber();
    if (!f) return;  // not inside a launch (e.g. static initialisers while loading)
    if (f->trace) return count_memory_access(f, a, size, write, pc, kind);
    if (f->w->L->check) classify(f, a, size, write, pc, kind);
}

// The result of an atomic of kernel code at a, noted as a poll when unchanged(result) says it left
// memory as it was.
template <class R, class Unchanged>
inline R polled_if(R result, Unchanged unchanged, const volatile void *a) {
    if (unchanged(result)) note_poll(const_cast<const void *>(a));
    return result;
}

}  // namespace

// ---- the C interface ------------------------------------------------------------------------

extern "C" {

void pmpp_syncthreads(const char *file, int line) {
    pmpp_syncthreads_op(PMPP_BAR_PLAIN, 0, file, line);
}

int pmpp_syncthreads_op(int op, int predicate, const char *file, int line) {
    Fiber *f = cur_fiber();
    Worker *w = f->w;
    f->bar_file = file;
    f->bar_line = line;
    if (predicate) w->bar_pending++;
    f->state = AT_BARRIER;
    w->nbar++;
    if (w->L->count) count_park(w, f);
    yield(w);
    switch (op) {
        case PMPP_BAR_COUNT: return w->bar_result;
        case PMPP_BAR_AND: return w->bar_result == w->bar_arrived;
        case PMPP_BAR_OR: return w->bar_result != 0;
        default: return 0;
    }
}

uint64_t pmpp_warp_op(int op, uint32_t mask, uint64_t value, int arg, int width, const char *file,
                      int line) {
    Fiber *f = cur_fiber();
    Worker *w = f->w;
    Warp &W = w->warps[f->warp];
    const uint32_t bit = 1u << f->lane;
    mask |= bit;
    f->wop = (op >= 0 && op < PMPP_W_NUM_OPS) ? op : PMPP_W_SYNC;
    f->wmask = mask;
    f->wval = value;
    f->warg = arg;
    f->wwidth = width;
    f->wfile = file;
    f->wline = line;
    W.arrived |= bit;
    const uint32_t need = mask & W.live;
    if ((W.arrived & need) == need) {
        warp_complete(w, f->warp, need);
        return f->wres;
    }
    f->state = AT_WARP;
    w->nwarp++;
    yield(w);
    return f->wres;
}

void pmpp_yield(void) {
    Fiber *f = cur_fiber();
    yield(f->w);
}

uint32_t pmpp_activemask(void) {
    Fiber *f = cur_fiber();
    return f->w->warps[f->warp].live;
}

// The limits a launch is checked against: the chosen target's (PMPP_TARGET), else the H100's.
static size_t shared_limit(const pmpp_launch_desc *d) {
    return d->max_shared_per_block ? d->max_shared_per_block : kSharedLimit;
}
static uint32_t threads_limit(const pmpp_launch_desc *d) {
    return d->max_threads_per_block ? d->max_threads_per_block : kMaxThreads;
}
static const char *target_name(const pmpp_launch_desc *d) { return d->target ? d->target : kOwnTarget; }
static std::string kib(size_t bytes) {
    return bytes % 1024 ? fmt("%zu bytes", bytes) : fmt("%zu KiB", bytes / 1024);
}

void *pmpp_shared_var(const void *site, size_t size, size_t align, const char *name,
                      size_t elem_size, const char *elem_type, int rank, const uint32_t *extents) {
    Fiber *f = cur_fiber();
    Worker *w = f->w;
    for (const Site &s : w->sites)
        if (s.key == site) return s.ptr;
    Launch *L = w->L;
    align = std::max<size_t>(align, 16);
    const size_t rz = L->check ? kRedZone : 0;
    const size_t off = (w->arena_used + rz + align - 1) / align * align;
    w->static_bytes += size;
    if (w->static_bytes > kStaticSharedLimit)
        fiber_fail(f, PMPP_ERR_LIMIT,
                   fmt("kernel '%s' declares more than 48 KB of static __shared__ memory (%zu "
                       "bytes once '%s' is added); CUDA allows at most 49152 bytes per block: "
                       "use smaller tiles, or dynamic shared memory (extern __shared__)",
                       kname(L), w->static_bytes, name));
    if (off + size + rz > kArenaCap || w->static_bytes + w->dyn_size > shared_limit(L->d))
        fiber_fail(f, PMPP_ERR_LIMIT,
                   fmt("kernel '%s' uses %s of shared memory per block (%zu bytes static + %zu "
                       "dynamic); %s allows at most %s: use a smaller tile",
                       kname(L), kib(w->static_bytes + w->dyn_size).c_str(), w->static_bytes,
                       w->dyn_size, target_name(L->d), kib(shared_limit(L->d)).c_str()));
    char *p = w->arena + off;
    w->arena_used = off + size;
    w->sites.push_back({site, p});
    if (L->check || L->count) {
        ShRegion r{p, size, elem_size, name, elem_type, rank, {1, 1, 1, 1}, false};
        for (int k = 0; k < rank && k < 4; ++k) r.ext[k] = extents[k];
        r.rank = std::min(rank, 4);
        w->regions.push_back(r);
    }
    return p;
}

void *pmpp_dynamic_shared(const char *name, size_t elem_size, const char *elem_type) {
    Fiber *f = cur_fiber();
    Worker *w = f->w;
    if ((w->L->check || w->L->count) && !w->dyn_registered) {
        w->regions.push_back(
            {w->dyn_base, w->dyn_size, elem_size, name, elem_type, 1, {1, 1, 1, 1}, true});
        w->dyn_registered = true;
    }
    return w->dyn_base;
}

void pmpp_device_assert(const char *expr, const char *file, int line, const char *func) {
    Fiber *f = cur_fiber();
    if (!f) {
        fprintf(stderr, "%s:%d: %s: assertion `%s` failed\n", file, line, func, expr);
        abort();
    }
    Worker *w = f->w;
    fiber_fail(f, PMPP_ERR_ASSERT,
               fmt("device-side assert triggered in kernel '%s' at %s:%d (in %s), block %s "
                   "thread %s: assertion `%s` failed",
                   kname(w->L), file, line, func, coord(w->bid).c_str(),
                   coord(f->c.thread_idx).c_str(), expr));
}

void pmpp_trap(const char *what, const char *file, int line) {
    Fiber *f = cur_fiber();
    if (!f) abort();
    Worker *w = f->w;
    fiber_fail(f, PMPP_ERR_ASSERT,
               fmt("%s called in kernel '%s' at %s:%d, block %s thread %s", what, kname(w->L),
                   file, line, coord(w->bid).c_str(), coord(f->c.thread_idx).c_str()));
}

void pmpp_check_atomic(const void *addr, size_t size, const void *pc) {
    check_access(uintptr_t(addr), size, true, uintptr_t(pc), ACCESS_ATOMIC);
}

int pmpp_launch(pmpp_launch_desc *d) {
    // Line-buffered printf: what a kernel printed before it crashed or hung still gets out.
    static bool stdout_set = (setvbuf(stdout, nullptr, _IOLBF, 1 << 16), true);
    (void)stdout_set;
    d->error_kind = PMPP_OK;
    d->error_msg[0] = 0;
    Launch L;
    L.d = d;
    L.bx = d->block[0], L.by = d->block[1], L.bz = d->block[2];
    L.gx = d->grid[0], L.gy = d->grid[1], L.gz = d->grid[2];
    const uint64_t nthr = uint64_t(L.bx) * L.by * L.bz;
    L.nblocks = uint64_t(L.gx) * L.gy * L.gz;
    L.check = d->check != 0;
    L.count = d->count != 0;
    if (nthr == 0 || nthr > threads_limit(d)) {
        report(&L, PMPP_ERR_LIMIT,
               fmt("kernel '%s': a block of %llu threads; %s allows 1 to %u threads per block: "
                   "use smaller blocks (and more of them)",
                   kname(&L), (unsigned long long)nthr, target_name(d), threads_limit(d)));
        return d->error_kind;
    }
    if (d->shared_mem > shared_limit(d)) {
        report(&L, PMPP_ERR_LIMIT,
               fmt("kernel '%s' asks for %s of dynamic shared memory per block; %s allows at "
                   "most %s: use a smaller tile",
                   kname(&L), kib(d->shared_mem).c_str(), target_name(d), kib(shared_limit(d)).c_str()));
        return d->error_kind;
    }
    L.nthr = uint32_t(nthr);
    if (L.count) g_count = CountResult{};
    if (L.nblocks == 0) return PMPP_OK;
    if (L.check || L.count) collect_segments(&L);
    const int nt = int(std::min<uint64_t>(std::max(1, std::min(d->nthreads, kMaxSlots)),
                                          L.nblocks));
    if (L.check) setup_global_shadow(&L);
    std::vector<std::thread> pool;
    for (int s = 1; s < nt; ++s) pool.emplace_back(worker_main, &L, s);
    worker_main(&L, 0);
    for (std::thread &t : pool) t.join();
    if (L.check) finish_global_shadow(&L);
    if (L.count && d->error_kind == PMPP_OK) count_merge(&L, nt);
    fflush(stdout);
    return d->error_kind;
}

#ifdef __APPLE__
int pmpp_symbol(void *handle, const char *name, void **addr, uint64_t *size) {
    dlerror();
    void *p = dlsym(handle, name);
    if (!p) return 0;
    // dlsym also searches the libraries the module uses; pmpp_module_kernel_count, which every
    // module defines (source.py's kernel table) and nothing else does, marks the module's image
    void *own = dlsym(handle, "pmpp_module_kernel_count");
    Dl_info of_module, of_symbol;
    if (!own || !dladdr(own, &of_module) || !dladdr(p, &of_symbol) ||
        of_module.dli_fbase != of_symbol.dli_fbase)
        return 0;
    const MachImage img = image_containing(p);
    if (!img.header) return 0;
    *addr = p;
    *size = symbol_extent(img, uintptr_t(p));
    return 1;
}
#else
int pmpp_symbol(void *handle, const char *name, void **addr, uint64_t *size) {
    dlerror();
    void *p = dlsym(handle, name);
    if (!p) return 0;
    struct link_map *lm = nullptr;
    Dl_info info;
    const ElfW(Sym) *sym = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm ||
        !dladdr1(p, &info, (void **)(&sym), RTLD_DL_SYMENT) ||
        reinterpret_cast<uintptr_t>(info.dli_fbase) != lm->l_addr)
        return 0;  // found in a library the module uses, not in the module itself
    *addr = p;
    *size = sym ? sym->st_size : 0;
    return 1;
}
#endif

const char *pmpp_runtime_version(void) { return "pmpp-cpu-runtime 1"; }

// Count builds: g++'s -fsanitize-coverage=trace-pc calls this at the start of every basic block.
__attribute__((noinline)) void __sanitizer_cov_trace_pc(void) {
    Fiber *f = cur_fiber();
    if (f && f->trace) count_block(f, uintptr_t(__builtin_return_address(0)));
}

void pmpp_count_result(pmpp_count_summary *summary, pmpp_count_row *rows, uint64_t max_rows,
                       pmpp_count_sample *samples, uint64_t max_samples) {
    *summary = g_count.sum;
    for (uint64_t i = 0; i < std::min<uint64_t>(max_rows, g_count.rows.size()); ++i)
        rows[i] = g_count.rows[i];
    for (uint64_t i = 0; i < std::min<uint64_t>(max_samples, g_count.samples.size()); ++i)
        samples[i] = g_count.samples[i];
}

// Called by instrumented kernel code before every access (see the top of this file).
#define PMPP_PC uintptr_t(__builtin_return_address(0))
#define PMPP_TSAN_HOOKS(n)                                                                     \
    __attribute__((noinline)) void __tsan_read##n(void *a) {                                   \
        check_access(uintptr_t(a), n, false, PMPP_PC, ACCESS_PLAIN);                           \
    }                                                                                          \
    __attribute__((noinline)) void __tsan_write##n(void *a) {                                  \
        check_access(uintptr_t(a), n, true, PMPP_PC, ACCESS_PLAIN);                            \
    }                                                                                          \
    __attribute__((noinline)) void __tsan_unaligned_read##n(void *a) {                         \
        check_access(uintptr_t(a), n, false, PMPP_PC, ACCESS_PLAIN);                           \
    }                                                                                          \
    __attribute__((noinline)) void __tsan_unaligned_write##n(void *a) {                        \
        check_access(uintptr_t(a), n, true, PMPP_PC, ACCESS_PLAIN);                            \
    }                                                                                          \
    __attribute__((noinline)) void __tsan_volatile_read##n(void *a) {                          \
        check_access(uintptr_t(a), n, false, PMPP_PC, ACCESS_VOLATILE);                        \
        note_poll(a);                                                                          \
    }                                                                                          \
    __attribute__((noinline)) void __tsan_volatile_write##n(void *a) {                         \
        check_access(uintptr_t(a), n, true, PMPP_PC, ACCESS_VOLATILE);                         \
    }
PMPP_TSAN_HOOKS(1)
PMPP_TSAN_HOOKS(2)
PMPP_TSAN_HOOKS(4)
PMPP_TSAN_HOOKS(8)
PMPP_TSAN_HOOKS(16)

__attribute__((noinline)) void __tsan_read_range(void *a, size_t n) {
    check_access(uintptr_t(a), n, false, PMPP_PC, ACCESS_PLAIN);
}
__attribute__((noinline)) void __tsan_write_range(void *a, size_t n) {
    check_access(uintptr_t(a), n, true, PMPP_PC, ACCESS_PLAIN);
}
// clang turns a copy of a 16-byte struct (a float4) into memcpy and instruments it as these calls.
__attribute__((noinline)) void *__tsan_memcpy(void *d, const void *s, size_t n) {
    if (n) {
        check_access(uintptr_t(s), n, false, PMPP_PC, ACCESS_PLAIN);
        check_access(uintptr_t(d), n, true, PMPP_PC, ACCESS_PLAIN);
    }
    return memcpy(d, s, n);
}
__attribute__((noinline)) void *__tsan_memmove(void *d, const void *s, size_t n) {
    if (n) {
        check_access(uintptr_t(s), n, false, PMPP_PC, ACCESS_PLAIN);
        check_access(uintptr_t(d), n, true, PMPP_PC, ACCESS_PLAIN);
    }
    return memmove(d, s, n);
}
__attribute__((noinline)) void *__tsan_memset(void *d, int c, size_t n) {
    if (n) check_access(uintptr_t(d), n, true, PMPP_PC, ACCESS_PLAIN);
    return memset(d, c, n);
}
void __tsan_init(void) {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit(void) {}
void __tsan_vptr_update(void **, void *) {}
void __tsan_vptr_read(void **) {}

// Atomics written with __atomic builtins or std::atomic directly in kernel code (the prelude's
// atomicAdd and friends are not instrumented and check their address themselves).
// Those that leave memory as it was are polls (see note_poll).
#define PMPP_TSAN_ATOMICS(n, T)                                                                                    \
    __attribute__((noinline)) T __tsan_atomic##n##_load(const volatile T *a, int) {                                \
        check_access(uintptr_t(a), sizeof(T), false, PMPP_PC, ACCESS_ATOMIC);                                      \
        note_poll((const void *)a);                                                                                \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                               \
    }                                                                                                              \
    __attribute__((noinline)) void __tsan_atomic##n##_store(volatile T *a, T v, int) {                             \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                  \
    }                                                                                                              \
    __attribute__((noinline)) T __tsan_atomic##n##_exchange(volatile T *a, T v, int) {                             \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        return polled_if(__atomic_exchange_n(a, v, __ATOMIC_SEQ_CST), [v](T old) { return old == v; }, a);         \
    }                                                                                                              \
    __attribute__((noinline)) T __tsan_atomic##n##_fetch_add(volatile T *a, T v, int) {                            \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        return polled_if(__atomic_fetch_add(a, v, __ATOMIC_SEQ_CST), [v](T) { return v == 0; }, a);                \
    }                                                                                                              \
    __attribute__((noinline)) T __tsan_atomic##n##_fetch_sub(volatile T *a, T v, int) {                            \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        return polled_if(__atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST), [v](T) { return v == 0; }, a);                \
    }                                                                                                              \
    __attribute__((noinline)) T __tsan_atomic##n##_fetch_and(volatile T *a, T v, int) {                            \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        return polled_if(__atomic_fetch_and(a, v, __ATOMIC_SEQ_CST), [v](T old) { return T(old & v) == old; }, a); \
    }                                                                                                              \
    __attribute__((noinline)) T __tsan_atomic##n##_fetch_or(volatile T *a, T v, int) {                             \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        return polled_if(__atomic_fetch_or(a, v, __ATOMIC_SEQ_CST), [v](T old) { return T(old | v) == old; }, a);  \
    }                                                                                                              \
    __attribute__((noinline)) T __tsan_atomic##n##_fetch_xor(volatile T *a, T v, int) {                            \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        return polled_if(__atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST), [v](T) { return v == 0; }, a);                \
    }                                                                                                              \
    __attribute__((noinline)) int __tsan_atomic##n##_compare_exchange_strong(                                      \
        volatile T *a, T *c, T v, int, int) {                                                                      \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        return polled_if(__atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST),          \
                         [](bool swapped) { return !swapped; }, a);                                                \
    }                                                                                                              \
    __attribute__((noinline)) int __tsan_atomic##n##_compare_exchange_weak(                                        \
        volatile T *a, T *c, T v, int, int) {                                                                      \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        return polled_if(__atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST),          \
                         [](bool swapped) { return !swapped; }, a);                                                \
    }                                                                                                              \
    __attribute__((noinline)) T __tsan_atomic##n##_compare_exchange_val(volatile T *a, T c,                        \
                                                                        T v, int, int) {                           \
        check_access(uintptr_t(a), sizeof(T), true, PMPP_PC, ACCESS_ATOMIC);                                       \
        bool swapped = __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
        if (!swapped) note_poll((const void *)a);                                                                  \
        return c;                                                                                                  \
    }
PMPP_TSAN_ATOMICS(8, uint8_t)
PMPP_TSAN_ATOMICS(16, uint16_t)
PMPP_TSAN_ATOMICS(32, uint32_t)
PMPP_TSAN_ATOMICS(64, uint64_t)
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"
