"""Elementwise (beyond the book): every variant against NumPy, in float32 and float16, on the CPU
engine with its race and bounds checks, and on a GPU when there is one.

Inputs are fresh each run; a failing test's message carries the seed that reproduces it.
"""
from __future__ import annotations

import numpy as np
import pytest

import pmpp
from pmpp.chapters import elementwise
from pmpp.chapters.elementwise import CHAPTER, DTYPES
from pmpp.runner import array_module as xp_for

PACKED = [CHAPTER.variant(name) for name in ("03_packed", "04_unfused_silu_mul", "05_fused_silu_mul")]






def run_on(chapter, variant, backend, problem, inputs):
    """A variant of a chapter on the backend; on the CPU engine with the race and bounds checks.
    (Also used by test_upsample and test_pooling, with the fixtures above.)"""
    module = pmpp.load(chapter.kernel_path(variant), backend=backend, check=backend == "cpu",
                       defines=dict(variant.defines), name_expressions=tuple(variant.name_expressions))
    return variant.launch(module, problem, inputs)


def assert_matches(chapter, variant, backend, problem, inputs, seed):
    """Run it and judge the output against the chapter's reference."""
    output = run_on(chapter, variant, backend, problem, inputs)
    result = chapter.check(output, chapter.reference(problem, inputs), problem)
    assert result, f"{variant.name}, {chapter.describe(problem)}, seed={seed}: {result.detail}"


def run(variant, backend, problem, inputs):
    return run_on(CHAPTER, variant, backend, problem, inputs)


def problem_for(variant, n, dtype):
    return {**CHAPTER.problems["cpu"], "n": n, "dtype": dtype, **variant.problem}


@pytest.mark.parametrize("offset", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", PACKED, ids=lambda v: v.name)
def test_packed_handles_input_not_aligned_to_16_bytes(variant, dtype, offset, backend, rng, seed):
    """A 16-byte load needs a 16-byte-aligned address; x[offset:] is not: the kernel must fall
    back to one element at a time, not read across the start of the array."""
    n = 1000
    problem = problem_for(variant, n, dtype)
    padded = CHAPTER.make_inputs({**problem, "n": n + offset}, xp_for(backend), rng)
    inputs = {name: (a[offset:] if name == "x" else a[:n]) for name, a in padded.items()}
    result = CHAPTER.check(run(variant, backend, problem, inputs), CHAPTER.reference(problem, inputs), problem)
    assert result, f"{variant.name}, {dtype}, offset={offset}, seed={seed}: {result.detail}"


def test_unfused_variant_writes_silu_to_its_temporary(rng):
    variant = CHAPTER.variant("04_unfused_silu_mul")
    problem = problem_for(variant, 777, "float32")
    inputs = CHAPTER.make_inputs(problem, np, rng)
    run(variant, "cpu", problem, inputs)
    x = inputs["x"].astype(np.float64)
    np.testing.assert_allclose(inputs["t"], x / (1 + np.exp(-x)), rtol=8 * elementwise.U32)


# ------------------------------------------------------------------------------------------
# The chapter definition itself (no kernels)
# ------------------------------------------------------------------------------------------

def test_make_inputs_gives_fresh_values_in_dtype_and_poisoned_output(rng):
    for dtype in DTYPES:
        problem = {"n": 10_000, "dtype": dtype, "op": "silu_mul"}
        a, b = CHAPTER.make_inputs(problem, np, rng), CHAPTER.make_inputs(problem, np, rng)
        assert a["x"].dtype == np.dtype(dtype) and a["x"].shape == (10_000,)
        assert -4 <= a["x"].min() and a["x"].max() <= 4 and not np.array_equal(a["x"], b["x"])
        assert np.isnan(a["z"]).all() and np.isnan(a["t"]).all()


def test_mul_check_is_bit_exact_and_rejects_nan():
    problem = {"n": 3, "dtype": "float32", "op": "mul"}
    ref = np.array([1.0, -0.0, 3.0], np.float32)
    assert CHAPTER.check(ref.copy(), ref, problem)
    assert not CHAPTER.check(np.array([1.0, 0.0, 3.0], np.float32), ref, problem)      # +0 vs -0
    assert not CHAPTER.check(np.nextafter(ref, np.float32(9)), ref, problem)
    assert not CHAPTER.check(np.array([1.0, -0.0, np.nan], np.float32), ref, problem)


def test_float16_product_is_correctly_rounded_by_numpy():
    """The reason the multiply check can be exact: NumPy's float16 x * y equals the exact product
    (representable in float64) rounded once to float16, as __hmul and PyTorch compute it."""
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(100_000).astype(np.float16) for _ in range(2))
    exact = x.astype(np.float64) * y.astype(np.float64)
    assert np.array_equal(x * y, exact.astype(np.float16))


def test_silu_mul_tolerance_accepts_float_rounding_and_rejects_one_half_ulp_too_many():
    rel32, _ = elementwise.silu_mul_tolerance("float32")
    rel16, abs16 = elementwise.silu_mul_tolerance("float16")
    assert rel32 == 16 * 2.0 ** -24 and rel16 == 2 * 2.0 ** -11 + 16 * 2.0 ** -24 and abs16 == 2.0 ** -24
    problem = {"n": 1, "dtype": "float16", "op": "silu_mul"}
    ref = np.array([1.0 + 2.0 ** -11])                     # halfway between two halves
    assert CHAPTER.check(np.array([1.0], np.float16), ref, problem)
    assert not CHAPTER.check(np.array([1.0 + 2.0 ** -9], np.float16), ref, problem)
    assert not CHAPTER.check(np.array([np.nan], np.float16), ref, problem)


@pytest.mark.parametrize("variant", CHAPTER.variants, ids=lambda v: v.name)
def test_model_counts_the_arrays_each_algorithm_moves(variant):
    for dtype, size in (("float32", 4), ("float16", 2)):
        problem = {**CHAPTER.problems["gpu"], "dtype": dtype, **variant.problem}
        model = variant.model(problem)
        arrays = 5 if variant.name.startswith("04") else 3
        assert model.bytes == arrays * size * problem["n"]
    mul = CHAPTER.variant("01_naive").model(CHAPTER.problems["gpu"])
    assert mul.intensity == pytest.approx(1 / 12)


def test_grid_size_fills_the_gpu_waves_times_at_most():
    class FakeModule:
        device_sm_count = 132
    assert elementwise.grid_size(FakeModule, 10, 256, 32) == 1
    assert elementwise.grid_size(FakeModule, 2 ** 26, 256, 32) == 132 * 8 * 32
    assert elementwise.grid_size(FakeModule, 2 ** 24, 256, 64) == 2 ** 16       # one pack per thread


def test_gpu_problems_cover_both_dtypes_and_both_operations():
    seen = {(p["dtype"], p["op"]) for _, s in CHAPTER.bench_sets() for p in s.problems}
    assert seen == {(d, o) for d in DTYPES for o in elementwise.OPS}
