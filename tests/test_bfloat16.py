"""__nv_bfloat16 and __nv_bfloat162 (<cuda_bf16.h>) on the CPU engine: conversions round to nearest
even and arithmetic is correctly rounded, as the GPU's bfloat16 instructions are; the arrays are
uint16 arrays of the bits. Where there is a GPU, the same kernels give the same bits there."""
import numpy as np
import pytest

import pmpp

SOURCE = r"""
#include <cuda_bf16.h>
extern "C" __global__ void from_float(const float* x, unsigned short* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __bfloat16_as_ushort(__float2bfloat16(x[i]));
}
extern "C" __global__ void arithmetic(const __nv_bfloat16* a, const __nv_bfloat16* b, const __nv_bfloat16* c,
                                      __nv_bfloat16* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[5 * i + 0] = a[i] + b[i];
        out[5 * i + 1] = a[i] - b[i];
        out[5 * i + 2] = a[i] * b[i];
        out[5 * i + 3] = __hdiv(a[i], b[i]);
        out[5 * i + 4] = __hfma(a[i], b[i], c[i]);
    }
}
extern "C" __global__ void pairs(const __nv_bfloat162* a, const __nv_bfloat162* b, float2* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __bfloat1622float2(__hmul2(a[i], b[i]));
}
extern "C" __global__ void count(const int* bins, __nv_bfloat16* histo, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&histo[bins[i]], __float2bfloat16(1.0f));
}
"""


def to_bfloat16(x) -> np.ndarray:
    """The bfloat16 bits nearest each value (float32 or float64), ties to even; NaN stays NaN."""
    x = np.asarray(x)
    if x.dtype == np.float64:
        x = _round_to_odd_float32(x)
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    bits[(u & 0x7FFFFFFF) > 0x7F800000] = 0x7FFF        # the canonical NaN, as a GPU's conversion gives
    return bits


