"""Chapter 10 - Reduction (PMPP 4th ed.), with Harris's seven steps (SC07) and what came after.

The problem: the sum (or the max) of ``n`` float32 values, ``{"n": int, "op": "sum" | "max"}``.
Every kernel in ``kernels/reduction/`` handles any ``n >= 1``: an element past the end counts as
the operator's identity (0 for a sum, -inf for a max).

Variants come in four launch shapes, and :data:`CHAPTER` says which each one uses:

* multi-pass trees (01-03, 06-12): each block reduces its own segment and writes a partial;
  Python launches again on the partials until one value is left;
* atomics (04, 05): each block ``atomicAdd``s its sum into one accumulator that starts at 0;
* grid-stride (13-15, 17): a grid sized from the SM count, then one block for the partials;
* one pass (16): partials plus a last-block finish, in a single launch.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

import pmpp
from pmpp.chapters.base import BenchSet, Chapter, CheckResult, Library, Model, Variant
from pmpp.chapters.draw import generator_for
from pmpp.libraries import cub, cupy_routines

BLOCK_DIM = 256          # default threads per block (15-17: VECTOR_BLOCK_DIM)
VECTOR_BLOCK_DIM = 1024  # 15-17: 1024 beat 256 by ~1-2% on an H100 at 2^28
COARSE_FACTOR = 4        # default of 05_coarsened
COARSE_FACTORS = (1, 2, 4, 8, 16, 32)     # the sweep `pmpp bench --all-problems` records
UNROLL = 4               # default float4 loads in flight per thread (15-17)
THREADS_PER_SM = 2048    # resident threads per SM on an H100: one "wave" of a grid fills them
WAVES = 64               # 15-17 launch up to this many waves by default (13-14: one), see _grid_size
MAX_N = 2 ** 31          # the largest n every kernel indexes without unsigned overflow

U32 = 2.0 ** -24         # unit roundoff of float32 (round to nearest): half of eps32 = 2^-23
U64 = 2.0 ** -53         # unit roundoff of float64

IDENTITY = {"sum": 0.0, "max": -math.inf}
# What every byte of an output holds before a kernel writes it. For a sum 0xFF: 0xFFFFFFFF is a
# NaN, which survives any addition, so a partial that is never written shows up as a NaN result.
# Not for a max: fmaxf(NaN, x) == x would swallow it; 0x7F7F7F7F = 3.4e38 is above any input.
POISON_BYTE = {"sum": 0xFF, "max": 0x7F}


# --------------------------------------------------------------------------------------------
# Inputs and reference
# --------------------------------------------------------------------------------------------

def make_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """``{"x": n float32 values, uniform in [0, 1)}``, drawn where ``xp`` keeps them
    (:func:`~pmpp.chapters.draw.generator_for`).

    Positive, so the sum grows like n/2 and stays far outside :func:`sum_tolerance`: with values
    of both signs the sum is only ~sqrt(n/3), and a wrong answer such as 0 could fall within it."""
    return {"x": xp.asarray(generator_for(xp, rng).random(problem["n"], dtype=np.float32))}


def make_integer_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator,
                        bound: int = 8) -> dict:
    """``{"x": n float32 values that are integers in [-bound, bound]}``.

    Every partial sum of these is an integer of magnitude at most ``bound * n``; while that is at
    most 2^24 every float32 addition is exact, whatever the order - so each variant's sum must equal
    the reference EXACTLY (guaranteed for n <= 2^21 with the default bound 8; for larger n the
    partial sums of random signs stay near sqrt(n)*5, still far below 2^24). A dropped or
    double-counted element that a tolerance could hide changes the sum by a nonzero integer. The
    values never sum to zero: a kernel that writes nothing leaves the zeroed output, and must fail."""
    x = generator_for(xp, rng).integers(-bound, bound + 1, size=problem["n"]).astype(np.float32)
    if x.size and float(x.sum()) == 0:
        x[0] = x[0] + (1 if float(x[0]) < bound else -1)
    return {"x": xp.asarray(x)}


class SumReference(np.float64):
    """The float64 sum of the input, carrying ``abs_sum`` = sum of |x_i|, which the tolerance of
    :func:`check` needs (check sees the reference, not the input)."""

    def __new__(cls, value, abs_sum):
        obj = super().__new__(cls, value)
        obj.abs_sum = float(abs_sum)
        return obj

    def __reduce__(self):
        return (SumReference, (float(self), self.abs_sum))


def reference(problem: Mapping[str, Any], inputs: Mapping[str, Any]):
    """The float64 sum (a :class:`SumReference`) or max of the input, computed where it is (NumPy
    or CuPy: a float64 sum on the GPU is as exact as NumPy's)."""
    x = inputs["x"]
    xp = pmpp.get_array_module(x)
    if problem.get("op", "sum") == "max":
        return np.float64(float(xp.max(x))) if x.size else np.float64(-np.inf)
    return SumReference(float(xp.sum(x, dtype=np.float64)), float(xp.sum(xp.abs(x), dtype=np.float64)))


# --------------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------------

def longest_chain(n: int) -> int:
    """An upper bound on the number of float32 additions between any input element and the result,
    over every variant of this chapter at its default parameters (BLOCK_DIM 256, or 1024 for
    15-17; COARSE_FACTOR 4; UNROLL 4; THREADS_PER_SM 2048; any SM count), for n elements:

    * multi-pass trees (01-03, 06-12): log2(segment) levels a pass (9 for 2*256, 8 for 256),
      ceil(log_segment n) passes: at most log2(n) + 9;
    * 04_segmented: 9 levels in the block, then the block's sum goes through at most
      G = ceil(n/512) atomicAdds into the total, in whatever order they land;
    * 05_coarsened: 2*4 serial adds, 8 levels, then G = ceil(n/2048) atomics;
    * grid-stride (13-17), at least 2048 threads: per thread at most 2*ceil(n/4096) serial adds
      (reduce6 and 14 add two elements an iteration; 15-17 fewer still: four per float4, UNROLL
      accumulators), a few to combine accumulators, head and tail, log2(BLOCK_DIM) <= 10 levels
      in the block, then the partials' pass: a few serial adds and 10 levels more.

    All are below ceil(n/512) + 2*ceil(log2 n) + 16, which is what is returned. (A notebook that
    shrinks BLOCK_DIM or COARSE_FACTOR of 04/05 lengthens their atomic chain past this bound; in
    practice their errors stay far below it, see :func:`sum_tolerance`.)
    """
    levels = math.ceil(math.log2(n)) if n > 1 else 0
    return -(-n // 512) + 2 * levels + 16


def sum_tolerance(n: int, abs_sum: float) -> float:
    """The largest error a correct kernel can make on this input: gamma_d * sum|x_i|, plus the
    float64 reference's own (negligible) error.

    Derivation (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., sec. 4.2): every
    variant adds the n values along a tree - within a thread, within a block, across blocks by
    further passes or by atomics - and each float32 addition rounds its result: fl(a + b) =
    (a + b)(1 + delta), |delta| <= u = 2^-24. An input x_i reaches the result through the d_i
    additions on its path, so the computed sum is sum_i x_i * prod_{k <= d_i} (1 + delta_ik) and

        |computed - exact| <= gamma_d * sum_i |x_i|,  gamma_d = d*u / (1 - d*u),

    with d the longest path, :func:`longest_chain`. The order of atomicAdds varies from run to run,
    but any order is still a chain of at most G additions, so the bound covers it. The reference is
    NumPy's pairwise float64 sum: its error is below gamma64_{ceil(log2 n)+1} * sum|x_i|.

    This is a worst case, rigorous and pessimistic: rounding errors of random data mostly cancel,
    and the error seen is typically 100-10000x smaller. It is also loose where the data make it so:
    for zero-mean data sum|x_i| is ~sqrt(n) times |sum x_i|, which is why the inputs are positive.
    So this check catches NaN, garbage and gross mistakes; a dropped or doubled element is caught by the exact check on integer-valued
    inputs (:func:`make_integer_inputs`). NaN never passes.
    """
    d = longest_chain(n)
    gamma32 = d * U32 / (1 - d * U32) if d * U32 < 1 else math.inf
    levels = (math.ceil(math.log2(n)) if n > 1 else 0) + 1
    gamma64 = levels * U64 / (1 - levels * U64)
    return (gamma32 + gamma64) * abs_sum


def check(output, ref, problem: Mapping[str, Any]) -> CheckResult:
    """Max: exact equality (a max never rounds). Sum: |output - ref| <= :func:`sum_tolerance`."""
    out = np.asarray(pmpp.asnumpy(output), dtype=np.float64).reshape(-1)
    if out.size != 1:
        return CheckResult(False, math.inf, 0.0, f"expected one value, got an array of shape {out.shape}")
    value = float(out[0])
    expected = float(ref)
    if problem.get("op", "sum") == "max":
        ok = value == expected
        error = 0.0 if ok else abs(value - expected)
        return CheckResult(ok, error, 0.0, f"max {value!r}, expected {expected!r}")
    abs_sum = getattr(ref, "abs_sum", None)
    if abs_sum is None:
        raise TypeError("check needs the reference made by reduction.reference (it carries sum |x_i|)")
    tolerance = sum_tolerance(problem["n"], abs_sum)
    error = abs(value - expected)
    ok = not math.isnan(value) and error <= tolerance
    return CheckResult(ok, error, tolerance,
                       f"sum {value!r}, expected {expected!r} (error {error:.3g}, tolerance {tolerance:.3g})")


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------

def _defines(module, defaults: Mapping[str, Any] | None) -> dict:
    """The variant's defines, updated by the ones the module was built with, if the loader says."""
    merged = {"BLOCK_DIM": BLOCK_DIM, "COARSE_FACTOR": COARSE_FACTOR}
    merged.update(defaults or {})
    merged.update(module.defines)
    return merged


def _kernel_and_block(module, kernel: str, defines) -> tuple[str, int]:
    """The kernel's name and block size. A template kernel ("reduce5<256>") takes both from the
    instance the module was built with, if the loader says, else from ``kernel``; any other from
    BLOCK_DIM."""
    if "<" not in kernel:
        return kernel, int(_defines(module, defines)["BLOCK_DIM"])
    name = (module.name_expressions or (kernel,))[0]
    return name, int(name[name.index("<") + 1:name.index(">")])


def _check_block(block: int, minimum: int = 1, power_of_two: bool = True) -> int:
    """Tree kernels halve the block each step: a power of two. Warp-shuffle kernels: whole warps."""
    block = int(block)
    if power_of_two and (block < minimum or block > 1024 or block & (block - 1)):
        raise ValueError(f"BLOCK_DIM must be a power of two in [{minimum}, 1024], got {block}")
    if not power_of_two and (block < 32 or block > 1024 or block % 32):
        raise ValueError(f"BLOCK_DIM must be a multiple of 32 in [32, 1024], got {block}")
    return block


def _empty_result(xp, op):
    return xp.full((1,), IDENTITY[op], dtype=np.float32)


def _poisoned(xp, size: int, op: str):
    """A float32 array of ``size`` whose every byte is POISON_BYTE[op]. A byte memset rather than
    ``xp.full``: on CuPy, full launches a fill kernel from Python (~25 us before the reduction can
    start - 7% of a 2^28 sum on an H100); a memset is one cudaMemsetAsync."""
    a = xp.empty((size,), dtype=np.float32)
    memset_async = getattr(getattr(a, "data", None), "memset_async", None)   # CuPy's MemoryPointer
    if memset_async is not None:
        memset_async(POISON_BYTE[op], a.nbytes)
    else:
        a.view(np.uint8).fill(POISON_BYTE[op])
    return a


def _setup(module, inputs, problem, kernel, defines, **block_rules):
    """What every tree launcher starts from: the input, its array module, the operator, n, the
    kernel to launch and its checked block size."""
    x = inputs["x"]
    name, block = _kernel_and_block(module, kernel, defines)
    return (x, pmpp.get_array_module(x), problem.get("op", "sum"), int(x.size),
            module.get_function(name), _check_block(block, **block_rules))


def _multipass(kernel: str, *, elements_per_thread: int, in_place: bool = False,
               dynamic_shared: bool = False, min_block: int = 1,
               defines: Mapping[str, Any] | None = None):
    """Launch ``kernel(input, output, n)`` - block b reduces elements_per_thread * BLOCK_DIM
    elements into output[b] - on the input, then on the partials, until one value is left.
    ``in_place`` kernels overwrite their input, so they get a copy of it."""

    def launch(module, problem, inputs):
        x, xp, op, n, k, block = _setup(module, inputs, problem, kernel, defines, minimum=min_block)
        if n == 0:
            return _empty_result(xp, op)
        shared = block * 4 if dynamic_shared else 0
        per_block = elements_per_thread * block
        src = x.copy() if in_place else x
        while True:
            grid = -(-n // per_block)
            out = _poisoned(xp, grid, op)
            k(grid, block, (src, out, np.uint32(n)), shared_mem=shared)
            if grid == 1:
                return out
            src, n = out, grid

    return launch


def _atomic(kernel: str, *, coarsened: bool = False,
            defines: Mapping[str, Any] | None = None):
    """One launch of ``kernel(input, output, n)``; each block atomicAdds its sum into output[0],
    which starts at the identity 0."""

    def launch(module, problem, inputs):
        x = inputs["x"]
        xp = pmpp.get_array_module(x)
        n = int(x.size)
        d = _defines(module, defines)
        block = _check_block(d["BLOCK_DIM"])
        per_block = 2 * block * (int(d["COARSE_FACTOR"]) if coarsened else 1)
        out = xp.zeros((1,), dtype=np.float32)       # the accumulator: must start at 0
        if n:
            k = module.get_function(kernel)
            k(-(-n // per_block), block, (x, out, np.uint32(n)))
        return out

    return launch


def _grid_size(module, n: int, block: int, elements_per_thread_step: int, waves: int = 1) -> int:
    """The grid of a grid-stride kernel: ``waves`` times what fills every SM once (THREADS_PER_SM
    threads each), or fewer blocks if n is small (no thread without a step of work).

    One wave is Harris's reduce6 design (13, 14): each thread loops over many elements. On an H100
    at 2^28, 15-17 ran 0.5-2% faster with many waves - each thread doing about one unrolled step -
    than with one: blocks then finish at different times and the block scheduler keeps every SM
    busy to the end, where in a single wave the SMs that are served slower hold up the whole grid.
    """
    fill = int(module.device_sm_count) * max(1, THREADS_PER_SM // block) * waves
    return max(1, min(-(-n // (elements_per_thread_step * block)), fill))


def _grid_stride(kernel: str, *, elements_per_thread_step: int, dynamic_shared: bool = False,
                 min_block: int = 32, power_of_two: bool = True, many_waves: bool = False,
                 defines: Mapping[str, Any] | None = None):
    """Pass 1: ``kernel(input, partials, n)`` on a grid sized from the SM count; pass 2: the same
    kernel with one block on the partials."""

    def launch(module, problem, inputs):
        x, xp, op, n, k, block = _setup(module, inputs, problem, kernel, defines,
                                        minimum=min_block, power_of_two=power_of_two)
        if n == 0:
            return _empty_result(xp, op)
        shared = block * 4 if dynamic_shared else 0
        chosen = _defines(module, defines)
        step = elements_per_thread_step * (int(chosen.get("UNROLL", 1)) if many_waves else 1)
        grid = _grid_size(module, n, block, step, int(chosen.get("WAVES", WAVES)) if many_waves else 1)
        partials = _poisoned(xp, grid, op)
        k(grid, block, (x, partials, np.uint32(n)), shared_mem=shared)
        if grid == 1:
            return partials
        out = _poisoned(xp, 1, op)
        k(1, block, (partials, out, np.uint32(grid)), shared_mem=shared)
        return out

    return launch


def _one_pass(kernel: str, *, defines: Mapping[str, Any]):
    """One launch of ``kernel(input, partials, n)``: the last block to finish adds the partials
    partials[0..grid) into partials[grid]. The kernel resets its own retirement counter."""

    def launch(module, problem, inputs):
        x, xp, op, n, k, block = _setup(module, inputs, problem, kernel, defines, power_of_two=False)
        if n == 0:
            return _empty_result(xp, op)
        chosen = _defines(module, defines)
        grid = _grid_size(module, n, block, 4 * int(chosen["UNROLL"]), int(chosen.get("WAVES", WAVES)))
        partials = _poisoned(xp, grid + 1, op)      # the blocks' sums, then the total
        k(grid, block, (x, partials, np.uint32(n)))
        return partials[grid:]

    return launch


# --------------------------------------------------------------------------------------------
# Models: the bytes that must move
# --------------------------------------------------------------------------------------------

def _flops(n: int) -> float:
    return float(max(n - 1, 0))       # n - 1 additions (or comparisons), whatever the tree


def _multipass_model(elements_per_block: int):
    """4n bytes read, then each pass's partials written (4 bytes each) and read by the next pass."""

    def model(problem):
        n = problem["n"]
        moved, m = 4 * n, n
        while True:
            grid = -(-m // elements_per_block)
            moved += 4 * grid                 # partials written
            if grid <= 1:
                break
            moved += 4 * grid                 # ... and read again by the next pass
            m = grid
        return Model(flops=_flops(n), bytes=moved)

    return model


def _single_pass_model(problem):
    """4n bytes read and one result written. Atomics resolve in L2; the grid-stride variants'
    partials (one per block, a few thousand floats at most) are below the model's resolution."""
    n = problem["n"]
    return Model(flops=_flops(n), bytes=4 * n + 4)


# --------------------------------------------------------------------------------------------
# Library routines: the bar to beat
# --------------------------------------------------------------------------------------------

def _cupy_run(problem, inputs):
    import cupy
    x = cupy.asarray(inputs["x"])
    return cupy.max(x) if problem.get("op", "sum") == "max" else cupy.sum(x)


def _cub_run(problem, inputs):
    """cub::DeviceReduce::Sum, or ::Max for a max, called directly."""
    return cub.reduce(inputs["x"], problem.get("op", "sum"))


def _torch_run(problem, inputs):
    import cupy
    import torch
    t = torch.from_dlpack(cupy.asarray(inputs["x"]))
    r = t.max() if problem.get("op", "sum") == "max" else t.sum()
    return cupy.from_dlpack(r.reshape(1))


def _torch_available(backend: str) -> bool:
    if backend != "cupy" or importlib.util.find_spec("torch") is None:
        return False
    import torch
    return torch.cuda.is_available()


def _numpy_run(problem, inputs):
    x = inputs["x"]
    x = x if isinstance(x, np.ndarray) else pmpp.asnumpy(x)
    return np.asarray(np.max(x) if problem.get("op", "sum") == "max" else np.sum(x))


# --------------------------------------------------------------------------------------------
# The chapter
# --------------------------------------------------------------------------------------------

_B = {"BLOCK_DIM": BLOCK_DIM}
_B_C = {"BLOCK_DIM": BLOCK_DIM, "COARSE_FACTOR": COARSE_FACTOR}
_B_U = {"BLOCK_DIM": VECTOR_BLOCK_DIM, "UNROLL": UNROLL, "WAVES": WAVES}   # WAVES: the launch's, see _grid_size

_VARIANTS = (
    Variant("01_simple", "10.3 simple: in place, stride doubling (divergent)", "PMPP 10.3",
            _multipass("SimpleSumReductionKernel", elements_per_thread=2, in_place=True),
            _multipass_model(2 * BLOCK_DIM), defines=_B),
    Variant("02_convergent", "10.4 convergent: active threads packed", "PMPP 10.4-10.5",
            _multipass("ConvergentSumReductionKernel", elements_per_thread=2, in_place=True),
            _multipass_model(2 * BLOCK_DIM), defines=_B),
    Variant("03_shared_memory", "10.6 shared memory, first add during load", "PMPP 10.6",
            _multipass("SharedMemorySumReductionKernel", elements_per_thread=2),
            _multipass_model(2 * BLOCK_DIM), defines=_B),
    Variant("04_segmented", "10.7 segmented: atomicAdd of each block's sum", "PMPP 10.7",
            _atomic("SegmentedSumReductionKernel"), _single_pass_model, defines=_B),
    Variant("05_coarsened", "10.8 thread coarsening (COARSE_FACTOR)", "PMPP 10.8",
            _atomic("CoarsenedSumReductionKernel", coarsened=True, defines=_B_C), _single_pass_model,
            defines=_B_C),
    Variant("06_reduce0", "reduce0: interleaved addressing, modulo", "Harris reduce0",
            _multipass("reduce0", elements_per_thread=1, dynamic_shared=True),
            _multipass_model(BLOCK_DIM), defines=_B),
    Variant("07_reduce1", "reduce1: strided index (bank conflicts)", "Harris reduce1",
            _multipass("reduce1", elements_per_thread=1, dynamic_shared=True),
            _multipass_model(BLOCK_DIM), defines=_B),
    Variant("08_reduce2", "reduce2: sequential addressing", "Harris reduce2",
            _multipass("reduce2", elements_per_thread=1, dynamic_shared=True),
            _multipass_model(BLOCK_DIM), defines=_B),
    Variant("09_reduce3", "reduce3: first add during load", "Harris reduce3",
            _multipass("reduce3", elements_per_thread=2, dynamic_shared=True),
            _multipass_model(2 * BLOCK_DIM), defines=_B),
    Variant("10_reduce4_racy", "reduce4 as published: last warp unrolled, racy since Volta",
            "Harris reduce4",
            _multipass("reduce4", elements_per_thread=2, dynamic_shared=True, min_block=64),
            _multipass_model(2 * BLOCK_DIM), defines=_B, racy=True),
    Variant("11_reduce4", "reduce4 fixed: last warp with __syncwarp()", "Harris reduce4 + Volta fix",
            _multipass("reduce4", elements_per_thread=2, dynamic_shared=True, min_block=64),
            _multipass_model(2 * BLOCK_DIM), defines=_B),
    Variant("12_reduce5", "reduce5: completely unrolled (template<blockSize>)", "Harris reduce5",
            _multipass(f"reduce5<{BLOCK_DIM}>", elements_per_thread=2, dynamic_shared=True, min_block=64),
            _multipass_model(2 * BLOCK_DIM), name_expressions=(f"reduce5<{BLOCK_DIM}>",)),
    Variant("13_reduce6", "reduce6: many elements per thread, grid-stride", "Harris reduce6",
            _grid_stride(f"reduce6<{BLOCK_DIM}>", elements_per_thread_step=2, dynamic_shared=True,
                         min_block=64),
            _single_pass_model, name_expressions=(f"reduce6<{BLOCK_DIM}>",)),
    Variant("14_warp_shuffle", "warp shuffles (__shfl_down_sync)", "beyond the book",
            _grid_stride("WarpShuffleSumReductionKernel", elements_per_thread_step=2, power_of_two=False),
            _single_pass_model, defines=_B),
    Variant("15_vectorized", "float4 loads, UNROLL loads in flight", "beyond the book",
            _grid_stride("VectorizedSumReductionKernel", elements_per_thread_step=4, power_of_two=False,
                         many_waves=True, defines=_B_U),
            _single_pass_model, defines=_B_U),
    Variant("16_one_pass", "one pass: last block sums the partials", "beyond the book",
            _one_pass("OnePassSumReductionKernel", defines=_B_U), _single_pass_model, defines=_B_U),
    Variant("17_max", "max: identity -INFINITY (float4, as 15)", "PMPP 10.1-10.2",
            _grid_stride("VectorizedMaxReductionKernel", elements_per_thread_step=4, power_of_two=False,
                         many_waves=True, defines=_B_U),
            _single_pass_model, defines=_B_U, problem={"op": "max"}),
)
# What `pmpp tune` may set, per variant: the block size of every tree (a power of two; 64 at least
# where the last warp is unrolled), the shuffle kernels' whole warps, and the elements a thread takes
# before the tree (05's COARSE_FACTOR, 15-17's float4 loads in flight), and for 15-17 how many
# waves the grid may have (WAVES: read by the launch, not the kernel; one wave is the H200's best
# for 15 where the H100 gained from many).
_TREE_BLOCKS = (64, 128, 256, 512, 1024)
_WARP_BLOCKS = (128, 256, 512, 1024)
TUNABLES = {
    **{name: {"BLOCK_DIM": _TREE_BLOCKS} for name in ("01_simple", "02_convergent", "03_shared_memory",
                                                     "04_segmented", "06_reduce0", "07_reduce1", "08_reduce2",
                                                     "09_reduce3", "11_reduce4")},
    "05_coarsened": {"BLOCK_DIM": _TREE_BLOCKS, "COARSE_FACTOR": (1, 2, 4, 8, 16, 32)},
    "14_warp_shuffle": {"BLOCK_DIM": _WARP_BLOCKS},
    **{name: {"BLOCK_DIM": _WARP_BLOCKS, "UNROLL": (1, 2, 4, 8), "WAVES": (1, 2, 4, 8, 16, 32, 64)}
       for name in ("15_vectorized", "16_one_pass", "17_max")},
}
# The kernels index with 32-bit unsigned ints: i + BLOCK_DIM and the like must not wrap.
VARIANTS = tuple(replace(v, max_n=MAX_N, tunables=TUNABLES.get(v.name, {})) for v in _VARIANTS)

CHAPTER = Chapter(
    name="reduction",
    title="Reduction (PMPP ch. 10)",
    kernel_dir="reduction",
    variants=VARIANTS,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    problems={"gpu": {"n": 2 ** 28, "op": "sum"}, "cpu": {"n": 2 ** 20, "op": "sum"}},
    test_sizes=(1, 31, 1000, 2 ** 20 + 3),
    cpu_largest=frozenset({"01_simple", "04_segmented", "13_reduce6", "15_vectorized", "16_one_pass", "17_max"}),
    library=(
        Library("cub::DeviceReduce", _cub_run, cub.available, why_not=cub.why_not_on_gpu),
        Library("cupy.sum (CUB)", _cupy_run, cupy_routines.available(with_cub=True)),
        Library("cupy.sum", _cupy_run, cupy_routines.available(with_cub=False)),
        Library("torch.sum", _torch_run, _torch_available, imports=("torch",)),
        Library("numpy.sum", _numpy_run, lambda backend: backend == "cpu"),
    ),
    describe=lambda p: f"n={p['n']} float32 {p.get('op', 'sum')}",
    make_exact_inputs=make_integer_inputs,
    # 05 with each COARSE_FACTOR: how many elements a thread adds before the tree (the book's 4)
    bench=(BenchSet("coarse_factor", ({"n": 2 ** 28, "op": "sum"},),
                    tuple(VARIANTS[4].configured(COARSE_FACTOR=c) for c in COARSE_FACTORS)),),
)
