"""UpsampleNearest2D (beyond the book): every variant against NumPy, forward and backward, in
float32 and float16, on the CPU engine with its race and bounds checks, and on a GPU when there
is one.

Inputs are fresh each run; a failing test's message carries the seed that reproduces it.
"""
from __future__ import annotations

import numpy as np
import pytest

from pmpp.runner import array_module as xp_for
from test_elementwise import assert_matches, run_on
from pmpp.chapters import upsample
from pmpp.chapters.upsample import CHAPTER
from pmpp.chapters.elementwise import DTYPES

GENERIC = [v for v in CHAPTER.variants if not v.only_2x]
WIDE = [v for v in CHAPTER.variants if v.name.endswith(("_wide", "_coalesced"))]   # with a fallback


def run(variant, backend, problem, inputs):
    return run_on(CHAPTER, variant, backend, problem, inputs)


def problem_for(variant, shape, dtype, scale=2):
    return {**CHAPTER.problems["cpu"], "shape": shape, "dtype": dtype, "scale": scale, **variant.problem}


def run_and_check(variant, backend, problem, inputs, seed):
    assert_matches(CHAPTER, variant, backend, problem, inputs, seed)


@pytest.mark.parametrize("scale", [1, 3, 4])
@pytest.mark.parametrize("variant", GENERIC, ids=lambda v: v.name)
def test_generic_kernels_handle_other_integer_scales(variant, scale, backend, rng, seed):
    problem = problem_for(variant, (2, 3, 5, 7), "float32", scale)
    run_and_check(variant, backend, problem, CHAPTER.make_inputs(problem, xp_for(backend), rng), seed)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", WIDE, ids=lambda v: v.name)
def test_wide_kernels_fall_back_when_arrays_are_not_16_byte_aligned(variant, dtype, backend, rng, seed):
    """W = 16 allows the 16-byte path; a source starting one element into its buffer does not."""
    problem = problem_for(variant, (1, 2, 3, 16), dtype)
    inputs = CHAPTER.make_inputs(problem, xp_for(backend), rng)
    name = "x" if problem["direction"] == "forward" else "dy"
    flat = xp_for(backend).concatenate([inputs[name].reshape(-1)[:1], inputs[name].reshape(-1)])
    inputs[name] = flat[1:].reshape(inputs[name].shape)          # same values, 2 or 4 bytes off
    run_and_check(variant, backend, problem, inputs, seed)


@pytest.mark.parametrize("variant", [v for v in CHAPTER.variants if v.only_2x and v not in WIDE],
                         ids=lambda v: v.name)
def test_pack2_kernels_refuse_a_misaligned_array_with_a_clear_error(variant, backend, rng):
    """02 stores Pack2s into y and 05 loads them from dy: one element off, they would fault on a
    GPU (misaligned address), so the launcher refuses and says what to pass instead."""
    problem = problem_for(variant, (1, 2, 3, 16), "float32")
    inputs = CHAPTER.make_inputs(problem, xp_for(backend), rng)
    name = "y" if problem["direction"] == "forward" else "dy"
    flat = xp_for(backend).concatenate([inputs[name].reshape(-1)[:1], inputs[name].reshape(-1)])
    inputs[name] = flat[1:].reshape(inputs[name].shape)
    with pytest.raises(ValueError, match=f"{name} must be 8-byte aligned.*pass a copy"):
        run(variant, backend, problem, inputs)


def test_only_2x_variants_say_they_need_scale_2():
    problem = {**CHAPTER.problems["cpu"], "scale": 3}
    assert {v.name for v in CHAPTER.variants if v.supports(problem)} == {v.name for v in GENERIC}
    assert all(v.supports(CHAPTER.problems["cpu"]) for v in CHAPTER.variants)


# ------------------------------------------------------------------------------------------
# The chapter definition itself (no kernels)
# ------------------------------------------------------------------------------------------

def test_make_inputs_gives_the_direction_its_arrays_poisoned_output(rng):
    fwd = CHAPTER.make_inputs({**CHAPTER.problems["cpu"], "shape": (1, 2, 3, 4)}, np, rng)
    assert fwd["x"].shape == (1, 2, 3, 4) and fwd["y"].shape == (1, 2, 6, 8) and np.isnan(fwd["y"]).all()
    bwd = CHAPTER.make_inputs({**CHAPTER.problems["cpu"], "shape": (1, 2, 3, 4), "direction": "backward",
                               "dtype": "float16"}, np, rng)
    assert bwd["dy"].shape == (1, 2, 6, 8) and bwd["dx"].shape == (1, 2, 3, 4)
    assert bwd["dy"].dtype == np.float16 and np.isnan(bwd["dx"]).all()


def test_forward_check_is_bit_exact():
    problem = {**CHAPTER.problems["cpu"], "shape": (1, 1, 1, 2)}
    x = np.array([[[[0.5, -0.0]]]], np.float32)
    ref = CHAPTER.reference(problem, {"x": x})
    assert ref.shape == (1, 1, 2, 4) and CHAPTER.check(ref.copy(), ref, problem)
    bad = ref.copy()
    bad[0, 0, 1, 3] = 0.0                                  # +0 where -0 was copied
    assert not CHAPTER.check(bad, ref, problem)


def test_backward_tolerance_is_gamma3_of_abs_sums_plus_one_half_rounding():
    problem = {**CHAPTER.problems["cpu"], "direction": "backward", "shape": (1, 1, 1, 1)}
    gamma, rounding, tiny = upsample.backward_tolerance(problem)
    assert gamma == pytest.approx(3 * 2.0 ** -24) and rounding == 0 and tiny == 0
    assert upsample.backward_tolerance({**problem, "dtype": "float16"})[1:] == (2.0 ** -11, 2.0 ** -25)
    dy = np.array([[[[1.0, 2.0 ** -24], [2.0 ** -24, 2.0 ** -24]]]], np.float32)
    ref = CHAPTER.reference(problem, {"dy": dy})
    assert ref.abs_sums[0, 0, 0, 0] == 1 + 3 * 2.0 ** -24
    assert CHAPTER.check(np.array([[[[1.0]]]], np.float32), ref, problem)   # float's own rounding
    assert not CHAPTER.check(np.array([[[[1.001]]]], np.float32), ref, problem)
    assert not CHAPTER.check(np.array([[[[np.nan]]]], np.float32), ref, problem)


def test_model_moves_five_times_the_small_side():
    for variant in CHAPTER.variants:
        problem = {**CHAPTER.problems["gpu"], **variant.problem}
        model = variant.model(problem)
        assert model.bytes == 5 * 4 * 16 * 32 * 80 * 80
        assert model.flops == (3 * 16 * 32 * 80 * 80 if problem["direction"] == "backward" else 0)


def test_gpu_problems_cover_both_directions_and_dtypes():
    seen = {(p["dtype"], p["direction"]) for _, s in CHAPTER.bench_sets() for p in s.problems}
    assert seen == {(d, w) for d in DTYPES for w in ("forward", "backward")}
