"""pmpp.counters: Nsight Compute's counters from the CPU engine, on kernels counted by hand."""
import numpy as np
import pytest

import pmpp
from pmpp.profiling import ncu

from counter_cases import (ATOM_REQ, BLOCK, CASES, GRID, KERNEL_FILE, LD_REQ, LD_SECT, N, ST_REQ, ST_SECT,
                           WARPS)


@pytest.fixture(scope="module")
def module():
    return pmpp.load(source=KERNEL_FILE.read_text(), filename=KERNEL_FILE.name, backend="cpu")


def count_case(module, case, seed=0):
    args = ncu.case_arguments(case, np, seed)
    return pmpp.counters(module.get_function(case["kernel"]), tuple(case["grid"]), tuple(case["block"]), args)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_counts_match_the_hand_count(module, case):
    found = count_case(module, case)
    for name, expected in case["expected"].items():
        assert found[name] == pytest.approx(expected), name


def test_inactive_lanes_count_nothing(module):
    even = count_case(module, next(c for c in CASES if c["name"] == "even_lanes"))
    (line,) = [r for r in even.lines if r["global_requests"]]
    assert line["active_lanes"] == 16
    assert line["sectors_per_request"] == 4


def test_divergence_shows_as_fewer_active_lanes(module):
    full = count_case(module, next(c for c in CASES if c["name"] == "strided_load_1"))
    half = count_case(module, next(c for c in CASES if c["name"] == "half_warp_loop"))
    assert full["smsp__thread_inst_executed_per_inst_executed.ratio"] == 32
    assert half["smsp__thread_inst_executed_per_inst_executed.ratio"] < 24
    loop = [r for r in half.lines if "sum += in[i + k]" in r["source"]]
    assert loop and loop[0]["active_lanes"] == 16 and loop[0]["diverged_warps"] == WARPS


def test_counting_does_not_change_results(module):
    case = next(c for c in CASES if c["name"] == "strided_load_2")
    plain_args = ncu.case_arguments(case, np, 3)
    counted_args = ncu.case_arguments(case, np, 3)
    module.get_function("StridedLoad")((GRID,), (BLOCK,), plain_args)
    pmpp.counters(module.get_function("StridedLoad"), (GRID,), (BLOCK,), counted_args)
    np.testing.assert_array_equal(plain_args[1], counted_args[1])
    np.testing.assert_array_equal(counted_args[1], counted_args[0][::2][:N])


def test_a_count_build_not_collecting_runs_alike_and_counts_nothing(module):
    from pmpp.counters import counting_module
    case = next(c for c in CASES if c["name"] == "strided_load_2")
    twin = counting_module(module, collect=False)
    args = ncu.case_arguments(case, np, 4)
    args[1][:] = np.nan
    twin.get_function("StridedLoad")((GRID,), (BLOCK,), args)
    np.testing.assert_array_equal(args[1], args[0][::2][:N])
    assert twin.launches == [] and twin._impl.last_counts is None
    twin = counting_module(module)   # collects again
    twin.get_function("StridedLoad")((GRID,), (BLOCK,), args)
    assert twin.launches[-1][LD_REQ] == WARPS


def test_lines_name_the_source(module):
    found = count_case(module, next(c for c in CASES if c["name"] == "strided_load_32"))
    (line,) = [r for r in found.lines if r["global_requests"]]
    assert line["file"] == KERNEL_FILE.name and "in[i * stride]" in line["source"]
    assert line["kinds"] == "global.ld global.st"


def test_sample_records_one_real_warp_instruction(module):
    found = count_case(module, next(c for c in CASES if c["name"] == "shared_stride_2"))
    sample = found.sample(space="shared", op="ld")
    assert sample.mask == 0xFFFFFFFF and sample.array == "s"
    banks = sample.banks()
    assert [banks[lane] for lane in (0, 1, 16, 17)] == [0, 2, 0, 2]
    strided = count_case(module, next(c for c in CASES if c["name"] == "strided_load_2"))
    load = strided.sample(space="global", op="ld")
    assert load.array == "in" and load.sectors()[31] == 62 * 4 // 32


