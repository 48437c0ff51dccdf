"""Inline PTX (asm statements) in kernels: special registers, loads and stores, warp shuffles and
votes, atomics, barriers and integer instructions, checked against NumPy on each backend; on the
CPU engine, PTX loads are bounds-checked like C++ ones and an instruction it does not translate is
a compile error naming the instruction and its line."""

import numpy as np
import pytest

import pmpp
from pmpp.runner import array_module


def launch(source, name, grid, block, args, backend, check=False):
    module = pmpp.load(source=source, backend=backend, check=check and backend == "cpu")
    module.get_function(name)(grid, block, args)


def line_of(source, text):
    return source[:source.index(text)].count("\n") + 1


SPECIAL_REGISTERS = r"""
extern "C" __global__ void registers(unsigned *out) {
    unsigned lane, tid_x, tid_y, ntid_x, ctaid_x, nctaid_x, lt, ge;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    asm volatile("mov.u32 %0, %%tid.x;\n\t"
                 "mov.u32 %1, %%tid.y;" : "=r"(tid_x), "=r"(tid_y));
    asm("mov.u32 %0, %%ntid.x; mov.u32 %1, %%ctaid.x; mov.u32 %2, %%nctaid.x;"
        : "=r"(ntid_x), "=r"(ctaid_x), "=r"(nctaid_x));
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
    asm("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
    unsigned t = threadIdx.x + threadIdx.y * blockDim.x + blockIdx.x * blockDim.x * blockDim.y;
    unsigned *o = out + 8 * t;
    o[0] = lane; o[1] = tid_x; o[2] = tid_y; o[3] = ntid_x; o[4] = ctaid_x; o[5] = nctaid_x;
    o[6] = lt; o[7] = ge;
}
"""


def test_special_registers_read_the_thread_and_its_lane(backend):
    xp, block, blocks = array_module(backend), (16, 4), 3
    out = xp.zeros((blocks * 64, 8), np.uint32)
    launch(SPECIAL_REGISTERS, "registers", blocks, block, (out,), backend)
    got = pmpp.asnumpy(out)
    y, x = np.divmod(np.arange(64), 16)
    lane = (x + 16 * y) % 32                      # lanes count the linear thread index
    expected = np.stack([lane, x, y, np.full(64, 16), np.zeros(64), np.full(64, blocks),
                         (1 << lane) - 1, ~((1 << lane) - 1) & 0xffffffff], axis=1)
    expected = np.concatenate([expected + np.array([0, 0, 0, 0, b, 0, 0, 0]) for b in range(blocks)])
    np.testing.assert_array_equal(got, expected.astype(np.uint32))


WARPS = r"""
extern "C" __global__ void warps(unsigned *out) {
    unsigned w, nw;
    asm("mov.u32 %0, %%warpid;\n mov.u32 %1, %%nwarpid;" : "=r"(w), "=r"(nw));
    out[2 * threadIdx.x] = w;
    out[2 * threadIdx.x + 1] = nw;
}
"""


