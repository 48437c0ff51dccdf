"""pmpp.timing (bench, rates) and pmpp.ceilings (datasheet peaks, the FMA check, the cache)."""
import json
import time
from types import SimpleNamespace

import numpy as np
import pytest

from pmpp import device as ceil
from pmpp import results
from pmpp.timing import (CPU_WALL_CLOCK, CUDA_EVENTS, Timing, bench, gbps, gflops, on_gpu,
                         rotation_count)


# --- bench on the CPU clock ------------------------------------------------------------------

def test_cpu_bench_median_of_sleeps_is_plausible():
    t = bench(lambda: time.sleep(0.002), warmup=1, repeat=7, backend="cpu")
    assert t.clock == CPU_WALL_CLOCK
    assert len(t.samples_us) == 7
    assert 2000 <= t.min_us <= t.median_us <= t.max_us
    assert t.median_us < 20000


def test_bench_rotates_among_input_sets_in_order():
    seen = []
    bench(lambda x: seen.append(x), args=[("a",), ("b",), ("c",)], warmup=2, repeat=5, backend="cpu")
    assert "".join(seen) == "abcabca"


def test_bench_passes_every_argument_of_an_input_set():
    seen = []
    bench(lambda x, y: seen.append((x, y)), args=[(1, 2), (3, 4)], warmup=0, repeat=2, backend="cpu")
    assert seen == [(1, 2), (3, 4)]


def test_bench_times_only_the_repeats_not_the_warmup():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.02 if len(calls) <= 2 else 0.0)   # the two warm-ups are slow

    t = bench(fn, warmup=2, repeat=4, backend="cpu")
    assert len(calls) == 6
    assert len(t.samples_us) == 4
    assert t.max_us < 15000


def test_bench_uses_the_backend_of_a_loaded_module():
    t = bench(lambda: None, warmup=0, repeat=3, backend=SimpleNamespace(backend="cpu"))
    assert t.clock == CPU_WALL_CLOCK


def test_bench_rejects_an_empty_rotation():
    with pytest.raises(ValueError, match="at least one input set"):
        bench(lambda: None, args=[], backend="cpu")


def test_bench_rejects_zero_repeats():
    with pytest.raises(ValueError, match="repeat"):
        bench(lambda: None, repeat=0, backend="cpu")


def test_unknown_backend_name_is_an_error():
    with pytest.raises(ValueError, match="unknown backend"):
        on_gpu("opencl")


def test_timing_from_samples_takes_median_min_max():
    t = Timing.from_samples([3.0, 1.0, 2.0, 10.0], CPU_WALL_CLOCK)
    assert (t.median_us, t.min_us, t.max_us) == (2.5, 1.0, 10.0)
    assert "cpu wall clock" in str(t)


def test_quartiles_are_a_robust_spread():
    t = Timing.from_samples([10.0, 11.0, 12.0, 13.0, 500.0], CPU_WALL_CLOCK)
    assert (t.q1_us, t.q3_us) == (11.0, 13.0)      # one outlier moves the max, not the quartiles
    assert Timing.from_samples([7.0], CPU_WALL_CLOCK).q1_us == 7.0


@pytest.mark.parametrize("samples, noisy", [
    ([10.0, 10.2, 10.3, 10.4, 900.0], False),      # one outlier: the median holds
    ([10.0, 11.5, 12.0, 12.5, 13.0], True),        # median 20% above the fastest repeat
    ([4.0, 4.6, 4.7, 4.8], False),                 # 17% above, but under an event's resolution
    ([100.0, 109.0, 109.5, 110.0], False),         # within 10%
])
def test_a_median_far_above_the_fastest_repeat_is_noise(samples, noisy):
    assert Timing.from_samples(samples, CUDA_EVENTS).noisy is noisy


# --- rates -----------------------------------------------------------------------------------

def test_gbps_is_bytes_per_nanosecond():
    assert gbps(1e9, 1e6) == pytest.approx(1.0)           # 1 GB in 1 s
    assert gbps(2 * 4 * 2**28, 700.0) == pytest.approx(3067.5, rel=1e-3)


