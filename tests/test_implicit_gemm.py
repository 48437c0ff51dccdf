"""Chapter 7, multi-channel convolution as implicit GEMM: every variant against the float64 NumPy
reference, on the CPU engine (with its race and bounds checks) and on a GPU when there is one.

Inputs are fresh each run; a failing test's message carries the seed that reproduces it. The
TF32 variant (08) uses the tensor cores through inline PTX, which the CPU engine cannot run: on
the CPU it runs with its two PTX instructions replaced by CUDA C that does the same (TF32
rounding, and mma.sync.m16n8k8 with the fragment layout of the PTX ISA, gathered by shuffles).
"""
from __future__ import annotations

import numpy as np
import pytest

import pmpp
from pmpp.runner import array_module as xp_for
from pmpp.chapters import implicit_gemm
from pmpp.chapters.implicit_gemm import CHAPTER
from pmpp.chapters.implicit_gemm import conv_problem as shape

TF32 = CHAPTER.variant("08_tf32_mma")


SHAPES = implicit_gemm.TEST_SHAPES                    # the chapter's awkward shapes
GPU_SHAPES = {**SHAPES, "gpu_problem": dict(implicit_gemm.GPU_PROBLEM)}


# ------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------

_modules: dict = {}


def load(variant, backend, *, source=None):
    """The variant's module, compiled once per session; on the CPU engine with the checks on.
    ``source``: a modified kernel text (the emulated TF32 kernel) instead of the file."""
    key = (variant.name, backend, source is not None)
    if key not in _modules:
        where = {"source": source} if source is not None else {"path": CHAPTER.kernel_path(variant)}
        _modules[key] = pmpp.load(**where, defines=dict(variant.defines), backend=backend,
                                  check=backend == "cpu")
    return _modules[key]


def run(variant, backend, problem, inputs, *, source=None):
    return variant.launch(load(variant, backend, source=source), problem, inputs)


def cases():
    """(variant, shape name, backend) for every variant and shape: on the GPU all of them, on the
    CPU engine all but the GPU problem and the TF32 variant."""
    for variant in CHAPTER.variants:
        for name in GPU_SHAPES:
            if not variant.gpu_only and name in SHAPES:
                yield pytest.param(variant, name, "cpu", id=f"{variant.name}-{name}-cpu")
            yield pytest.param(variant, name, "cupy", marks=pytest.mark.gpu, id=f"{variant.name}-{name}-cupy")


# ------------------------------------------------------------------------------------------
# Every variant, every shape
# (Random inputs at every size, every variant: the chapter contract, tests/test_chapters.py.)
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant, name, backend", list(cases()))
def test_integer_valued_inputs_convolve_exactly(variant, name, backend, rng, seed):
    """Small integers keep every product and partial sum exact, in FP32 and in TF32: any
    difference is a dropped, doubled or misplaced term."""
    problem = {**GPU_SHAPES[name], **variant.problem}
    inputs = implicit_gemm.make_integer_inputs(problem, xp_for(backend), rng)
    got = pmpp.asnumpy(run(variant, backend, problem, inputs))
    expected = CHAPTER.reference(problem, inputs).value
    wrong = np.argwhere(got != expected)
    assert wrong.size == 0, (f"{variant.name}, {name}, seed={seed}: {len(wrong)} outputs differ, first at "
                             f"{wrong[0].tolist()}: {got[tuple(wrong[0])]} != {expected[tuple(wrong[0])]}")


@pytest.mark.parametrize("name", SHAPES)
def test_tf32_kernel_with_emulated_mma_matches_reference_on_cpu(name, rng, seed):
    """08's tiles, fragment loads, double buffering and epilogue on the CPU engine, race-checked:
    a fragment loaded from the wrong place changes the result (see the next test)."""
    problem = {**SHAPES[name], **TF32.problem}
    inputs = CHAPTER.make_inputs(problem, np, rng)
    output = run(TF32, "cpu", problem, inputs, source=implicit_gemm.emulated_tf32_source())
    result = CHAPTER.check(output, CHAPTER.reference(problem, inputs), problem)
    assert result, f"{name}, seed={seed}: {result.detail}"
    exact = implicit_gemm.make_integer_inputs(problem, np, rng)
    assert np.array_equal(run(TF32, "cpu", problem, exact, source=implicit_gemm.emulated_tf32_source()),
                          CHAPTER.reference(problem, exact).value), f"{name}, seed={seed}"


