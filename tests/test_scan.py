"""Chapter 11 (scan): every variant against the NumPy reference, on the CPU engine (with its race
and bounds checks) and on a GPU when there is one; the look-back protocol; the work model.

Inputs are fresh each run; a failing test's message carries the seed that reproduces it.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import pmpp
from pmpp import runner
from pmpp.chapters import scan
from pmpp.chapters.scan import CHAPTER
from pmpp.runner import array_module as xp_for


LARGE = max(CHAPTER.test_sizes)                      # 2^20 + 7
GPU_SIZE = CHAPTER.problems["gpu"]["n"]              # 2^28: GPU only
CORRECT_VARIANTS = [v for v in CHAPTER.variants if not v.racy]
ONE_SECTION = [v for v in CORRECT_VARIANTS if v.max_n < scan.MAX_N]
SINGLE_PASS = [CHAPTER.variant(name) for name in ("07", "08", "09", "10", "11")]
LOOK_BACK = [CHAPTER.variant(name) for name in ("08", "09", "10", "11")]
PERSISTENT = CHAPTER.variant("10")     # blocks take tiles until none are left
VECTORIZED = [CHAPTER.variant(name) for name in ("09", "10", "11")]   # float4 loads


# ------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------


def load(variant, backend, *, check=None):
    """The variant's module (``pmpp.load`` keeps it for the session). On the CPU engine the race
    and bounds checks are on unless asked otherwise."""
    check = (backend == "cpu") if check is None else check
    return runner.load_variant(CHAPTER, variant, backend=backend, check=check)


def problem(n, dtype="float32", kind="inclusive"):
    return {"n": n, "dtype": dtype, "kind": kind}


def run(variant, backend, p, inputs, *, check=None):
    return variant.launch(load(variant, backend, check=check), p, inputs)


def skip_unless_size_runs(variant, backend, n, case=None):
    if not variant.supports({"n": n}, backend):
        pytest.skip(f"{variant.name} scans one section of at most {variant.max_n} elements")
    if n == GPU_SIZE and backend == "cpu":
        pytest.skip("2^28 runs on the GPU only")
    if n >= LARGE and case is not None and case not in scan.LARGEST_CASES:
        pytest.skip(f"at n={n} only {sorted(scan.LARGEST_CASES)} run")


def status_word(flag: int, value: int) -> int:
    """A tile status as 08/09 pack it: flag in the high 32 bits, the int32 value's bits low."""
    return (flag << 32) | (int(value) & 0xFFFFFFFF)


# ------------------------------------------------------------------------------------------
# Every variant, every size, both dtypes, both kinds
# (Random inputs at every size, every variant: the chapter contract, tests/test_chapters.py.)
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", scan.KINDS)
@pytest.mark.parametrize("n", CHAPTER.test_sizes + (GPU_SIZE,))
@pytest.mark.parametrize("variant", CORRECT_VARIANTS, ids=lambda v: v.name)
def test_integer_valued_floats_scan_exactly(variant, n, kind, backend, rng, seed):
    """While every prefix is below 2^23, every float32 addition of integer values is exact in
    any order: a dropped or doubled element shows, where the float tolerance could hide it."""
    skip_unless_size_runs(variant, backend, n, ("float32", "inclusive") if kind == "inclusive" else None)
    if n >= LARGE and kind == "exclusive":
        pytest.skip("exclusive scans of integer-valued floats run at the small sizes")
    p = problem(n, "float32", kind)
    inputs = scan.make_exact_inputs(p, xp_for(backend), rng)
    ref = CHAPTER.reference(p, inputs)
    assert scan.exactly_summable(ref), f"seed={seed}: a prefix reached 2^23; draw again"
    got = pmpp.asnumpy(run(variant, backend, p, inputs)).astype(np.float64)
    wrong = np.flatnonzero(got != np.asarray(ref))
    assert not wrong.size, (f"{variant.name}, n={n} {kind}, seed={seed}: {wrong.size} elements differ; "
                            f"first at {wrong[0]}: {got[wrong[0]]!r}, expected {ref[wrong[0]]!r}")


