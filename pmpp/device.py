"""The device's two ceilings, measured: memory bandwidth and FP32 rate — the roofline's two roofs.

* ``copy_gbs``: a large float4 grid-stride device-to-device copy (``kernels/common/copy.cu``),
  at least 1 GiB (and 8x L2) moved per run, counting bytes read plus bytes written.
* ``read_gbs``: the same volume only read (``kernels/common/read.cu``, the fastest of 1, 2, 4 or 8
  float4 loads per thread): the ceiling of a kernel that reads its input and writes next to
  nothing (a sum, a histogram). Recordings made before it existed have None.
* ``fp32_gflops``: independent chains of fused multiply-adds (``kernels/common/fma.cu``),
  counting 2 flops per FMA, its result checked so that the work cannot have been dropped.

Each is the median of repeated runs timed with CUDA events. Beside them, the datasheet peaks
that follow from the device's properties — what the hardware could do, not what a kernel gets.
The measurement is cached per device under ``$PMPP_CACHE_DIR`` (default ``~/.cache/pmpp/``).

The CPU engine has no such ceilings: there :func:`ceilings` returns the ones recorded on a real
GPU in ``results/`` (``measured_on`` says which GPU and when), or raises if none are recorded.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pmpp.results as results
from pmpp.paths import cache_dir
from pmpp.errors import BackendUnavailableError
from pmpp.backends import gpu_available
from pmpp.timing import Timing, bench, gbps, gflops

# FP32 lanes (FP32 FMA results per clock) per SM, by compute capability.
FP32_LANES_PER_SM = {
    (5, 0): 128, (5, 2): 128, (5, 3): 128,
    (6, 0): 64, (6, 1): 128, (6, 2): 128,
    (7, 0): 64, (7, 2): 64, (7, 5): 64,
    (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128, (10, 3): 128,
    (12, 0): 128, (12, 1): 128,
}

COPY_MIN_BYTES = 1 << 30       # bytes moved (read + written) per timed copy, at least
COPY_L2_FACTOR = 8             # ... and at least this many times the L2 cache
FMA_CHAINS = 8                 # must match CHAINS in kernels/common/fma.cu (passed as a define)
FMA_ITERS = 16384              # ~1 ms per run on an H100
BLOCK_DIM = 256
READ_UNROLLS = (1, 2, 4, 8)      # float4 loads per thread tried for the read-only ceiling


@dataclass(frozen=True)
class Ceilings:
    """Measured ceilings (``copy_gbs``, ``fp32_gflops``, ``read_gbs``) and datasheet peaks (None if
    unknown)."""

    device: str
    copy_gbs: float
    fp32_gflops: float
    peak_bw_gbs: float | None
    peak_fp32_gflops: float | None
    measured_on: str
    read_gbs: float | None = None

    @property
    def ridge_intensity(self) -> float:
        """OP/B where the two measured roofs meet: below it a kernel is bound by memory."""
        return self.fp32_gflops / self.copy_gbs

    def __str__(self) -> str:
        def of_peak(x: float, peak: float | None) -> str:
            return f" ({100 * x / peak:.0f}% of the {peak:,.0f} datasheet peak)" if peak else ""

        read = f"read {self.read_gbs:,.0f} GB/s, " if self.read_gbs else ""
        return (f"{self.device}: copy {self.copy_gbs:,.0f} GB/s{of_peak(self.copy_gbs, self.peak_bw_gbs)}, {read}"
                f"FP32 {self.fp32_gflops:,.0f} GFLOP/s{of_peak(self.fp32_gflops, self.peak_fp32_gflops)}; "
                f"{self.measured_on}")


def peak_bandwidth_gbs(memory_clock_khz: float | None, bus_bits: float | None) -> float | None:
    """Datasheet bandwidth: 2 transfers per memory clock x bus width in bytes, in GB/s."""
    if not memory_clock_khz or not bus_bits:
        return None
    return 2 * memory_clock_khz * 1e3 * bus_bits / 8 / 1e9


def peak_fp32_gflops(compute_capability: str | tuple | None, sm_count: int | None,
                     sm_clock_khz: float | None) -> float | None:
    """Datasheet FP32 rate: SMs x FP32 lanes per SM x 2 flops per FMA x SM clock, in GFLOP/s."""
    lanes = FP32_LANES_PER_SM.get(_cc_tuple(compute_capability))
    if not lanes or not sm_count or not sm_clock_khz:
        return None
    return sm_count * lanes * 2 * sm_clock_khz * 1e3 / 1e9


def theoretical_peaks(device: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(peak_bw_gbs, peak_fp32_gflops) from a :func:`pmpp.results.device_info` dict."""
    return (peak_bandwidth_gbs(device.get("memory_clock_khz"), device.get("memory_bus_bits")),
            peak_fp32_gflops(device.get("compute_capability"), device.get("sm_count"),
                             device.get("sm_clock_khz")))