def test_emulated_mma_catches_a_fragment_loaded_from_the_wrong_place(rng):
    """Swap A[g + 8][t] and A[g][t + 4] in 08's fragment loads: the emulation must notice."""
    text = pmpp.kernel_source(CHAPTER.kernel_path(TF32))
    first, second = "a[mi][1] = filter_s[buffer][kk + t][m + 8];", "a[mi][2] = filter_s[buffer][kk + t + 4][m];"
    assert first in text and second in text
    swapped = text.replace(first, "a[mi][1] = filter_s[buffer][kk + t + 4][m];").replace(
        second, "a[mi][2] = filter_s[buffer][kk + t][m + 8];")
    module = pmpp.load(source=implicit_gemm.emulated_tf32_source(swapped), backend="cpu")
    problem = {**implicit_gemm.CPU_PROBLEM, **TF32.problem}
    inputs = implicit_gemm.make_integer_inputs(problem, np, rng)
    got = TF32.launch(module, problem, inputs)
    assert not np.array_equal(got, CHAPTER.reference(problem, inputs).value)


def test_storing_into_the_buffer_being_read_is_a_race_the_checks_find(rng):
    """06 with the next tiles stored into the copy the other warps still read: RaceError."""
    variant = CHAPTER.variant("06_double_buffer")
    text = pmpp.kernel_source(CHAPTER.kernel_path(variant))
    assert text.count("store_tiles(buffer ^ 1);") == 1
    module = pmpp.load(source=text.replace("store_tiles(buffer ^ 1);", "store_tiles(buffer);"),
                       backend="cpu", check=True)
    problem = dict(implicit_gemm.CPU_PROBLEM)
    with pytest.raises(pmpp.RaceError, match="filter_s|input_s"):
        variant.launch(module, problem, CHAPTER.make_inputs(problem, np, rng))


CUDNN = [library for library in CHAPTER.library if library.name.startswith("cuDNN")]


@pytest.mark.gpu
@pytest.mark.parametrize("library", CUDNN, ids=lambda library: library.name)
def test_cudnn_matches_reference_at_its_precision(library, rng, seed):
    """The bar to beat must be right too: FP32 with TF32 off within the FP32 tolerance, TF32 within TF32's."""
    if not library.available("cupy"):
        pytest.skip("torch with CUDA is not installed")
    problem = dict(implicit_gemm.GPU_PROBLEM)
    inputs = CHAPTER.make_inputs(problem, xp_for("cupy"), rng)
    result = CHAPTER.check(library.run(problem, inputs), CHAPTER.reference(problem, inputs), problem)
    assert result, f"{library.name}, seed={seed}: {result.detail}"


@pytest.mark.gpu
def test_sweep_checks_and_times_each_problem_on_the_gpu():
    small = [{**implicit_gemm.GPU_PROBLEM, "n": 2, "h": h, "w": h} for h in (16, 33)]
    entries = implicit_gemm.sweep(small, backend="cupy", variants=["07_rsc_order", "08_tf32_mma"])
    assert all(e["correct"] for e in entries)
    rows = implicit_gemm.sweep_rows(entries)
    assert len(rows) == 2 and all(row["best_fp32"]["name"] == "07_rsc_order" and row["tf32"] for row in rows)
    print(implicit_gemm.sweep_table(entries))


def test_filter_is_rearranged_to_rsck_with_rows_padded_to_four(rng):
    problem = shape(1, 3, 4, 4, 5, 2, 3, 1, 0)
    w = rng.random((5, 3, 2, 3), dtype=np.float32)
    module = load(CHAPTER.variant("07_rsc_order"), "cpu")
    filter_t, kp = implicit_gemm._rearranged_filter(module, problem, w)
    assert kp == 8
    expected = np.zeros((2, 3, 3, 8), np.float32)
    expected[..., :5] = w.transpose(2, 3, 1, 0)               # [r][s][c][k]
    assert np.array_equal(filter_t.reshape(2, 3, 3, 8), expected)


def test_run_command_checks_and_times_the_chapter_on_cpu(capsys):
    from pmpp.cli import main
    assert main(["run", "implicit_gemm", "--backend", "cpu", "--variants", "05", "07"]) == 0
    out = capsys.readouterr().out
    assert "05_large_tile" in out and "07_rsc_order" in out and "numpy im2col" in out
    assert "Every variant matched the reference" in out


# ------------------------------------------------------------------------------------------
# The chapter definition itself (no kernels)
# ------------------------------------------------------------------------------------------

