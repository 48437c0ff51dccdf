"""cuRAND's device API on the CPU engine (`#include <curand_kernel.h>`): XORWOW and Philox4x32-10
against Python implementations of the generators written from their definitions, the
distributions' ranges and moments, and values recorded on a GPU (tests/data/curand_h100.json,
made by the kernels of tests/data/curand_draw.cu)."""

import functools
import json
from pathlib import Path

import numpy as np
import pytest

import pmpp

DATA = Path(__file__).parent / "data"
DRAW = DATA / "curand_draw.cu"
WORD = 0xFFFFFFFF
INTS, FLOATS, DOUBLES = 40, 44, 16  # slots per case in curand_draw.cu

# ---- Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC'11): 10 rounds of two 32x32->64-bit
# multiplications, the key bumped by the Weyl constants between rounds ------------------------
PHILOX_M0, PHILOX_M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85


def philox4x32_10(counters, key):
    """counters: (n, 4) words, low word first; key: (k0, k1). Returns (n, 4) uint32."""
    c = np.asarray(counters, np.uint64)
    k0, k1 = key
    for _ in range(10):
        p0, p1 = c[:, 0] * PHILOX_M0, c[:, 2] * PHILOX_M1
        c = np.stack([(p1 >> np.uint64(32)) ^ c[:, 1] ^ np.uint64(k0), p1 & np.uint64(WORD),
                      (p0 >> np.uint64(32)) ^ c[:, 3] ^ np.uint64(k1), p0 & np.uint64(WORD)], axis=1)
        k0, k1 = (k0 + PHILOX_W0) & WORD, (k1 + PHILOX_W1) & WORD
    return c.astype(np.uint32)


def words_of(value, n=4):
    return [(value >> (32 * i)) & WORD for i in range(n)]


def philox_stream(seed, subsequence, offset, count):
    """cuRAND's Philox numbers: subsequence is the counter's upper 64 bits, the stream hands out
    the four words of each counter value in turn, offset counts words."""
    first, last = offset // 4, (offset + count - 1) // 4
    counters = [words_of((subsequence << 64) + b) for b in range(first, last + 1)]
    words = philox4x32_10(counters, (seed & WORD, seed >> 32)).ravel()
    return words[offset % 4: offset % 4 + count]


# ---- XORWOW (Marsaglia, "Xorshift RNGs", JSS 2003) with cuRAND's seeding --------------------
WEYL = 362437


def xorwow_seeded(seed):
    t0 = (1099087573 * ((seed & WORD) ^ 0xAAD26B49)) & WORD
    t1 = (2591861531 * ((seed >> 32) ^ 0xF7DCEFDD)) & WORD
    v = [(123456789 + t0) & WORD, 362436069 ^ t0, (521288629 + t1) & WORD, 88675123 ^ t1,
         (5783321 + t0) & WORD]
    return (6615241 + t1 + t0) & WORD, v


def pack(v):
    return sum(w << (32 * i) for i, w in enumerate(v))


def xorshift(x):
    """One step of the xorshift part on the 160-bit state (v[0] in the low word)."""
    v = words_of(x, 5)
    t = v[0] ^ (v[0] >> 2)
    new = (v[4] ^ (v[4] << 4) ^ t ^ (t << 1)) & WORD
    return pack(v[1:] + [new])


def apply(images, x):
    out = 0
    while x:
        low = x & -x
        out ^= images[low.bit_length() - 1]
        x ^= low
    return out


@functools.cache
def power_images(k):
    """Images of the 160 unit vectors under 2^k steps: GF(2) matrix squaring."""
    if k == 0:
        return tuple(xorshift(1 << i) for i in range(160))
    half = power_images(k - 1)
    return tuple(apply(half, image) for image in half)


def jump(x, n):
    for bit in range(n.bit_length()):
        if n >> bit & 1:
            x = apply(power_images(bit), x)
    return x


