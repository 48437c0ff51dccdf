"""Chapter 11 - Prefix sum (scan) (PMPP 4th ed.), from Kogge-Stone to a single pass at copy speed.

The problem: ``{"n": int, "dtype": "float32" | "int32", "kind": "inclusive" | "exclusive"}``,
the scan of ``n`` values x with +:

* inclusive: ``y[i] = x[0] + ... + x[i]``;
* exclusive: ``y[i] = x[0] + ... + x[i-1]``, ``y[0] = 0`` - the inclusive scan of x shifted right
  by one, which is how kernels 01-08 compute it (they load x[i - 1]); 09 computes it in registers.

Variants come in three launch shapes, and :data:`CHAPTER` says which each one uses:

* one section (01-05): one block scans the whole input, so n is at most one section
  (``Variant.max_n``); 11.6 is what scans longer inputs;
* hierarchical (06): scan sections, scan the section sums, add them back - as many levels as n
  needs;
* single pass (07-11): one launch; blocks take their section ("tile") from an atomic counter and
  hand the running sum on - along a serial chain (07), or by decoupled look-back (08-11). The
  counter and the tile flags are zeroed by a memset inside the launch (and so inside its timing).

Every kernel is a template, instantiated for ``float`` and ``int``. The model's flops are the
n - 1 additions a scan must do (as ch. 10 counts a sum); what each algorithm really executes is
:func:`additions`, the work-efficiency model of 11.3.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

import pmpp
from pmpp.args import check_aligned
from pmpp.chapters.base import BenchSet, Chapter, CheckResult, Library, Model, Variant
from pmpp.chapters.draw import generator_for, host, on_host
from pmpp.libraries import cub, cupy_routines

KINDS = ("inclusive", "exclusive")
DTYPES = {"float32": "float", "int32": "int"}     # problem dtype -> the kernels' template argument
MAX_N = 2 ** 31 - 1          # indices are 32-bit unsigned: i + a section never wraps below this

KOGGE_STONE = {"BLOCK_DIM": 1024}                        # 01-03: one thread per element
BRENT_KUNG = {"BLOCK_DIM": 512}                          # 04: two elements per thread
THREE_PHASE = {"BLOCK_DIM": 512, "COARSE_FACTOR": 8}     # 05-08: 4096-element sections
VECTORIZED = {"BLOCK_DIM": 128, "VECS_PER_THREAD": 16}   # 09: 8192-element tiles of float4s
PIPELINED = {"BLOCK_DIM": 256, "VECS_PER_THREAD": 8, "BLOCKS_PER_SM": 2}   # 10: two 8192-element tiles
# 11: 16384-element tiles, half in registers, half copied to shared memory; 4 blocks per SM
ASYNC_COPY = {"BLOCK_DIM": 256, "VECS_PER_THREAD": 16, "SMEM_VECS": 8, "MIN_BLOCKS": 4}
BULK_COPY = {"BLOCK_DIM": 256, "VECS_PER_THREAD": 20, "SMEM_VECS": 11, "MIN_BLOCKS": 4}

INT_BOUND = 7      # integer inputs lie in [-7, 7]: no prefix of n <= 2^28 of them overflows int32
EXACT_FLOAT_LIMIT = 2 ** 23   # integer-valued float32 prefixes below this are computed exactly
U32 = 2.0 ** -24   # unit roundoff of float32
U64 = 2.0 ** -53   # unit roundoff of float64
# What every byte of an output holds before a kernel writes it: 0xFFFFFFFF is a float32 NaN; for
# int32, 0x7F7F7F7F = 2139062143 lies beyond any prefix of n <= 2^28 values in [-7, 7].
POISON_BYTE = {"float32": 0xFF, "int32": 0x7F}


# --------------------------------------------------------------------------------------------
# Inputs and reference
# --------------------------------------------------------------------------------------------

def _with_output(problem: Mapping[str, Any], xp, x: np.ndarray) -> dict:
    """``{"x": x on the backend, "y": a poisoned output}``. The output is poisoned with a byte
    memset rather than ``xp.full``: on CuPy a fill is a kernel launched from Python; at 2^28 the
    buffer is 1 GiB, made once per set of inputs and never inside a timed launch."""
    y = xp.empty((problem["n"],), dtype=x.dtype)
    memset_async = getattr(getattr(y, "data", None), "memset_async", None)   # CuPy's MemoryPointer
    if memset_async is not None:
        if y.nbytes:
            memset_async(POISON_BYTE[problem["dtype"]], y.nbytes)
    else:
        y.view(np.uint8).fill(POISON_BYTE[problem["dtype"]])
    return {"x": xp.asarray(x), "y": y}


def make_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """float32: uniform in [-1, 1); int32: uniform integers in [-INT_BOUND, INT_BOUND]. Drawn
    where ``xp`` keeps them (:func:`~pmpp.chapters.draw.generator_for`)."""
    n = problem["n"]
    rng = generator_for(xp, rng)
    if problem["dtype"] == "int32":
        x = rng.integers(-INT_BOUND, INT_BOUND + 1, size=n, dtype=np.int32)
    else:
        x = rng.random(n, dtype=np.float32)   # [0, 1), exactly representable
        x *= 2                                # exact
        x -= 1                                # [-1, 1)
    return _with_output(problem, xp, x)


def make_exact_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """Integer values in [-INT_BOUND, INT_BOUND], as float32 or int32.

    Every intermediate of every variant here is the sum of a run of consecutive inputs (padded
    with zeros), i.e. a difference of two prefixes; while every prefix stays below
    EXACT_FLOAT_LIMIT = 2^23 in magnitude, all those sums are integers below 2^24 and every
    float32 addition is exact, in any order. Then the output must equal the reference exactly,
    and a dropped or doubled element cannot hide in a rounding tolerance. Random signs keep the
    prefixes near sqrt(n) * 4: far below 2^23 even at n = 2^28 (:func:`exactly_summable` checks)."""
    x = generator_for(xp, rng).integers(-INT_BOUND, INT_BOUND + 1, size=problem["n"], dtype=np.int32)
    return _with_output(problem, xp, x.astype(np.float32) if problem["dtype"] == "float32" else x)


class ScanReference(np.ndarray):
    """The reference scan (float64 for float32 inputs, int32 for int32), carrying ``abs_prefix``:
    the float64 scan of |x| (same kind), which the float tolerance needs; None for integers."""

    abs_prefix: np.ndarray | None = None


class DeviceScanReference:
    """The reference of :func:`reference` for inputs on a GPU, left there: ``values`` (CuPy; what
    an exact check compares against) and ``abs_prefix`` (CuPy, or None for integers).
    ``numpy.asarray`` of it copies the values to the host."""

    def __init__(self, values, abs_prefix):
        self.values, self.abs_prefix = values, abs_prefix

    @property
    def size(self) -> int:
        return int(self.values.size)

    def __array__(self, dtype=None, copy=None):
        values = host(self.values)
        return values if dtype is None else values.astype(dtype)


def _scan(values, kind: str, dtype):
    """The scan of ``values`` (NumPy or CuPy), accumulated in ``dtype``, one pass."""
    xp = pmpp.get_array_module(values)
    out = xp.empty(values.size, dtype=dtype)
    if kind == "inclusive":
        xp.cumsum(values, dtype=dtype, out=out)
    elif values.size:
        out[0] = 0
        xp.cumsum(values[:-1], dtype=dtype, out=out[1:])
    return out


def reference(problem: Mapping[str, Any], inputs: Mapping[str, Any]):
    """The scan, computed where the input is: in float64 for float32 inputs; in int32 for int32
    (wrapping modulo 2^32, as the kernels' int additions do - though no input here comes near).
    NumPy input: a :class:`ScanReference`; CuPy: a :class:`DeviceScanReference`."""
    x = inputs["x"]
    kind = problem.get("kind", "inclusive")
    on_gpu = not on_host(pmpp.get_array_module(x))
    if problem["dtype"] == "int32":
        values = _scan(x, kind, np.int32)
        return DeviceScanReference(values, None) if on_gpu else values.view(ScanReference)
    values = _scan(x, kind, np.float64)
    abs_prefix = _scan(abs(x), kind, np.float64)       # |x| in float32 is exact
    if on_gpu:
        return DeviceScanReference(values, abs_prefix)
    ref = values.view(ScanReference)
    ref.abs_prefix = abs_prefix
    return ref


def exactly_summable(ref: np.ndarray) -> bool:
    """Whether every prefix is below EXACT_FLOAT_LIMIT: then float32 scans of integer-valued
    inputs are exact (see :func:`make_exact_inputs`)."""
    return ref.size == 0 or float(np.max(np.abs(np.asarray(ref, dtype=np.float64)))) < EXACT_FLOAT_LIMIT


# --------------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------------

def longest_chain(i, n: int):
    """An upper bound on the number of float32 additions between any input and output element
    ``i`` (an int or an array of them) of an n-element scan, over every variant of this chapter at
    its default parameters:

    * inside a section or tile: at most 7 + 9 + 1 (three-phase: COARSE_FACTOR - 1 serial adds,
      log2 BLOCK_DIM Kogge-Stone levels, one add in phase 3), 2 log2 1024 for Brent-Kung, and for
      09: 3 in a vector, 5 + 5 shuffle levels, one carry per 32 warp totals, 3 more for the prefix;
    * hierarchical (06): those per level, one more add per level, at most 4 levels for n < 2^31;
    * single pass: the running sum goes along the tiles. 07 adds each section's total to it (one
      addition per section before i); 08 and 09 pass a predecessor's inclusive prefix through two
      additions per tile (prefix + aggregates, then + own total) and an aggregate through at most
      one more per window of 32 tiles looked at.

    All of these are below 2 * floor(i / 1024) + 4 * ceil(log2(n + 1)) + 64, which is returned
    (sections and tiles hold at least 1024 elements: 2 per 1024 covers 2 per tile)."""
    levels = math.ceil(math.log2(n + 1))
    return 2 * (np.asarray(i) // 1024) + 4 * levels + 64


def tolerance_factor(i, n: int):
    """gamma32_d + gamma64_(i+1) for output element(s) ``i``, d = :func:`longest_chain`: times the
    sum of |x_j| over the inputs of element i, the largest error a correct kernel can make there.

    Derivation (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., sec. 4.2): each
    output is a sum of its inputs along some tree, and each float32 addition rounds:
    fl(a + b) = (a + b)(1 + delta), |delta| <= u = 2^-24. An input reaching output i through d
    additions leaves |computed - exact| <= gamma_d * sum |x_j|, gamma_d = d u / (1 - d u), with d
    bounded by :func:`longest_chain` - which grows with i, since the running sum of a single-pass
    scan passes through a few additions per tile. The reference is NumPy's sequential float64 scan,
    itself off by at most gamma64_(i+1) * sum |x_j|. A worst case: random roundings mostly cancel."""
    d = longest_chain(i, n).astype(np.float64)
    steps = np.asarray(i, dtype=np.float64) + 1
    with np.errstate(divide="ignore"):
        gamma32 = np.where(d * U32 < 1, d * U32 / (1 - d * U32), np.inf)
    return gamma32 + steps * U64 / (1 - steps * U64)


def tolerance(i, n: int, abs_prefix):
    """The largest error a correct kernel can make in output element(s) ``i`` whose inputs' |x|
    add up to ``abs_prefix``: :func:`tolerance_factor` times ``abs_prefix``."""
    return tolerance_factor(i, n) * abs_prefix


CHECK_CHUNK = 2 ** 22   # elements compared at a time (a multiple of 1024): bounded host memory


def _chunk_tolerance(start: int, stop: int, n: int, abs_prefix: np.ndarray) -> np.ndarray:
    """:func:`tolerance` for elements start..stop-1 (start a multiple of 1024), with the factor
    evaluated once per 1024 elements, at the last: d is the same for all 1024, and gamma64 grows
    by at most 1023 * 2^-53 across them, in a factor of at least 64 u = 3.8e-6: a tolerance
    looser by under a part in 10^7, for 1/1024 of the work."""
    last = np.minimum(np.arange(start + 1023, stop + 1023, 1024), n - 1)
    return np.repeat(tolerance_factor(last, n), 1024)[:stop - start] * abs_prefix[start:stop]


def check(output, ref, problem: Mapping[str, Any]) -> CheckResult:
    """int32: every element equal to the reference. float32: every element within
    :func:`tolerance` of the float64 reference (NaN never passes)."""
    n = problem["n"]
    out = pmpp.asnumpy(output).reshape(-1)
    if out.size != n:
        return CheckResult(False, math.inf, 0.0, f"expected {n} elements, got {out.size}")
    if out.dtype != np.dtype(problem["dtype"]):
        return CheckResult(False, math.inf, 0.0, f"expected {problem['dtype']}, got {out.dtype}")
    ref_values = np.asarray(ref)
    if problem["dtype"] == "int32":
        wrong = np.flatnonzero(out != ref_values)
        detail = "exact" if not wrong.size else (
            f"{wrong.size} of {n} elements wrong; first at {wrong[0]}: "
            f"{out[wrong[0]]}, expected {ref_values[wrong[0]]}")
        return CheckResult(not wrong.size, float(wrong.size), 0.0, detail)
    abs_prefix = getattr(ref, "abs_prefix", None)
    if abs_prefix is None:
        raise TypeError("check needs the reference made by scan.reference (it carries abs_prefix)")
    abs_prefix = host(abs_prefix)
    worst_ratio, worst_at, worst, worst_tol, bad, first_bad = -1.0, 0, 0.0, 0.0, 0, None
    for start in range(0, n, CHECK_CHUNK):
        stop = min(start + CHECK_CHUNK, n)
        error = out[start:stop].astype(np.float64)
        np.subtract(error, ref_values[start:stop], out=error)
        np.abs(error, out=error)
        tol = _chunk_tolerance(start, stop, n, abs_prefix)
        outside = ~(error <= tol)                        # NaN is outside
        if outside.any():
            bad += int(outside.sum())
            first_bad = start + int(np.argmax(outside)) if first_bad is None else first_bad
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.divide(error, tol, out=np.zeros_like(error), where=tol > 0)   # 0 where both are 0
        k = int(np.argmax(ratio))
        if ratio[k] > worst_ratio:
            worst_ratio, worst_at, worst, worst_tol = float(ratio[k]), start + k, float(error[k]), float(tol[k])
    if bad:
        return CheckResult(False, math.inf, 0.0,
                           f"{bad} of {n} elements outside the tolerance; first at {first_bad}: "
                           f"{float(out[first_bad])!r}, expected {float(ref_values[first_bad])!r} "
                           f"(tolerance {float(tolerance(first_bad, n, abs_prefix[first_bad])):.3g})")
    return CheckResult(True, worst, worst_tol,
                       f"largest error relative to its tolerance: {worst:.3g} at element {worst_at} "
                       f"(tolerance {worst_tol:.3g})")


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------

def _setting(module, defaults: Mapping[str, Any], name: str) -> int:
    """A tunable: as the module was built (``pmpp.load(defines=...)``), else the variant's default."""
    return int({**defaults, **(module.defines if module is not None else {})}[name])