def test_gflops_is_flops_per_nanosecond():
    assert gflops(2e12, 1e6) == pytest.approx(2000.0)


def test_rates_refuse_a_zero_time():
    with pytest.raises(ValueError, match="positive"):
        gbps(100, 0.0)


def test_rotation_count_covers_twice_the_l2():
    assert rotation_count(10e6, 50e6) == 10
    assert rotation_count(1e9, 50e6) == 1
    assert rotation_count(10e6, None) == 1


# --- ceilings: datasheet peaks, the FMA check, the cache -------------------------------------

def test_peak_fp32_of_an_h100_sxm():
    # 132 SMs x 128 lanes x 2 flops x 1.98 GHz
    assert ceil.peak_fp32_gflops("9.0", 132, 1_980_000) == pytest.approx(66908.16)


def test_peak_fp32_of_an_a100_uses_64_lanes():
    assert ceil.peak_fp32_gflops((8, 0), 108, 1_410_000) == pytest.approx(19491.84)


def test_peak_fp32_unknown_compute_capability_is_none():
    assert ceil.peak_fp32_gflops("99.9", 132, 1_980_000) is None


def test_peak_bandwidth_of_hbm3():
    # 2 x 2619 MHz x 5120 bits / 8
    assert ceil.peak_bandwidth_gbs(2_619_000, 5120) == pytest.approx(3352.32)
    assert ceil.peak_bandwidth_gbs(None, 5120) is None


def test_fma_closed_form_matches_the_iteration():
    a, b, iters, threads = 0.99, 0.5, 37, 20
    i = np.arange(threads)
    x = np.arange(ceil.FMA_CHAINS)[None, :] + 0.125 * (i & 15)[:, None]
    for _ in range(iters):
        x = x * a + b
    np.testing.assert_allclose(ceil.fma_expected(threads, a, b, iters), x.sum(axis=1), rtol=1e-12)


def test_fma_check_rejects_dropped_work():
    a, b = 1 - 2.0**-12, 0.25
    good = ceil.fma_expected(64, a, b, 16384).astype(np.float32)
    ceil._check_fma(good, a, b, 16384)
    with pytest.raises(RuntimeError, match="dropped work"):
        ceil._check_fma(ceil.fma_expected(64, a, b, 8192).astype(np.float32), a, b, 16384)
    with pytest.raises(RuntimeError):
        ceil._check_fma(np.full(64, np.nan, np.float32), a, b, 16384)


FAKE_GPU = {"name": "Fake GPU 80GB", "compute_capability": "9.0", "sm_count": 132, "sm_clock_khz": 1_980_000,
            "memory_clock_khz": 2_619_000, "memory_bus_bits": 5120, "uuid": "GPU-1234", "pci_bus_id": "0000:01:00.0"}