def xorwow_stream(seed, subsequence, offset, count):
    d, v = xorwow_seeded(seed)
    x = jump(pack(v), (subsequence << 67) + offset)
    d = (d + WEYL * offset) & WORD
    out = []
    for _ in range(count):
        x = xorshift(x)
        d = (d + WEYL) & WORD
        out.append((words_of(x, 5)[4] + d) & WORD)
    return np.array(out, np.uint32)


STREAM = {"xorwow": xorwow_stream, "philox": philox_stream}
STATE = {"xorwow": "curandState", "philox": "curandStatePhilox4_32_10_t"}


def uniform_of(ints):
    """cuRAND's float uniform: x * 2^-32 + 2^-33 in float, so (0, 1]."""
    return np.asarray(ints, np.uint32).astype(np.float32) * np.float32(2.0 ** -32) + np.float32(2.0 ** -33)


# ---- the references themselves --------------------------------------------------------------
def test_the_philox_reference_gives_random123s_known_answers():
    # Known-answer vectors of Random123's kat_vectors (philox4x32, 10 rounds).
    cases = [([0, 0, 0, 0], (0, 0), [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
             ([WORD] * 4, (WORD, WORD), [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
             ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], (0xA4093822, 0x299F31D0),
              [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1])]
    for counter, key, expected in cases:
        assert philox4x32_10([counter], key)[0].tolist() == expected


def test_the_xorwow_reference_jumps_as_far_as_it_steps():
    x = pack(xorwow_seeded(99)[1])
    stepped = x
    for _ in range(1029):
        stepped = xorshift(stepped)
    assert jump(x, 1029) == stepped


# ---- the engine against the references -------------------------------------------------------
def draw_ints_source(state):
    return ("#include <curand_kernel.h>\n"
            "extern \"C\" __global__ void ints(unsigned long long seed, unsigned long long first,\n"
            "                                  unsigned long long offset, int count, unsigned int *out) {\n"
            f"    {state} s;\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    curand_init(seed, first + t, offset, &s);\n"
            "    for (int k = 0; k < count; ++k) out[t * count + k] = curand(&s);\n"
            "}\n")


def engine_ints(generator, seed, first_subsequence, offset, threads, count):
    module = pmpp.load(source=draw_ints_source(STATE[generator]), backend="cpu")
    out = np.zeros(threads * count, np.uint32)
    module.get_function("ints")(1, threads, (np.uint64(seed), np.uint64(first_subsequence),
                                             np.uint64(offset), np.int32(count), out))
    return out.reshape(threads, count)


@pytest.mark.parametrize("generator", ["xorwow", "philox"])
@pytest.mark.parametrize("far", [False, True], ids=["near", "far"])
def test_curand_gives_the_generators_stream_for_each_subsequence_and_offset(generator, far, rng):
    seed = int(rng.integers(0, 2 ** 64, dtype=np.uint64))
    first = int(rng.integers(2 ** 40, 2 ** 62)) if far else 0
    offset = int(rng.integers(2 ** 33, 2 ** 60)) if far else int(rng.integers(0, 9))
    threads, count = 8, 9
    got = engine_ints(generator, seed, first, offset, threads, count)
    for t in range(threads):
        np.testing.assert_array_equal(got[t], STREAM[generator](seed, first + t, offset, count),
                                      err_msg=f"{generator} thread {t}")


def distribution_source(state):
    return ("#include <curand_kernel.h>\n"
            "extern \"C\" __global__ void dist(unsigned long long seed, int n, unsigned int *ints,\n"
            "                                  float *uniforms, float *normals) {\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (t >= n) return;\n"
            f"    {state} a, b;\n"
            "    curand_init(seed, t, 0, &a);\n"
            "    b = a;\n"
            "    for (int k = 0; k < 2; ++k) ints[2 * t + k] = curand(&a);\n"
            "    for (int k = 0; k < 2; ++k) uniforms[2 * t + k] = curand_uniform(&b);\n"
            "    curand_init(seed, t, 0, &a);\n"
            "    for (int k = 0; k < 2; ++k) normals[2 * t + k] = curand_normal(&a);\n"
            "}\n")


@pytest.mark.parametrize("generator", ["xorwow", "philox"])
def test_uniform_is_in_0_1_and_normal_is_standard(generator, seed):
    n = 50_000  # threads, two values each: 1e5 values
    module = pmpp.load(source=distribution_source(STATE[generator]), backend="cpu")
    ints, uniforms, normals = (np.zeros(2 * n, np.uint32), np.zeros(2 * n, np.float32),
                               np.zeros(2 * n, np.float32))
    module.get_function("dist")((n + 255) // 256, 256, (np.uint64(seed), np.int32(n), ints,
                                                         uniforms, normals))
    np.testing.assert_array_equal(uniforms, uniform_of(ints))
    assert uniforms.min() > 0 and uniforms.max() <= 1
    assert abs(normals.mean()) < 5 / np.sqrt(normals.size)
    assert abs(normals.var() - 1) < 5 * np.sqrt(2 / normals.size)
    # Box-Muller of each pair of numbers: sin first, then the cos that was kept.
    u, angle = uniform_of(ints[0::2]).astype(float), 2 * np.pi * uniform_of(ints[1::2]).astype(float)
    radius = np.sqrt(-2 * np.log(u))
    expected = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1).ravel()
    assert np.all(np.abs(normals - expected) <= 1e-5 * np.repeat(radius, 2) + 1e-6)