def test_counters_of_several_launches_add_up(module):
    case = next(c for c in CASES if c["name"] == "strided_load_1")
    once = count_case(module, case)
    twice = once + count_case(module, case)
    assert twice["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 2 * once["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
    assert twice["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"] == 4


def test_counters_name_their_metrics(module):
    found = count_case(module, CASES[0])
    with pytest.raises(KeyError, match="no counter 'dram__bytes_read.sum'"):
        found["dram__bytes_read.sum"]
    assert set(found) == set(pmpp.counters.METRICS)
    assert "<table>" in found._repr_html_()


def test_counters_want_a_pmpp_kernel():
    with pytest.raises(TypeError, match="pmpp.load"):
        pmpp.counters(lambda: None, 1, 1, ())


def test_out_of_bounds_while_counting_is_reported(module):
    with pytest.raises(pmpp.OutOfBoundsError, match="argument 'in'"):
        pmpp.counters(module.get_function("StridedLoad"), (GRID,), (BLOCK,),
                      (np.zeros(N, np.float32), np.zeros(N, np.float32), np.int32(2)))


def test_listing_marks_the_worst_line_and_shows_each_access(module):
    found = count_case(module, next(c for c in CASES if c["name"] == "strided_load_32"))
    listing = found.listing()
    (line,) = [text for text in str(listing).splitlines() if "in[i * stride]" in text]
    assert line.startswith(">>") and "ld 32.0/4 st 4.0/4" in line
    assert "background" in listing._repr_html_()


def test_a_sample_names_its_line_by_text_and_its_execution_by_k(module):
    found = count_case(module, next(c for c in CASES if c["name"] == "half_warp_loop"))
    assert found.find("sum += in[i + k]") == found.sample("sum += in[i + k]").line
    second = found.sample("sum += in[i + k]", k=1)
    assert second.offsets[0] == 4 and second.mask == 0xFFFF
    with pytest.raises(KeyError, match="k=8 is past that"):
        found.sample("sum += in[i + k]", k=8)


@pytest.mark.gpu
def test_counters_of_a_gpu_kernel_count_on_the_engine_and_copy_back():
    """A kernel loaded on the GPU, called with CuPy arrays: counted on the CPU engine, the same
    counts as the engine's own, and its output back in the CuPy array."""
    import cupy
    case = next(c for c in CASES if c["name"] == "strided_load_2")
    gpu_module = pmpp.load(source=KERNEL_FILE.read_text(), filename=KERNEL_FILE.name, backend="cupy")
    args = ncu.case_arguments(case, cupy, 5)
    found = pmpp.counters(gpu_module.get_function("StridedLoad"), (GRID,), (BLOCK,), args)
    for name, expected in case["expected"].items():
        assert found[name] == expected, name
    np.testing.assert_array_equal(cupy.asnumpy(args[1]), cupy.asnumpy(args[0])[::2][:N])


def test_a_warp_outside_the_grid_records_nothing_and_says_what_to_do(module):
    case = next(c for c in CASES if c["name"] == "strided_load_1")
    found = pmpp.counters(module.get_function("StridedLoad"), (GRID,), (BLOCK,), ncu.case_arguments(case, np, 0),
                          sample_warp=(GRID + 3, 0))
    assert found["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == WARPS
    with pytest.raises(KeyError, match="sample_warp"):
        found.sample(space="global")
    later = pmpp.counters(module.get_function("StridedLoad"), (GRID,), (BLOCK,), ncu.case_arguments(case, np, 0),
                          sample_warp=(1, 2))
    assert later.sample(space="global", op="ld").offsets[0] == 4 * (BLOCK + 64)


# ---- warps whose lanes go apart: lanes that branch off together, and lanes that each go their own way

APART_SOURCE = r'''
extern "C" __global__ void LaneLoops(const float* in, float* out) {
    unsigned lane = threadIdx.x % 32;
    float sum = 0.0f;
    for (unsigned k = 0; k < lane; ++k) sum += in[k * 32 + lane];  // lane L loads L times
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

extern "C" __global__ void EdgeTile(const float* in, float* out, int width) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    float v = 0.0f;
    if (col < width) v = in[col];  // lanes past the edge skip the load
    out[col] = v + 1.0f;
}

extern "C" __global__ void Bins(const unsigned* in, unsigned* bins) {
    unsigned v = in[blockIdx.x * blockDim.x + threadIdx.x];
    if (v % 3 != 0) atomicAdd(&bins[v % 8], 1u);  // which lanes add depends on the data
}
'''


@pytest.fixture(scope="module")
def apart():
    return pmpp.load(source=APART_SOURCE, filename="apart.cu", backend="cpu")


def sectors(addresses):
    return len({a // 32 for a in addresses})


def test_lanes_that_each_loop_their_own_count_are_put_back_together(apart):
    """Lane L of a warp loads L times: 31 loads per warp, the k-th by lanes k+1..31 (every lane's
    events differ from every other's, more paths than a warp keeps together)."""
    blocks, block = 2, 64
    warps = blocks * block // 32
    found = pmpp.counters(apart.get_function("LaneLoops"), (blocks,), (block,),
                          (np.ones(32 * 32, np.float32), np.zeros(blocks * block, np.float32)))
    loads = [[4 * (k * 32 + lane) for lane in range(k + 1, 32)] for k in range(31)]
    assert found[LD_REQ] == warps * 31
    assert found[LD_SECT] == warps * sum(sectors(load) for load in loads)
    assert found.line("sum += in[k * 32 + lane]")["active_lanes"] == sum(len(load) for load in loads) / 31
    assert found[ST_REQ] == warps and found[ST_SECT] == 4 * warps


def test_lanes_past_an_edge_skip_the_load_then_go_on_together(apart):
    """4 warps, width 80: warps 0 and 1 load with all lanes, warp 2 with 16, warp 3 not at all;
    every warp stores with all its lanes."""
    found = pmpp.counters(apart.get_function("EdgeTile"), (1,), (128,),
                          (np.ones(128, np.float32), np.zeros(128, np.float32), np.int32(80)))
    assert found[LD_REQ] == 3 and found[LD_SECT] == 4 + 4 + 2
    assert found[ST_REQ] == 4 and found[ST_SECT] == 4 * 4
    load = found.line("v = in[col]")
    assert load["active_lanes"] == (32 + 32 + 16) / 3 and load["diverged_warps"] == 1


def test_lanes_that_go_apart_on_their_data_count_their_atomics(apart):
    values = np.random.default_rng(7).integers(0, 1000, 8 * 64).astype(np.uint32)
    found = pmpp.counters(apart.get_function("Bins"), (8,), (64,), (values, np.zeros(8, np.uint32)))
    adding = [w[w % 3 != 0] for w in values.reshape(-1, 32)]
    assert found["engine__atomics.sum"] == sum(len(w) for w in adding)
    assert found[ATOM_REQ] == sum(len(w) > 0 for w in adding)
    assert found["engine__atomic_max_updates_per_address"] == np.bincount(values[values % 3 != 0] % 8).max()


def counted_with_threads(monkeypatch, kernel, grid, block, args, threads):
    """Counters of a launch in a worker of its own that runs blocks on ``threads`` OS threads."""
    from pmpp.backends.cpu import client
    monkeypatch.setenv("PMPP_CPU_THREADS", str(threads))
    with client.dedicated(client.WorkerClient()):
        found = pmpp.counters(kernel, grid, block, args)
    return dict(found), found.lines


@pytest.mark.parametrize("name, grid, block, args", [
    ("LaneLoops", (8,), (64,), (np.ones(32 * 32, np.float32), np.zeros(512, np.float32))),
    ("EdgeTile", (6,), (96,), (np.ones(576, np.float32), np.zeros(576, np.float32), np.int32(500))),
    ("Bins", (16,), (64,), (np.arange(1024, dtype=np.uint32) * 7, np.zeros(8, np.uint32))),
])
def test_counts_do_not_depend_on_how_many_os_threads_run_the_blocks(apart, monkeypatch, name, grid, block, args):
    kernel = apart.get_function(name)
    one = counted_with_threads(monkeypatch, kernel, grid, block, [a.copy() for a in args], 1)
    three = counted_with_threads(monkeypatch, kernel, grid, block, [a.copy() for a in args], 3)
    assert one == three


def test_samples_are_made_when_first_looked_at_and_then_kept(module):
    found = count_case(module, next(c for c in CASES if c["name"] == "half_warp_loop"))
    recorded = len(found.samples)
    assert recorded > 0 and found.samples._made is None
    listed = list(found.samples)
    assert len(listed) == recorded and found.samples == listed
    assert [s.k for s in listed if s.line == listed[0].line and s.site == listed[0].site] == \
        sorted(s.k for s in listed if s.line == listed[0].line and s.site == listed[0].site)


def test_samples_come_as_the_engines_records_and_read_back_lane_by_lane(module):
    """The worker sends the sampled warp's records as the engine's bytes; read back, a stride-2
    shared load has its lanes 8 bytes apart."""
    case = next(c for c in CASES if c["name"] == "shared_stride_2")
    twin = pmpp.counters.counting_module(module)
    twin.get_function(case["kernel"])((GRID,), (BLOCK,), ncu.case_arguments(case, np, 0))
    assert isinstance(twin._impl.last_counts["samples"], bytes)
    sample = count_case(module, case).sample(space="shared", op="ld")
    lanes = [o for o in sample.offsets if o is not None]
    assert len(lanes) == 32 and all(b - a == 8 for a, b in zip(lanes, lanes[1:]))


def test_the_cost_summary_gives_median_worst_and_total():
    from pmpp.profiling.count_cost import summary
    rows = [{"chapter": "c", "variant": v, "plain_s": p, "counted_s": c, "ratio": c / p, "instrumented_ratio": i}
            for v, p, c, i in (("a", 1.0, 2.0, 1.5), ("b", 2.0, 10.0, 4.0), ("d", 1.0, 3.0, 2.0))]
    found = summary(rows)
    assert found["median_ratio"] == 3.0 and found["worst_ratio"] == 5.0 and found["worst_variant"] == "c/b"
    assert found["total_ratio"] == 15.0 / 4.0 and found["within_goal"] == 2
    assert found["median_instrumented_ratio"] == 2.0 and found["instrumented_over_goal"] == 1


def test_a_load_a_later_branch_splits_by_lane_is_still_one_instruction_per_warp():
    """14_warp_shuffle's first warp reads the block's warp sums with one load (lanes 0-7 active);
    lane 0 alone goes on to write the result. A compiler that copies the load into lane 0's path
    and the others' (g++ 13's jump threading) would count two; a GPU issues one LDS."""
    from pmpp import chapters
    from pmpp.profiling.explain import count_variant
    counted = count_variant(chapters.get("reduction"), "14_warp_shuffle")
    blocks = sum(grid[0] * grid[1] * grid[2] for _, grid, _, _ in counted.kernels)
    line = counted.line("warpSum_s[lane]")
    assert counted["smsp__sass_inst_executed_op_shared_ld.sum"] == line["shared_requests"] == blocks
    assert line["active_lanes"] == 8
