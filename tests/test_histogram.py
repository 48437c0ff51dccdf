"""Chapter 9 (histogram) and the atomics lessons: every variant against numpy.bincount (exact counts)
or the float64 dot product (exact by construction), on the CPU engine with its race and bounds
checks, and on a GPU when there is one.

Inputs are fresh each run; a failing test's message carries the seed that reproduces it.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import pmpp
from pmpp.chapters import histogram
from pmpp.chapters.histogram import CHAPTER
from pmpp.runner import array_module as xp_for


DOT_SIZES = (0, 1, 31, 1000, 2048, 65_537)

HISTOGRAM_VARIANTS = [v for v in CHAPTER.variants if histogram.binnings(v) and not v.racy]
DOT_VARIANTS = [CHAPTER.variant(name) for name in histogram.DOT_VARIANTS]
VECTORIZED = [v for v in HISTOGRAM_VARIANTS if "UNROLL" in v.defines]      # 16-byte loads
BINNED = [histogram.variant_for(v, bins=b) for v in HISTOGRAM_VARIANTS for b in histogram.binnings(v)]
FAST = CHAPTER.variant("14_dot_fast_atomic_add")


def binned_id(variant):
    return f"{variant.name}-{variant.problem['bins']}bins"


# ------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------

def load(variant, backend, *, check=None):
    """The variant's module; on the CPU engine with the race and bounds checks unless told otherwise."""
    check = (backend == "cpu") if check is None else check
    options = {"check": True} if check else {}
    return pmpp.load(CHAPTER.kernel_path(variant), defines=dict(variant.defines), backend=backend, **options)


def run_and_check(variant, backend, problem, inputs, *, check=None):
    output = variant.launch(load(variant, backend, check=check), problem, inputs)
    return CHAPTER.check(output, CHAPTER.reference(problem, inputs), problem)


def problem_for(variant, n, **overrides):
    return {**CHAPTER.problems["cpu"], **variant.problem, "n": n, **overrides}


# ------------------------------------------------------------------------------------------
# Every histogram variant, both binnings, every input (every size: tests/test_chapters.py)
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", histogram.INPUTS)
@pytest.mark.parametrize("variant", BINNED, ids=binned_id)
def test_every_input_distribution_is_counted_exactly(variant, kind, backend, rng, seed):
    problem = problem_for(variant, 4099, input=kind)
    inputs = CHAPTER.make_inputs(problem, xp_for(backend), rng)
    result = run_and_check(variant, backend, problem, inputs)
    assert result, f"{binned_id(variant)} on {kind}, seed={seed}: {result.detail}"


@pytest.mark.parametrize("offset", [1, 7, 15])
@pytest.mark.parametrize("variant", VECTORIZED, ids=lambda v: v.name)
def test_vectorized_handles_input_not_aligned_to_16_bytes(variant, offset, backend, rng, seed):
    """uint4 loads need a 16-byte-aligned address: data[offset:] starts offset bytes past one."""
    problem = problem_for(variant, 1000)
    base = CHAPTER.make_inputs({**problem, "n": 1000 + offset}, xp_for(backend), rng)
    inputs = {"data": base["data"][offset:], "histo": base["histo"]}
    result = run_and_check(variant, backend, problem, inputs)
    assert result, f"{variant.name}, offset={offset}, seed={seed}: {result.detail}"


def test_output_is_zeroed_by_the_launch_not_assumed_zero(rng):
    """make_inputs poisons the bins; a launch that forgot to zero them would add to 0xFFFFFFFF."""
    variant = CHAPTER.variant("04_private_shared")
    problem = problem_for(variant, 1000)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    assert (inputs["histo"] == histogram.POISON).all()
    for attempt in range(2):                      # and twice in a row on the same buffers
        assert run_and_check(variant, "cpu", problem, inputs), f"launch {attempt + 1}"


def test_module_built_for_other_bins_is_refused(rng):
    variant = CHAPTER.variant("01_basic")                     # built with NUM_BINS=7
    problem = problem_for(variant, 100, bins=256)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    with pytest.raises(ValueError, match="NUM_BINS=7"):
        variant.launch(load(variant, "cpu", check=False), problem, inputs)


# ------------------------------------------------------------------------------------------
# The race without atomics
# ------------------------------------------------------------------------------------------

def test_shared_bins_without_atomics_raise_race_error_under_check(rng):
    variant = CHAPTER.variant("03_private_shared_racy")
    problem = problem_for(variant, 1000)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    with pytest.raises(pmpp.RaceError) as err:
        variant.launch(load(variant, "cpu", check=True), problem, inputs)
    # The fix first: two threads' histo_s[bin]++ is an update race, which only an atomic fixes.
    message = str(err.value)
    assert re.search(r"thread \(\d+,0,0\) updated __shared__ 'histo_s'\[\d+\] \(read, then write\)", message), message
    assert message.index("make the update atomic") < message.index("__syncthreads()") and len(message) < 520