# ---- bit for bit with a GPU ----------------------------------------------------------------
@functools.cache
def recorded():
    return json.loads((DATA / "curand_h100.json").read_text())


def engine_draw(generator, backend="cpu"):
    from pmpp.runner import array_module
    xp, cases = array_module(backend), np.array(recorded()["cases"], np.uint64).ravel()
    n = len(recorded()["cases"])
    out = [xp.zeros(n * size, dtype) for size, dtype in
           ((INTS, np.uint32), (FLOATS, np.float32), (DOUBLES, np.float64))]
    module = pmpp.load(str(DRAW), backend=backend)
    module.get_function(f"draw_{generator}")(1, 32, (xp.asarray(cases), np.int32(n), *out))
    return [pmpp.asnumpy(a).reshape(n, -1) for a in out]


def ulps(a, b):
    bits = np.int32 if a.dtype == np.float32 else np.int64
    return np.abs(a.view(bits).astype(np.int64) - b.astype(a.dtype).view(bits).astype(np.int64))


# slots of curand_draw.cu
UNIFORM_FLOATS = np.r_[0:8, 24:28]
NORMAL_PAIRS = np.r_[8:20, 28:32]  # (sin, cos) of one Box-Muller each, in that order
LOG_NORMALS = np.r_[20:24]
UNIFORM_DOUBLES, NORMAL_DOUBLES, LOG_NORMAL_DOUBLES = np.r_[0:4, 10:12], np.r_[4:8, 12:14], np.r_[8:10]


@pytest.mark.parametrize("generator", ["xorwow", "philox"])
def test_the_engine_draws_what_a_gpu_drew(generator):
    data, bound = recorded()[generator], recorded()["cpu_engine_difference"]
    ints, floats, doubles = engine_draw(generator)
    n = len(recorded()["cases"])
    gpu_ints = np.array(data["ints"], np.uint32).reshape(n, INTS)
    gpu_floats = np.array(data["floats"], np.float32).reshape(n, FLOATS)
    gpu_doubles = np.array(data["doubles"], np.float64).reshape(n, DOUBLES)
    used_ints = INTS if generator == "philox" else 16  # curand4 (slots 16-31) is Philox's
    np.testing.assert_array_equal(ints[:, :used_ints], gpu_ints[:, :used_ints])
    floats_used = UNIFORM_FLOATS if generator == "philox" else UNIFORM_FLOATS[:8]
    np.testing.assert_array_equal(floats[:, floats_used], gpu_floats[:, floats_used])
    doubles_used = UNIFORM_DOUBLES if generator == "philox" else UNIFORM_DOUBLES[:4]
    np.testing.assert_array_equal(doubles[:, doubles_used], gpu_doubles[:, doubles_used])

    pairs = NORMAL_PAIRS if generator == "philox" else NORMAL_PAIRS[:12]
    gpu_pairs = gpu_floats[:, pairs].astype(float).reshape(n, -1, 2)
    radius = np.repeat(np.hypot(gpu_pairs[..., 0], gpu_pairs[..., 1]), 2, axis=1)
    error = np.abs(floats[:, pairs] - gpu_floats[:, pairs].astype(float))
    assert np.all(error <= bound["normal_over_radius"] * radius)
    assert ulps(floats[:, LOG_NORMALS], gpu_floats[:, LOG_NORMALS]).max() <= bound["log_normal_max_ulp"]
    normal_doubles = NORMAL_DOUBLES if generator == "philox" else NORMAL_DOUBLES[:4]
    assert ulps(doubles[:, normal_doubles], gpu_doubles[:, normal_doubles]).max() <= \
        bound["normal_double_max_ulp"]
    assert ulps(doubles[:, LOG_NORMAL_DOUBLES], gpu_doubles[:, LOG_NORMAL_DOUBLES]).max() <= \
        bound["log_normal_double_max_ulp_in_cases"]


