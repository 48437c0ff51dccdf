"""Chapter 7 (convolution): every variant against the float64 NumPy reference, on the CPU engine
(with its race and bounds checks) and on a GPU when there is one; the book's models.

Inputs are fresh each run; a failing test's message carries the seed that reproduces it.
"""
from __future__ import annotations

import types
from dataclasses import replace

import numpy as np
import pytest

import pmpp
from pmpp.chapters import convolution
from pmpp.chapters.convolution import CHAPTER
from pmpp.runner import array_module as xp_for


CORRECT_VARIANTS = [v for v in CHAPTER.variants if not v.racy]
AS_PRINTED = CHAPTER.variant("04_cached_halo_as_printed")
FIXED = CHAPTER.variant("05_cached_halo")
VECTORIZED = [CHAPTER.variant("07_vectorized"), CHAPTER.variant("08_separable")]
SEPARABLE = CHAPTER.variant("08_separable")
# (h, w): wider than tall and taller than wide, widths that are and are not multiples of 4 (the
# float4 and the scalar paths of 07/08), a one-row image, and one narrower than the filter.
SHAPES = [(37, 130), (130, 37), (1, 300), (70, 3), (64, 256)]
RADII = [0, 1, 4, 5]                                  # 1 x 1 to 11 x 11; 5 widens 07's halo to 8


# ------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------





def with_radius(variant, r):
    """The variant compiled for filter radius r (01 takes r at run time and needs no define)."""
    if "FILTER_RADIUS" not in variant.defines:
        return variant
    return replace(variant, defines={**variant.defines, "FILTER_RADIUS": r})


def load(variant, backend, *, check=None):
    """The variant's module (pmpp.load caches it). On the CPU engine the race and bounds checks
    are on unless asked otherwise."""
    check = (backend == "cpu") if check is None else check
    return pmpp.load(CHAPTER.kernel_path(variant), defines=dict(variant.defines), backend=backend, check=check)


def problem_for(variant, n=None, *, h=None, w=None, r=convolution.FILTER_RADIUS):
    problem = {**CHAPTER.problems["cpu"], "r": r, **variant.problem}
    if n is not None:
        problem["n"] = n
    if h is not None:
        problem.update(h=h, w=w)
    return problem


def run(variant, backend, problem, inputs, *, check=None):
    return variant.launch(load(variant, backend, check=check), problem, inputs)


def assert_matches_reference(variant, backend, problem, inputs, seed):
    output = run(variant, backend, problem, inputs)
    result = CHAPTER.check(output, CHAPTER.reference(problem, inputs), problem)
    assert result, f"{variant.name}, {CHAPTER.describe(problem)}, seed={seed}: {result.detail}"


def assert_exact(variant, backend, problem, inputs, seed):
    got = pmpp.asnumpy(run(variant, backend, problem, inputs))
    expected = CHAPTER.reference(problem, inputs).value
    wrong = np.argwhere(got != expected)
    assert wrong.size == 0, (f"{variant.name}, {CHAPTER.describe(problem)}, seed={seed}: {len(wrong)} elements "
                             f"differ, first at {tuple(wrong[0])}: got {got[tuple(wrong[0])]!r}, "
                             f"expected {expected[tuple(wrong[0])]!r}")


# ------------------------------------------------------------------------------------------
# Every variant, every size
# (Random inputs at every size, every variant: the chapter contract, tests/test_chapters.py.)
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", CHAPTER.test_sizes)
@pytest.mark.parametrize("variant", CORRECT_VARIANTS, ids=lambda v: v.name)
def test_integer_valued_inputs_give_exact_results(variant, n, backend, rng, seed):
    """Integer values keep every float32 product and sum exact, whatever the order: any difference
    from the reference is a wrong tap, a wrong halo or ghost cell, or an element not written."""
    problem = problem_for(variant, n)
    inputs = convolution.make_integer_inputs(problem, xp_for(backend), rng)
    assert_exact(variant, backend, problem, inputs, seed)


