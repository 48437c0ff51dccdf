"""MaxPool3D (beyond the book): every variant against NumPy, on the CPU engine with its race and
bounds checks, and on a GPU when there is one.

Inputs are fresh each run; a failing test's message carries the seed that reproduces it.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from pmpp.runner import array_module as xp_for
from test_elementwise import assert_matches, run_on
from pmpp.chapters import pooling
from pmpp.chapters.pooling import CHAPTER, SHAPES, TEST_PROBLEMS

GPU_PROBLEMS = (CHAPTER.problems["gpu"], {**CHAPTER.problems["gpu"], "kernel": 3, "stride": 1})
MAPPED = [v for v in CHAPTER.variants if v.name[:2] in ("05", "07", "08", "09")]


def run(variant, backend, problem, inputs):
    return run_on(CHAPTER, variant, backend, problem, inputs)


def run_and_check(variant, backend, problem, inputs, seed):
    assert_matches(CHAPTER, variant, backend, problem, inputs, seed)


def brute_force(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    """The definition, cell by cell: an independent check of the separable reference."""
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p)] * 3, constant_values=-np.inf)
    out_shape = x.shape[:2] + tuple((d + 2 * p - k) // s + 1 for d in x.shape[2:])
    y = np.empty(out_shape, np.float32)
    for ot, oh, ow in itertools.product(*map(range, out_shape[2:])):
        y[:, :, ot, oh, ow] = padded[:, :, ot * s:ot * s + k, oh * s:oh * s + k, ow * s:ow * s + k].max(axis=(2, 3, 4))
    return y


@pytest.mark.parametrize("variant", CHAPTER.variants, ids=lambda v: v.name)
def test_padding_is_minus_infinity_not_zero(variant, backend, rng, seed):
    """All inputs negative: a kernel that pads with 0 (or starts its max at 0) returns 0 at the
    border, where the right answer is a negative input."""
    problem = pooling._pool((2, 3, 6, 7, 8), 3, 2, 1)
    inputs = CHAPTER.make_inputs(problem, xp_for(backend), rng)
    inputs["x"] = inputs["x"] * 0.5 - 1.5                    # in [-2, -1)
    run_and_check(variant, backend, problem, inputs, seed)


@pytest.mark.parametrize("variant", MAPPED, ids=lambda v: v.name)
def test_mapped_kernels_loop_over_nc_beyond_65535_blocks(variant, backend, rng, seed):
    """gridDim.z stops at 65535: the volumes past it are reached by the loop over z."""
    problem = pooling._pool((1, 65537, 2, 2, 2), 2, 1)
    run_and_check(variant, backend, problem, CHAPTER.make_inputs(problem, xp_for(backend), rng), seed)


@pytest.mark.parametrize("problem", TEST_PROBLEMS[:8], ids=CHAPTER.describe)
def test_separable_reference_equals_the_definition(problem, rng):
    x = CHAPTER.make_inputs(problem, np, rng)["x"]
    assert np.array_equal(CHAPTER.reference(problem, {"x": x}),
                          brute_force(x, problem["kernel"], problem["stride"], problem["padding"]))


# ------------------------------------------------------------------------------------------
# The chapter definition itself (no kernels)
# ------------------------------------------------------------------------------------------

def test_output_sizes_round_down_and_bad_padding_is_refused():
    assert pooling.output_shape(pooling._pool((1, 2, 9, 10, 11), 2, 2, 1)) == (1, 2, 5, 6, 6)
    assert pooling.output_shape(pooling._pool((16, 32, 64, 64, 64), 3, 1)) == (16, 32, 62, 62, 62)
    with pytest.raises(ValueError):
        pooling.validate(pooling._pool((1, 1, 8, 8, 8), 3, 1, 2))      # p > k / 2, as PyTorch refuses
    with pytest.raises(ValueError):
        pooling.validate(pooling._pool((1, 1, 2, 8, 8), 3, 1))         # no output along T


def test_make_inputs_poisons_the_output(rng):
    inputs = CHAPTER.make_inputs(CHAPTER.problems["cpu"], np, rng)
    assert inputs["y"].shape == pooling.output_shape(CHAPTER.problems["cpu"]) and np.isnan(inputs["y"]).all()
    assert inputs["x"].dtype == np.float32 and -1 <= inputs["x"].min() and inputs["x"].max() < 1


def test_check_is_exact_and_rejects_nan():
    problem = CHAPTER.problems["cpu"]
    ref = np.zeros(pooling.output_shape(problem), np.float32)
    assert CHAPTER.check(ref.copy(), ref, problem)
    bad = ref.copy()
    bad.flat[7] = np.nextafter(np.float32(0), np.float32(1))
    assert not CHAPTER.check(bad, ref, problem)
    bad.flat[7] = np.nan
    assert not CHAPTER.check(bad, ref, problem)


def test_the_25_shapes_span_kernels_strides_volumes_and_channels():
    assert len(SHAPES) == 25 == len(pooling.SHAPES_CPU)
    assert {(p["kernel"], p["stride"]) for p in SHAPES} >= {(k, s) for k in (2, 3, 8) for s in (1, k)}
    assert {p["shape"][2] for p in SHAPES} == {8, 64} and {p["shape"][1] for p in SHAPES} == {8, 64}
    assert any(p["padding"] for p in SHAPES)
    for problem in SHAPES:
        pooling.validate(problem)


def test_per_shape_choice_walks_stride_1_and_keeps_blocks_full():
    picks = {CHAPTER.describe(p): pooling.choose_mapping(p) for p in SHAPES}
    assert set(picks.values()) == {"v4", "v5", "walk"}
    for problem in SHAPES:
        pick = pooling.choose_mapping(problem)
        if problem["stride"] == 1 and problem["shape"][2] == 64:
            assert pick == "walk"
        if pick == "v5":
            assert np.prod(pooling.v5_geometry(problem)[1]) >= 256
    assert pooling.choose_mapping(pooling._pool((2, 8, 8, 8, 8), 8, 1)) == "v4"      # one output per volume


def test_shared_tile_fits_48_kb_and_shrinks_for_large_kernels():
    for problem in SHAPES + TEST_PROBLEMS:
        (tx, ty), nbytes = pooling.shared_tile(problem)
        assert nbytes <= 48 * 1024 and tx >= 1 and ty >= 1
    assert pooling.shared_tile(pooling._pool((1, 1, 64, 64, 64), 2, 2)) == ((32, 8), 8192)
    (tx, ty), _ = pooling.shared_tile(pooling._pool((1, 1, 64, 64, 64), 8, 8))
    assert tx * ty == 16                                   # k = 8, s = 8: a 16-thread block


def test_geometries_respect_cuda_limits():
    for problem in SHAPES + TEST_PROBLEMS + GPU_PROBLEMS:
        for geometry in (pooling.v4_geometry, pooling.v5_geometry, pooling.walk_geometry):
            grid, block = geometry(problem)
            assert np.prod(block) <= 1024 and block[2] <= 64 and max(grid[1:]) <= 65535 and min(grid) >= 1


def test_model_of_the_headline_problems():
    k2 = CHAPTER.variants[0].model(GPU_PROBLEMS[0])
    assert k2.bytes == 4 * (16 * 32 * 64 ** 3 + 16 * 32 * 32 ** 3)          # 604 MB: 2019 GB/s at 299 us
    assert k2.flops == 16 * 32 * 32 ** 3 * 7
    k3 = CHAPTER.variants[0].model(GPU_PROBLEMS[1])
    assert k3.bytes == 4 * 16 * 32 * (64 ** 3 + 62 ** 3) and k3.intensity == pytest.approx(3.1, abs=0.05)
    assert pooling.reuse(GPU_PROBLEMS[0]) == 1.0
    assert pooling.reuse(GPU_PROBLEMS[1]) == pytest.approx(27 * (62 / 64) ** 3)


def test_relative_throughput_divides_library_time_by_variant_time():
    entries = [{"problem": "a", "kind": "variant", "name": "v", "median_us": 2.0},
               {"problem": "a", "kind": "library", "name": "lib", "median_us": 6.0},
               {"problem": "b", "kind": "variant", "name": "v", "median_us": 1.0}]
    assert pooling.relative_throughput(entries) == {"a": {"v": 3.0}}


def test_per_shape_compares_09_with_the_fastest_mapping_and_refuses_noisy_rows():
    k2s2, k3s1 = SHAPES[0], SHAPES[12]
    rows = []
    for problem, times in ((k2s2, {"06_mapping_nct": 4.0, "07_mapping_thw": 3.0, "08_column_walk": 3.5,
                                   "09_per_shape": 4.5, "torch.max_pool3d": 9.0}),
                           (k3s1, {"06_mapping_nct": 4.0, "07_mapping_thw": 3.0, "08_column_walk": 30.0,
                                   "09_per_shape": 3.0, "torch.max_pool3d": 6.0})):
        rows += [{"name": n, "problem": CHAPTER.describe(problem), "median_us": t, "min_us": t}
                 for n, t in times.items()]
    noisy = lambda e: e["name"] == "08_column_walk" and e["median_us"] == 30.0
    first, second = pooling.per_shape(rows, (k2s2, k3s1, SHAPES[5]), noisy=noisy)   # SHAPES[5]: not in rows
    assert first["pick"] == pooling.choose_mapping(k2s2) and first["best"] == "07_mapping_thw"
    assert first["vs_best"] == 1.5 and first["vs_library"] == 2.0 and first["steady"] and first["noisy"] == []
    assert second["noisy"] == ["08_column_walk"] and not second["steady"]
    assert second["vs_best"] is None and second["vs_library"] == 2.0     # torch and 09 are steady
