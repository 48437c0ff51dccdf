"""Races between lanes of one warp under ``check=True``, as CUDA's memory model has them.

Since Volta the lanes of a warp are scheduled independently: two accesses of one shared-memory
location by two lanes, one of them a write, race unless a ``__syncthreads()``, or a
``__syncwarp()`` or warp primitive (shuffle, vote, ...) with both lanes in its mask, lies between
them; ``volatile`` orders nothing. compute-sanitizer's racecheck reports such hazards, and so does
the CPU engine's checked build, naming the lanes and ``__syncwarp()``. The unchecked engine runs
a warp's lanes one after another (a lane runs until it reaches a warp primitive or barrier), so
legacy warp-synchronous code gives a wrong answer there, without an error.
"""
import re

import numpy as np
import pytest

import pmpp
from pmpp.errors import RaceError

FILENAME = "warp_tail.cu"

# One warp sums 32 values. `legacy_tail` is the unrolled last warp of older samples (Harris's
# reduce4 tail), written for lanes that run in lockstep; `synced_tail` is the same six steps
# with __syncwarp() between each step's read and its write; `shuffle_tail` keeps the values in
# registers.
SOURCE = r"""
extern "C" __global__ void legacy_tail(const float* in, float* out) {
    __shared__ float sdata[64];
    unsigned tid = threadIdx.x;
    sdata[tid] = in[tid];
    sdata[tid + 32] = 0.0f;
    __syncthreads();
    if (tid < 32) {
        volatile float* vs = sdata;
        vs[tid] += vs[tid + 32];  // step 32
        vs[tid] += vs[tid + 16];  // step 16
        vs[tid] += vs[tid + 8];   // step 8
        vs[tid] += vs[tid + 4];   // step 4
        vs[tid] += vs[tid + 2];   // step 2
        vs[tid] += vs[tid + 1];   // step 1
    }
    if (tid == 0) out[0] = sdata[0];
}

// __syncwarp() between the statements only: a step's read of vs[tid + 16] and lane tid + 16's
// write of it in the same step still race.
extern "C" __global__ void syncwarp_between_statements(const float* in, float* out) {
    __shared__ float sdata[64];
    unsigned tid = threadIdx.x;
    sdata[tid] = in[tid];
    sdata[tid + 32] = 0.0f;
    __syncthreads();
    volatile float* vs = sdata;
    vs[tid] += vs[tid + 32]; __syncwarp();
    vs[tid] += vs[tid + 16]; __syncwarp();
    vs[tid] += vs[tid + 8];  __syncwarp();
    vs[tid] += vs[tid + 4];  __syncwarp();
    vs[tid] += vs[tid + 2];  __syncwarp();
    vs[tid] += vs[tid + 1];  __syncwarp();
    if (tid == 0) out[0] = sdata[0];
}

extern "C" __global__ void synced_tail(const float* in, float* out) {
    __shared__ float sdata[64];
    unsigned tid = threadIdx.x;
    sdata[tid] = in[tid];
    sdata[tid + 32] = 0.0f;
    __syncthreads();
    float sum = sdata[tid] + sdata[tid + 32];
    sdata[tid] = sum;         __syncwarp();
    sum += sdata[tid + 16];   __syncwarp();
    sdata[tid] = sum;         __syncwarp();
    sum += sdata[tid + 8];    __syncwarp();
    sdata[tid] = sum;         __syncwarp();
    sum += sdata[tid + 4];    __syncwarp();
    sdata[tid] = sum;         __syncwarp();
    sum += sdata[tid + 2];    __syncwarp();
    sdata[tid] = sum;         __syncwarp();
    sum += sdata[tid + 1];
    if (tid == 0) out[0] = sum;
}

extern "C" __global__ void shuffle_tail(const float* in, float* out) {
    __shared__ float sdata[32];
    unsigned tid = threadIdx.x;
    sdata[tid] = in[tid];
    __syncthreads();
    float sum = sdata[tid];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (tid == 0) out[0] = sum;
}

// Lanes `a` and `b` both store to one shared word (no synchronisation between them).
extern "C" __global__ void two_lanes_write(int a, int b, int* out) {
    __shared__ int word;
    if (threadIdx.x == a || threadIdx.x == b) word = threadIdx.x;
    __syncthreads();
    out[0] = word;
}

// Each lane writes its slot, then reads the previous lane's after `mask`'s __syncwarp(); lanes
// outside `mask` wait in a __syncwarp() of their own first.
extern "C" __global__ void write_sync_read(unsigned mask, int* out) {
    __shared__ int slot[32];
    unsigned lane = threadIdx.x;
    slot[lane] = 10 * lane;
    if (mask >> lane & 1u) __syncwarp(mask);
    else __syncwarp(~mask);
    out[lane] = slot[(lane + 31) % 32];
}
"""


def kernel(name, check):
    return pmpp.load(source=SOURCE, filename=FILENAME, backend="cpu", check=check).get_function(name)