# Each variant's tunables, and what one block scans: BLOCK_DIM x the elements per thread (a
# number, or the define that sets it) x the elements per load.
SHAPES = {
    "01_kogge_stone_racy": (KOGGE_STONE, 1, 1),
    "02_kogge_stone": (KOGGE_STONE, 1, 1),
    "03_kogge_stone_double_buffer": (KOGGE_STONE, 1, 1),
    "04_brent_kung": (BRENT_KUNG, 2, 1),
    "05_three_phase": (THREE_PHASE, "COARSE_FACTOR", 1),
    "06_hierarchical": (THREE_PHASE, "COARSE_FACTOR", 1),
    "07_stream_based": (THREE_PHASE, "COARSE_FACTOR", 1),
    "08_decoupled_lookback": (THREE_PHASE, "COARSE_FACTOR", 1),
    "09_vectorized_lookback": (VECTORIZED, "VECS_PER_THREAD", 4),
    "10_pipelined_lookback": (PIPELINED, "VECS_PER_THREAD", 4),
    "11_async_copy_lookback": (ASYNC_COPY, "VECS_PER_THREAD", 4),
    "12_bulk_copy_lookback": (BULK_COPY, "VECS_PER_THREAD", 4),
}


def block_dim(name: str, module=None) -> int:
    return _setting(module, SHAPES[name][0], "BLOCK_DIM")


