"""pmpp.runner.measure and the benchmark sets that ``pmpp bench --all-problems`` records."""
import dataclasses

import pytest

from pmpp import chapters, runner
from pmpp.chapters import elementwise

SMALL = {"n": 4099, "dtype": "float32", "op": "mul"}


def test_each_measured_variant_writes_into_a_freshly_poisoned_output(backend):
    # Inputs are made once per problem; a variant that writes nothing must still fail, even right
    # after a correct variant filled the same problem's output.
    packed = elementwise.CHAPTER.variant("03_packed")
    lazy = dataclasses.replace(packed, launch=lambda module, problem, inputs: inputs["z"])
    chapter = dataclasses.replace(elementwise.CHAPTER, variants=(packed, lazy), library=())
    problem = SMALL if backend == "cpu" else elementwise.CHAPTER.problems["gpu"]
    entries = runner.measure(chapter, backend=backend, problem=problem)
    assert [e["correct"] for e in entries] == [True, False]


def test_inputs_are_drawn_once_per_problem(monkeypatch):
    made = []
    make = elementwise.CHAPTER.make_inputs
    chapter = dataclasses.replace(elementwise.CHAPTER, make_inputs=lambda *a: made.append(a[0]) or make(*a))
    entries = runner.measure(chapter, backend="cpu", problem=SMALL,
                             variants=["01_naive", "02_grid_stride", "03_packed", "05_fused_silu_mul"])
    assert all(e["correct"] for e in entries) and len(entries) == 5       # four variants and numpy
    assert [p["op"] for p in made] == ["mul", "silu_mul"]


@pytest.mark.parametrize("name", chapters.names())
def test_benchmark_sets_name_real_variants_and_distinct_keys(name):
    chapter = chapters.get(name)
    sets = chapter.bench_sets()
    keys = [key for key, _ in sets]
    assert keys[0] == name and len(set(keys)) == len(keys)
    for key, bench_set in sets:
        assert bench_set.problems, key
        variants = [chapter.variant(v) if isinstance(v, str) else v
                    for v in bench_set.variants or chapter.variants]
        for problem in bench_set.problems:
            assert any(v.supports(runner.problem_for(v, problem)) for v in variants), (key, problem)


def test_measure_problems_reports_each_problem_and_returns_all_entries():
    problems = [SMALL, {**SMALL, "n": 1000}]
    seen = []
    entries = runner.measure_problems(elementwise.CHAPTER, problems, backend="cpu", variants=["03_packed"],
                                      report=lambda problem, found: seen.append((problem["n"], len(found))))
    assert seen == [(4099, 2), (1000, 2)]                      # 03_packed and numpy, per problem
    assert [e["problem"] for e in entries] == [elementwise.CHAPTER.describe(p) for p in problems for _ in "ab"]
    assert all(e["correct"] for e in entries)


def test_a_variant_that_cannot_run_is_a_row_that_says_why():
    from pmpp.chapters import scan
    problem = {"n": 5000, "dtype": "float32", "kind": "inclusive"}
    entries = runner.measure(scan.CHAPTER, backend="cpu", problem=problem, library=False,
                             variants=["02_kogge_stone", "06_hierarchical"], skipped=True)
    assert [e["name"] for e in entries] == ["02_kogge_stone", "06_hierarchical"]
    kogge, hierarchical = entries
    assert kogge["median_us"] is None and kogge["correct"] is None and "at most n=1024" in kogge["skipped"]
    assert hierarchical["correct"] is True and not hierarchical.get("skipped")
    assert runner.timed(entries) == [hierarchical]
    assert "not run: handles at most n=1024" in runner.format_table(entries)
    # without skipped=True (notebooks, plots) the row is left out, as before
    assert [e["name"] for e in runner.measure(scan.CHAPTER, backend="cpu", problem=problem, library=False,
                                              variants=["02_kogge_stone"])] == []


def test_gpu_only_variants_say_so_on_the_cpu_engine():
    from pmpp.chapters import implicit_gemm
    variant = implicit_gemm.CHAPTER.variant("08_tf32_mma")
    assert runner.why_not(variant, implicit_gemm.CHAPTER.problems["cpu"], "cpu").startswith("GPU only")
    assert runner.why_not(implicit_gemm.CHAPTER.variant("01_naive"), implicit_gemm.CHAPTER.problems["cpu"],
                          "cpu") is None


def test_exact_check_finds_one_wrong_element():
    import numpy as np
    reference = np.arange(10, dtype=np.float64)
    output = reference.astype(np.float32)
    assert runner.exact_check(output, reference)
    output[7] += 1
    result = runner.exact_check(output, reference)
    assert not result and result.error == 1 and "element 7" in result.detail
    assert not runner.exact_check(output[:9], reference)


def test_measure_reports_each_row_to_the_progress_display():
    steps = []

    class Recorder:
        def advance(self, label=""):
            steps.append(label)

    runner.measure(elementwise.CHAPTER, backend="cpu", problem=SMALL, variants=["01_naive"], progress=Recorder())
    assert steps == ["elementwise/01_naive"] + [f"elementwise/{lib.name}" for lib in elementwise.CHAPTER.library]