@pytest.mark.parametrize("variant", CORRECT_VARIANTS, ids=lambda v: v.name)
def test_empty_input_gives_empty_output(variant, backend, rng):
    p = problem(0)
    inputs = CHAPTER.make_inputs(p, xp_for(backend), rng)
    out = run(variant, backend, p, inputs)
    assert out.shape == (0,) and out.dtype == np.float32


# ------------------------------------------------------------------------------------------
# Single-section variants (01-05)
# ------------------------------------------------------------------------------------------

def test_racy_kogge_stone_raises_race_error_under_check(rng):
    variant = CHAPTER.variant("01_kogge_stone_racy")
    p = problem(1000)
    with pytest.raises(pmpp.RaceError, match="XY"):
        run(variant, "cpu", p, CHAPTER.make_inputs(p, np, rng), check=True)


def test_racy_kogge_stone_is_wrong_on_the_cpu_engine(rng):
    """Without the check the race shows in the result: the engine runs a block's threads one
    after another between barriers, so thread i always reads XY[i - s] already updated."""
    variant = CHAPTER.variant("01_kogge_stone_racy")
    p = problem(1000, "int32")
    inputs = CHAPTER.make_inputs(p, np, rng)
    assert not CHAPTER.check(run(variant, "cpu", p, inputs, check=False), CHAPTER.reference(p, inputs), p)


def test_fixed_kogge_stone_passes_race_check(rng):
    variant = CHAPTER.variant("02_kogge_stone")
    p = problem(1000, "int32")
    inputs = CHAPTER.make_inputs(p, np, rng)
    assert CHAPTER.check(run(variant, "cpu", p, inputs, check=True), CHAPTER.reference(p, inputs), p)


@pytest.mark.parametrize("variant", ONE_SECTION, ids=lambda v: v.name)
def test_one_section_variants_scan_a_full_section(variant, backend, rng, seed):
    p = problem(variant.max_n, "int32", "exclusive")
    inputs = CHAPTER.make_inputs(p, xp_for(backend), rng)
    result = CHAPTER.check(run(variant, backend, p, inputs), CHAPTER.reference(p, inputs), p)
    assert result, f"{variant.name} at n={variant.max_n}, seed={seed}: {result.detail}"


@pytest.mark.parametrize("variant", ONE_SECTION, ids=lambda v: v.name)
def test_one_section_variants_refuse_longer_inputs(variant, rng):
    p = problem(variant.max_n + 1)
    with pytest.raises(ValueError, match="one section"):
        run(variant, "cpu", p, CHAPTER.make_inputs(p, np, rng))


# ------------------------------------------------------------------------------------------
# Single pass (07-11): the counter, the flags, the look-back
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", SINGLE_PASS, ids=lambda v: v.name)
def test_single_pass_is_right_twice_in_a_row(variant, backend, rng, seed):
    """Counter and flags must start from zero at every launch, not where the last one left them."""
    p = problem(100_003, "int32")
    module = load(variant, backend)
    for attempt in range(2):
        inputs = CHAPTER.make_inputs(p, xp_for(backend), rng)
        result = CHAPTER.check(variant.launch(module, p, inputs), CHAPTER.reference(p, inputs), p)
        assert result, f"launch {attempt + 1}, seed={seed}: {result.detail}"