def test_every_variant_has_a_tile_shape():
    assert set(implicit_gemm.TILES) == {v.name for v in CHAPTER.variants}


def test_only_the_tensor_core_variants_are_gpu_only_and_judged_as_tf32():
    tensor_core = ["08_tf32_mma", "10_wgmma_tma"]
    assert [v.name for v in CHAPTER.variants if v.gpu_only] == tensor_core
    assert [v.name for v in CHAPTER.variants if v.problem.get("precision") == "tf32"] == tensor_core
    assert not TF32.supports(implicit_gemm.CPU_PROBLEM, "cpu") and TF32.supports(implicit_gemm.GPU_PROBLEM, "cupy")


def test_the_wgmma_variant_needs_sm_90_and_tiles_any_output_width():
    wgmma = CHAPTER.variant("10_wgmma_tma")
    assert wgmma.min_arch == 90 and not wgmma.supports(implicit_gemm.CPU_PROBLEM, "cpu")
    for ow in (1, 5, 8, 9, 64, 100, 128, 129, 1000):
        tw, th = implicit_gemm._pixel_box(ow)
        assert tw * th == implicit_gemm.WGMMA_TILE and 8 <= tw <= 128 and th <= 256
        assert tw >= min(ow, 128) and (tw == 8 or tw < 2 * ow)


def test_make_inputs_gives_fresh_float32_and_a_nan_poisoned_output(rng):
    problem = dict(implicit_gemm.CPU_PROBLEM)
    a, b = CHAPTER.make_inputs(problem, np, rng), CHAPTER.make_inputs(problem, np, rng)
    assert a["x"].shape == (2, 8, 13, 13) and a["w"].shape == (16, 8, 3, 3) and a["out"].shape == (2, 16, 13, 13)
    assert all(a[key].dtype == np.float32 for key in ("x", "w", "out"))
    assert -1 <= a["x"].min() and a["x"].max() < 1 and not np.array_equal(a["x"], b["x"])
    assert np.isnan(a["out"]).all()


def test_output_size_follows_stride_and_padding():
    assert implicit_gemm.output_size(implicit_gemm.GPU_PROBLEM) == (128, 128)
    assert implicit_gemm.output_size(shape(1, 1, 7, 5, 1, 3, 2, 2, 1)) == (4, 3)
    assert implicit_gemm.output_size(shape(1, 1, 6, 6, 1, 3, 3, 3, 0)) == (2, 2)


def test_reference_matches_the_definition_summed_term_by_term(rng):
    problem = shape(2, 3, 5, 4, 2, 3, 2, 2, 1)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    x, w = inputs["x"].astype(np.float64), inputs["w"].astype(np.float64)
    oh, ow = implicit_gemm.output_size(problem)
    expected = np.zeros((2, 2, oh, ow))
    for n, k, p, q, c, r, s in np.ndindex(2, 2, oh, ow, 3, 3, 2):
        h, col = p * 2 - 1 + r, q * 2 - 1 + s
        if 0 <= h < 5 and 0 <= col < 4:
            expected[n, k, p, q] += x[n, c, h, col] * w[k, c, r, s]
    ref = CHAPTER.reference(problem, inputs)
    assert np.allclose(ref.value, expected, rtol=1e-12, atol=1e-12)
    assert (ref.abs_value >= np.abs(ref.value)).all()


def test_check_rejects_nan_a_wrong_output_and_a_wrong_shape(rng):
    problem = dict(implicit_gemm.CPU_PROBLEM)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    ref = CHAPTER.reference(problem, inputs)
    good = ref.value.astype(np.float32)
    assert CHAPTER.check(good, ref, problem)
    for index, value in (((0, 0, 0, 0), np.nan), ((1, 15, 12, 12), good[1, 15, 12, 12] + 0.01)):
        bad = good.copy()
        bad[index] = value
        assert not CHAPTER.check(bad, ref, problem)
    assert not CHAPTER.check(good[:1], ref, problem)


def test_tf32_results_get_the_tf32_tolerance_and_fp32_results_the_fp32_one(rng):
    problem = dict(implicit_gemm.CPU_PROBLEM)
    inputs = CHAPTER.make_inputs(problem, np, rng)
    ref = CHAPTER.reference(problem, inputs)
    off = (ref.value + 1e-4 * ref.abs_value).astype(np.float32)    # TF32-sized errors
    assert not CHAPTER.check(off, ref, problem)
    assert CHAPTER.check(implicit_gemm.Result(off, "tf32"), ref, problem)
    assert CHAPTER.check(off, ref, {**problem, "precision": "tf32"})


