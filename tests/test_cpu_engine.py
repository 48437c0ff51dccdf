"""The CPU engine (pmpp.backends.cpu): CUDA kernels compiled with g++ and run with CUDA's
execution model, with and without the race / bounds / barrier checks.

Kernels live in tests/cpu_kernels/. Inputs are fresh random values; outputs are poisoned
before each launch and checked element by element against NumPy.
"""

import functools
from pathlib import Path

import numpy as np
import pytest

from pmpp.backends.cpu import CpuModule, toolchain
from pmpp.errors import (BarrierDivergenceError, CompileError, KernelCrashError,
                         KernelTimeoutError, OutOfBoundsError, RaceError)

KERNELS = Path(__file__).parent / "cpu_kernels"


def source(name):
    return f'#line 1 "cpu_kernels/{name}"\n' + (KERNELS / name).read_text()


@functools.lru_cache(maxsize=None)
def module(name, kernels=(), exprs=(), check=False, options=()):
    return CpuModule(source(name), filename=f"cpu_kernels/{name}", kernel_names=kernels,
                     name_expressions=exprs, check=check, options=options)


def dims(d):
    d = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    return d + (1,) * (3 - len(d))


def launch(mod, name, grid, block, *args, shared=0, writable=None):
    names = [f"arg{i}" for i in range(len(args))]
    if writable is None:
        writable = [isinstance(a, np.ndarray) for a in args]
    mod.launch(name, dims(grid), dims(block), shared, list(args), names, writable)


@pytest.fixture
def rng():
    return np.random.default_rng()


