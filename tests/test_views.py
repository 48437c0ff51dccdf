"""A pointer into the middle of an allocation, as a GPU has it: an array view passed to a kernel on
the CPU engine keeps its whole allocation reachable, and bounds are the allocation's."""
import numpy as np
import pytest

import pmpp

# A 1D stencil written for a pointer d_in + RADIUS: it reads in[i - RADIUS .. i + RADIUS].
STENCIL = r"""
#define RADIUS 3
extern "C" __global__ void stencil(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int k = -RADIUS; k <= RADIUS; ++k) sum += in[i + k];
        out[i] = sum;
    }
}
extern "C" __global__ void copy_back(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i - 1];
}
"""
RADIUS = 3


def kernel(name, check):
    return pmpp.load(source=STENCIL, filename="views.cu", backend="cpu", check=check).get_function(name)


@pytest.mark.parametrize("check", [False, True], ids=["plain", "checked"])
def test_a_view_reads_its_neighbours_in_the_allocation(check):
    padded = np.random.default_rng(0).random(1000 + 2 * RADIUS, dtype=np.float32)
    n = padded.size - 2 * RADIUS
    out = np.full(n, np.nan, np.float32)
    kernel("stencil", check)((4,), (256,), (padded[RADIUS:], out, np.int32(n)))
    expected = np.convolve(padded.astype(np.float64), np.ones(2 * RADIUS + 1), "valid")
    np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_reading_before_the_allocation_is_out_of_bounds_at_the_views_index():
    padded = np.zeros(100, np.float32)
    out = np.zeros(98, np.float32)
    with pytest.raises(pmpp.OutOfBoundsError) as err:
        kernel("stencil", True)((1,), (98,), (padded[2:], out, np.int32(98)))
    assert "element [-3] of argument 'in' (a view from element 2 of its allocation of 100" in str(err.value)


def test_two_views_of_one_allocation_are_two_pointers_into_one_copy():
    a = np.arange(66, dtype=np.float32)
    kernel("copy_back", True)((1,), (32,), (a[1:33], a[34:], np.int32(32)))   # out[i] = in[i - 1]
    expected = np.arange(66, dtype=np.float32)
    expected[34:] = np.arange(32)
    np.testing.assert_array_equal(a, expected)


def test_a_strided_view_is_refused_before_its_allocation_is_looked_at():
    a = np.zeros((8, 8), np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernel("copy_back", False)((1,), (4,), (a[:, 1], np.zeros(8, np.float32), np.int32(4)))