def line_of(text):
    """The line of SOURCE (as the engine numbers it) that holds ``text``."""
    return next(i for i, line in enumerate(SOURCE.splitlines(), 1) if re.search(re.escape(text) + r"\b", line))


def warp_sum(name, values, check):
    out = np.full(1, np.nan, np.float32)
    kernel(name, check)((1,), (32,), (values.astype(np.float32), out))
    return out[0]


RACE = re.compile(
    r"shared-memory race in kernel '(?P<kernel>\w+)' on __shared__ '(?P<var>\w+)'\[(?P<index>\d+)\]: "
    r"thread \((?P<t1>\d+),0,0\) (?P<op1>read|wrote) at (?P<file1>[\w.]+):(?P<line1>\d+) and "
    r"thread \((?P<t2>\d+),0,0\) (?P<op2>read|wrote) at (?P<file2>[\w.]+):(?P<line2>\d+) with no barrier or "
    r"__syncwarp\(\) between them \(block \(0,0,0\)\)\. They are lanes (?P<lane1>\d+) and (?P<lane2>\d+) "
    r"of warp 0, .*add __syncwarp\(\) between the two accesses")


def race_report(launch):
    with pytest.raises(RaceError) as raised:
        launch()
    found = RACE.match(str(raised.value))
    assert found, str(raised.value)
    assert (found["lane1"], found["lane2"]) == (found["t1"], found["t2"])
    assert found["t1"] != found["t2"] and "wrote" in (found["op1"], found["op2"])
    assert found["file1"] == found["file2"] == FILENAME
    return found


def test_legacy_warp_synchronous_tail_is_a_race_between_two_lanes():
    ones = np.ones(32)
    found = race_report(lambda: warp_sum("legacy_tail", ones, check=True))
    steps = {line_of(f"// step {s}") for s in (32, 16, 8, 4, 2, 1)}
    assert found["kernel"] == "legacy_tail" and found["var"] == "sdata"
    assert {int(found["line1"]), int(found["line2"])} <= steps
    # The word they race on is one lane's own slot, which the other lane reads in a later step.
    assert found["index"] in (found["t1"], found["t2"])


def sequential_lanes_sum(values):
    """The legacy tail with lane 0 running all its steps, then lane 1, ...: the unchecked engine."""
    s = np.concatenate([values, np.zeros(32)]).astype(np.float32)
    for lane in range(32):
        for step in (32, 16, 8, 4, 2, 1):
            s[lane] += s[lane + step]
    return s[0]


def test_unchecked_engine_runs_the_lanes_one_after_another(rng):
    values = rng.integers(0, 4, 32).astype(np.float32)
    assert warp_sum("legacy_tail", values, check=False) == sequential_lanes_sum(values)
    assert sequential_lanes_sum(np.ones(32)) != 32     # so it is a wrong sum, with no error


def test_syncwarp_between_the_statements_alone_still_races():
    found = race_report(lambda: warp_sum("syncwarp_between_statements", np.ones(32), check=True))
    assert found["line1"] == found["line2"]        # the read and the write of one step


@pytest.mark.parametrize("name", ["synced_tail", "shuffle_tail"])
@pytest.mark.parametrize("check", [False, True])
def test_synchronised_tails_pass_with_the_right_sum(name, check, rng):
    values = rng.random(32, np.float32)
    np.testing.assert_allclose(warp_sum(name, values, check), values.sum(dtype=np.float64), rtol=1e-5)


def test_two_lanes_writing_one_shared_word_race():
    out = np.zeros(1, np.int32)
    found = race_report(lambda: kernel("two_lanes_write", True)((1,), (32,), (np.int32(3), np.int32(7), out)))
    assert (found["var"], found["op1"], found["op2"]) == ("word", "wrote", "wrote")
    assert {found["lane1"], found["lane2"]} == {"3", "7"}
    assert int(found["line1"]) == int(found["line2"]) == line_of("word = threadIdx.x")


def write_sync_read(mask, check=True):
    out = np.full(32, -1, np.int32)
    kernel("write_sync_read", check)((1,), (32,), (np.uint32(mask), out))
    return out


def test_a_read_by_another_lane_after_syncwarp_is_no_race():
    np.testing.assert_array_equal(write_sync_read(0xFFFFFFFF), 10 * ((np.arange(32) + 31) % 32))


def test_syncwarp_orders_only_the_lanes_in_its_mask():
    # Lanes 0-15 and 16-31 each meet in a __syncwarp() of their own half: nothing orders lane 15's
    # write before lane 16's read, nor lane 31's before lane 0's (a __syncwarp() of the whole warp
    # would: the test above).
    found = race_report(lambda: write_sync_read(0x0000FFFF))
    assert found["var"] == "slot" and {found["lane1"], found["lane2"]} in ({"15", "16"}, {"31", "0"})
