"""Cooperative groups (CUDA Programming Guide, "Cooperative Groups"): the thread block, warp tiles
of 1 to 32 threads, coalesced groups, cg::reduce and the scans, memcpy_async; loaded with pmpp.load
and checked against NumPy on each backend (NVRTC compiles the same source on the GPU)."""

import numpy as np
import pytest

import pmpp
from pmpp.runner import array_module

HEADERS = """
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
#include <cooperative_groups/memcpy_async.h>
namespace cg = cooperative_groups;
"""


def load(body, backend, check=False, **macros):
    return pmpp.load(source=HEADERS + body, backend=backend, check=check, defines=macros or None)


def launch(module, name, grid, block, args, shared_mem=0):
    module.get_function(name)(grid, block, args, shared_mem=shared_mem)


def per_warp(values, lanes=32):
    """values split into consecutive groups of `lanes` threads (the last may be shorter)."""
    return [values[i:i + lanes] for i in range(0, len(values), lanes)]


BLOCK_GROUP = """
extern "C" __global__ void describe(const float *in, float *reversed, unsigned *info) {
    cg::thread_block b = cg::this_thread_block();
    __shared__ float staged[256];
    unsigned r = b.thread_rank();
    staged[r] = in[b.group_index().x * b.size() + r];
    cg::sync(b);
    reversed[b.group_index().x * b.size() + r] = staged[b.size() - 1 - r];
    b.sync();
    unsigned *mine = info + 6 * (b.group_index().x * b.num_threads() + r);
    mine[0] = r;
    mine[1] = b.size();
    mine[2] = b.thread_index().x + 100 * b.thread_index().y;
    mine[3] = b.group_dim().x + 100 * b.dim_threads().y;
    mine[4] = cg::thread_rank(b);
    mine[5] = cg::group_size(b);
}
"""