def fake_measured(info=None, **kw):
    return ceil.Ceilings("Fake GPU 80GB", 3000.0, 50000.0, 3352.0, 66908.0, "measured on Fake GPU 80GB, 2026-11-21",
                         read_gbs=3100.0)


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv("PMPP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ceil, "gpu_available", lambda: True)
    monkeypatch.setattr(results, "_gpu_properties", lambda: dict(FAKE_GPU))
    calls = []
    monkeypatch.setattr(ceil, "measure", lambda info: calls.append(info) or fake_measured())
    return calls


def test_ceilings_are_measured_once_then_cached_per_device(fake_gpu, tmp_path):
    first = ceil.ceilings()
    second = ceil.ceilings()
    assert len(fake_gpu) == 1
    assert first == second
    cached = json.loads(next(tmp_path.glob("ceilings-fake-gpu-80gb-*.json")).read_text())
    assert cached["key"] == "Fake GPU 80GB|GPU-1234"


def test_ceilings_refresh_measures_again(fake_gpu):
    ceil.ceilings()
    ceil.ceilings(refresh=True)
    assert len(fake_gpu) == 2


def test_cache_of_another_device_is_not_used(fake_gpu, monkeypatch):
    ceil.ceilings()
    monkeypatch.setattr(results, "_gpu_properties", lambda: {**FAKE_GPU, "uuid": "GPU-5678"})
    ceil.ceilings()
    assert len(fake_gpu) == 2


def test_corrupt_cache_is_measured_again(fake_gpu):
    ceil.ceilings()
    ceil.cache_path(FAKE_GPU).write_text("{not json")
    assert ceil.ceilings().copy_gbs == 3000.0
    assert len(fake_gpu) == 2


def test_ceilings_ridge_point():
    assert fake_measured().ridge_intensity == pytest.approx(50000 / 3000)


# --- on a GPU --------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_bench_uses_cuda_events():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.random(1 << 22, dtype=cupy.float32)
    t = bench(lambda: x * 2, warmup=2, repeat=10, backend="cupy")
    assert t.clock == CUDA_EVENTS
    assert 0 < t.min_us <= t.median_us <= t.max_us
    assert len(t.samples_us) == 10


@pytest.mark.gpu
def test_gpu_ceilings_are_under_the_datasheet_peaks(tmp_path, monkeypatch):
    pytest.importorskip("cupy")
    monkeypatch.setenv("PMPP_CACHE_DIR", str(tmp_path))
    c = ceil.ceilings(refresh=True)
    assert c.copy_gbs > 0 and c.fp32_gflops > 0
    if c.peak_bw_gbs:
        assert 0.3 * c.peak_bw_gbs < c.copy_gbs < 1.05 * c.peak_bw_gbs
    if c.peak_fp32_gflops:
        assert 0.3 * c.peak_fp32_gflops < c.fp32_gflops < 1.05 * c.peak_fp32_gflops
    assert list(tmp_path.glob("ceilings-*.json"))


@pytest.mark.gpu
def test_gpu_device_info_and_versions():
    pytest.importorskip("cupy")
    info = results.device_info()
    assert info["engine"] == "cupy" and info["sm_count"] > 0 and info["l2_bytes"] > 0
    assert "uuid" not in info
    v = results.versions()
    assert v["cuda_runtime"] and v["cupy"] and v["driver"]


@pytest.mark.gpu
def test_gpu_bench_times_the_device_not_the_hosts_launch_overhead():
    # A kernel of a few microseconds launched after 100 us of host work: the events must see the
    # kernel, not the host (the spin queued before each repeat keeps the device busy meanwhile).
    import cupy
    x = cupy.ones(1024, dtype=cupy.float32)

    def slow_host_launch():
        time.sleep(100e-6)
        x.__imul__(1.0)

    t = bench(slow_host_launch, warmup=2, repeat=20, backend="cupy")
    assert t.clock == CUDA_EVENTS and t.median_us < 50, t


def test_read_ceiling_kernel_reads_every_element_once():
    # The read-only ceiling's kernel, on the CPU engine: its warp sums add up to the input's sum
    # (a last tile that is only partly inside the input included).
    import pmpp
    n4 = 2 * 64 * 4 + 5                      # two whole tiles and five float4s of a third
    src = np.random.default_rng(3).integers(0, 4, size=4 * n4).astype(np.float32)
    warp_sums = np.full(64 // 32 * 3, np.nan, dtype=np.float32)
    kernel = pmpp.load("common/read.cu", defines={"BLOCK_DIM": 64, "UNROLL": 4},
                       backend="cpu", check=True).get_function("read_kernel")
    kernel((3,), (64,), (src, warp_sums, np.int64(n4)))
    assert float(warp_sums.sum(dtype=np.float64)) == float(src.sum(dtype=np.float64))


def test_a_time_budget_stops_the_repeats_early_but_not_below_five():
    from pmpp.timing import MIN_REPEATS, bench
    calls = []
    t = bench(lambda: calls.append(1), warmup=0, repeat=30, backend="cpu", budget_s=0.0)
    assert len(t.samples_us) == MIN_REPEATS == len(calls)
    assert len(bench(lambda: None, warmup=0, repeat=30, backend="cpu").samples_us) == 30
    assert len(bench(lambda: None, warmup=0, repeat=3, backend="cpu", budget_s=0.0).samples_us) == 3