@pytest.mark.parametrize("variant", LOOK_BACK, ids=lambda v: v.name)
def test_every_block_draws_one_tile_and_publishes_its_inclusive_prefix(variant, rng):
    """After a launch the counter equals the number of tiles (10: plus one draw per block, the
    one that found no tile left) and every tile's status is P with the inclusive prefix of the
    input through that tile."""
    p = problem(50_000, "int32")
    inputs = CHAPTER.make_inputs(p, np, rng)
    module = load(variant, "cpu")
    tile = scan.block_elements(variant.name, module)
    tiles = -(-p["n"] // tile)
    status, counter = np.zeros(tiles, np.uint64), np.zeros(1, np.uint64)
    kernel = module.get_function(variant.name_expressions[1])          # the int instance
    kernel(tiles, variant.defines["BLOCK_DIM"], (inputs["x"], inputs["y"], status, counter, np.uint32(p["n"]), 0))
    assert int(counter[0]) == (2 * tiles if variant is PERSISTENT else tiles)
    prefixes = np.cumsum(inputs["x"].astype(np.int64))[np.minimum(np.arange(1, tiles + 1) * tile, p["n"]) - 1]
    assert [int(s) for s in status] == [status_word(2, v) for v in prefixes]


def _run_from_tile(variant, rng, first, prefill):
    """Launch the int instance for the tiles from ``first`` on, with the counter starting at
    ``first`` and tiles 0..first-1 given the statuses ``prefill(tile sums, prefixes)`` returns.
    Return (output, reference) for the elements of those tiles."""
    module = load(variant, "cpu")
    tile = scan.block_elements(variant.name, module)
    tiles = first + 3
    p = problem(tiles * tile - 5, "int32")
    inputs = CHAPTER.make_inputs(p, np, rng)
    sums = np.add.reduceat(inputs["x"].astype(np.int64), np.arange(tiles) * tile)
    status = np.zeros(tiles, np.uint64)
    status[:first] = prefill(sums[:first], np.cumsum(sums)[:first])
    counter = np.array([first], np.uint64)
    kernel = module.get_function(variant.name_expressions[1])
    kernel(tiles - first, variant.defines["BLOCK_DIM"], (inputs["x"], inputs["y"], status, counter, np.uint32(p["n"]), 0))
    ref = np.cumsum(inputs["x"].astype(np.int64)).astype(np.int32)
    return inputs["y"][first * tile:], ref[first * tile:]


@pytest.mark.parametrize("variant", LOOK_BACK, ids=lambda v: v.name)
def test_lookback_adds_aggregates_across_several_windows(variant, rng):
    """Tile 0 has its inclusive prefix, tiles 1..69 only their aggregates: the look-back of tile
    70 must add 69 aggregates (three windows of 32 for 09) before it reaches tile 0."""
    first = 70
    got, want = _run_from_tile(variant, rng, first, lambda sums, prefixes: [
        status_word(2 if j == 0 else 1, prefixes[0] if j == 0 else sums[j]) for j in range(first)])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("variant", LOOK_BACK, ids=lambda v: v.name)
def test_lookback_stops_at_the_nearest_inclusive_prefix(variant, rng):
    """Tiles 0..67 never publish (status X) but tile 68 has its inclusive prefix: the look-back
    must use it and not wait for tiles behind it (it would wait forever: a timeout)."""
    first = 70
    got, want = _run_from_tile(variant, rng, first, lambda sums, prefixes: [
        0 if j < 68 else status_word(2, prefixes[68]) if j == 68 else status_word(1, sums[69])
        for j in range(first)])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("variant", SINGLE_PASS, ids=lambda v: v.name)
def test_single_pass_is_right_with_many_blocks_in_flight(variant):
    """Eight OS threads run blocks at once on the CPU engine, so tiles really look back at tiles
    that are still running (or, in 07, wait for them). A fresh process: the thread count is
    read when the engine's worker starts."""
    code = (
        "import numpy as np, pmpp\n"
        "from pmpp import runner\n"
        "from pmpp.chapters import scan\n"
        f"v = scan.CHAPTER.variant({variant.name!r})\n"
        "for kind in scan.KINDS:\n"
        "    r = runner.verify(scan.CHAPTER, v, {'n': 2**18 + 7, 'dtype': 'int32', 'kind': kind}, backend='cpu')\n"
        "    assert r.ok, r.detail\n")
    env = {**os.environ, "PMPP_CPU_THREADS": "8"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("offset", [1, 2, 3])
@pytest.mark.parametrize("variant", VECTORIZED, ids=lambda v: v.name)
def test_vectorized_refuses_arrays_not_aligned_to_16_bytes(variant, offset, rng):
    p = problem(1000)
    base = CHAPTER.make_inputs(problem(1000 + offset), np, rng)
    with pytest.raises(ValueError, match="16-byte aligned"):
        run(variant, "cpu", p, {"x": base["x"][offset:], "y": base["y"][:1000]})


# ------------------------------------------------------------------------------------------
# The chapter definition itself (no kernels)
# ------------------------------------------------------------------------------------------

def test_only_the_in_place_kogge_stone_is_marked_racy():
    assert [v.name for v in CHAPTER.variants if v.racy] == ["01_kogge_stone_racy"]


@pytest.mark.parametrize("dtype", scan.DTYPES)
def test_make_inputs_gives_fresh_values_and_a_poisoned_output(dtype, rng):
    p = problem(100_000, dtype)
    a, b = CHAPTER.make_inputs(p, np, rng), CHAPTER.make_inputs(p, np, rng)
    assert a["x"].dtype == a["y"].dtype == np.dtype(dtype) and a["y"].shape == (100_000,)
    assert not np.array_equal(a["x"], b["x"])
    if dtype == "float32":
        assert a["x"].min() >= -1 and a["x"].max() < 1 and np.isnan(a["y"]).all()
    else:
        assert np.abs(a["x"]).max() <= scan.INT_BOUND and (a["y"] == 0x7F7F7F7F).all()


def test_int32_poison_is_no_prefix_of_any_input_up_to_2_to_the_28():
    assert scan.INT_BOUND * GPU_SIZE < 0x7F7F7F7F < 2 ** 31


def test_reference_is_inclusive_or_exclusive_scan():
    x = np.array([1.5, -2.0, 0.25], dtype=np.float32)
    inclusive = CHAPTER.reference(problem(3), {"x": x})
    exclusive = CHAPTER.reference(problem(3, kind="exclusive"), {"x": x})
    assert np.array_equal(inclusive, [1.5, -0.5, -0.25]) and np.array_equal(inclusive.abs_prefix, [1.5, 3.5, 3.75])
    assert np.array_equal(exclusive, [0, 1.5, -0.5]) and np.array_equal(exclusive.abs_prefix, [0, 1.5, 3.5])
    ints = CHAPTER.reference(problem(3, "int32", "exclusive"), {"x": np.array([3, -1, 4], np.int32)})
    assert ints.dtype == np.int32 and np.array_equal(ints, [0, 3, 2])


def test_check_accepts_the_reference_and_rejects_nan_and_a_wrong_element():
    p = problem(5)
    x = np.array([0.5, -0.25, 1.0, 0.75, -1.0], np.float32)
    ref = CHAPTER.reference(p, {"x": x})
    good = np.cumsum(x, dtype=np.float32)
    assert CHAPTER.check(good, ref, p)
    for bad in (np.where(np.arange(5) == 3, np.nan, good), good + np.float32(0.25) * (np.arange(5) == 2)):
        assert not CHAPTER.check(bad.astype(np.float32), ref, p)
    assert not CHAPTER.check(good.astype(np.float64), ref, p)            # wrong dtype
    assert not CHAPTER.check(good[:4], ref, p)                          # wrong length
    ints = problem(3, "int32")
    ref = CHAPTER.reference(ints, {"x": np.array([3, -1, 4], np.int32)})
    assert CHAPTER.check(np.array([3, 2, 6], np.int32), ref, ints)
    assert not CHAPTER.check(np.array([3, 2, 7], np.int32), ref, ints)


def test_tolerance_grows_with_position_along_the_tiles():
    n = 2 ** 28
    assert scan.longest_chain(0, n) == 4 * 29 + 64
    assert scan.longest_chain(2 ** 20, n) - scan.longest_chain(0, n) == 2 * 2 ** 10
    tol = scan.tolerance(np.array([0, 2 ** 20, 2 ** 27]), n, np.ones(3))
    assert tol[0] < tol[1] < tol[2] < 0.02


def test_check_applies_at_least_each_elements_tolerance_evaluated_per_1024(rng):
    n = 3 * scan.CHECK_CHUNK // 2 + 5
    abs_prefix = np.cumsum(rng.random(n))
    start = scan.CHECK_CHUNK
    exact = scan.tolerance(np.arange(start, n), n, abs_prefix[start:])
    fast = scan._chunk_tolerance(start, n, n, abs_prefix)
    assert (fast >= exact).all() and (fast <= exact * (1 + 1e-9)).all()


def test_tolerance_covers_a_sequential_float32_scan(rng):
    """A sequential float32 scan is a chain of i additions at element i: within the bound the
    tolerance gives at n = 2^28, whose chain allows 2 additions per 1024 elements plus 180."""
    x = rng.random(200_000, dtype=np.float32) * 2 - 1
    ref = CHAPTER.reference(problem(x.size), {"x": x})
    error = np.abs(np.cumsum(x, dtype=np.float32).astype(np.float64) - ref)
    chain = np.arange(x.size) + 1                                       # the sequential chain
    bound = chain * scan.U32 / (1 - chain * scan.U32) * ref.abs_prefix
    assert (error <= bound).all()


@pytest.mark.parametrize("n", [2 ** k for k in range(1, 17)])
def test_additions_reproduce_the_books_work_formulas(n):
    log = int(math.log2(n))
    assert scan.additions("sequential", n) == n - 1
    assert scan.additions("Kogge-Stone", n) == n * log - (n - 1)           # 11.3
    assert scan.additions("Brent-Kung", n) == 2 * n - 2 - log               # 11.4
    assert scan.parallel_time("Kogge-Stone", n) == log
    assert scan.parallel_time("Brent-Kung", n) == 2 * log - 1


def test_kogge_stone_wins_with_enough_adders_and_loses_with_few():
    n = 1024
    assert scan.parallel_time("Kogge-Stone", n) < scan.parallel_time("Brent-Kung", n)          # unlimited
    assert scan.parallel_time("Kogge-Stone", n, 32) > scan.parallel_time("Brent-Kung", n, 32)  # one warp's lanes
    assert scan.additions("Kogge-Stone", n) == 9217 and scan.additions("Brent-Kung", n) == 2036


def test_three_phase_work_is_about_2n_plus_kogge_stone_on_the_threads():
    """Phase 1: T(C - 1); phase 2: T log2 T - (T - 1); phase 3: (T - 1)C. For N = TC elements:
    2N - 2T + T log2 T - C + 1 - about 2.9 per element at T = 512, C = 8, against Kogge-Stone's 11."""
    threads, coarse = scan.THREE_PHASE["BLOCK_DIM"], scan.THREE_PHASE["COARSE_FACTOR"]
    n = threads * coarse
    work = scan.additions("three-phase", n)
    assert work == 2 * n - 2 * threads + threads * int(math.log2(threads)) - coarse + 1 == 11769
    assert scan.additions("Brent-Kung", n) < work < scan.additions("Kogge-Stone", n) / 3


@pytest.mark.parametrize("variant", CHAPTER.variants, ids=lambda v: v.name)
def test_model_counts_n_minus_1_additions_and_the_bytes_each_shape_moves(variant):
    n = GPU_SIZE if variant.supports({"n": GPU_SIZE}) else variant.max_n
    model = variant.model(problem(n))
    assert model.flops == n - 1
    if variant.name.startswith("06"):
        assert 16 * n - 8 * 4096 < model.bytes < 16.01 * n                # read and write twice
    else:
        assert model.bytes == 8 * n                                     # read x, write y


def test_the_bulk_copy_variant_says_it_needs_sm90_on_an_older_gpu(monkeypatch):
    import pmpp.chapters.base as base
    from pmpp.errors import BackendUnavailableError
    variant = CHAPTER.variant("12_bulk_copy_lookback")
    assert variant.min_arch == 90
    monkeypatch.setattr(runner, "resolve_backend", lambda backend: "cupy")
    monkeypatch.setattr(base, "current_arch", lambda: 80)
    with pytest.raises(BackendUnavailableError, match=r"compute capability 9\.0 or newer.*this GPU is 8\.0"):
        runner.load_variant(CHAPTER, variant, backend="cupy")
    assert not variant.supports({"n": 1000}, "cupy")
    assert variant.supports({"n": 1000}, "cpu")
    monkeypatch.setattr(base, "current_arch", lambda: 90)
    assert variant.supports({"n": 1000}, "cupy")