@pytest.mark.parametrize("check", [False, True])
def test_the_thread_block_synchronizes_and_ranks_its_threads(check, backend, rng):
    if check and backend != "cpu":
        pytest.skip("check=True runs on the CPU engine")
    xp, block, blocks = array_module(backend), (16, 8), 3
    n = blocks * 128
    x = rng.standard_normal(n).astype(np.float32)
    reversed_, info = xp.zeros(n, np.float32), xp.zeros(6 * n, np.uint32)
    launch(load(BLOCK_GROUP, backend, check), "describe", blocks, block, (xp.asarray(x), reversed_, info))
    np.testing.assert_array_equal(pmpp.asnumpy(reversed_), x.reshape(blocks, 128)[:, ::-1].ravel())
    rank, size, index, dim, free_rank, free_size = pmpp.asnumpy(info).reshape(-1, 6).T
    ranks = np.tile(np.arange(128), blocks)
    np.testing.assert_array_equal(rank, ranks)
    np.testing.assert_array_equal(free_rank, ranks)
    assert set(size) == set(free_size) == {128}
    np.testing.assert_array_equal(index, ranks % 16 + 100 * (ranks // 16))
    assert set(dim) == {16 + 100 * 8}


TILE_SUM = """
extern "C" __global__ void block_sum(const float *in, float *out, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float partial[32];
    unsigned i = blockIdx.x * block.size() + block.thread_rank();
    float v = i < n ? in[i] : 0.0f;
    for (int offset = warp.size() / 2; offset > 0; offset /= 2) v += warp.shfl_down(v, offset);
    if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = v;
    block.sync();
    if (warp.meta_group_rank() == 0) {
        v = warp.thread_rank() < warp.meta_group_size() ? partial[warp.thread_rank()] : 0.0f;
        v = cg::reduce(warp, v, cg::plus<float>());
        if (warp.thread_rank() == 0) out[blockIdx.x] = v;
    }
}
"""


@pytest.mark.parametrize("check", [False, True])
def test_a_block_sums_with_warp_tiles_shuffles_and_reduce(check, backend, rng):
    if check and backend != "cpu":
        pytest.skip("check=True runs on the CPU engine")
    xp, block, n = array_module(backend), 256, 1000
    x = rng.standard_normal(n).astype(np.float32)
    blocks = -(-n // block)
    out = xp.zeros(blocks, np.float32)
    launch(load(TILE_SUM, backend, check), "block_sum", blocks, block, (xp.asarray(x), out, np.int32(n)))
    expected = np.pad(x, (0, blocks * block - n)).reshape(blocks, block).sum(axis=1)
    np.testing.assert_allclose(pmpp.asnumpy(out), expected, rtol=1e-5, atol=1e-5)


REDUCE_OPS = """
extern "C" __global__ void reduce_ops(const int *in, int *out) {
    auto tile = cg::tiled_partition<TILE>(cg::this_thread_block());
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    int *mine = out + 6 * (blockIdx.x * blockDim.x + threadIdx.x);
    mine[0] = cg::reduce(tile, v, cg::plus<int>());
    mine[1] = cg::reduce(tile, v, cg::less<int>());
    mine[2] = cg::reduce(tile, v, cg::greater<int>());
    mine[3] = cg::reduce(tile, v, cg::bit_and<int>());
    mine[4] = cg::reduce(tile, v, cg::bit_or<int>());
    mine[5] = cg::reduce(tile, v, cg::bit_xor<int>());
}
"""


@pytest.mark.parametrize("tile", [32, 8])
def test_reduce_gives_every_thread_of_the_tile_its_result(tile, backend, rng):
    xp, block, blocks = array_module(backend), 64, 2
    x = rng.integers(-1000, 1000, blocks * block).astype(np.int32)
    out = xp.zeros(6 * x.size, np.int32)
    launch(load(REDUCE_OPS, backend, TILE=tile), "reduce_ops", blocks, block, (xp.asarray(x), out))
    groups = x.reshape(-1, tile)
    folds = [groups.sum(1), groups.min(1), groups.max(1), np.bitwise_and.reduce(groups, 1),
             np.bitwise_or.reduce(groups, 1), np.bitwise_xor.reduce(groups, 1)]
    expected = np.stack([np.repeat(f, tile) for f in folds], axis=1)
    np.testing.assert_array_equal(pmpp.asnumpy(out).reshape(-1, 6), expected)


SMALL_TILES = """
extern "C" __global__ void tile_ops(const int *in, int *out) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<TILE> t = cg::tiled_partition<TILE>(block);
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    int *mine = out + 9 * (blockIdx.x * blockDim.x + threadIdx.x);
    mine[0] = t.thread_rank();
    mine[1] = t.meta_group_rank();
    mine[2] = t.meta_group_size();
    mine[3] = t.shfl(v, 0);                   // the tile's first thread
    mine[4] = t.shfl_down(v, 1);              // the last one keeps its own
    mine[5] = t.shfl_up(v, 1);                // the first one keeps its own
    mine[6] = t.shfl_xor(v, TILE / 2);
    mine[7] = t.ballot(v % 2 != 0);
    mine[8] = t.any(v == 0) + 2 * t.all(v >= 0) + 4 * (t.match_any(v % 3) >> t.thread_rank() & 1);
    t.sync();
}
"""


@pytest.mark.parametrize("tile", [4, 8, 16])
def test_shuffles_and_votes_stay_inside_a_small_tile(tile, backend, rng):
    xp, block = array_module(backend), 96
    x = rng.integers(0, 20, block).astype(np.int32)
    out = xp.zeros(9 * block, np.int32)
    launch(load(SMALL_TILES, backend, TILE=tile), "tile_ops", 1, block, (xp.asarray(x), out))
    got = pmpp.asnumpy(out).reshape(-1, 9)
    rank = np.arange(block) % tile
    groups = x.reshape(-1, tile)
    np.testing.assert_array_equal(got[:, 0], rank)
    np.testing.assert_array_equal(got[:, 1], np.arange(block) // tile)
    assert set(got[:, 2]) == {block // tile}
    np.testing.assert_array_equal(got[:, 3], np.repeat(groups[:, 0], tile))
    down = np.concatenate([groups[:, 1:], groups[:, -1:]], axis=1).ravel()
    up = np.concatenate([groups[:, :1], groups[:, :-1]], axis=1).ravel()
    np.testing.assert_array_equal(got[:, 4], down)
    np.testing.assert_array_equal(got[:, 5], up)
    np.testing.assert_array_equal(got[:, 6], x[np.arange(block) ^ (tile // 2)])
    ballots = ((groups % 2 != 0) << np.arange(tile)).sum(1)
    np.testing.assert_array_equal(got[:, 7], np.repeat(ballots, tile))
    votes = np.repeat((groups == 0).any(1) + 2 * (groups >= 0).all(1), tile)
    np.testing.assert_array_equal(got[:, 8], votes + 4)


SCANS = """
extern "C" __global__ void scans(const int *in, int *inclusive, int *exclusive, int *largest) {
    auto tile = cg::tiled_partition<16>(cg::this_thread_block());
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    inclusive[i] = cg::inclusive_scan(tile, in[i]);
    exclusive[i] = cg::exclusive_scan(tile, in[i], cg::plus<int>());
    largest[i] = cg::inclusive_scan(tile, in[i], cg::greater<int>());
}
"""


def test_inclusive_and_exclusive_scans_run_in_rank_order(backend, rng):
    xp, block = array_module(backend), 64
    x = rng.integers(-50, 50, 2 * block).astype(np.int32)
    inc, exc, top = (xp.zeros(x.size, np.int32) for _ in range(3))
    launch(load(SCANS, backend), "scans", 2, block, (xp.asarray(x), inc, exc, top))
    groups = x.reshape(-1, 16)
    np.testing.assert_array_equal(pmpp.asnumpy(inc), np.cumsum(groups, 1).ravel())
    np.testing.assert_array_equal(pmpp.asnumpy(exc), (np.cumsum(groups, 1) - groups).ravel())
    np.testing.assert_array_equal(pmpp.asnumpy(top), np.maximum.accumulate(groups, 1).ravel())


PARTIAL_WARP = """
extern "C" __global__ void partial(const int *in, int *out) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int v = in[block.thread_rank()];
    for (unsigned d = 1; d < 32; d *= 2) {     // shfl_up reads lower lanes only: all of them exist
        int lower = warp.shfl_up(v, d);
        if (warp.thread_rank() >= d) v += lower;
    }
    cg::coalesced_group here = cg::coalesced_threads();
    int *mine = out + 5 * block.thread_rank();
    mine[0] = v;
    mine[1] = warp.meta_group_rank() + 100 * warp.meta_group_size();
    mine[2] = here.size();
    mine[3] = here.thread_rank();
    mine[4] = cg::reduce(here, in[block.thread_rank()], cg::plus<int>());
}
"""


@pytest.mark.parametrize("block", [40, 70])
def test_a_block_with_a_partial_last_warp(block, backend, rng):
    xp = array_module(backend)
    x = rng.integers(0, 100, block).astype(np.int32)
    out = xp.zeros(5 * block, np.int32)
    launch(load(PARTIAL_WARP, backend), "partial", 1, block, (xp.asarray(x), out))
    got = pmpp.asnumpy(out).reshape(-1, 5)
    warps = per_warp(x)
    np.testing.assert_array_equal(got[:, 0], np.concatenate([np.cumsum(w) for w in warps]))
    np.testing.assert_array_equal(got[:, 1], np.arange(block) // 32 + 100 * len(warps))
    np.testing.assert_array_equal(got[:, 2], np.concatenate([np.full(len(w), len(w)) for w in warps]))
    np.testing.assert_array_equal(got[:, 3], np.arange(block) % 32)
    np.testing.assert_array_equal(got[:, 4], np.concatenate([np.full(len(w), w.sum()) for w in warps]))


COMPACT = """
extern "C" __global__ void keep_positive(const float *in, float *kept, int *count, int *seen, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && in[i] > 0.0f) {
        cg::coalesced_group active = cg::coalesced_threads();
        int first;
        if (active.thread_rank() == 0) first = atomicAdd(count, active.size());
        first = active.shfl(first, 0);
        kept[first + active.thread_rank()] = in[i];
        seen[2 * i] = active.size();
        seen[2 * i + 1] = active.thread_rank() + 100 * active.any(in[i] > 1.0f)
                          + 1000 * __popc(active.ballot(in[i] > 1.0f));
    }
}
"""


def test_coalesced_threads_in_a_branch_are_the_lanes_that_took_it(backend, rng):
    xp, n, block = array_module(backend), 300, 64
    x = rng.standard_normal(n).astype(np.float32) * 2
    kept, count = xp.zeros(n, np.float32), xp.zeros(1, np.int32)
    seen = xp.full(2 * n, -1, np.int32)
    launch(load(COMPACT, backend), "keep_positive", -(-n // block), block,
           (xp.asarray(x), kept, count, seen, np.int32(n)))
    total = int(pmpp.asnumpy(count)[0])
    assert total == int((x > 0).sum())
    np.testing.assert_array_equal(np.sort(pmpp.asnumpy(kept)[:total]), np.sort(x[x > 0]))
    size, rank = pmpp.asnumpy(seen).reshape(-1, 2).T
    for start in range(0, n, 32):
        w = x[start:start + 32]
        taken = np.flatnonzero(w > 0)
        np.testing.assert_array_equal(size[start + taken], len(taken))
        big = int((w[taken] > 1).sum())
        np.testing.assert_array_equal(rank[start + taken],
                                      np.arange(len(taken)) + 100 * (big > 0) + 1000 * big)
        assert (size[start + np.flatnonzero(w <= 0)] == -1).all()


DYNAMIC_TILES = """
extern "C" __global__ void dynamic(int *out) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_group tile = cg::tiled_partition(block, 8);
    tile.sync();
    cg::thread_group warp_tile = cg::tiled_partition<32>(block);
    out[3 * block.thread_rank()] = tile.thread_rank();
    out[3 * block.thread_rank() + 1] = tile.size();
    out[3 * block.thread_rank() + 2] = warp_tile.thread_rank() + 100 * warp_tile.size();
}
"""


def test_a_dynamic_tiled_partition_is_a_thread_group(backend):
    xp, block = array_module(backend), 64
    out = xp.zeros(3 * block, np.int32)
    launch(load(DYNAMIC_TILES, backend), "dynamic", 1, block, (out,))
    got = pmpp.asnumpy(out).reshape(-1, 3)
    np.testing.assert_array_equal(got[:, 0], np.arange(block) % 8)
    assert set(got[:, 1]) == {8}
    np.testing.assert_array_equal(got[:, 2], np.arange(block) % 32 + 3200)


MEMCPY_ASYNC = """
extern "C" __global__ void reverse(const float *in, float *out) {
    cg::thread_block block = cg::this_thread_block();
    __shared__ float staged[128];
    cg::memcpy_async(block, staged, in + blockIdx.x * 128, sizeof(float) * 128);
    cg::wait(block);
    out[blockIdx.x * 128 + block.thread_rank()] = staged[127 - block.thread_rank()];
}
"""


def test_memcpy_async_is_complete_after_wait(backend, rng):
    xp = array_module(backend)
    x = rng.standard_normal(256).astype(np.float32)
    out = xp.zeros(256, np.float32)
    launch(load(MEMCPY_ASYNC, backend), "reverse", 2, 128, (xp.asarray(x), out))
    np.testing.assert_array_equal(pmpp.asnumpy(out), x.reshape(2, 128)[:, ::-1].ravel())


@pytest.mark.parametrize("body, message", [
    ("cg::grid_group g = cg::this_grid(); g.sync();", "needs a cooperative launch"),
    ("cg::reduce(cg::this_thread_block(), 1, cg::plus<int>());", "take a thread_block_tile or a coalesced_group"),
    ("auto t = cg::tiled_partition<64>(cg::this_thread_block());", "N = 1, 2, 4, 8, 16 and 32 only"),
])
def test_what_the_engine_lacks_is_a_compile_error_at_the_kernels_line(body, message):
    source = f'{HEADERS}extern "C" __global__ void k() {{\n    {body}\n}}\n'
    with pytest.raises(pmpp.CompileError, match=message) as raised:
        pmpp.load(source=source, backend="cpu", filename="lacks.cu")
    assert (raised.value.filename, raised.value.line) == ("lacks.cu", HEADERS.count("\n") + 2)


def test_coalesced_threads_beside_another_warp_primitive_is_an_error_not_a_wrong_group():
    source = HEADERS + """
extern "C" __global__ void k(int *out) {
    if (threadIdx.x % 2 == 0) {
        out[threadIdx.x] = cg::coalesced_threads().size();
    } else {
        out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
    }
}
"""
    with pytest.raises(pmpp.KernelCrashError, match="coalesced_threads.*another warp primitive"):
        launch(pmpp.load(source=source, backend="cpu"), "k", 1, 32, (np.zeros(32, np.int32),))


LABELED = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void by_label(const int* label, int* rank, int* size, int* leader) {
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
    int t = threadIdx.x;
    cg::coalesced_group same = cg::labeled_partition(warp, label[t]);
    rank[t] = same.thread_rank();
    size[t] = same.size();
    leader[t] = same.shfl(t, 0);                            // the first lane of its label
    cg::coalesced_group odd = cg::binary_partition(same, t % 2 == 1);
    size[t] += 100 * odd.size();
}
"""


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cupy", marks=pytest.mark.gpu)])
def test_labeled_and_binary_partitions_group_the_lanes_with_one_label(backend, rng):
    xp = pmpp.xp if backend == "cupy" else np
    label = rng.integers(0, 3, 64).astype(np.int32)
    out = [xp.full(64, -1, np.int32) for _ in range(3)]
    k = pmpp.load(source=LABELED, filename="labeled.cu", backend=backend, check=backend == "cpu")
    k.get_function("by_label")(1, 64, (xp.asarray(label), *out))
    rank, size, leader = (pmpp.asnumpy(a) for a in out)
    for t in range(64):
        mates = [u for u in range(t - t % 32, t - t % 32 + 32) if label[u] == label[t]]
        odd_mates = [u for u in mates if u % 2 == t % 2]
        assert rank[t] == mates.index(t) and leader[t] == mates[0]
        assert size[t] == len(mates) + 100 * len(odd_mates)


def test_a_cooperative_groups_name_the_engine_lacks_is_named_as_lacking():
    src = ("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
           "extern \"C\" __global__ void k(int* out) {\n"
           "    cg::invoke_one(cg::this_thread_block(), [&]() { out[0] = 1; });\n}\n")
    with pytest.raises(pmpp.CompileError, match=r"pmpp's CPU engine does not provide "
                                                r"cooperative_groups::invoke_one \(it has thread_block"):
        pmpp.load(source=src, filename="lacking.cu", backend="cpu")