@pytest.mark.parametrize("barrier", [0, 1], ids=["before counting", "before reading out"])
def test_a_missing_barrier_between_atomic_and_plain_accesses_is_a_race_that_names_it(barrier, rng, tmp_path):
    """04_private_shared zeroes histo_s, counts into it with atomicAdd, reads it out: without one
    of its two __syncthreads() a thread's plain store or load meets another's atomic."""
    from pmpp.runner import load_variant
    variant = CHAPTER.variant("04_private_shared")
    text = (pmpp.kernels_dir() / "histogram" / "04_private_shared.cu").read_text()
    assert text.count("__syncthreads();") == 2
    cut = [m.start() for m in re.finditer(r"__syncthreads\(\);", text)][barrier]
    (tmp_path / "04_private_shared.cu").write_text(text[:cut] + text[cut:].replace("__syncthreads();", ";", 1))
    problem = problem_for(variant, 4099)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    with pytest.raises(pmpp.RaceError) as err:
        variant.launch(load_variant(CHAPTER, variant, backend="cpu", check=True, path=tmp_path / "04_private_shared.cu"),
                       problem, inputs)
    message = str(err.value)
    assert "__shared__ 'histo_s'" in message and "atomic update" in message and "plain" in message, message
    assert message.index("__syncthreads() missing") < message.index("04_private_shared.cu"), "the fix first"


def test_shared_bins_without_atomics_count_right_on_cpu_engine_where_threads_take_turns(rng):
    """Not a GPU property: the engine runs a block's threads one after another between barriers,
    so no increment is ever interrupted. Only the race check shows the bug here."""
    variant = CHAPTER.variant("03_private_shared_racy")
    problem = problem_for(variant, 4099)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    assert run_and_check(variant, "cpu", problem, inputs, check=False)


# ------------------------------------------------------------------------------------------
# The dot products: atomics on __half, __half2 and float
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", DOT_SIZES + (histogram.DOT_N,))
@pytest.mark.parametrize("variant", DOT_VARIANTS, ids=lambda v: v.name)
def test_dot_product_equals_float64_reference_exactly(variant, n, backend, rng, seed):
    if n == histogram.DOT_N and backend == "cpu" and variant.name != "13_dot_half_atomic":
        pytest.skip("2^22 on the CPU engine for one variant only")
    problem = problem_for(variant, n)
    inputs = CHAPTER.make_inputs(problem, xp_for(backend), rng)
    result = run_and_check(variant, backend, problem, inputs)
    assert result, f"{variant.name}, n={n}, seed={seed}: {result.detail}"


def test_fast_atomic_add_puts_an_odd_index_in_the_high_lane(backend, rng, seed):
    """target 1 is not 4-byte aligned: the __half2 is [0, 1] with the value in .y and 0 in .x."""
    problem = problem_for(FAST, 1000, target=1)
    inputs = CHAPTER.make_inputs(problem, xp_for(backend), rng)
    result = run_and_check(FAST, backend, problem, inputs)
    assert result, f"seed={seed}: {result.detail}"


def test_fast_atomic_add_stays_inside_an_array_of_one_half(rng):
    """No partner lane inside the array: the scalar atomic. A __half2 would read out[1], which the
    bounds check reports."""
    problem = problem_for(FAST, 1000)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    out = np.zeros(1, dtype=np.float16)
    k = load(FAST, "cpu").get_function("dot_fast_atomic_add_kernel")
    k(4, histogram.BLOCK_DIM, (inputs["a"], inputs["b"], np.uint32(1000), out, np.uint32(0), np.uint32(1)))
    assert float(out[0]) == float(CHAPTER.reference(problem, inputs))


def test_dot_inputs_are_sparse_plus_minus_one_products(rng):
    problem = {"op": "dot", "n": 2 ** 20}
    inputs = histogram.make_dot_inputs(problem, np, rng)
    products = inputs["a"].astype(np.float64) * inputs["b"].astype(np.float64)
    assert inputs["a"].dtype == np.float16 and set(np.unique(products)) <= {-1.0, 0.0, 1.0}
    nonzero = np.count_nonzero(products)
    assert abs(nonzero - histogram.DOT_ATOMICS) < 8 * histogram.DOT_ATOMICS ** 0.5


def test_dot_exactness_bound_is_negligible_and_zero_for_small_n():
    assert histogram.dot_inexact_probability({"n": 2048}) == 0.0
    for n in (65_537, histogram.DOT_N, 2 ** 28):
        assert histogram.dot_inexact_probability({"n": n}) < 1e-11


# ------------------------------------------------------------------------------------------
# Inputs, reference, check
# ------------------------------------------------------------------------------------------

def test_text_is_english_with_e_the_commonest_letter(rng):
    x = histogram.make_bytes("text", 2 ** 20, rng)
    counts = np.bincount(x, minlength=256)
    letters = counts[ord("a"):ord("z") + 1]
    assert chr(ord("a") + int(np.argmax(letters))) == "e"
    assert 0.6 < letters.sum() / x.size < 0.8 and counts[ord(" ")] / x.size > 0.1