def test_tolerances_are_gamma_of_the_reduction_length():
    fp32 = implicit_gemm.tolerance(implicit_gemm.GPU_PROBLEM)            # C*R*S = 576 terms
    assert 576 * 2.0 ** -24 < fp32 < 1.01 * 576 * 2.0 ** -24
    tf32 = implicit_gemm.tolerance(implicit_gemm.GPU_PROBLEM, "tf32")
    assert 1e-3 < tf32 < 3e-3                                             # TF32's ~1e-3 relative


def test_check_problem_rejects_empty_outputs_and_32_bit_overflow():
    with pytest.raises(ValueError, match="larger than the padded input"):
        implicit_gemm.check_problem(shape(1, 1, 2, 2, 1, 3, 3, 1, 0))
    with pytest.raises(ValueError, match="32-bit"):
        implicit_gemm.check_problem(shape(64, 256, 512, 512, 1, 1, 1, 1, 0))
    with pytest.raises(ValueError, match="at least 1"):
        implicit_gemm.check_problem(shape(0, 1, 1, 1, 1, 1, 1, 1, 0))


def test_model_counts_two_flops_per_tap_and_each_array_once():
    p = implicit_gemm.GPU_PROBLEM
    model = CHAPTER.variant("05").model(p)
    assert model.flops == 2 * 8 * 128 * 128 * 128 * 64 * 9                 # 19.3 GFLOP
    assert model.bytes == 4 * (8 * 64 * 128 * 128 + 128 * 64 * 9 + 8 * 128 * 128 * 128)
    assert 180 < model.intensity < 200                                    # far right of the ridge
    assert CHAPTER.variant("07").model(p).bytes == model.bytes + 2 * 4 * 9 * 64 * 128


def test_load_intensity_is_the_books_quarter_for_one_output_and_grows_with_the_tile():
    assert implicit_gemm.load_intensity(1, 1) == 0.25                    # PMPP's basic kernel
    intensities = {name: implicit_gemm.load_intensity(*tile) for name, tile in implicit_gemm.TILES.items()}
    assert intensities["02_shared_tiles"] == 4 and intensities["04_thread_tile"] == 16
    assert intensities["05_large_tile"] == 32
    assert implicit_gemm.load_intensity(64, 256) < implicit_gemm.load_intensity(128, 128)  # square is best


def test_sweep_is_the_lab_reports_eight_problems():
    assert len(implicit_gemm.SWEEP) == 8
    assert {(p["c"], p["h"], p["k"]) for p in implicit_gemm.SWEEP} == {
        (c, hw, k) for c in (32, 64) for hw in (64, 128) for k in (128, 256)}
    assert implicit_gemm.GPU_PROBLEM in implicit_gemm.SWEEP


def test_sweep_table_puts_each_problems_best_variants_beside_cudnn():
    problem = implicit_gemm.describe(implicit_gemm.GPU_PROBLEM)           # ends in "fp32"
    tf32 = problem.removesuffix("fp32") + "tf32"

    def entry(name, kind, us, description=problem, correct=True):
        return {"name": name, "kind": kind, "problem": description, "median_us": us,
                "gflops": 19.33e9 / us / 1e3, "correct": correct}

    entries = [entry("06_double_buffer", "variant", 600), entry("07_rsc_order", "variant", 500),
               entry("05_large_tile", "variant", 400, correct=False), entry("08_tf32_mma", "variant", 250, tf32),
               entry("cuDNN FP32 (torch conv2d)", "library", 462), entry("cuDNN TF32 (torch conv2d)", "library", 144)]
    (row,) = implicit_gemm.sweep_rows(entries)
    assert row["best_fp32"]["name"] == "07_rsc_order" and row["tf32"]["median_us"] == 250
    table = implicit_gemm.sweep_table(entries)
    assert "07_rsc_order" in table and "0.92x" in table and "0.58x" in table


def test_main_loop_mix_counts_the_longest_loop_of_the_named_kernel():
    listing = """\t\tFunction : Other
        /*0000*/                   FFMA R1, R2, R3, R1 ;
        /*0010*/              @!P0 BRA 0x0 ;
\t\tFunction : Kernel
        /*0000*/                   MOV R1, RZ ;
        /*0010*/                   LDS.128 R4, [R2] ;
        /*0020*/                   FFMA R1, R4, R5, R1 ;
        /*0030*/               @P1 BRA 0x50 ;
        /*0040*/                   FFMA R1, R6, R7, R1 ;
        /*0050*/              @!P0 BRA 0x10 ;
        /*0060*/                   EXIT ;
"""
    mix = implicit_gemm.main_loop_mix(listing, "Kernel")
    assert mix == {"LDS": 1, "FFMA": 2, "BRA": 2}
    with pytest.raises(ValueError, match="no loop"):
        implicit_gemm.main_loop_mix(listing.replace("BRA 0x10", "BRA 0x60"), "Kernel")