def block_elements(name: str, module=None) -> int:
    """The elements one block of variant ``name`` scans - its section, or its tile - at the
    defines ``module`` was built with (else the variant's defaults)."""
    defaults, per_thread, vector = SHAPES[name]
    per = _setting(module, defaults, per_thread) if isinstance(per_thread, str) else per_thread
    return block_dim(name, module) * per * vector


def _kernel(module, name: str, x):
    """The template instance of ``name`` for x's dtype, e.g. ``KoggeStoneScan<float>``."""
    ctype = DTYPES.get(str(x.dtype))
    if ctype is None:
        raise TypeError(f"the scan kernels are instantiated for {', '.join(DTYPES)}, not {x.dtype}")
    return module.get_function(f"{name}<{ctype}>")


def _exclusive(problem) -> int:
    kind = problem.get("kind", "inclusive")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return int(kind == "exclusive")


def _one_section(name: str, kernel: str):
    """01-05: one block scans the whole input, ``kernel(x, y, n, exclusive)``."""

    def launch(module, problem, inputs):
        x, y = inputs["x"], inputs["y"]
        n = int(x.size)
        section = block_elements(name, module)
        if n > section:
            raise ValueError(f"{kernel} scans one section of at most {section} elements, got n={n}; "
                             "06_hierarchical and later variants scan any length")
        if n:
            _kernel(module, kernel, x)(1, block_dim(name, module), (x, y, np.uint32(n), _exclusive(problem)))
        return y

    return launch