def test_text_is_shuffled_fresh_each_time(rng):
    assert not np.array_equal(histogram.make_bytes("text", 10_000, rng), histogram.make_bytes("text", 10_000, rng))


def test_skewed_input_has_one_dominant_byte(rng):
    x = histogram.make_bytes("skewed", 100_000, rng)
    share = np.mean(x == histogram.DOMINANT_BYTE)
    assert abs(share - 0.9 - 0.1 / 256) < 0.01


def test_uniform_input_uses_every_byte_value(rng):
    assert np.unique(histogram.make_bytes("uniform", 2 ** 16, rng)).size == 256


def test_letter_reference_folds_byte_counts_into_groups_of_four():
    text = np.frombuffer(b"abcd efgh ijkl mnop qrst uvwx yz{| ABC", np.uint8)
    ref = CHAPTER.reference({"n": text.size, "bins": 7, "input": "text"}, {"data": text})
    assert ref.tolist() == [4, 4, 4, 4, 4, 4, 2]


def test_check_is_exact_and_rejects_wrong_shape():
    problem = {"n": 10, "bins": 7, "input": "text"}
    ref = np.arange(7)
    assert CHAPTER.check(np.arange(7, dtype=np.uint32), ref, problem)
    off_by_one = np.arange(7, dtype=np.uint32)
    off_by_one[3] += 1
    assert not CHAPTER.check(off_by_one, ref, problem)
    assert not CHAPTER.check(np.arange(8, dtype=np.uint32), ref, problem)


def test_unknown_input_kind_is_a_clear_error(rng):
    with pytest.raises(ValueError, match="uniform"):
        histogram.make_bytes("zipf", 10, rng)


# ------------------------------------------------------------------------------------------
# The models
# ------------------------------------------------------------------------------------------

def test_atomics_model_reproduces_the_books_numbers():
    model = histogram.AtomicsModel()
    assert model.dram_bytes_per_s == 128e9 and model.elements_per_s() == 32e9
    assert model.ns_per_atomic == 400 and model.atomics_per_s() == 2.5e6
    assert model.atomics_per_s(7) == 17.5e6


def test_interleaved_partition_reads_one_sector_per_warp_load():
    assert histogram.sectors_per_request("interleaved") == 1
    assert histogram.sectors_per_request("contiguous", 32) == 32
    assert histogram.sectors_per_request("contiguous", 4) == 4


def test_collisions_grow_from_uniform_to_text_to_skewed(rng):
    per_input = [histogram.warp_collisions(histogram.make_bytes(k, 2 ** 16, rng), 7) for k in histogram.INPUTS]
    assert 1 <= per_input[0] < per_input[1] < per_input[2] <= 32


def test_per_lane_copies_have_no_bank_conflicts(rng):
    x = histogram.make_bytes("uniform", 2 ** 16, rng)
    assert histogram.bank_conflicts(x, per_lane=True) == 1.0
    assert histogram.bank_conflicts(x) > 2.5


@pytest.mark.parametrize("variant", HISTOGRAM_VARIANTS, ids=lambda v: v.name)
def test_histogram_model_is_about_one_operation_per_byte(variant):
    model = variant.model({**CHAPTER.problems["gpu"], **variant.problem})
    assert model.bytes >= CHAPTER.problems["gpu"]["n"] and 0.8 < model.intensity <= 1.0


def test_vector_grid_fills_each_sm_but_no_more_than_the_work():
    class Module:
        defines = dict(CHAPTER.variant("11_per_lane").defines)
        device_sm_count = 132
    assert histogram.vector_grid(Module, 2 ** 28) == 132 * histogram.BLOCKS_PER_SM
    assert histogram.vector_grid(Module, 1) == 1


# ------------------------------------------------------------------------------------------
# The chapter definition itself
# ------------------------------------------------------------------------------------------

def test_only_the_shared_bins_without_atomics_are_marked_racy():
    assert [v.name for v in CHAPTER.variants if v.racy] == ["03_private_shared_racy"]


def test_variant_for_rebuilds_with_other_bins_and_refuses_what_a_kernel_cannot_count():
    moved = histogram.variant_for(CHAPTER.variant("01_basic"), bins=256, input="skewed")
    assert moved.defines["NUM_BINS"] == 256 and moved.problem == {"bins": 256, "input": "skewed"}
    with pytest.raises(ValueError, match="12_register_counts"):
        histogram.variant_for(CHAPTER.variant("12_register_counts"), bins=256)


def test_describe_names_the_input_and_the_bins():
    assert CHAPTER.describe(CHAPTER.problems["gpu"]) == "n=268435456 uniform random bytes, 256 bins"
    dot = {**CHAPTER.problems["gpu"], **FAST.problem}
    assert CHAPTER.describe(dot) == "dot of two float16 vectors, n=4194304, 65536 atomicAdds on one address"
