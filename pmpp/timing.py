"""Timing a kernel the way the numbers in the book are taken: warm up, repeat, take the median.

On the GPU each repeat sits between two CUDA events on the current stream, so what is timed is
device time. Before each repeat the device is given queued work (:class:`_Gap`): a write over
twice its L2 cache, so that no repeat finds the previous one's data still in cache, and a short
spin, so that the start event waits behind it while Python prepares the launch - otherwise a
kernel shorter than its launch overhead would be timed as the overhead.

On the CPU engine there are no events: each repeat is timed with ``time.perf_counter`` and the
result says ``clock="cpu wall clock"`` — those numbers say how the CPU engine ran, never how a
GPU would.

    t = bench(lambda: kernel(grid, block, (x, out, n)))
    print(t, gbps(model.bytes, t.median_us), "GB/s")

If one run's inputs fit in L2, repeated runs over the same buffers measure the cache, not device
memory: prepare several input sets and let ``bench`` rotate among them::

    sets = [make_inputs() for _ in range(rotation_count(bytes_per_set, l2_bytes))]
    t = bench(lambda x, out: kernel(grid, block, (x, out, n)), args=[(s.x, s.out) for s in sets])
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .backends import gpu_available

CUDA_EVENTS = "cuda events"
CPU_WALL_CLOCK = "cpu wall clock"

_GPU_BACKENDS = {"cupy", "gpu", "cuda"}


@dataclass(frozen=True)
class Timing:
    """Times of the repeats of one run, in microseconds, and the clock that took them."""

    median_us: float
    min_us: float
    max_us: float
    samples_us: tuple[float, ...]
    clock: str

    @classmethod
    def from_samples(cls, samples_us: Sequence[float], clock: str) -> "Timing":
        samples = tuple(float(s) for s in samples_us)
        if not samples:
            raise ValueError("a Timing needs at least one sample")
        return cls(statistics.median(samples), min(samples), max(samples), samples, clock)

    @property
    def spread(self) -> float:
        """(max - min) / median: two versions closer than this are not told apart."""
        return (self.max_us - self.min_us) / self.median_us if self.median_us else math.inf

    @property
    def q1_us(self) -> float:
        """The first quartile of the samples: with :attr:`q3_us`, the error bar of a figure (a
        robust spread: one outlier moves it no more than any other sample)."""
        return _quartiles(self.samples_us)[0]

    @property
    def q3_us(self) -> float:
        """The third quartile of the samples."""
        return _quartiles(self.samples_us)[1]

    @property
    def noisy(self) -> bool:
        """True when the median lies more than :data:`NOISE_BOUND` above the fastest repeat (and
        more than :data:`NOISE_FLOOR_US` above it, a CUDA event's resolution): the repeats did
        not agree, so the median says more about the machine than about the kernel."""
        return is_noisy(self.median_us, self.min_us)

    def __str__(self) -> str:
        return (f"{self.median_us:.1f} us median (min {self.min_us:.1f}, max {self.max_us:.1f}; "
                f"{len(self.samples_us)} runs, {self.clock})")


NOISE_BOUND = 0.10        # a median more than 10% above the fastest repeat ...
NOISE_FLOOR_US = 1.0      # ... and more than 1 us above it (events resolve about 0.5 us) is noise


def is_noisy(median_us: float, min_us: float) -> bool:
    """The rule of :attr:`Timing.noisy`, for a recorded row's median and minimum."""
    return median_us - min_us > max(NOISE_BOUND * min_us, NOISE_FLOOR_US)


def _quartiles(samples: Sequence[float]) -> tuple[float, float]:
    if len(samples) < 2:
        return samples[0], samples[0]
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, q3


def bench(fn: Callable[..., Any], *, args: Sequence[Sequence[Any]] | None = None,
          warmup: int = 5, repeat: int = 30, backend: Any = None,
          budget_s: float | None = None) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeat`` times timed; return the :class:`Timing`.

    ``args``: input sets to rotate among; call ``i`` (warm-ups included) is
    ``fn(*args[i % len(args)])``. Without ``args``, ``fn()`` is called.
    ``backend``: ``"cupy"`` (CUDA events) or ``"cpu"`` (wall clock), or a loaded module (its
    ``.backend`` is used); by default the GPU if one is available, else the CPU engine.
    ``budget_s``: stop the timed repeats once they have taken this many seconds of wall time, after
    at least ``min(repeat, MIN_REPEATS)`` of them (a long kernel needs fewer to find its median).
    """
    if repeat < 1 or warmup < 0:
        raise ValueError(f"bench needs repeat >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
    if args is not None and len(args) == 0:
        raise ValueError("bench(args=...) needs at least one input set to rotate among")

    def call(i: int) -> Any:
        return fn() if args is None else fn(*args[i % len(args)])

    if on_gpu(backend):
        samples = _bench_cuda_events(call, warmup, repeat, _Budget(budget_s, repeat))
        clock = CUDA_EVENTS
    else:
        samples = _bench_wall_clock(call, warmup, repeat, _Budget(budget_s, repeat))
        clock = CPU_WALL_CLOCK
    return Timing.from_samples(samples, clock)


def _bench_cuda_events(call: Callable[[int], Any], warmup: int, repeat: int, budget: "_Budget") -> list[float]:
    import cupy

    stream = cupy.cuda.get_current_stream()
    gap = _Gap.for_current_device()
    for i in range(warmup):
        call(i)
    stream.synchronize()
    starts = [cupy.cuda.Event() for _ in range(repeat)]
    ends = [cupy.cuda.Event() for _ in range(repeat)]
    budget.start()
    done = 0
    while done < repeat and not budget.spent(done):
        gap.queue(stream)
        starts[done].record(stream)
        call(warmup + done)
        ends[done].record(stream)
        ends[done].synchronize()     # the host never runs ahead: each gap covers one launch's overhead
        done += 1
    return [cupy.cuda.get_elapsed_time(s, e) * 1e3 for s, e in zip(starts[:done], ends[:done])]


_SPIN_SOURCE = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


class _Gap:
    """Device work queued before a timed repeat: a memset of ``2 x L2`` bytes (evicts the last
    repeat's data) and a one-thread spin of :attr:`SPIN_US` (hides the host's launch overhead)."""

    SPIN_US = 300.0
    _by_device: dict = {}

    def __init__(self):
        import cupy
        device = cupy.cuda.Device()
        l2 = int(device.attributes.get("L2CacheSize", 0)) or 64 * 2 ** 20
        self.scratch = cupy.empty(2 * l2, dtype=cupy.uint8)
        self.spin = cupy.RawKernel(_SPIN_SOURCE, "spin")
        clock_khz = int(device.attributes.get("ClockRate", 0)) or 2_000_000
        self.cycles = cupy.int64(int(self.SPIN_US * clock_khz / 1e3))
        self.memset_async = cupy.cuda.runtime.memsetAsync

    @classmethod
    def for_current_device(cls) -> "_Gap":
        import cupy
        device = cupy.cuda.Device().id
        if device not in cls._by_device:
            cls._by_device[device] = cls()
        return cls._by_device[device]

    def queue(self, stream) -> None:
        self.memset_async(self.scratch.data.ptr, 0, self.scratch.nbytes, stream.ptr)
        self.spin((1,), (1,), (self.cycles,))     # on the current stream, as is `stream`


def _bench_wall_clock(call: Callable[[int], Any], warmup: int, repeat: int, budget: "_Budget") -> list[float]:
    for i in range(warmup):
        call(i)
    samples = []
    budget.start()
    while len(samples) < repeat and not budget.spent(len(samples)):
        t0 = time.perf_counter()
        call(warmup + len(samples))
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples


MIN_REPEATS = 5


class _Budget:
    """When a timed loop with a wall-time budget may stop: after ``min(repeat, MIN_REPEATS)``
    repeats, once ``seconds`` have passed; never without a budget."""

    def __init__(self, seconds: float | None, repeat: int):
        self.seconds, self.least = seconds, min(repeat, MIN_REPEATS)
        self.began = 0.0

    def start(self) -> None:
        self.began = time.perf_counter()

    def spent(self, done: int) -> bool:
        return (self.seconds is not None and done >= self.least
                and time.perf_counter() - self.began >= self.seconds)


def on_gpu(backend: Any = None) -> bool:
    """True if ``backend`` (a name, a loaded module, or None for "whatever is active") is the GPU."""
    backend = getattr(backend, "backend", backend)
    if backend is None:
        return gpu_available()
    if backend in _GPU_BACKENDS:
        return True
    if backend == "cpu":
        return False
    raise ValueError(f"unknown backend {backend!r}: use 'cupy' (GPU) or 'cpu' (the CPU engine)")


def gbps(nbytes: float, us: float) -> float:
    """Effective bandwidth in GB/s (10^9 bytes per second) of moving ``nbytes`` in ``us`` microseconds."""
    return _per_us(nbytes, us) / 1e3


def gflops(flops: float, us: float) -> float:
    """Rate in GFLOP/s (10^9 operations per second) of ``flops`` operations in ``us`` microseconds."""
    return _per_us(flops, us) / 1e3


def _per_us(amount: float, us: float) -> float:
    if not us > 0:
        raise ValueError(f"a time must be positive to give a rate, got {us!r} us")
    return amount / us


def rotation_count(bytes_per_set: float, l2_bytes: float | None, *, factor: float = 2.0) -> int:
    """How many input sets to rotate among so that together they are ``factor`` x the L2 cache
    (so that no run finds its inputs still in L2 from the run before). At least 1."""
    if not l2_bytes or bytes_per_set <= 0:
        return 1
    return max(1, math.ceil(factor * l2_bytes / bytes_per_set))