def _cc_tuple(cc: str | tuple | None) -> tuple[int, int] | None:
    if cc is None:
        return None
    if isinstance(cc, str):
        major, _, minor = cc.partition(".")
        return int(major), int(minor or 0)
    return int(cc[0]), int(cc[1])


# ---------------------------------------------------------------------------------------------
# The public entry point

def ceilings(refresh: bool = False) -> Ceilings:
    """This device's ceilings: measured (cached per device; ``refresh=True`` measures again), or,
    without a GPU, the newest ones recorded on a real GPU in ``results/``."""
    if not gpu_available():
        return recorded_ceilings()
    info = results._gpu_properties()
    path = cache_path(info)
    if not refresh:
        cached = _read_cache(path, _device_key(info))
        if cached is not None:
            return cached
    measured = measure(info)
    _write_cache(path, _device_key(info), measured)
    return measured


def recorded_ceilings(directory: str | os.PathLike | None = None) -> Ceilings:
    """The ceilings in the newest results file of ``results/``; BackendUnavailableError if none."""
    found = results.recorded(directory=directory)
    if not found:
        where = directory or results.RESULTS_DIR
        raise BackendUnavailableError(
            f"no GPU found, and no ceilings are recorded in {where}: the CPU engine has no bandwidth "
            "or FLOP/s ceiling worth drawing. Run pmpp.ceilings.ceilings() on a machine with a CUDA "
            "GPU and record a chapter there (pmpp.results.write_results) to have some.")
    r = found[0]
    c = r["ceilings"]
    peak_bw, peak_fp32 = theoretical_peaks(r["device"])
    return Ceilings(device=r["device"]["name"], copy_gbs=float(c["copy_gbs"]),
                    fp32_gflops=float(c["fp32_gflops"]),
                    peak_bw_gbs=c.get("peak_bw_gbs") or peak_bw,
                    peak_fp32_gflops=c.get("peak_fp32_gflops") or peak_fp32,
                    measured_on=results.label(r), read_gbs=c.get("read_gbs"))


# ---------------------------------------------------------------------------------------------
# Measuring (GPU only)

def measure(info: Mapping[str, Any] | None = None, *, warmup: int = 10, repeat: int = 30) -> Ceilings:
    """Measure both ceilings on the current GPU now (no cache)."""
    info = results._gpu_properties() if info is None else info
    copy, _ = measure_copy(info, warmup=warmup, repeat=repeat)
    read, _ = measure_read(info, warmup=warmup, repeat=repeat)
    fp32, _ = measure_fp32(info, warmup=warmup, repeat=repeat)
    peak_bw, peak_fp32 = theoretical_peaks(info)
    today = _dt.date.today().isoformat()
    return Ceilings(device=info["name"], copy_gbs=copy, fp32_gflops=fp32, peak_bw_gbs=peak_bw,
                    peak_fp32_gflops=peak_fp32, measured_on=f"measured on {info['name']}, {today}",
                    read_gbs=read)