# ------------------------------------------------------------------------------------------
# Tile sizes from bounds
# ------------------------------------------------------------------------------------------

def test_bandwidth_gives_a_lower_bound_on_the_tile_from_the_ridge_point():
    figures = implicit_gemm.GPU_FIGURES
    # ridge = FP32 FLOP/s over DRAM bytes/s, by hand: T4 8.1e12 / 320e9 = 25.3125; A100 19.5e12 /
    # 2039e9 = 9.5635; H100 65.021e12 / 3024e9 = 21.502; H200 64.961e12 / 4336e9 = 14.982
    assert figures["T4"].ridge == pytest.approx(25.3125)
    assert figures["A100"].ridge == pytest.approx(9.5635, rel=1e-4)
    assert figures["H100"].ridge == pytest.approx(21.502, rel=1e-4)
    assert figures["H200"].ridge == pytest.approx(14.982, rel=1e-4)
    # a T x T tile loads 8T bytes per reduction index for 2T^2 FLOP: T / 4 FLOP per byte
    assert implicit_gemm.load_intensity(64, 64) == 16 and implicit_gemm.load_intensity(128, 128) == 32
    assert implicit_gemm.smallest_square_tile(figures["T4"]) == pytest.approx(101.25)
    assert implicit_gemm.smallest_square_tile(figures["H200"]) == pytest.approx(59.93, rel=1e-3)
    # the bound is where the tile's intensity meets the ridge
    for gpu in figures.values():
        t = implicit_gemm.smallest_square_tile(gpu)
        assert implicit_gemm.load_intensity(t, t) == pytest.approx(gpu.ridge)


def test_shared_memory_and_registers_give_upper_bounds_on_the_tile():
    figures = implicit_gemm.GPU_FIGURES
    assert implicit_gemm.tile_shared_bytes(128, 128, 8) == 8192                 # 05: 4 * 256 * 8
    assert implicit_gemm.tile_shared_bytes(128, 128, 16, stages=3) == 49152     # 09: 48 KB
    # 2 blocks, 2 stages, TILE_K = 8: T <= 228 KB / (8 * 8 * 2 * 2) = 912 on the H100; 256 on a T4
    assert implicit_gemm.largest_square_tile_by_shared(figures["H100"], 8, 2, 2) == 912
    assert implicit_gemm.largest_square_tile_by_shared(figures["T4"], 8, 2, 2) == 256
    assert implicit_gemm.thread_registers(8, 8) == 80 and implicit_gemm.thread_registers(16, 8) == 152
    # 65,536 / (256 threads x 2 blocks) = 128; with 128 threads 256, held to 255; a T4's 4 blocks: 64
    assert implicit_gemm.register_budget(figures["H100"], 256, 2) == 128
    assert implicit_gemm.register_budget(figures["H200"], 128, 2) == 255
    assert implicit_gemm.register_budget(figures["T4"], 256, 4) == 64
    # t^2 + 2t <= budget: 10 x 10 (120) fits 128, 11 x 11 (143) does not; 15 x 15 fills 255 exactly
    assert implicit_gemm.largest_thread_tile(128) == 10 and implicit_gemm.largest_thread_tile(255) == 15
    assert implicit_gemm.largest_thread_tile(80) == 8


def test_tile_shapes_are_the_kernel_files_defines():
    for name, tile in implicit_gemm.TILE_SHAPES.items():
        defines = implicit_gemm.kernel_defines(name)
        assert (defines["TILE_M"], defines["TILE_N"], defines["THREADS"]) == \
            (tile["tile_m"], tile["tile_n"], tile["threads"]), name
        assert defines.get("TILE_K", defines.get("TILE_C")) == tile["tile_k"], name
        if "STAGES" in defines:
            assert defines["STAGES"] == tile["stages"], name
        if tile["thread"]:
            assert tile["thread"][0] * tile["thread"][1] * tile["threads"] == tile["tile_m"] * tile["tile_n"], name
    assert implicit_gemm.kernel_defines("09_register_blocking")["THREAD_M"] == 16