def test_precompile_does_nothing_on_the_cpu_engine():
    from pmpp.runner import precompile
    assert precompile([(chapters.get("reduction"), chapters.get("reduction").variants)], "cpu") == 0


def test_precompile_takes_every_variant_that_runs_on_a_gpu_at_some_size():
    from pmpp.runner import to_precompile
    plan = [(chapters.get(name), chapters.get(name).variants) for name in chapters.names()]
    work = to_precompile(plan, "cupy")
    assert ("scan", "01_kogge_stone_racy") in work and ("scan", "08_decoupled_lookback") in work
    assert ("convolution", "04_cached_halo_as_printed") not in work      # CPU engine only
    assert len(work) == sum(len(variants) for _, variants in plan) - 1


def test_precompile_gives_way_when_processes_cannot_start(monkeypatch):
    import concurrent.futures

    class Refusing:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("An attempt has been made to start a new process before the current "
                               "process has finished its bootstrapping phase.")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Refusing)
    assert runner._compile_in_processes([("reduction", "01_simple", False)] * 2, jobs=2) == 0


@pytest.mark.gpu
def test_precompile_fills_cupys_kernel_cache_for_the_run_that_follows(tmp_path, monkeypatch):
    from pmpp.runner import precompile
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))       # the spawned processes inherit it
    variants = chapters.get("reduction").variants
    assert precompile([(chapters.get("reduction"), variants)], "cupy", jobs=4) == len(variants) + len({repr(sorted(v.problem.items())) for v in variants})
    cached = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert len(cached) >= len(variants), cached
    # now the cache holds them: nothing more is done
    assert precompile([(chapters.get("reduction"), variants)], "cupy", jobs=4) == 0


def test_a_noisy_gpu_timing_is_taken_again_and_the_steadiest_kept(monkeypatch):
    from pmpp import timing
    takes = iter([[10.0, 15.0, 16.0, 17.0], [10.0, 14.0, 14.5, 15.0], [10.0, 10.2, 10.3, 10.4]])
    monkeypatch.setattr(timing, "bench", lambda run, **kw: timing.Timing.from_samples(next(takes), timing.CUDA_EVENTS))
    entry = runner._checked_and_timed("k", "variant", "n=1", None, "cupy", {"warmup": 1, "repeat": 4},
                                      lambda: None, lambda out: True)
    assert entry["remeasured"] == 2 and entry["noisy"] is False and entry["median_us"] == 10.25
    assert (entry["q1_us"], entry["q3_us"]) == pytest.approx((10.15, 10.325))


def test_a_row_still_noisy_after_its_retakes_says_so(monkeypatch):
    from pmpp import timing
    monkeypatch.setattr(timing, "bench", lambda run, **kw: timing.Timing.from_samples([10.0, 20.0, 30.0], timing.CUDA_EVENTS))
    entry = runner._checked_and_timed("k", "variant", "n=1", None, "cupy", {"warmup": 1, "repeat": 3},
                                      lambda: None, lambda out: True)
    assert entry["noisy"] is True and entry["remeasured"] == runner.REMEASURES


def test_the_cpu_engine_does_not_retake_its_wall_clock_timings(monkeypatch):
    from pmpp import timing
    calls = []
    def noisy_bench(run, **kw):
        calls.append(1)
        return timing.Timing.from_samples([10.0, 20.0, 30.0], timing.CPU_WALL_CLOCK)
    monkeypatch.setattr(timing, "bench", noisy_bench)
    entry = runner._checked_and_timed("k", "variant", "n=1", None, "cpu", {"warmup": 1, "repeat": 3},
                                      lambda: None, lambda out: True)
    assert len(calls) == 1 and "remeasured" not in entry and entry["noisy"] is True


def test_a_configured_variant_is_the_same_file_with_other_defines():
    v05 = chapters.get("reduction").variant("05")
    v = v05.configured(COARSE_FACTOR=8)
    assert v.name == "05_coarsened COARSE_FACTOR=8" and v.defines["COARSE_FACTOR"] == 8
    assert chapters.get("reduction").kernel_path(v) == "reduction/05_coarsened.cu"
    assert v.configured(COARSE_FACTOR=2).defines["COARSE_FACTOR"] == 2
    with pytest.raises(KeyError, match="no compile-time parameter TILE"):
        v05.configured(TILE=4)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["reduction:coarse_factor", "stencil:block_shape"])
def test_every_configuration_a_sweep_records_is_right_on_the_cpu_engine(key):
    chapter = chapters.get(key.split(":")[0])
    sweep = dict(chapter.bench_sets())[key]
    small = {"reduction": {"n": 100_003, "op": "sum"}, "stencil": {"n": 37}}[chapter.name]
    for variant in sweep.variants:
        result = runner.verify(chapter, variant, small)
        assert result.ok, f"{variant.name}: {result.detail}"
