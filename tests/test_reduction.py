"""Chapter 10 (reduction): every variant against the NumPy reference, on the CPU engine (with its
race and bounds checks) and on a GPU when there is one.

Inputs are fresh each run; a failing test's message carries the seed that reproduces it.
"""
from __future__ import annotations

import numpy as np
import pytest

import pmpp
from pmpp.chapters import reduction
from pmpp.chapters.reduction import CHAPTER
from pmpp import runner
from pmpp.runner import array_module as xp_for


LARGE = max(CHAPTER.test_sizes)                      # 2^20 + 3
SMALL_SIZES = tuple(s for s in CHAPTER.test_sizes if s != LARGE)
GPU_SIZE = CHAPTER.problems["gpu"]["n"]              # 2^28: GPU only
# At 2^20 + 3 the CPU engine runs these only: one of each launch shape (multi-pass in place with
# three passes, atomics, template grid-stride, float4 with head/tail, one pass, max).

CORRECT_VARIANTS = [v for v in CHAPTER.variants if not v.racy]
MAX_VARIANT = CHAPTER.variant("17_max")
VECTORIZED = [CHAPTER.variant(name) for name in ("15_vectorized", "16_one_pass", "17_max")]


# ------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------



def load(variant, backend, *, check=None):
    """The variant's module (``pmpp.load`` keeps it for the session). On the CPU engine the race
    and bounds checks are on unless asked otherwise."""
    check = (backend == "cpu") if check is None else check
    return runner.load_variant(CHAPTER, variant, backend=backend, check=check)




def problem_for(variant, n):
    return {**CHAPTER.problems["cpu"], "n": n, **variant.problem}


def run(variant, backend, problem, inputs, *, check=None):
    module = load(variant, backend, check=check)
    return variant.launch(module, problem, inputs)


def value_of(output) -> float:
    out = np.asarray(pmpp.asnumpy(output)).reshape(-1)
    assert out.size == 1, f"expected one value, got shape {out.shape}"
    return float(out[0])


def skip_unless_size_runs(variant, backend, n):
    if n == GPU_SIZE and backend == "cpu":
        pytest.skip("2^28 runs on the GPU only")
    if n == LARGE and backend == "cpu" and variant.name not in CHAPTER.cpu_largest:
        pytest.skip("2^20 + 3 runs on the CPU engine for one variant of each launch shape only")


# ------------------------------------------------------------------------------------------
# Every variant, every size
# (Random inputs at every size, every variant: the chapter contract, tests/test_chapters.py.)
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", CHAPTER.test_sizes)
@pytest.mark.parametrize("variant", CORRECT_VARIANTS, ids=lambda v: v.name)
def test_integer_valued_inputs_reduce_exactly(variant, n, backend, rng, seed):
    """Integer values keep every float32 partial sum exact, so the order of additions cannot
    matter: any difference from the reference is a dropped or double-counted element."""
    skip_unless_size_runs(variant, backend, n)
    problem = problem_for(variant, n)
    inputs = reduction.make_integer_inputs(problem, xp_for(backend), rng)
    got = value_of(run(variant, backend, problem, inputs))
    expected = float(CHAPTER.reference(problem, inputs))
    assert got == expected, f"{variant.name}, n={n}, seed={seed}: got {got!r}, expected {expected!r}"


@pytest.mark.parametrize("n", SMALL_SIZES)
def test_max_uses_minus_infinity_as_identity_on_all_negative_inputs(n, backend, rng, seed):
    """A max that starts from 0 (or pads short blocks with 0) returns 0 here."""
    problem = problem_for(MAX_VARIANT, n)
    x = -(1.0 + rng.random(n, dtype=np.float32))        # all in (-2, -1]
    inputs = {"x": xp_for(backend).asarray(x)}
    got = value_of(run(MAX_VARIANT, backend, problem, inputs))
    assert got == float(x.max()), f"n={n}, seed={seed}: got {got!r}, expected {float(x.max())!r}"


@pytest.mark.parametrize("offset", [1, 2, 3])
@pytest.mark.parametrize("variant", VECTORIZED, ids=lambda v: v.name)
def test_vectorized_handles_input_not_aligned_to_16_bytes(variant, offset, backend, rng, seed):
    """float4 loads need 16-byte alignment; a slice x[offset:] starts 4*offset bytes past it."""
    n = 1000
    problem = problem_for(variant, n)
    xp = xp_for(backend)
    base = reduction.make_integer_inputs({"n": n + offset}, xp, rng)["x"]
    inputs = {"x": base[offset:]}
    got = value_of(run(variant, backend, problem, inputs))
    expected = float(CHAPTER.reference(problem, inputs))
    assert got == expected, f"{variant.name}, offset={offset}, seed={seed}: got {got!r}, expected {expected!r}"


# ------------------------------------------------------------------------------------------
# Behaviours of particular variants
# ------------------------------------------------------------------------------------------

def test_racy_reduce4_raises_race_error_under_check(rng):
    variant = CHAPTER.variant("10_reduce4_racy")
    problem = problem_for(variant, 1000)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    with pytest.raises(pmpp.RaceError):
        run(variant, "cpu", problem, inputs, check=True)