@pytest.mark.gpu
@pytest.mark.parametrize("generator", ["xorwow", "philox"])
def test_the_engine_and_the_gpu_draw_the_same_integers_and_uniforms(generator):
    cpu, gpu = engine_draw(generator, "cpu"), engine_draw(generator, "cupy")
    np.testing.assert_array_equal(cpu[0], gpu[0])
    np.testing.assert_array_equal(cpu[1][:, UNIFORM_FLOATS[:8]], gpu[1][:, UNIFORM_FLOATS[:8]])
    np.testing.assert_array_equal(cpu[2][:, UNIFORM_DOUBLES[:4]], gpu[2][:, UNIFORM_DOUBLES[:4]])


# ---- states in global memory, checked builds, what is not supported ----------------------------
STATES_SOURCE = """
#include <curand_kernel.h>
extern "C" __global__ void sizes(unsigned int *out) {
    out[0] = sizeof(curandState), out[1] = sizeof(curandStatePhilox4_32_10_t);
}
extern "C" __global__ void setup(curandState *states, unsigned long long seed) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    curand_init(seed, t, 0, &states[t]);
}
extern "C" __global__ void generate(curandState *states, unsigned int *out, int count) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    curandState local = states[t];
    for (int k = 0; k < count; ++k) out[t * count + k] = curand(&local);
    states[t] = local;
}
"""


@pytest.mark.parametrize("check", [False, True], ids=["plain", "checked"])
def test_states_kept_in_global_memory_continue_their_streams_across_launches(check, seed):
    module = pmpp.load(source=STATES_SOURCE, backend="cpu", check=check)
    sizes = np.zeros(2, np.uint32)
    module.get_function("sizes")(1, 1, (sizes,))
    assert sizes.tolist() == [48, 64]  # cuRAND's sizes, so arrays of states lay out alike
    threads, count = 64, 3
    states, out = np.zeros(threads * 48, np.uint8), np.zeros(threads * count, np.uint32)
    module.get_function("setup")(2, threads // 2, (states, np.uint64(seed)))
    draws = []
    for _ in range(2):
        module.get_function("generate")(2, threads // 2, (states, out, np.int32(count)))
        draws.append(out.reshape(threads, count).copy())
    for t in (0, 1, threads - 1):
        np.testing.assert_array_equal(np.concatenate([d[t] for d in draws]),
                                      xorwow_stream(seed, t, 0, 2 * count))


def test_an_unsupported_distribution_is_a_compile_error_that_names_it():
    source = ("#include <curand_kernel.h>\n"
              "__global__ void k(unsigned int *out) {\n"
              "    curandState s;\n"
              "    curand_init(1, 0, 0, &s);\n"
              "    out[0] = curand_poisson(&s, 3.0);\n"
              "}\n")
    with pytest.raises(pmpp.CompileError, match="curand_poisson is not supported"):
        pmpp.load(source=source, backend="cpu")