@pytest.mark.parametrize("hw", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("variant", CORRECT_VARIANTS, ids=lambda v: v.name)
def test_variant_handles_non_square_images(variant, hw, backend, rng, seed):
    problem = problem_for(variant, h=hw[0], w=hw[1])
    inputs = convolution.make_integer_inputs(problem, xp_for(backend), rng)
    assert_exact(variant, backend, problem, inputs, seed)


@pytest.mark.parametrize("r", RADII)
@pytest.mark.parametrize("variant", CORRECT_VARIANTS, ids=lambda v: v.name)
def test_variant_handles_other_filter_radii(variant, r, backend, rng, seed):
    variant = with_radius(variant, r)
    problem = problem_for(variant, h=45, w=68, r=r)
    inputs = convolution.make_integer_inputs(problem, xp_for(backend), rng)
    assert_exact(variant, backend, problem, inputs, seed)


@pytest.mark.parametrize("offset", [1, 2, 3])
@pytest.mark.parametrize("variant", VECTORIZED, ids=lambda v: v.name)
def test_vectorized_falls_back_to_scalar_on_arrays_not_aligned_to_16_bytes(variant, offset, backend, rng, seed):
    """float4 accesses need 16-byte alignment; a view that starts `offset` floats into a buffer
    does not have it, although its width (68) is a multiple of 4. (The CPU engine copies every
    array to aligned memory, so there this checks views only; the scalar path itself is also
    taken for widths that are not multiples of 4, which every size test covers.)"""
    problem = problem_for(variant, h=20, w=68)
    xp = xp_for(backend)
    inputs = convolution.make_integer_inputs(problem, xp, rng)
    for key in ("x", "out"):
        buffer = xp.full(inputs[key].size + offset, np.nan, dtype=np.float32)
        view = buffer[offset:].reshape(inputs[key].shape)
        view[...] = inputs[key]
        inputs[key] = view
    assert_exact(variant, backend, problem, inputs, seed)


# ------------------------------------------------------------------------------------------
# Behaviours of particular variants
# ------------------------------------------------------------------------------------------

def test_cached_halo_as_printed_raises_out_of_bounds_error_under_check(rng):
    problem = problem_for(AS_PRINTED, 64)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    with pytest.raises(pmpp.OutOfBoundsError, match="N_s"):
        run(AS_PRINTED, "cpu", problem, inputs, check=True)


def test_cached_halo_as_printed_gives_wrong_results(rng):
    problem = problem_for(AS_PRINTED, 64)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    output = run(AS_PRINTED, "cpu", problem, inputs, check=False)
    assert not CHAPTER.check(output, CHAPTER.reference(problem, inputs), problem)


def test_cached_halo_as_printed_is_never_launched_on_a_gpu():
    """Reading past a block's shared memory on a GPU ends the CUDA context; pmpp run and pmpp
    bench skip the variant there, and its launch refuses a GPU module."""
    problem = problem_for(AS_PRINTED, 64)
    assert AS_PRINTED.supports(problem, "cpu") and not AS_PRINTED.supports(problem, "cupy")
    gpu_module = types.SimpleNamespace(backend="cupy", filename=CHAPTER.kernel_path(AS_PRINTED), defines={})
    with pytest.raises(RuntimeError, match="CPU engine"):
        AS_PRINTED.launch(gpu_module, problem, {})


def test_corrected_cached_halo_passes_bounds_and_race_checks(rng, seed):
    problem = problem_for(FIXED, 64)
    inputs = convolution.make_integer_inputs(problem, np, rng)
    assert_exact(FIXED, "cpu", problem, inputs, seed)


def test_separable_variant_needs_a_separable_problem(rng):
    problem = {**problem_for(SEPARABLE, 40), "filter": "general"}
    inputs = CHAPTER.make_inputs(problem, np, rng)
    with pytest.raises(ValueError, match="separable"):
        run(SEPARABLE, "cpu", problem, inputs)


def test_module_compiled_for_another_radius_is_a_clear_error(rng):
    variant = CHAPTER.variant("07_vectorized")
    problem = problem_for(variant, 40, r=3)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    with pytest.raises(ValueError, match="FILTER_RADIUS"):
        run(variant, "cpu", problem, inputs)


def test_library_routines_match_reference(backend, rng, seed):
    """The bar to beat must compute the same thing: scipy / NumPy on the CPU engine, cupyx and
    cuDNN (through PyTorch, when installed) on a GPU."""
    problem = {**CHAPTER.problems["cpu"], "n": 101}
    routines = [lib for lib in CHAPTER.library if lib.available(backend)]
    assert routines
    for lib in routines:
        inputs = CHAPTER.make_inputs(problem, xp_for(backend), rng)
        output, ref = lib.run(problem, inputs), CHAPTER.reference(problem, inputs)
        if lib.name.startswith("torch"):
            # cuDNN picks its algorithm (implicit GEMM, FFT, Winograd); the transform-based ones
            # are not bound by a direct sum's elementwise error, so hold it to 1e-5 of the largest
            # magnitude - loose for float32, but ~10x too tight for a TF32 result.
            error = np.abs(pmpp.asnumpy(output).astype(np.float64) - ref.value).max()
            assert error <= 1e-5 * ref.magnitude.max(), f"{lib.name}, seed={seed}: error {error:.3g}"
        else:
            result = CHAPTER.check(output, ref, problem)
            assert result, f"{lib.name}, seed={seed}: {result.detail}"


# ------------------------------------------------------------------------------------------
# The chapter definition itself (no kernels)
# ------------------------------------------------------------------------------------------

def test_only_the_cached_halo_listing_as_printed_is_marked_racy():
    assert [v.name for v in CHAPTER.variants if v.racy] == ["04_cached_halo_as_printed"]


def test_make_inputs_gives_fresh_float32_and_a_nan_poisoned_output(rng):
    problem = {"h": 30, "w": 50, "r": 2}
    a, b = CHAPTER.make_inputs(problem, np, rng), CHAPTER.make_inputs(problem, np, rng)
    assert a["x"].dtype == a["f"].dtype == a["out"].dtype == np.float32
    assert a["x"].shape == a["out"].shape == (30, 50) and a["f"].shape == (5, 5)
    assert a["x"].min() >= -1 and a["x"].max() < 1
    assert np.isnan(a["out"]).all()
    assert not np.array_equal(a["x"], b["x"])


def test_separable_problem_filter_is_the_outer_product_of_its_factors(rng):
    inputs = CHAPTER.make_inputs({"n": 10, "r": 3, "filter": "separable"}, np, rng)
    assert inputs["f_y"].shape == inputs["f_x"].shape == (7,)
    np.testing.assert_array_equal(inputs["f"], np.outer(inputs["f_y"], inputs["f_x"]).astype(np.float32))


def test_reference_matches_scipy_ndimage_correlate(rng):
    ndimage = pytest.importorskip("scipy.ndimage")
    problem = {"h": 23, "w": 41, "r": 3}
    inputs = CHAPTER.make_inputs(problem, np, rng)
    ref = CHAPTER.reference(problem, inputs)
    expected = ndimage.correlate(inputs["x"].astype(np.float64), inputs["f"].astype(np.float64),
                                 mode="constant", cval=0.0)
    np.testing.assert_allclose(ref.value, expected, rtol=0, atol=1e-12)
    expected_magnitude = ndimage.correlate(np.abs(inputs["x"].astype(np.float64)),
                                           np.abs(inputs["f"].astype(np.float64)), mode="constant")
    np.testing.assert_allclose(ref.magnitude, expected_magnitude, rtol=0, atol=1e-12)


def test_reference_is_a_correlation_not_a_convolution():
    """A single 1 at (2, 2) correlated with F puts F flipped around it (scipy's convention)."""
    x = np.zeros((5, 5), np.float32)
    x[2, 2] = 1
    f = np.arange(9, dtype=np.float32).reshape(3, 3)
    ref = CHAPTER.reference({"n": 5, "r": 1}, {"x": x, "f": f})
    np.testing.assert_array_equal(ref.value[1:4, 1:4], f[::-1, ::-1])


def test_check_rejects_nan_a_wrong_element_and_a_wrong_shape(rng):
    problem = {"h": 16, "w": 16, "r": 2}
    inputs = CHAPTER.make_inputs(problem, np, rng)
    ref = CHAPTER.reference(problem, inputs)
    good = ref.value.astype(np.float32)
    assert CHAPTER.check(good, ref, problem)
    for bad in (np.where(np.arange(256).reshape(16, 16) == 77, np.nan, good),
                good + np.where(np.arange(256).reshape(16, 16) == 77, np.float32(1e-3), 0)):
        result = CHAPTER.check(bad.astype(np.float32), ref, problem)
        assert not result and "1 of 256" in result.detail and "[4, 13]" in result.detail
    assert not CHAPTER.check(good[:, :15], ref, problem)


def test_tolerance_covers_float32_sums_in_any_order(rng):
    """Sanity check of the bound on sums we can compute here: each output of a random 11 x 11
    problem summed in float32 taps-first, in reverse and with every product rounded."""
    problem = {"h": 30, "w": 30, "r": 5}
    inputs = CHAPTER.make_inputs(problem, np, rng)
    ref = CHAPTER.reference(problem, inputs)
    f = inputs["f"]
    padded = np.pad(inputs["x"], 5)
    taps = [(i, j) for i in range(11) for j in range(11)]
    for order in (taps, taps[::-1]):
        acc = np.zeros((30, 30), np.float32)
        for i, j in order:
            acc += (f[i, j] * padded[i:i + 30, j:j + 30]).astype(np.float32)
        assert CHAPTER.check(acc, ref, problem)


def test_rounding_depth_covers_direct_and_separable_sums():
    assert convolution.rounding_depth(2) == 26          # 25 taps, + 1 for a rounded separable filter
    assert convolution.rounding_depth(0) == 3           # separable: 1 + 1 roundings, + 1
    assert convolution.tolerance_factor(2) == pytest.approx(26 * 2.0 ** -24, rel=1e-5)


def test_book_model_gives_the_books_basic_and_constant_memory_intensities():
    problem = CHAPTER.problems["gpu"]
    assert convolution.book_model("01_basic", problem).intensity == 0.25
    assert convolution.book_model("02_constant_memory", problem).intensity == 0.5


def test_tiled_intensity_reproduces_the_books_table():
    for (tile, r), book in convolution.BOOK_TABLE.items():
        assert convolution.rounds_to(convolution.tiled_intensity(tile, r), book), (tile, r)
    assert convolution.tiled_intensity(8, 4) == 0.0     # no output left in an 8 x 8 tile


def test_book_model_of_tiled_kernel_over_a_whole_image_is_just_below_the_interior_tile():
    """At 8192^2 the last column and row of 28 x 28 output tiles stick out of the image, but
    their blocks still load whole 32 x 32 input tiles: 9.54 rather than 9.57 OP/B."""
    intensity = convolution.book_model("03_tiled_halo", CHAPTER.problems["gpu"]).intensity
    assert 9.5 < intensity < convolution.tiled_intensity(32, 2)


def test_book_model_of_cached_halo_reaches_the_large_tile_limit():
    """If every halo load hits in L2, each input element is loaded from DRAM once: (2r+1)^2 / 2."""
    for name in ("04_cached_halo_as_printed", "05_cached_halo"):
        assert convolution.book_model(name, CHAPTER.problems["gpu"]).intensity == 12.5


def test_book_model_of_coarsened_kernels_lies_between_the_tiled_and_the_limit():
    problem = CHAPTER.problems["gpu"]
    for name in ("06_register_tiled", "07_vectorized"):
        assert convolution.tiled_intensity(32, 2) < convolution.book_model(name, problem).intensity < 12.5
    separable = convolution.book_model("08_separable", problem)
    assert separable.flops == 25 * 8192 ** 2                      # 12.5 multiply-adds per output
    assert separable.bytes == convolution.book_model("07_vectorized", problem).bytes


def test_every_variant_uses_the_compulsory_model_of_8_bytes_per_output():
    problem = CHAPTER.problems["gpu"]
    for variant in CHAPTER.variants:
        model = variant.model({**problem, **variant.problem})
        assert model.flops == 50 * 8192 ** 2 and model.bytes == 8 * 8192 ** 2 + 100
        assert 6.249 < model.intensity < 6.25