def poisoned(shape, dtype=np.float32):
    if np.issubdtype(np.dtype(dtype), np.floating):
        return np.full(shape, np.nan, dtype)
    return np.full(shape, np.iinfo(dtype).max // 3, dtype)


def cdiv(a, b):
    return -(-a // b)


# ---- indexing ------------------------------------------------------------------------------

def test_1d_indexing_handles_size_not_multiple_of_block(rng):
    n = 1000
    a, b = rng.random(n, np.float32), rng.random(n, np.float32)
    c = poisoned(n + 24)  # the tail past n must stay untouched
    launch(module("indexing.cu", ("vec_add",)), "vec_add", cdiv(n, 128), 128, a, b, c, np.int32(n))
    np.testing.assert_array_equal(c[:n], a + b)
    assert np.isnan(c[n:]).all()


def test_2d_indexing_handles_sizes_not_multiple_of_block(rng):
    rows, cols = 37, 53
    a, b = rng.random((rows, cols), np.float32), rng.random((rows, cols), np.float32)
    c = poisoned((rows, cols))
    launch(module("indexing.cu", ("mat_axpy_2d",)), "mat_axpy_2d", (cdiv(cols, 16), cdiv(rows, 8)),
           (16, 8), a, b, c, np.int32(rows), np.int32(cols))
    np.testing.assert_array_equal(c, a + np.float32(2) * b)


def test_3d_indexing_covers_every_element_once():
    nx, ny, nz = 9, 10, 11
    block = (4, 3, 5)
    grid = (cdiv(nx, 4), cdiv(ny, 3), cdiv(nz, 5))
    out, who = poisoned((nz, ny, nx), np.int32), poisoned((nz, ny, nx), np.uint32)
    launch(module("indexing.cu", ("coords_3d",)), "coords_3d", grid, block, out, who,
           np.int32(nx), np.int32(ny), np.int32(nz))
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(out, x + 1000 * y + 1000000 * z)
    bx, by, bz = x // 4, y // 3, z // 5
    tx, ty, tz = x % 4, y % 3, z % 5
    block_id = bx + grid[0] * (by + grid[1] * bz)
    np.testing.assert_array_equal(who, block_id * 1024 + tx + 4 * (ty + 3 * tz))


def test_warps_are_formed_from_the_linear_thread_index():
    block = (5, 7, 3)  # 105 threads: 4 warps, the last one partial
    leader = poisoned(105, np.uint32)
    launch(module("indexing.cu", ("warp_leader_3d",)), "warp_leader_3d", 1, block, leader)
    np.testing.assert_array_equal(leader, np.arange(105) // 32 * 32)


# ---- shared memory -------------------------------------------------------------------------

def test_static_shared_memory_tiled_matmul(rng):
    width = 45  # not a multiple of TILE
    m, n = rng.random((width, width), np.float32), rng.random((width, width), np.float32)
    p = poisoned((width, width))
    mod = module("shared.cu", ("matmul_tiled",), options=("-DTILE=8", "-arch=sm_90", "--use_fast_math"))
    launch(mod, "matmul_tiled", (cdiv(width, 8), cdiv(width, 8)), (8, 8), m, n, p, np.int32(width))
    np.testing.assert_allclose(p, m @ n, rtol=1e-5)


def test_dynamic_shared_memory_and_aliasing_extern_arrays(rng):
    n, block = 1000, 128
    x = rng.standard_normal(n).astype(np.float32)
    out, bits = poisoned(n), poisoned(n, np.uint32)
    launch(module("shared.cu", ("reverse_blocks",)), "reverse_blocks", cdiv(n, block), block,
           x, out, bits, np.int32(n), shared=block * 4)
    padded = np.zeros(cdiv(n, block) * block, np.float32)
    padded[:n] = x
    expected = padded.reshape(-1, block)[:, ::-1].reshape(-1)[:n]
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(bits, expected.view(np.uint32))


def test_namespace_scope_extern_shared_array(rng):
    n, block = 300, 64
    x = rng.random(n, np.float32)
    out = poisoned(n)
    launch(module("shared.cu", ("scale_staged",)), "scale_staged", cdiv(n, block), block, x, out,
           np.float32(3), np.int32(n), shared=block * 4)
    padded = np.zeros(cdiv(n, block) * block, np.float32)
    padded[:n] = x
    np.testing.assert_array_equal(out, (padded.reshape(-1, block)[:, ::-1].reshape(-1) * np.float32(3))[:n])


def test_shared_scalars_with_shared_atomics(rng):
    n, block = 777, 64
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    best, count = poisoned(cdiv(n, block), np.int32), poisoned(cdiv(n, block), np.int32)
    launch(module("shared.cu", ("block_max_count",)), "block_max_count", cdiv(n, block), block,
           x, best, count, np.int32(n))
    segments = np.array_split(x, np.arange(block, n, block))
    np.testing.assert_array_equal(best, [s.max() for s in segments])
    np.testing.assert_array_equal(count, [(s > 0).sum() for s in segments])


# ---- templates and constant memory ----------------------------------------------------------

def test_template_kernels_via_name_expressions(rng):
    exprs = ("reduce_sum<128>", "reduce_sum<256>", "scale_add<float, 4>", "scale_add<double, 3>")
    mod = module("templates.cu", exprs=exprs)
    assert mod.kernel_names == list(exprs)
    n = 1000
    x = rng.random(n, np.float32)
    for block in (128, 256):
        out = poisoned(cdiv(n, block))
        launch(mod, f"reduce_sum<{block}>", cdiv(n, block), block, x, out, np.uint32(n))
        padded = np.zeros(cdiv(n, block) * block, np.float32)
        padded[:n] = x
        np.testing.assert_allclose(out, padded.reshape(-1, block).sum(1, dtype=np.float64), rtol=1e-5)
    for expr, dtype, k in (("scale_add<float, 4>", np.float32, 4), ("scale_add<double, 3>", np.float64, 3)):
        y = poisoned(n, dtype)
        xin = x.astype(dtype)
        launch(mod, expr, cdiv(n, 64), 64, xin, y, np.int32(n))
        np.testing.assert_array_equal(y, xin * dtype(k) + dtype(1))


def test_copy_to_symbol_fills_constant_memory_across_launches(rng):
    mod = CpuModule(source("constant.cu"), filename="cpu_kernels/constant.cu", kernel_names=["conv1d"])
    f = rng.random(7, np.float32)
    mod.copy_to_symbol("F", f)
    mod.copy_to_symbol("offset_value", np.int32(5))
    n = 500
    for _ in range(2):  # the values persist from one launch to the next
        x = rng.random(n, np.float32)
        y = poisoned(n)
        launch(mod, "conv1d", cdiv(n, 64), 64, x, y, np.int32(n))
        expected = np.convolve(np.pad(x, 3), f[::-1], mode="valid") + 5
        np.testing.assert_allclose(y, expected, rtol=1e-5)


def test_copy_to_symbol_rejects_unknown_name_and_oversized_data():
    mod = module("constant.cu", ("conv1d",))
    with pytest.raises(ValueError, match=r"no __constant__ .*'Filter'.*F, offset_value"):
        mod.copy_to_symbol("Filter", np.zeros(7, np.float32))
    with pytest.raises(ValueError, match=r"32 bytes into 'F'.*28 bytes"):
        mod.copy_to_symbol("F", np.zeros(8, np.float32))


def test_cuda_qualifiers_and_helpers_compile_and_run(rng):
    n = 300
    x = rng.random(n, np.float32)
    out = poisoned(n)
    launch(module("misc.cu", ("qualifiers",)), "qualifiers", cdiv(n, 128), 128, x, out, np.int32(n))
    padded = np.full(cdiv(n, 128) * 128, 2 * x[0], np.float32)  # i >= n loads in[0]
    padded[:n] = 2 * x
    blocks = padded.reshape(-1, 128)
    acc = sum(np.roll(blocks, -k, axis=1) for k in range(4)).reshape(-1)[:n]
    np.testing.assert_allclose(out, acc + 1 + 8 + 16 + 32, rtol=1e-6)


def test_same_array_passed_twice_is_one_buffer(rng):
    n = 500
    a, b = rng.random(n, np.float32), rng.random(n, np.float32)
    expected = a + b
    mod = module("indexing.cu", ("vec_add",))
    mod.launch("vec_add", (cdiv(n, 128), 1, 1), (128, 1, 1), 0, [a, b, a, np.int32(n)],
               ["a", "b", "c", "n"], [False, False, True, False])
    np.testing.assert_array_equal(a, expected)


def test_arrays_of_tens_of_megabytes(rng):
    n = 6_000_000  # 24 MB per array
    a, b = rng.random(n, np.float32), rng.random(n, np.float32)
    c = poisoned(n)
    launch(module("indexing.cu", ("vec_add",)), "vec_add", cdiv(n, 1024), 1024, a, b, c, np.int32(n))
    np.testing.assert_array_equal(c, a + b)


def test_param_sizes_come_from_cplusplus():
    mod = module("indexing.cu", ("vec_add",))
    assert mod.param_sizes("vec_add") == [8, 8, 8, 4]


def test_unknown_kernel_name_lists_available_ones():
    mod = module("indexing.cu", ("vec_add",))
    with pytest.raises(ValueError, match="no launchable kernel 'vecadd'; available: vec_add"):
        launch(mod, "vecadd", 1, 32)


# ---- warp primitives --------------------------------------------------------------------------

def shuffle_model(v, op, arg, width):
    """What __shfl*_sync returns in every lane (PTX shfl semantics), for full warps."""
    out = np.empty_like(v)
    for t in range(len(v)):
        lane, base = t % 32, t - t % 32
        lo = lane & ~(width - 1)
        hi = lo + width - 1
        a = int(arg[t]) if np.ndim(arg) else int(arg)
        if op == "idx":
            j = lo | (a & (width - 1))
        elif op == "up":
            j = lane - a if lane - a >= lo else lane
        elif op == "down":
            j = lane + a if lane + a <= hi else lane
        else:
            j = lane ^ a if (lane ^ a) <= hi else lane
        out[t] = v[base + j]
    return out


SHUFFLE_TYPES = [("int", np.int32), ("unsigned", np.uint32), ("float", np.float32), ("double", np.float64),
                 ("long long", np.int64), ("__half", np.float16), ("__half2", np.uint32)]  # half2: its bits


@pytest.mark.parametrize("ctype,dtype", SHUFFLE_TYPES)
def test_shuffles_match_numpy_model(rng, ctype, dtype):
    mod = module("warp.cu", exprs=tuple(f"shuffle_all<{t}>" for t, _ in SHUFFLE_TYPES))
    n = 128
    v = (rng.integers(0, 1000, n) if np.dtype(dtype).kind in "iu" else rng.standard_normal(n)).astype(dtype)
    src = rng.integers(0, 64, n).astype(np.int32)
    for delta, width in ((1, 32), (3, 32), (2, 8), (5, 16)):
        outs = [poisoned(n, dtype) for _ in range(4)]
        launch(mod, f"shuffle_all<{ctype}>", 2, 64, v, src, *outs, np.int32(delta), np.int32(width))
        for out, op, arg in zip(outs, ("idx", "up", "down", "xor"), (src, delta, delta, delta)):
            np.testing.assert_array_equal(out, shuffle_model(v, op, arg, width), err_msg=f"{op} {delta} {width}")


def test_votes_and_activemask(rng):
    n = 96  # 3 warps of one block
    pred = (rng.random(n) < 0.5).astype(np.int32)
    pred[32:64] = 1  # warp 1: all true
    pred[64:96] = 0  # warp 2: all false
    ballot, active, count_lt = (poisoned(n, np.uint32) for _ in range(3))
    anyv, allv = poisoned(n, np.int32), poisoned(n, np.int32)
    launch(module("warp.cu", ("votes",)), "votes", 1, n, pred, ballot, anyv, allv, active, count_lt)
    for w in range(3):
        p = pred[32 * w:32 * (w + 1)]
        bits = int(sum(int(b) << k for k, b in enumerate(p)))
        np.testing.assert_array_equal(ballot[32 * w:32 * (w + 1)], bits)
        np.testing.assert_array_equal(anyv[32 * w:32 * (w + 1)], int(p.any()))
        np.testing.assert_array_equal(allv[32 * w:32 * (w + 1)], int(p.all()))
        np.testing.assert_array_equal(count_lt[32 * w:32 * (w + 1)], np.concatenate([[0], np.cumsum(p)[:-1]]))
    np.testing.assert_array_equal(active, 0xFFFFFFFF)


def test_warp_shuffle_reduction(rng):
    n = 32 * 40
    x = rng.random(n, np.float32)
    out = poisoned(40)
    launch(module("warp.cu", ("warp_sums",)), "warp_sums", 5, 256, x, out)
    np.testing.assert_allclose(out, x.reshape(40, 32).sum(1), rtol=1e-5)


def test_syncthreads_count_and_or(rng):
    blocks, block = 6, 100
    pred = (rng.random(blocks * block) < 0.3).astype(np.int32)
    pred[:block] = 1
    pred[block:2 * block] = 0
    count, allv, anyv = (poisoned(blocks, np.int32) for _ in range(3))
    launch(module("warp.cu", ("block_votes",)), "block_votes", blocks, block, pred, count, allv, anyv)
    p = pred.reshape(blocks, block)
    np.testing.assert_array_equal(count, p.sum(1))
    np.testing.assert_array_equal(allv, p.all(1))
    np.testing.assert_array_equal(anyv, p.any(1))


# ---- atomics ----------------------------------------------------------------------------------

def test_atomic_histogram_on_global_and_shared_memory(rng):
    n = 100_000
    data = rng.integers(0, 1 << 20, n).astype(np.int32)
    expected = np.bincount(data % 16, minlength=16)
    mod = module("atomics.cu", ("histogram_global", "histogram_shared"))
    for kernel, grid in (("histogram_global", cdiv(n, 256)), ("histogram_shared", 37)):
        bins = np.zeros(16, np.uint32)
        launch(mod, kernel, grid, 256, data, np.int32(n), bins)
        np.testing.assert_array_equal(bins, expected)


def test_atomic_add_max_min_with_contention(rng):
    n = 50_000
    x = rng.integers(0, 100, n).astype(np.float32)  # integers: every summation order is exact
    fsum, dsum = np.zeros(1, np.float32), np.zeros(1, np.float64)
    isum, usum = np.zeros(1, np.int32), np.zeros(1, np.uint64)
    imax, imin, umax = np.array([-1], np.int32), np.array([1 << 30], np.int32), np.zeros(1, np.uint32)
    launch(module("atomics.cu", ("sums",)), "sums", cdiv(n, 128), 128, x, np.int32(n),
           fsum, dsum, isum, usum, imax, imin, umax)
    total = int(x.sum(dtype=np.float64))
    assert (fsum[0], dsum[0], isum[0], usum[0]) == (total, total, total, total)
    assert (imax[0], imin[0], umax[0]) == (x.max(), x.min(), x.max())


def test_atomic_add_float_double_on_shared_memory(rng):
    n, block = 3000, 256
    x = rng.integers(-50, 50, n).astype(np.float32)
    fout, dout = poisoned(cdiv(n, block)), poisoned(cdiv(n, block), np.float64)
    launch(module("atomics.cu", ("shared_float_double",)), "shared_float_double", cdiv(n, block), block,
           x, np.int32(n), fout, dout)
    sums = [s.sum(dtype=np.float64) for s in np.array_split(x, np.arange(block, n, block))]
    np.testing.assert_array_equal(fout, sums)
    np.testing.assert_array_equal(dout, sums)


def test_atomic_inc_dec_sub_bitwise_exch_cas():
    nthreads = 10 * 64
    inc, dec = np.zeros(1, np.uint32), np.zeros(1, np.uint32)
    sub = np.array([5], np.int32)
    andv, orv, xorv = np.array([0xFFFFFFFF], np.uint32), np.zeros(1, np.uint32), np.zeros(1, np.uint32)
    exch, cas = np.zeros(1, np.int32), np.zeros(1, np.int32)
    limit = 100
    launch(module("atomics.cu", ("misc",)), "misc", 10, 64, inc, dec, sub, andv, orv, xorv, exch, cas,
           np.uint32(limit))
    assert inc[0] == nthreads % (limit + 1)
    d = 0  # atomicDec wraps to limit at 0 (and above limit)
    for _ in range(nthreads):
        d = limit if d == 0 or d > limit else d - 1
    assert dec[0] == d
    assert sub[0] == 5 - 2 * nthreads
    assert (andv[0], orv[0], xorv[0]) == (0, 0xFFFFFFFF, 0)  # each bit flipped 80 times
    assert (exch[0], cas[0]) == (7, nthreads)


def test_atomic_add_half_and_half2_round_like_the_gpu(rng):
    n = 600
    x = rng.integers(0, 3, n).astype(np.float16)  # partial sums stay exact integers below 2048
    total, total2 = np.zeros(1, np.float16), np.zeros(2, np.float16)
    launch(module("atomics.cu", ("half_sums",)), "half_sums", cdiv(n, 64), 64, x, np.int32(n), total, total2)
    assert total[0] == x.astype(np.float64).sum()
    np.testing.assert_array_equal(total2, [x.astype(np.float64).sum(), 2 * x.astype(np.float64).sum()])


# ---- half precision and vector types ----------------------------------------------------------

def test_half_arithmetic_rounds_to_nearest_even(rng):
    n = 4096
    a, b, c = (rng.standard_normal(n).astype(np.float16) * np.float16(8) for _ in range(3))
    outs = [poisoned(n, np.float16) for _ in range(5)]
    widened = poisoned(n)
    launch(module("half_vector.cu", ("half_ops",)), "half_ops", cdiv(n, 256), 256, a, b, c, *outs,
           widened, np.int32(n))
    add, mul, fma, sub, ops = outs
    np.testing.assert_array_equal(add, a + b)  # numpy float16 ops round correctly too
    np.testing.assert_array_equal(mul, a * b)
    np.testing.assert_array_equal(sub, a - b)
    np.testing.assert_array_equal(fma, (a.astype(np.float64) * b + c).astype(np.float16))
    np.testing.assert_array_equal(ops, a * b + c)
    np.testing.assert_array_equal(widened, a.astype(np.float32) + b.astype(np.float32))


@pytest.mark.parametrize("seed", [254, 435, 501])
def test_half_fma_rounds_once_where_the_float_lands_halfway_between_halves(seed):
    # these inputs hold an a*b+c whose nearest float lies exactly halfway between two halves
    test_half_arithmetic_rounds_to_nearest_even(np.random.default_rng(seed))


def test_half2_and_float_to_half_conversion(rng):
    n = 1000
    a, b = (rng.standard_normal(2 * n).astype(np.float16) for _ in range(2))
    f = np.concatenate([rng.standard_normal(n - 8).astype(np.float32) * 1000,
                        [65519.0, 65520.0, 1e-8, 6e-8, -0.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    add2, mul2, from_float = poisoned(2 * n, np.float16), poisoned(2 * n, np.float16), poisoned(n, np.float16)
    as_f2 = poisoned(2 * n)
    launch(module("half_vector.cu", ("half2_ops",)), "half2_ops", cdiv(n, 128), 128, a, b, add2, mul2,
           as_f2, from_float, f, np.int32(n))
    np.testing.assert_array_equal(add2, a + b)
    np.testing.assert_array_equal(mul2, a * b)
    np.testing.assert_array_equal(as_f2, a.astype(np.float32))
    with np.errstate(over="ignore"):  # 65520 rounds to inf, as it should
        expected = f.astype(np.float16)
    np.testing.assert_array_equal(from_float.view(np.uint16), expected.view(np.uint16))


def test_vector_type_layout_matches_cuda():
    out = poisoned(9, np.int32)
    launch(module("half_vector.cu", ("layout",)), "layout", 1, 1, out)
    np.testing.assert_array_equal(out, [2, 4, 16, 16, 8, 12, 16, 4, 16])


def test_float4_loads(rng):
    n4 = 999
    x = rng.random(4 * n4, np.float32)
    out = poisoned(n4)
    launch(module("half_vector.cu", ("sum4",)), "sum4", cdiv(n4, 128), 128, x, out, np.int32(n4))
    q = x.reshape(-1, 4)
    np.testing.assert_array_equal(out, ((q[:, 0] + q[:, 1]) + q[:, 2]) + q[:, 3])


# ---- intrinsics, math, printf, assert ---------------------------------------------------------

def test_integer_intrinsics_and_mixed_min_max(rng):
    n = 300
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    x[:3] = [0, 1, 0x80000000]
    popc, clz, ffs, mixed_max = (poisoned(n, np.int32) for _ in range(4))
    brev, mixed_min = poisoned(n, np.uint32), poisoned(n, np.uint32)
    launch(module("misc.cu", ("int_intrinsics",)), "int_intrinsics", cdiv(n, 64), 64, x, popc, clz, ffs,
           brev, mixed_min, mixed_max, np.int32(n))
    xs = [int(v) for v in x]
    np.testing.assert_array_equal(popc, [3 * bin(v).count("1") for v in xs])
    np.testing.assert_array_equal(clz, [(32 - v.bit_length()) + 100 * (64 - v.bit_length()) for v in xs])
    ffs_of = lambda v: (v & -v).bit_length()
    np.testing.assert_array_equal(ffs, [ffs_of(v) + 100 * (ffs_of(v) + 3 if v else 0) for v in xs])
    np.testing.assert_array_equal(brev, [int(f"{v:032b}"[::-1], 2) for v in xs])
    np.testing.assert_array_equal(mixed_min, x)  # min(-1, x): -1 converts to 0xFFFFFFFF
    np.testing.assert_array_equal(mixed_max, np.maximum(np.fmod(x.view(np.int32), 7) - 3, -2))


def test_float_math_functions(rng):
    n = 500
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    out = poisoned((n, 12))
    launch(module("misc.cu", ("float_math",)), "float_math", cdiv(n, 64), 64, x, out, np.int32(n))
    from math import erf
    xd = x.astype(np.float64)
    expected = np.stack([np.exp(xd), np.exp(xd), np.log(np.abs(xd) + 1), np.sqrt(np.abs(xd)),
                         1 / np.sqrt(np.abs(xd) + 1), np.maximum(xd, 0.25), np.minimum(xd, 0.25),
                         np.tanh(xd), [erf(v) for v in xd], np.clip(xd, 0, 1),
                         np.round(x * np.float32(10)), xd + 2.0 ** np.floor(xd)], axis=1)
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=1e-6)


def test_printf_reaches_stdout(capsys):
    launch(module("misc.cu", ("hello",)), "hello", 2, 32, np.int32(2))
    lines = sorted(capsys.readouterr().out.splitlines())
    assert lines == ["block 0 thread 0 says 0.0", "block 0 thread 1 says 0.5",
                     "block 1 thread 0 says 0.0", "block 1 thread 1 says 0.5"]


def test_device_assert_raises_kernel_crash_error_with_location():
    a = np.ones(100, np.int32)
    a[70] = 0
    out = poisoned(100, np.int32)
    mod = module("misc.cu", ("checked_div",))
    with pytest.raises(KernelCrashError, match=r"device-side assert triggered in kernel 'checked_div' at "
                                               r"cpu_kernels/misc.cu:11 .*block \(2,0,0\) thread \(6,0,0\): "
                                               r"assertion `a\[i\] != 0` failed"):
        launch(mod, "checked_div", 4, 32, a, out, np.int32(100))


# ---- compile errors --------------------------------------------------------------------------

def test_compile_error_names_file_and_line():
    src = '#line 1 "scan/03_broken.cu"\nextern "C" __global__ void k(float* x) {\n    x[0] = y;\n}\n'
    with pytest.raises(CompileError) as err:
        CpuModule(src, filename="scan/03_broken.cu", kernel_names=["k"])
    assert str(err.value).startswith(("scan/03_broken.cu:2: ‘y’ was not declared in this scope",   # g++
                                      "scan/03_broken.cu:2: use of undeclared identifier 'y'"))   # clang
    assert (err.value.filename, err.value.line) == ("scan/03_broken.cu", 2)
    assert "error:" in err.value.log


@pytest.mark.parametrize("body,feature", [
    ("x[0] = __shfl_down(x[0], 1);", "__shfl_down (without _sync) is not supported by pmpp's CPU engine"),
    ("x[0] = tex1Dfetch<float>(0ull, 1);", "texture and surface objects (tex1Dfetch) are not supported"),
    ("cudaDeviceSynchronize();", "cudaDeviceSynchronize is not supported by pmpp's CPU engine"),
    ('asm("tex.1d.v4.f32.s32 {%0,%0,%0,%0}, [%1, {%2}];" : "+f"(x[0]) : "l"(0ull), "r"(0));',
     "inline PTX instruction 'tex.1d.v4.f32.s32' is not supported"),
    ("k<<<1, 1>>>(x);", "dynamic parallelism, <<<...>>>) are not supported"),
    ("x[0] = __dp4a(1, 2, 3);", "if __dp4a is a CUDA intrinsic, pmpp's CPU engine does not provide it"),
])
def test_unsupported_feature_gives_clear_compile_error(body, feature):
    src = f'#line 1 "bad.cu"\nextern "C" __global__ void k(float* x) {{\n    {body}\n}}\n'
    with pytest.raises(CompileError, match="^bad.cu:2: ") as err:
        CpuModule(src, filename="bad.cu", kernel_names=["k"])
    assert feature in str(err.value)


def test_unsupported_header_gives_clear_compile_error():
    src = '#line 1 "wmma.cu"\n#include <mma.h>\nextern "C" __global__ void k() {}\n'
    with pytest.raises(CompileError, match=r"^wmma.cu:1: #error \"tensor-core matrix operations .* not supported"):
        CpuModule(src, filename="wmma.cu", kernel_names=["k"])


def test_missing_kernel_name_is_a_clear_compile_error():
    with pytest.raises(CompileError, match=r"cannot make 'vec_ad' \(from kernel_names\) a launchable kernel"):
        CpuModule(source("indexing.cu"), filename="cpu_kernels/indexing.cu", kernel_names=["vec_ad"])


def test_cache_hit_does_not_recompile(monkeypatch):
    src = source("indexing.cu") + f"// {np.random.default_rng().integers(1 << 62)}\n"
    calls = []
    real_run = toolchain.subprocess.run
    monkeypatch.setattr(toolchain.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    first = CpuModule(src, filename="cpu_kernels/indexing.cu", kernel_names=["vec_add"])
    assert calls, "the first construction compiles"
    calls.clear()
    second = CpuModule(src, filename="cpu_kernels/indexing.cu", kernel_names=["vec_add"])
    assert calls == [] and second.library_path == first.library_path


# ---- checks: races ---------------------------------------------------------------------------

def test_kogge_stone_without_temporary_is_a_race(rng):
    mod = module("kogge_stone_racy.cu", ("KoggeStone",), check=True)
    x = rng.random(64, np.float32)
    with pytest.raises(RaceError) as err:
        launch(mod, "KoggeStone", 1, 64, x, poisoned(64), np.uint32(64))
    assert str(err.value) == (
        "shared-memory race in kernel 'KoggeStone' on __shared__ 'XY'[1]: thread (1,0,0) wrote at "
        "cpu_kernels/kogge_stone_racy.cu:12 and thread (2,0,0) read at cpu_kernels/kogge_stone_racy.cu:11 "
        "with no barrier or __syncwarp() between them (block (0,0,0)). They are lanes 1 and 2 of warp 0, and "
        "the lanes of a warp do not run in lockstep (independent thread scheduling, since Volta; volatile "
        "does not order them): add __syncwarp() between the two accesses where only this warp shares the "
        "data (between the steps of a warp-synchronous reduction), __syncthreads() where other warps do "
        "too, or atomics if both lanes update the value")


def test_kogge_stone_with_temporary_passes_the_race_check(rng):
    mod = module("kogge_stone.cu", ("KoggeStone",), check=True)
    n = 200
    x = rng.random(n, np.float32)
    y = poisoned(n)
    launch(mod, "KoggeStone", cdiv(n, 64), 64, x, y, np.uint32(n))
    padded = np.zeros(cdiv(n, 64) * 64, np.float32)
    padded[:n] = x
    np.testing.assert_allclose(y, np.cumsum(padded.reshape(-1, 64), axis=1).reshape(-1)[:n], rtol=1e-5)


def test_warp_tail_without_syncwarp_is_a_race(rng):
    mod = module("warp_tail_racy.cu", ("reduce",), check=True)
    with pytest.raises(RaceError, match=r"on __shared__ 'sdata'\[\d+\]: thread \(\d+,0,0\) read at "
                                        r"cpu_kernels/warp_tail_racy.cu:\d+ and thread \(\d+,0,0\) wrote at "
                                        r"cpu_kernels/warp_tail_racy.cu:\d+ with no barrier"):
        launch(mod, "reduce", 2, 128, rng.random(256, np.float32), poisoned(2))


def test_warp_tail_with_syncwarp_passes_the_race_check(rng):
    x = rng.random(128 * 5, np.float32)
    for check in (False, True):
        out = poisoned(5)
        launch(module("warp_tail_syncwarp.cu", ("reduce",), check=check), "reduce", 5, 128, x, out)
        np.testing.assert_allclose(out, x.reshape(5, 128).sum(1), rtol=1e-5)


def test_checked_build_gives_the_same_results(rng):
    n = 1000
    a, b = rng.random(n, np.float32), rng.random(n, np.float32)
    c = poisoned(n)
    launch(module("indexing.cu", ("vec_add",), check=True), "vec_add", cdiv(n, 128), 128, a, b, c, np.int32(n))
    np.testing.assert_array_equal(c, a + b)


# ---- checks: bounds ----------------------------------------------------------------------------

def test_global_read_out_of_bounds(rng):
    mod = module("bugs.cu", ("read_past_end",), check=True)
    n = 1000
    x = rng.random(n, np.float32)
    with pytest.raises(OutOfBoundsError) as err:
        mod.launch("read_past_end", (4, 1, 1), (256, 1, 1), 0, [x, poisoned(n), np.int32(n)],
                   ["input", "output", "n"], [False, True, False])
    assert str(err.value) == (
        "kernel 'read_past_end' at cpu_kernels/bugs.cu:4, block (3,0,0) thread (232,0,0): read of 4 bytes "
        "at element [1000] of argument 'input' (1000 float32 elements) is out of bounds")


def test_global_write_out_of_bounds(rng):
    mod = module("bugs.cu", ("write_past_end",), check=True)
    n = 300
    with pytest.raises(OutOfBoundsError) as err:
        mod.launch("write_past_end", (3, 1, 1), (128, 1, 1), 0, [rng.random(n, np.float32), poisoned(n), np.int32(n)],
                   ["input", "output", "n"], [False, True, False])
    assert str(err.value) == (
        "kernel 'write_past_end' at cpu_kernels/bugs.cu:9, block (2,0,0) thread (43,0,0): write of 4 bytes "
        "at element [300] of argument 'output' (300 float32 elements) is out of bounds")


def test_shared_memory_out_of_bounds(rng):
    mod = module("bugs.cu", ("shared_off_by_one",), check=True)
    with pytest.raises(OutOfBoundsError) as err:
        launch(mod, "shared_off_by_one", 2, 256, rng.random(512, np.float32), poisoned(512))
    assert str(err.value) == (
        "kernel 'shared_off_by_one' at cpu_kernels/bugs.cu:17, block (0,0,0) thread (255,0,0): read of 4 bytes "
        "at element [256] of __shared__ 'partialSum' (256 float elements) is out of bounds")


def test_wild_pointer_out_of_bounds_names_no_array():
    mod = module("bugs.cu", ("wild_write",), check=True)
    with pytest.raises(OutOfBoundsError, match=r"write of 4 bytes at address 0x[0-9a-f]+, which is not inside any"):
        launch(mod, "wild_write", 1, 32, poisoned(32), np.int64(1 << 40))


def test_shared_atomic_out_of_bounds():
    mod = module("bugs.cu", ("shared_histogram_bad_bin",), check=True)
    data = np.arange(32, dtype=np.int32) % 16
    data[20] = 16
    with pytest.raises(OutOfBoundsError) as err:
        launch(mod, "shared_histogram_bad_bin", 1, 32, data, poisoned(16, np.uint32))
    assert str(err.value) == (
        "kernel 'shared_histogram_bad_bin' at cpu_kernels/bugs.cu:57, block (0,0,0) thread (20,0,0): write of "
        "4 bytes at element [16] of __shared__ 'hist' (16 unsigned int elements) is out of bounds")


# ---- checks: barriers -------------------------------------------------------------------------

def test_barrier_divergence_from_early_return(rng):
    mod = module("bugs.cu", ("early_return",), check=True)
    with pytest.raises(BarrierDivergenceError) as err:
        launch(mod, "early_return", 2, 128, rng.random(200, np.float32), poisoned(200), np.int32(200))
    assert str(err.value).startswith(
        "barrier divergence in kernel 'early_return', block (1,0,0): threads (0,0,0)-(71,0,0) (72 threads) "
        "wait at __syncthreads() at cpu_kernels/bugs.cu:25, but threads (72,0,0)-(127,0,0) (56 threads) "
        "exited without reaching it")


def test_early_return_is_lenient_without_check(rng):
    x = rng.random(200, np.float32)
    y = poisoned(200)
    launch(module("bugs.cu", ("early_return",)), "early_return", 2, 128, x, y, np.int32(200))
    np.testing.assert_array_equal(y, x)


def test_barrier_divergence_between_two_barriers():
    mod = module("bugs.cu", ("two_barriers",), check=True)
    with pytest.raises(BarrierDivergenceError, match=(
            r"threads \(0,0,0\), \(2,0,0\), \(4,0,0\), ... \(32 threads\) wait at __syncthreads\(\) at "
            r"cpu_kernels/bugs.cu:31 while threads \(1,0,0\), \(3,0,0\), \(5,0,0\), ... \(32 threads\) wait at "
            r"__syncthreads\(\) at cpu_kernels/bugs.cu:33")):
        launch(mod, "two_barriers", 1, 64, poisoned(64))


def test_warp_primitive_missing_lanes_is_reported_not_hung():
    mod = module("bugs.cu", ("shfl_half_warp",))
    with pytest.raises(BarrierDivergenceError, match=r"threads \(0,0,0\)-\(15,0,0\) \(16 threads\) wait at "
                                                     r"__shfl_down_sync\(\) at cpu_kernels/bugs.cu:49"):
        launch(mod, "shfl_half_warp", 1, 32, poisoned(32))


# ---- isolation: crashes and timeouts ------------------------------------------------------------

def test_crash_raises_kernel_crash_error_and_next_launch_works(rng):
    conv = CpuModule(source("constant.cu"), filename="cpu_kernels/constant.cu", kernel_names=["conv1d"])
    f = rng.random(7, np.float32)
    conv.copy_to_symbol("F", f)
    conv.copy_to_symbol("offset_value", np.int32(-2))
    x = rng.random(100, np.float32)
    launch(conv, "conv1d", 2, 64, x, poisoned(100), np.int32(100))  # loaded in this worker
    mod = module("bugs.cu", ("wild_write",))
    with pytest.raises(KernelCrashError, match=r"kernel 'wild_write' .*SIGSEGV.*restarted.*check=True"):
        launch(mod, "wild_write", 1, 32, poisoned(32), np.int64(1 << 40))
    out = poisoned(32)
    launch(mod, "wild_write", 1, 32, out, np.int64(0))
    np.testing.assert_array_equal(out, 1.0)
    y = poisoned(100)  # the restarted worker reloaded the module and replayed copy_to_symbol
    launch(conv, "conv1d", 2, 64, x, y, np.int32(100))
    np.testing.assert_allclose(y, np.convolve(np.pad(x, 3), f[::-1], mode="valid") - 2, rtol=1e-5)


def test_timeout_kills_the_worker_and_next_launch_works():
    mod = CpuModule(source("bugs.cu"), filename="cpu_kernels/bugs.cu", kernel_names=["spin_forever"], timeout=2)
    with pytest.raises(KernelTimeoutError, match=r"kernel 'spin_forever' .*did not finish within 2 s"):
        launch(mod, "spin_forever", 1, 32, np.zeros(1, np.int32), poisoned(32, np.int32))
    out = poisoned(32, np.int32)
    launch(mod, "spin_forever", 1, 32, np.ones(1, np.int32), out)
    np.testing.assert_array_equal(out, 1)


# ---- asynchronous copies (cuda_pipeline.h) ---------------------------------------------------

def test_pipeline_memcpy_async_copies_global_to_shared():
    x = np.arange(256, dtype=np.float32)
    out = poisoned(256)
    launch(module("async_copy.cu", ("stage_through_shared",), check=True), "stage_through_shared", 1, 64,
           x, out, np.int32(0), np.int32(0))
    assert np.array_equal(out, x)


@pytest.mark.parametrize("size, offset, message", [
    (12, 0, "size other than 4, 8 or 16 bytes"),
    (16, 1, "address not aligned to the size"),
])
def test_pipeline_memcpy_async_refuses_what_a_gpu_would_fault_on(size, offset, message):
    x = np.arange(256, dtype=np.float32)
    with pytest.raises(KernelCrashError, match=message):
        launch(module("async_copy.cu", ("stage_through_shared",)), "stage_through_shared", 1, 64,
               x, poisoned(256), np.int32(size), np.int32(offset))


@pytest.mark.parametrize("all_wait", [0, 1])
def test_bulk_copies_move_a_block_of_floats_in_and_out(all_wait):
    x = np.random.default_rng().random(260, dtype=np.float32)
    out = poisoned(256)
    launch(module("bulk_copy.cu", ("double_through_shared",), check=True), "double_through_shared", 1, 64,
           x, out, np.int32(0), np.int32(0), np.int32(1), np.int32(all_wait))
    assert np.array_equal(out, 2 * x[:256])


@pytest.mark.parametrize("size, offset, arrivals, message", [
    (1000, 0, 1, "multiple of 16 bytes"),
    (0, 1, 1, "16-byte aligned addresses"),
    (0, 0, 2, "phase that never completes"),
])
def test_bulk_copies_refuse_what_a_gpu_would_fault_or_hang_on(size, offset, arrivals, message):
    x = np.arange(260, dtype=np.float32)
    with pytest.raises(KernelCrashError, match=message):
        launch(module("bulk_copy.cu", ("double_through_shared",)), "double_through_shared", 1, 64,
               x, poisoned(256), np.int32(size), np.int32(offset), np.int32(arrivals), np.int32(0))