def test_warpid_is_the_warp_of_the_block_on_the_cpu_engine():
    out = np.zeros((96, 2), np.uint32)
    launch(WARPS, "warps", 1, 96, (out,), "cpu")
    np.testing.assert_array_equal(out, np.stack([np.arange(96) // 32, np.full(96, 3)], axis=1))


CLOCK = r"""
extern "C" __global__ void timed(const float *in, float *out, unsigned long long *t) {
    unsigned long long before, after;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(before));
    float s = 0;
    for (int k = 0; k < 1000; ++k) s = s * 0.5f + in[(threadIdx.x + k) % 64];
    out[threadIdx.x] = s;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(after));
    t[2 * threadIdx.x] = before;
    t[2 * threadIdx.x + 1] = after;
}
"""


def test_clock64_moves_forward_in_each_thread(backend, rng):
    xp = array_module(backend)
    t = xp.zeros((64, 2), np.uint64)
    launch(CLOCK, "timed", 1, 64, (xp.asarray(rng.random(64, np.float32)), xp.zeros(64, np.float32), t),
           backend)
    before, after = pmpp.asnumpy(t).T
    assert (after > before).all()


COPY = r"""
extern "C" __global__ void copy(const float *src, float *dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v;
        asm("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(src + i));
        asm volatile("st.global.f32 [%0], %1;" :: "l"(dst + i), "f"(v) : "memory");
    }
}
extern "C" __global__ void copy4(const float4 *src, float4 *dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float a, b, c, d;
        asm("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];"
            : "=f"(a), "=f"(b), "=f"(c), "=f"(d) : "l"(src + i));
        asm("st.global.v4.f32 [%0+0], {%1, %2, %3, %4};" :: "l"(dst + i), "f"(a), "f"(b), "f"(c), "f"(d));
    }
}
"""


@pytest.mark.parametrize("kernel,width", [("copy", 1), ("copy4", 4)])
def test_ptx_loads_and_stores_copy_an_array_checked(kernel, width, backend, rng):
    xp, n = array_module(backend), 1000
    x = rng.standard_normal(n * width).astype(np.float32)
    out = xp.zeros(n * width, np.float32)
    launch(COPY, kernel, 4, 256, (xp.asarray(x), out, np.int32(n)), backend, check=True)
    np.testing.assert_array_equal(pmpp.asnumpy(out), x)


def test_an_out_of_bounds_ptx_load_is_reported_like_a_cpp_one(rng):
    n = 1000
    with pytest.raises(pmpp.OutOfBoundsError) as err:
        launch(COPY, "copy", 4, 256, (rng.random(n, np.float32), np.zeros(n + 24, np.float32),
                                      np.int32(n + 24)), "cpu", check=True)
    line = line_of(COPY, "ld.global.nc.f32")
    assert f":{line}, block (3,0,0) thread (232,0,0): read of 4 bytes at element [1000] of argument" \
           in str(err.value)


SHUFFLES = r"""
extern "C" __global__ void warp_sums(const int *in, int *sums, int *scans) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, v = in[i], s = v;
    for (int offset = 16; offset > 0; offset /= 2) {
        int other;
        asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(other) : "r"(s), "r"(offset));
        s += other;
    }
    sums[i] = s;
    // inclusive scan within groups of 8 lanes: c = (32 - 8) << 8, no clamp
    int x = v;
    for (int delta = 1; delta < 8; delta *= 2)
        asm volatile("{\n\t.reg .s32 t;\n\t.reg .pred p;\n\t"
                     "shfl.sync.up.b32 t|p, %0, %1, 0x1800, 0xffffffff;\n\t"
                     "@p add.s32 %0, %0, t;\n\t}" : "+r"(x) : "r"(delta));
    scans[i] = x;
}
"""


def test_shfl_sync_reduces_a_warp_and_scans_groups_of_lanes(backend, rng):
    xp = array_module(backend)
    x = rng.integers(-1000, 1000, 128).astype(np.int32)
    sums, scans = xp.zeros(128, np.int32), xp.zeros(128, np.int32)
    launch(SHUFFLES, "warp_sums", 2, 64, (xp.asarray(x), sums, scans), backend)
    got = pmpp.asnumpy(sums).reshape(4, 32)
    np.testing.assert_array_equal(got[:, 0], x.reshape(4, 32).sum(axis=1))
    np.testing.assert_array_equal(pmpp.asnumpy(scans), np.cumsum(x.reshape(16, 8), axis=1).ravel())


VOTES = r"""
extern "C" __global__ void votes(const float *in, unsigned *ballots, unsigned *counts, unsigned *masks) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned ballot, count, active;
    asm volatile("{\n"
                 "  .reg .pred positive;\n"
                 "  setp.gt.f32 positive, %3, 0f3F000000;  // 0.5\n"
                 "  vote.sync.ballot.b32 %0, positive, 0xffffffff;\n"
                 "  popc.b32 %1, %0;\n"
                 "  activemask.b32 %2;\n"
                 "}" : "=r"(ballot), "=r"(count), "=r"(active) : "f"(in[i]));
    ballots[i] = ballot; counts[i] = count; masks[i] = active;
}
"""


def test_vote_ballot_with_a_predicate_set_in_ptx(backend, rng):
    xp = array_module(backend)
    x = rng.standard_normal(64).astype(np.float32)
    ballots, counts, masks = (xp.zeros(64, np.uint32) for _ in range(3))
    launch(VOTES, "votes", 1, 64, (xp.asarray(x), ballots, counts, masks), backend)
    above = x.reshape(2, 32) > 0.5
    bits = above.astype(np.uint64) << np.arange(32, dtype=np.uint64)
    expected = bits.sum(axis=1).astype(np.uint32)
    np.testing.assert_array_equal(pmpp.asnumpy(ballots), np.repeat(expected, 32))
    np.testing.assert_array_equal(pmpp.asnumpy(counts), np.repeat(above.sum(axis=1), 32))
    lane = np.arange(64) % 32
    assert ((pmpp.asnumpy(masks) >> lane) & 1).all()          # activemask names the lane itself


ATOMICS = r"""
extern "C" __global__ void tickets(unsigned *counter, unsigned *ticket, unsigned *histogram, const unsigned *bins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned t;
    asm volatile("atom.global.add.u32 %0, [%1], 1;" : "=r"(t) : "l"(counter) : "memory");
    ticket[i] = t;
    asm volatile("red.global.add.u32 [%0], %1;" :: "l"(histogram + bins[i]), "r"(1u) : "memory");
}
"""


def test_ptx_atomics_hand_out_tickets_and_count_a_histogram(backend, rng):
    xp, n = array_module(backend), 512
    bins = rng.integers(0, 10, n).astype(np.uint32)
    counter, ticket, histogram = xp.zeros(1, np.uint32), xp.zeros(n, np.uint32), xp.zeros(10, np.uint32)
    launch(ATOMICS, "tickets", 4, 128, (counter, ticket, histogram, xp.asarray(bins)), backend)
    assert int(pmpp.asnumpy(counter)[0]) == n
    np.testing.assert_array_equal(np.sort(pmpp.asnumpy(ticket)), np.arange(n))
    np.testing.assert_array_equal(pmpp.asnumpy(histogram), np.bincount(bins, minlength=10))


BARRIER = r"""
extern "C" __global__ void reverse(const int *in, int *out) {
    __shared__ int tile[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = in[i];
    asm volatile("bar.sync 0;" ::: "memory");
    out[i] = tile[blockDim.x - 1 - threadIdx.x];
    asm volatile("membar.gl;\n\tfence.acq_rel.gpu;\n\tbarrier.sync 0;" ::: "memory");
}
"""


def test_bar_sync_orders_shared_memory_like_syncthreads(backend, rng):
    xp = array_module(backend)
    x = rng.integers(0, 1 << 30, 256).astype(np.int32)
    out = xp.zeros(256, np.int32)
    launch(BARRIER, "reverse", 2, 128, (xp.asarray(x), out), backend, check=True)
    np.testing.assert_array_equal(pmpp.asnumpy(out), x.reshape(2, 128)[:, ::-1].ravel())


INTEGER = r"""
extern "C" __global__ void integer(const unsigned *a, const unsigned *b, unsigned *out, unsigned long long *wide) {
    int i = threadIdx.x;
    unsigned x = a[i], y = b[i], *o = out + 10 * i;
    asm("mad.lo.s32 %0, %1, %2, 7;" : "=r"(o[0]) : "r"(x), "r"(y));
    asm("mul.hi.u32 %0, %1, %2;" : "=r"(o[1]) : "r"(x), "r"(y));
    asm("min.s32 %0, %1, %2;" : "=r"(o[2]) : "r"(x), "r"(y));
    asm("max.u32 %0, %1, %2;" : "=r"(o[3]) : "r"(x), "r"(y));
    asm("brev.b32 %0, %1;" : "=r"(o[4]) : "r"(x));
    asm("clz.b32 %0, %1;" : "=r"(o[5]) : "r"(x >> (y % 32)));
    asm("bfe.u32 %0, %1, 4, 12;" : "=r"(o[6]) : "r"(x));
    asm("bfe.s32 %0, %1, 20, 12;" : "=r"(o[7]) : "r"(x));
    asm("shr.s32 %0, %1, %2;" : "=r"(o[8]) : "r"(x), "r"(y % 40));
    asm("sub.u32 %0, %1, %2;" : "=r"(o[9]) : "r"(x), "r"(y));
    asm("mul.wide.u32 %0, %1, %2;" : "=l"(wide[2 * i]) : "r"(x), "r"(y));
    asm("mov.b64 %0, {%1, %2};" : "=l"(wide[2 * i + 1]) : "r"(x), "r"(y));
}
"""


def test_integer_instructions_match_numpy(backend, rng):
    xp, n = array_module(backend), 64
    a = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    out, wide = xp.zeros((n, 10), np.uint32), xp.zeros((n, 2), np.uint64)
    launch(INTEGER, "integer", 1, n, (xp.asarray(a), xp.asarray(b), out, wide), backend)
    ai, bi = a.astype(np.int64), b.astype(np.int64)
    sa = a.view(np.int32).astype(np.int64)
    shifted = (a >> (b % 32)).astype(np.uint32)
    expected = np.stack([
        (sa * b.view(np.int32) + 7) % (1 << 32),
        (ai * bi) >> 32,
        np.minimum(sa, b.view(np.int32)) % (1 << 32),
        np.maximum(a, b),
        [int(f"{v:032b}"[::-1], 2) for v in a],
        [32 - int(v).bit_length() for v in shifted],
        (a >> 4) & 0xfff,
        ((sa >> 20) % (1 << 32)),        # the top 12 bits, sign-extended
        (sa >> np.minimum(b % 40, 31)) % (1 << 32),
        (ai - bi) % (1 << 32),
    ], axis=1).astype(np.uint32)
    np.testing.assert_array_equal(pmpp.asnumpy(out), expected)
    np.testing.assert_array_equal(pmpp.asnumpy(wide)[:, 0], a.astype(np.uint64) * b.astype(np.uint64))
    np.testing.assert_array_equal(pmpp.asnumpy(wide)[:, 1], (b.astype(np.uint64) << 32) | a)


TF32 = r"""
extern "C" __global__ void to_tf32(const float *in, float *out) {
    unsigned t;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(t) : "f"(in[threadIdx.x]));
    out[threadIdx.x] = __uint_as_float(t);
}
"""


def test_cvt_rna_tf32_keeps_ten_mantissa_bits_rounding_ties_away(backend, rng):
    xp = array_module(backend)
    ulp = np.float32(2.0 ** -10)
    ties = np.array([1 + ulp / 2, -(1 + ulp / 2), 1 + 3 * ulp / 2], np.float32)   # halfway cases
    x = np.concatenate([ties, rng.standard_normal(61).astype(np.float32)])
    out = xp.zeros(64, np.float32)
    launch(TF32, "to_tf32", 1, 64, (xp.asarray(x), out), backend)
    mantissa, exponent = np.frexp(x.astype(np.float64))           # x = mantissa * 2**exponent
    scaled = np.abs(mantissa) * 2.0 ** 11                          # 11 significant bits
    expected = np.sign(mantissa) * np.floor(scaled + 0.5) * 2.0 ** (exponent - 11)
    np.testing.assert_array_equal(pmpp.asnumpy(out), expected.astype(np.float32))
    assert pmpp.asnumpy(out)[0] == 1 + ulp and pmpp.asnumpy(out)[1] == -(1 + ulp)


# ---- what the CPU engine refuses -------------------------------------------------------------

TEXTURE = """extern "C" __global__ void k(float *out, unsigned long long tex) {
    float a, b, c, d;
    asm("mov.u32 %0, %0;\\n\\t"
        "tex.1d.v4.f32.s32 {%0, %1, %2, %3}, [%4, {%5}];"
        : "+f"(a), "=f"(b), "=f"(c), "=f"(d) : "l"(tex), "r"(0));
    out[0] = a + b + c + d;
}
"""


def test_an_unsupported_instruction_is_a_compile_error_naming_it_and_its_line():
    with pytest.raises(pmpp.CompileError) as err:
        pmpp.load(source=TEXTURE, backend="cpu", filename="tex.cu")
    line = line_of(TEXTURE, "tex.1d")
    assert err.value.line == line
    assert str(err.value).startswith(
        f"tex.cu:{line}: inline PTX instruction 'tex.1d.v4.f32.s32' is not supported by pmpp's CPU engine: "
        "texture fetches are not supported: read the array through a pointer")


@pytest.mark.parametrize("ptx,constraint,message", [
    ("ld.global.f32 %0, [%1];", '"r"(0u)', "pass the pointer as a 64-bit operand"),
    ("ld.shared.f32 %0, [%1];", '"l"(p)', "the .shared state space is not translated"),
    ("mov.u32 %0, %%dynamic_smem_size;", '"r"(0u)', "pass the size of the dynamic shared memory"),
    ("mov.f32 %0, %%bogus;", '"r"(0u)', "'%bogus' in 'mov.f32' is neither an operand nor a register"),
    ("mov.b32 %[v], %1;", '"r"(0u)', "write it as %N, N the operand's position"),
    ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%0,%0,%0}, {%1,%1,%1,%1}, {%1,%1}, "
     "{%0,%0,%0,%0};", '"r"(0u)', "tensor-core instructions are not emulated"),
])
def test_what_the_engine_cannot_translate_says_what_to_do(ptx, constraint, message):
    source = ('extern "C" __global__ void k(float *p) {\n'
              '    float v = 0;\n'
              f'    asm volatile("{ptx}" : "+f"(v) : {constraint});\n'
              "    p[0] = v;\n}\n")
    with pytest.raises(pmpp.CompileError, match=r"^k\.cu:3: ") as err:
        pmpp.load(source=source, backend="cpu", filename="k.cu")
    assert message in str(err.value)