def _one_wave(info: Mapping[str, Any]) -> int:
    """Blocks of BLOCK_DIM threads that fill every SM once."""
    per_sm = max(1, (info.get("max_threads_per_sm") or 2048) // BLOCK_DIM)
    return (info.get("sm_count") or 1) * per_sm


def _bytes_per_run(info: Mapping[str, Any]) -> int:
    """Bytes a bandwidth ceiling's kernel moves per timed run: at least COPY_MIN_BYTES and
    COPY_L2_FACTOR times the L2, within 80% of the free device memory."""
    import cupy

    moved = max(COPY_MIN_BYTES, COPY_L2_FACTOR * (info.get("l2_bytes") or 0))
    return min(moved, int(0.8 * cupy.cuda.Device().mem_info[0]))


def measure_copy(info: Mapping[str, Any] | None = None, *, warmup: int = 10,
                 repeat: int = 30) -> tuple[float, Timing]:
    """(GB/s, Timing) of the float4 device-to-device copy, bytes read + written over time."""
    import cupy
    import numpy as np

    from .loader import load

    info = results._gpu_properties() if info is None else info
    n4 = _bytes_per_run(info) // 32                  # 16 bytes read + 16 written per float4
    src = cupy.random.random(4 * n4, dtype=cupy.float32)
    dst = cupy.full_like(src, cupy.nan)
    kernel = load("common/copy.cu", defines={"BLOCK_DIM": BLOCK_DIM},
                       backend="cupy").get_function("copy_kernel")
    blocks = min(-(-n4 // BLOCK_DIM), 2**31 - 1)    # one float4 per thread: fastest on an H100
    launch = ((blocks,), (BLOCK_DIM,), (src, dst, np.int64(n4)))
    kernel(*launch)
    if not bool(cupy.array_equal(src, dst)):
        raise RuntimeError("the bandwidth ceiling's copy kernel did not copy its input: its time is meaningless")
    t = bench(lambda: kernel(*launch), warmup=warmup, repeat=repeat, backend="cupy")
    return gbps(32 * n4, t.median_us), t


def measure_read(info: Mapping[str, Any] | None = None, *, warmup: int = 10,
                 repeat: int = 30, unrolls: Sequence[int] = READ_UNROLLS) -> tuple[float, Timing]:
    """(GB/s, Timing) of the fastest read-only kernel over ``unrolls`` (float4 loads per thread),
    bytes read over time, each one's warp sums checked."""
    import cupy
    import numpy as np

    from .loader import load

    info = results._gpu_properties() if info is None else info
    n4 = _bytes_per_run(info) // 16
    # Small integers: every thread's and every warp's sum is exact in float32, whatever the order.
    src = cupy.random.randint(0, 4, size=4 * n4).astype(cupy.float32)
    expected = float(src.sum(dtype=cupy.float64))
    best = None
    for unroll in unrolls:
        blocks = -(-n4 // (BLOCK_DIM * unroll))
        warp_sums = cupy.full(blocks * BLOCK_DIM // 32, cupy.nan, dtype=cupy.float32)
        kernel = load("common/read.cu", defines={"BLOCK_DIM": BLOCK_DIM, "UNROLL": unroll},
                           backend="cupy").get_function("read_kernel")
        launch = ((blocks,), (BLOCK_DIM,), (src, warp_sums, np.int64(n4)))
        kernel(*launch)
        if float(warp_sums.sum(dtype=cupy.float64)) != expected:
            raise RuntimeError("the read-only ceiling's kernel did not read all of its input: its time is meaningless")
        t = bench(lambda: kernel(*launch), warmup=warmup, repeat=repeat, backend="cupy")
        if best is None or t.median_us < best.median_us:
            best = t
    return gbps(16 * n4, best.median_us), best


def measure_fp32(info: Mapping[str, Any] | None = None, *, iters: int = FMA_ITERS, warmup: int = 10,
                 repeat: int = 30) -> tuple[float, Timing]:
    """(GFLOP/s, Timing) of the FMA-chain kernel, 2 flops per FMA, its result checked."""
    import cupy
    import numpy as np

    from .loader import load

    info = results._gpu_properties() if info is None else info
    blocks = _one_wave(info)
    threads = blocks * BLOCK_DIM
    a, b = np.float32(1 - 2.0 ** -12), np.float32(0.25)
    out = cupy.full(threads, cupy.nan, dtype=cupy.float32)
    kernel = load("common/fma.cu", defines={"BLOCK_DIM": BLOCK_DIM, "CHAINS": FMA_CHAINS},
                       backend="cupy").get_function("fma_kernel")
    launch = ((blocks,), (BLOCK_DIM,), (out, a, b, np.int32(iters)))
    kernel(*launch)
    _check_fma(cupy.asnumpy(out), float(a), float(b), iters)
    t = bench(lambda: kernel(*launch), warmup=warmup, repeat=repeat, backend="cupy")
    return gflops(2.0 * FMA_CHAINS * iters * threads, t.median_us), t


def fma_expected(threads: int, a: float, b: float, iters: int, chains: int = FMA_CHAINS):
    """What fma.cu writes, in float64: sum over chains of x_n = a^n (x_0 - L) + L, L = b/(1-a)."""
    import numpy as np

    i = np.arange(threads)
    x0 = np.arange(chains)[None, :] + 0.125 * (i & 15)[:, None]
    limit = b / (1 - a)
    return (a ** iters * (x0 - limit) + limit).sum(axis=1)


def _check_fma(out, a: float, b: float, iters: int) -> None:
    import numpy as np

    expected = fma_expected(out.size, a, b, iters)
    err = np.max(np.abs(out - expected) / np.abs(expected))
    if not err < 1e-3:   # also catches NaN: an unwritten output
        raise RuntimeError(f"the FP32 ceiling's FMA kernel computed the wrong result (max relative error "
                           f"{err:.2e}): the compiler may have dropped work, so its time is meaningless")


# ---------------------------------------------------------------------------------------------
# The per-device cache



def _device_key(info: Mapping[str, Any]) -> str:
    return f"{info['name']}|{info.get('uuid') or info.get('pci_bus_id') or 'unknown'}"


def cache_path(info: Mapping[str, Any]) -> Path:
    ident = info.get("uuid") or info.get("pci_bus_id") or "unknown"
    return cache_dir() / f"ceilings-{results.device_slug(info['name'])}-{results.device_slug(str(ident))}.json"


def _read_cache(path: Path, key: str) -> Ceilings | None:
    try:
        data = json.loads(path.read_text())
        if data.get("key") != key:
            return None
        c = Ceilings(**data["ceilings"])
    except (OSError, ValueError, TypeError, KeyError):
        return None      # missing or unreadable: measure again
    ok = all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0
             for x in (c.copy_gbs, c.read_gbs, c.fp32_gflops))     # older caches lack read_gbs
    return c if ok else None


def _write_cache(path: Path, key: str, c: Ceilings) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "ceilings": asdict(c)}, indent=1) + "\n")
    os.replace(tmp, path)