def _hierarchical(module, problem, inputs):
    """06 (11.6): ScanSections over the input (writing each section's total to S), the same scan
    of S (recursively), then AddSectionSums adds S[b - 1] to section b."""
    x, y = inputs["x"], inputs["y"]
    if x.size:
        _scan_levels(module, x, y, _exclusive(problem))
    return y


def _scan_levels(module, x, y, exclusive: int) -> None:
    xp = pmpp.get_array_module(x)
    n = int(x.size)
    block = block_dim("06_hierarchical", module)
    sections = -(-n // block_elements("06_hierarchical", module))
    sums = xp.empty((sections,), dtype=x.dtype)
    _kernel(module, "ScanSections", x)(sections, block, (x, y, sums, np.uint32(n), exclusive))
    if sections > 1:
        scanned = xp.empty_like(sums)
        _scan_levels(module, sums, scanned, 0)
        _kernel(module, "AddSectionSums", x)(sections, block, (y, scanned, np.uint32(n)))


def _zeroed(xp, tiles: int, dtype):
    """``(flags, counter)``: tiles + 1 zeros made by one memset (xp.zeros), split in two views."""
    scratch = xp.zeros((tiles + 1,), dtype=dtype)
    return scratch[:tiles], scratch[tiles:]


def _single_pass(name: str, kernel: str, *, persistent: bool = False):
    """07-12: tile indices from a counter; counter and tile flags zeroed for every launch (a
    memset: part of the launch, and of its time). 07-09, 11 and 12 launch one block per tile; 10 is
    ``persistent``: as many blocks as fit on the GPU at once, each taking tiles until none are left.
    07: ``kernel(x, y, flags, scanValue, blockCounter, n, exclusive)``;
    08-12: ``kernel(x, y, tileStatus, tileCounter, n, exclusive)``."""
    stream_based = name.startswith("07")
    vector = SHAPES[name][2]

    def launch(module, problem, inputs):
        x, y = inputs["x"], inputs["y"]
        xp = pmpp.get_array_module(x)
        n = int(x.size)
        if vector > 1:
            check_aligned(4 * vector, x=x, y=y)
        if not n:
            return y
        tiles = -(-n // block_elements(name, module))
        if stream_based:
            flags, counter = _zeroed(xp, tiles, np.uint32)
            scratch = (flags, xp.empty((tiles,), dtype=x.dtype), counter)
        else:
            scratch = _zeroed(xp, tiles, np.uint64)
        grid = min(tiles, module.device_sm_count * _setting(module, SHAPES[name][0], "BLOCKS_PER_SM")) \
            if persistent else tiles
        _kernel(module, kernel, x)(grid, block_dim(name, module),
                                   (x, y, *scratch, np.uint32(n), _exclusive(problem)))
        return y

    return launch


# --------------------------------------------------------------------------------------------
# Models: the bytes that must move, and the additions each algorithm does (11.3)
# --------------------------------------------------------------------------------------------

def _strides(n: int):
    s = 1
    while s < n:
        yield s
        s *= 2


def kogge_stone_steps(n: int) -> list[int]:
    """Additions in each step of a Kogge-Stone scan of n elements (n a power of two):
    step with stride s adds in n - s threads."""
    return [n - s for s in _strides(n)]


def brent_kung_steps(n: int) -> list[int]:
    """Additions in each step of a Brent-Kung scan of n elements (n a power of two), as
    04_brent_kung's loops do them: the reduction tree, then the distribution tree."""
    up = [n // (2 * s) for s in _strides(n)]
    # thread t works when index + s < n, index = (t + 1) * 2s - 1: for t + 1 <= (n - s) / 2s
    down = [(n - s) // (2 * s) for s in reversed(list(_strides(n // 2)))]
    return up + down


def sequential_steps(n: int) -> list[int]:
    """A sequential scan: one addition per step, n - 1 steps."""
    return [1] * max(n - 1, 0)


def three_phase_steps(threads: int, coarse: int) -> list[int]:
    """Coarsened three-phase scan of threads * coarse elements: coarse - 1 serial steps in every
    thread, Kogge-Stone on the threads' totals, then coarse steps of phase 3 (threads 1..T-1)."""
    return [threads] * (coarse - 1) + kogge_stone_steps(threads) + [threads - 1] * coarse


ALGORITHMS = {
    "sequential": sequential_steps,
    "Kogge-Stone": kogge_stone_steps,
    "Brent-Kung": brent_kung_steps,
    # 05's shape: COARSE_FACTOR elements per thread (n >= COARSE_FACTOR)
    "three-phase": lambda n: three_phase_steps(n // THREE_PHASE["COARSE_FACTOR"], THREE_PHASE["COARSE_FACTOR"]),
}


def additions(algorithm: str, n: int) -> int:
    """The additions an algorithm does to scan n elements (n a power of two): its work.
    Sequential n - 1; Kogge-Stone n log2 n - (n - 1); Brent-Kung 2n - 2 - log2 n (11.3, 11.4)."""
    return sum(ALGORITHMS[algorithm](n))


def parallel_time(algorithm: str, n: int, adders: int | None = None) -> int:
    """Time in addition steps with ``adders`` additions possible at once (None: as many as
    wanted). Each step takes ceil(its additions / adders): with enough hardware a scan takes as
    many steps as its depth - log2 n for Kogge-Stone, 2 log2 n - 1 for Brent-Kung - and with
    few adders as long as its work divided by them."""
    steps = ALGORITHMS[algorithm](n)
    return len(steps) if adders is None else sum(-(-a // adders) for a in steps)


def _flops(n: int) -> float:
    return float(max(n - 1, 0))


def _single_pass_model(problem):
    """Read x once, write y once: 2n * 4 bytes (the tile flags and counter, 8-16 bytes per tile
    of 4096 elements, stay in L2 and are below the model's resolution)."""
    n = problem["n"]
    return Model(flops=_flops(n), bytes=8.0 * n)


def hierarchical_bytes(n: int, section: int) -> float:
    """06: read x and write y (8n), write S; then S scanned the same way; then kernel 3 reads and
    writes every element of sections 1.. (8(n - section)) and reads S."""
    sections = -(-n // section)
    moved = 8.0 * n + 4 * sections
    if sections > 1:
        moved += hierarchical_bytes(sections, section) + 8.0 * (n - section) + 4 * sections
    return moved


def _hierarchical_model(problem):
    n = problem["n"]
    return Model(flops=_flops(n), bytes=hierarchical_bytes(n, block_elements("06_hierarchical")) if n else 0.0)


# --------------------------------------------------------------------------------------------
# Library routines: the bar to beat
# --------------------------------------------------------------------------------------------

def _shift_right(xp, inclusive):
    """The exclusive scan from the inclusive one: 0, then all but the last."""
    out = xp.empty_like(inclusive)
    out[:1] = 0
    out[1:] = inclusive[:-1]
    return out


def _library_result(xp, inclusive, problem):
    return inclusive if problem.get("kind", "inclusive") == "inclusive" else _shift_right(xp, inclusive)


def _cupy_run(problem, inputs):
    import cupy
    x = cupy.asarray(inputs["x"])
    inclusive = cupy.cumsum(x) if x.dtype == np.float32 else cupy.cumsum(x, dtype=x.dtype)
    return _library_result(cupy, inclusive, problem)


def _cub_run(problem, inputs):
    """cub::DeviceScan::InclusiveSum or ::ExclusiveSum, as the problem's kind asks, into the
    poisoned output the kernels write."""
    return cub.scan(inputs["x"], inputs["y"], problem.get("kind", "inclusive"))


def _torch_run(problem, inputs):
    import cupy
    import torch
    t = torch.from_dlpack(cupy.asarray(inputs["x"]))
    inclusive = cupy.from_dlpack(torch.cumsum(t, dim=0, dtype=t.dtype))
    return _library_result(cupy, inclusive, problem)


def _torch_available(backend: str) -> bool:
    if backend != "cupy" or importlib.util.find_spec("torch") is None:
        return False
    import torch
    return torch.cuda.is_available()


def _numpy_run(problem, inputs):
    x = pmpp.asnumpy(inputs["x"])
    return _library_result(np, np.cumsum(x, dtype=x.dtype), problem)


# --------------------------------------------------------------------------------------------
# The chapter
# --------------------------------------------------------------------------------------------

def _variant(name, title, source, launch, model, *kernels, **extra):
    return Variant(name, title, source, launch, model, defines=SHAPES[name][0],
                   name_expressions=tuple(f"{k}<{t}>" for k in kernels for t in DTYPES.values()),
                   **{"max_n": MAX_N, **extra})


def _one_section_variant(name, title, kernel, **extra):
    return _variant(name, title, f"PMPP {title.split()[0]}", _one_section(name, kernel), _single_pass_model,
                    kernel, max_n=block_elements(name), **extra)


VARIANTS = (
    _one_section_variant("01_kogge_stone_racy", "11.2 Kogge-Stone in place: one barrier, racy",
                         "KoggeStoneScan", racy=True),
    _one_section_variant("02_kogge_stone", "11.2 Kogge-Stone: temporary + second barrier",
                         "KoggeStoneScan"),
    _one_section_variant("03_kogge_stone_double_buffer", "11.2 Kogge-Stone double-buffered",
                         "KoggeStoneDoubleBufferScan"),
    _one_section_variant("04_brent_kung", "11.4 Brent-Kung: reduction + distribution trees",
                         "BrentKungScan"),
    _one_section_variant("05_three_phase", "11.5 coarsened three-phase", "ThreePhaseScan"),
    _variant("06_hierarchical", "11.6 hierarchical: scan sections, scan sums, add back", "PMPP 11.6",
             _hierarchical, _hierarchical_model, "ScanSections", "AddSectionSums"),
    _variant("07_stream_based", "11.7 stream-based (domino) single pass", "PMPP 11.7",
             _single_pass("07_stream_based", "StreamBasedScan"), _single_pass_model, "StreamBasedScan"),
    _variant("08_decoupled_lookback", "decoupled look-back, one thread looks back",
             "Merrill & Garland 2016", _single_pass("08_decoupled_lookback", "DecoupledLookbackScan"),
             _single_pass_model, "DecoupledLookbackScan"),
    _variant("09_vectorized_lookback", "look-back, float4 tiles in registers, warp look-back",
             "beyond the book",
             _single_pass("09_vectorized_lookback", "VectorizedLookbackScan"),
             _single_pass_model, "VectorizedLookbackScan"),
    _variant("10_pipelined_lookback", "look-back hidden behind the next tile's loads",
             "beyond the book",
             _single_pass("10_pipelined_lookback", "PipelinedLookbackScan", persistent=True),
             _single_pass_model, "PipelinedLookbackScan"),
    _variant("11_async_copy_lookback", "look-back, larger tiles half in shared memory (cp.async)",
             "beyond the book",
             _single_pass("11_async_copy_lookback", "AsyncCopyLookbackScan"),
             _single_pass_model, "AsyncCopyLookbackScan"),
    _variant("12_bulk_copy_lookback", "look-back, shared-memory half moved by bulk copies (TMA)",
             "beyond the book",
             _single_pass("12_bulk_copy_lookback", "BulkCopyLookbackScan"),
             _single_pass_model, "BulkCopyLookbackScan", min_arch=90),
)


def _sections_fit(d: Mapping[str, Any]) -> bool:
    """06-08's static shared memory (the padded section and two rows of sums) within 48 KB."""
    section = d["BLOCK_DIM"] * d["COARSE_FACTOR"]
    return 4 * (section + section // 32 + 2 * d["BLOCK_DIM"]) <= 48 * 1024


def _fits_an_sm(d: Mapping[str, Any]) -> bool:
    return d["BLOCK_DIM"] * d.get("BLOCKS_PER_SM", d.get("MIN_BLOCKS", 1)) <= 2048


def _split_tile_fits(d: Mapping[str, Any]) -> bool:
    """11 and 12: some rows in registers, some in shared memory; static shared memory (those
    rows, each row's warp totals and two words) within 48 KB."""
    rows = 16 * d["SMEM_VECS"] * d["BLOCK_DIM"]
    totals = 4 * d["VECS_PER_THREAD"] * (d["BLOCK_DIM"] // 32)
    return (_fits_an_sm(d) and 1 <= d["SMEM_VECS"] < d["VECS_PER_THREAD"]
            and rows + totals + 8 <= 48 * 1024)


# What `pmpp tune` may change (the defaults above among them): the block, the elements per
# thread, how the tile splits between registers and shared memory, and how many blocks the
# registers are budgeted for.
_SPLIT_TILE = {"BLOCK_DIM": (128, 256, 512), "VECS_PER_THREAD": (8, 12, 16, 20, 24),
               "SMEM_VECS": (4, 6, 8, 11, 12, 16), "MIN_BLOCKS": (1, 2, 3, 4)}
_SECTIONS = {"BLOCK_DIM": (128, 256, 512, 1024), "COARSE_FACTOR": (2, 4, 8, 16)}
TUNABLES = {
    "06_hierarchical": (_SECTIONS, _sections_fit),
    "07_stream_based": (_SECTIONS, _sections_fit),
    "08_decoupled_lookback": (_SECTIONS, _sections_fit),
    "09_vectorized_lookback": ({"BLOCK_DIM": (64, 128, 256, 512), "VECS_PER_THREAD": (4, 8, 12, 16, 24)}, None),
    "10_pipelined_lookback": ({"BLOCK_DIM": (128, 256, 512), "VECS_PER_THREAD": (4, 6, 8, 12),
                               "BLOCKS_PER_SM": (1, 2, 3, 4)}, _fits_an_sm),
    "11_async_copy_lookback": (_SPLIT_TILE, _split_tile_fits),
    "12_bulk_copy_lookback": (_SPLIT_TILE, _split_tile_fits),
}
VARIANTS = tuple(replace(v, tunables=TUNABLES[v.name][0], legal=TUNABLES[v.name][1]) if v.name in TUNABLES else v
                 for v in VARIANTS)

# At the largest test size and the GPU's, two of the four dtype x kind cases: each kernel's float
# and int instances, and both kinds, are still covered; the other two take minutes on the CPU engine.
LARGEST_CASES = {("float32", "inclusive"), ("int32", "exclusive")}


def _test_cases(backend: str):
    """Every variant, both dtypes and both kinds, at each test size (and on a GPU the GPU size)."""
    sizes = list(CHAPTER.test_sizes) + ([CHAPTER.problems["gpu"]["n"]] if backend == "cupy" else [])
    largest = max(CHAPTER.test_sizes)
    for variant in CHAPTER.variants:
        if variant.racy:
            continue
        for n in sizes:
            for dtype in DTYPES:
                for kind in KINDS:
                    if n < largest or (dtype, kind) in LARGEST_CASES:
                        yield variant, {"n": n, "dtype": dtype, "kind": kind}


CHAPTER = Chapter(
    name="scan",
    title="Prefix sum (scan) (PMPP ch. 11)",
    kernel_dir="scan",
    variants=VARIANTS,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    problems={"gpu": {"n": 2 ** 28, "dtype": "float32", "kind": "inclusive"},
              "cpu": {"n": 1024, "dtype": "float32", "kind": "inclusive"}},
    test_sizes=(1, 31, 1000, 2 ** 20 + 7),
    test_cases=_test_cases,
    library=(
        Library("cub::DeviceScan", _cub_run, cub.available, why_not=cub.why_not_on_gpu),
        Library("cupy.cumsum (CUB)", _cupy_run, cupy_routines.available(with_cub=True)),
        Library("cupy.cumsum", _cupy_run, cupy_routines.available(with_cub=False)),
        Library("torch.cumsum", _torch_run, _torch_available, imports=("torch",)),
        Library("numpy.cumsum", _numpy_run, lambda backend: backend == "cpu"),
    ),
    describe=lambda p: f"n={p['n']} {p['dtype']} {p.get('kind', 'inclusive')} scan",
    make_exact_inputs=make_exact_inputs,
    # `pmpp bench --all-problems` records, beside the float32 inclusive scan: int32, and exclusive.
    bench=(BenchSet("int32", ({"n": 2 ** 28, "dtype": "int32", "kind": "inclusive"},)),
           BenchSet("exclusive", ({"n": 2 ** 28, "dtype": "float32", "kind": "exclusive"},))),
)