def fused_multiply_add(a, b, c):
    """a * b + c (float64 bfloat16 values) rounded to odd in float64: a * b is exact, and TwoSum
    recovers what rounding the sum to nearest dropped, so that a bfloat16 rounding of it is the one
    rounding of the exact value a fused multiply-add makes."""
    p = a * b
    s = p + c
    bb = s - p
    e = (p - (s - bb)) + (c - bb)
    odd = (s.view(np.uint64) & 1) == 1
    away = (e != 0) & ~odd & np.isfinite(s)
    return np.where(away, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def _round_to_odd_float32(x):
    with np.errstate(over="ignore"):      # past float32's range: inf, as bfloat16 rounds it too
        f = x.astype(np.float32)
    inexact = f.astype(np.float64) != x
    bits = f.view(np.uint32).copy()
    toward_zero = inexact & (np.abs(f.astype(np.float64)) > np.abs(x))
    bits[toward_zero] -= 1
    bits[inexact] |= 1
    return bits.view(np.float32)


def from_bfloat16(bits) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def random_bfloat16(rng, n):
    """Finite bfloat16 values over a wide range of exponents, both signs, zeros and subnormals."""
    bits = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    finite = (bits & 0x7F80) != 0x7F80
    bits = bits[finite]
    exponent_kept = (bits & 0x807F) | (((bits >> 7 & 0xFF).astype(np.int32) % 64 + 96).astype(np.uint16) << 7)
    return np.where(rng.random(bits.size) < 0.9, exponent_kept, bits).astype(np.uint16)


def kernels(backend):
    return pmpp.load(source=SOURCE, filename="bf16.cu", backend=backend)


BACKENDS = ["cpu", pytest.param("cupy", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_to_bfloat16_rounds_to_nearest_even(backend, rng):
    xp = pmpp.xp if backend == "cupy" else np
    x = np.concatenate([rng.standard_normal(4000).astype(np.float32) * 10.0 ** rng.integers(-40, 38, 4000),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.00390625, 1.01171875, 3.4e38,
                                  1e-45, -1e-41], np.float32)]).astype(np.float32)
    y = xp.zeros(x.size, np.uint16)
    kernels(backend).get_function("from_float")((x.size + 255) // 256, 256, (xp.asarray(x), y, np.int32(x.size)))
    np.testing.assert_array_equal(pmpp.asnumpy(y), to_bfloat16(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_arithmetic_is_correctly_rounded(backend, rng):
    xp = pmpp.xp if backend == "cupy" else np
    a, b, c = (random_bfloat16(rng, 6000) for _ in range(3))
    n = min(a.size, b.size, c.size)
    a, b, c = a[:n], b[:n], c[:n]
    b[b & 0x7FFF == 0] = 0x3F80                          # no division by zero
    out = xp.zeros(5 * n, np.uint16)
    kernels(backend).get_function("arithmetic")((n + 255) // 256, 256,
                                                (xp.asarray(a), xp.asarray(b), xp.asarray(c), out, np.int32(n)))
    fa, fb, fc = (from_bfloat16(v).astype(np.float64) for v in (a, b, c))
    expected = np.stack([to_bfloat16(fa + fb), to_bfloat16(fa - fb), to_bfloat16(fa * fb),
                         to_bfloat16(fa / fb), to_bfloat16(fused_multiply_add(fa, fb, fc))], axis=1).reshape(-1)
    got = pmpp.asnumpy(out)
    same = (got == expected) | (np.isnan(from_bfloat16(got)) & np.isnan(from_bfloat16(expected)))
    assert same.all(), f"{np.count_nonzero(~same)} of {same.size} differ; first at {np.flatnonzero(~same)[:5]}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_pairs_multiply_lane_by_lane(backend, rng):
    xp = pmpp.xp if backend == "cupy" else np
    a, b = random_bfloat16(rng, 2000)[:1000], random_bfloat16(rng, 2000)[:1000]
    out = xp.zeros(a.size, np.float32)                 # float2 per pair
    kernels(backend).get_function("pairs")(2, 256, (xp.asarray(a), xp.asarray(b), out, np.int32(a.size // 2)))
    expected = from_bfloat16(to_bfloat16(from_bfloat16(a).astype(np.float64) * from_bfloat16(b)))
    np.testing.assert_array_equal(pmpp.asnumpy(out), expected)


def test_atomic_add_of_bfloat16_counts_exactly_up_to_256(rng):
    bins = rng.integers(0, 8, 4000).astype(np.int32)
    histo = np.zeros(8, np.uint16)
    pmpp.load(source=SOURCE, filename="bf16.cu", backend="cpu", check=True).get_function("count")(
        16, 256, (bins, histo, np.int32(bins.size)))
    counts = np.bincount(bins, minlength=8)
    assert np.all(counts > 256)
    # bfloat16 counts exactly to 256, then by 2s: a sum of ones stops growing at 256
    np.testing.assert_array_equal(from_bfloat16(histo), np.full(8, 256.0, np.float32))


def test_a_float_array_for_bfloat16_is_refused_with_what_to_pass():
    a = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="expects bfloat16 elements, which NumPy keeps as uint16 arrays of their "
                                        r"bits \(or ml_dtypes.bfloat16 arrays\), got float32"):
        kernels("cpu").get_function("arithmetic")(1, 4, (a, a, a, np.zeros(20, np.uint16), np.int32(4)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fma_rounds_once_where_the_product_alone_is_a_tie(backend):
    # -1.5 * 2^22 times -1.0234375 * 2^29 is exactly halfway between two bfloat16s; a positive c far
    # below the product's last bit breaks the tie upward (an H200's __hfma gives 0x5945). Adding c to
    # the product rounded to nearest in double first would lose it and round to even (0x5944).
    xp = pmpp.xp if backend == "cupy" else np
    a, b, c = (xp.asarray(np.array([v], np.uint16)) for v in (0xCAC0, 0xCE03, 0x328C))
    out = xp.zeros(5, np.uint16)
    kernels(backend).get_function("arithmetic")(1, 1, (a, b, c, out, np.int32(1)))
    assert int(pmpp.asnumpy(out)[4]) == 0x5945