def test_fixed_reduce4_passes_race_check(rng):
    variant = CHAPTER.variant("11_reduce4")
    problem = problem_for(variant, 1000)
    inputs = reduction.make_integer_inputs(problem, np, rng)
    got = value_of(run(variant, "cpu", problem, inputs, check=True))
    assert got == float(CHAPTER.reference(problem, inputs))


def test_one_pass_gives_right_answer_twice_in_a_row(backend, rng, seed):
    """The retirement counter lives in the module; the kernel must reset it for the next launch.
    n is large enough for many blocks, so the last-block ticket matters."""
    variant = CHAPTER.variant("16_one_pass")
    problem = problem_for(variant, 100_003)
    for attempt in range(2):
        inputs = reduction.make_integer_inputs(problem, xp_for(backend), rng)
        got = value_of(run(variant, backend, problem, inputs))
        expected = float(CHAPTER.reference(problem, inputs))
        assert got == expected, f"launch {attempt + 1}, seed={seed}: got {got!r}, expected {expected!r}"


def test_segmented_sum_handles_length_not_multiple_of_block(backend, rng):
    """A block whose segment runs past the end must add only the elements that exist."""
    variant = CHAPTER.variant("04_segmented")
    n = 3 * 2 * reduction.BLOCK_DIM + 7
    problem = problem_for(variant, n)
    inputs = reduction.make_integer_inputs(problem, xp_for(backend), rng)
    got = value_of(run(variant, backend, problem, inputs))
    assert got == float(CHAPTER.reference(problem, inputs))


# ------------------------------------------------------------------------------------------
# The chapter definition itself (no kernels)
# ------------------------------------------------------------------------------------------

def test_only_reduce4_as_published_is_marked_racy():
    assert [v.name for v in CHAPTER.variants if v.racy] == ["10_reduce4_racy"]


def test_make_inputs_gives_fresh_float32_in_minus_one_to_one(rng):
    x = CHAPTER.make_inputs({"n": 100_000, "op": "sum"}, np, rng)["x"]
    y = CHAPTER.make_inputs({"n": 100_000, "op": "sum"}, np, rng)["x"]
    assert x.dtype == np.float32 and x.shape == (100_000,)
    assert x.min() >= -1.0 and x.max() < 1.0
    assert not np.array_equal(x, y)


def test_integer_inputs_are_small_integers_in_float32(rng):
    x = reduction.make_integer_inputs({"n": 10_000}, np, rng)["x"]
    assert x.dtype == np.float32
    assert np.array_equal(x, np.round(x)) and np.abs(x).max() <= 8


def test_reference_is_float64_sum_carrying_abs_sum():
    x = np.array([1.5, -2.0, 0.25], dtype=np.float32)
    ref = CHAPTER.reference({"n": 3, "op": "sum"}, {"x": x})
    assert float(ref) == -0.25 and ref.abs_sum == 3.75


def test_check_accepts_reference_and_rejects_nan_and_gross_errors():
    problem = {"n": 1000, "op": "sum"}
    ref = reduction.SumReference(12.5, abs_sum=500.0)
    assert CHAPTER.check(np.array([12.5], np.float32), ref, problem)
    assert not CHAPTER.check(np.array([np.nan], np.float32), ref, problem)
    assert not CHAPTER.check(np.array([np.inf], np.float32), ref, problem)
    assert not CHAPTER.check(np.array([13.5], np.float32), ref, problem)
    assert not CHAPTER.check(np.array([12.5, 12.5], np.float32), ref, problem)


def test_sum_tolerance_is_gamma_of_longest_chain_times_abs_sum():
    n = 2 ** 20
    d = reduction.longest_chain(n)
    assert d == 2 ** 20 // 512 + 2 * 20 + 16
    tol = reduction.sum_tolerance(n, 1.0)
    assert d * 2.0 ** -24 <= tol <= 1.01 * d * 2.0 ** -24
    assert reduction.sum_tolerance(n, 2.0) == pytest.approx(2 * tol)


def test_sum_tolerance_covers_float32_recursive_summation_error(rng):
    """Sanity check of the bound on a chain we can compute here: 1000 values added left to right
    in float32 (a chain of 999) stay within gamma_999 * sum|x|, far inside the tolerance for
    n = 2^20 (whose longest chain is over 2000)."""
    x = rng.random(1000, dtype=np.float32)
    acc = np.float32(0)
    for v in x:
        acc = np.float32(acc + v)
    exact = float(np.sum(x, dtype=np.float64))
    assert abs(float(acc) - exact) <= reduction.sum_tolerance(2 ** 20, float(np.abs(x).sum(dtype=np.float64)))


def test_max_check_is_exact():
    problem = {"n": 10, "op": "max"}
    assert CHAPTER.check(np.array([0.5], np.float32), np.float64(0.5), problem)
    assert not CHAPTER.check(np.array([np.nextafter(np.float32(0.5), np.float32(1))]), np.float64(0.5), problem)
    assert not CHAPTER.check(np.array([np.nan], np.float32), np.float64(0.5), problem)


@pytest.mark.parametrize("variant", CHAPTER.variants, ids=lambda v: v.name)
def test_model_gives_the_books_quarter_op_per_byte(variant):
    problem = {**CHAPTER.problems["gpu"], **variant.problem}
    model = variant.model(problem)
    assert model.flops == problem["n"] - 1
    assert model.bytes >= 4 * problem["n"]
    assert 0.245 < model.intensity <= 0.25
