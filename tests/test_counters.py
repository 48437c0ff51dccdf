"""pmpp.counters: Nsight Compute's counters from the CPU engine, on kernels counted by hand."""
import numpy as np
import pytest

import pmpp
from pmpp import ncu

from counter_cases import BLOCK, CASES, GRID, KERNEL_FILE, N, WARPS


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
