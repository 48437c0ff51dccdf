"""Chapter 7 - Convolution (PMPP 4th ed.): 2D single-channel correlation with zero padding.

The problem: ``{"n": side, "r": filter radius}`` - an n x n float32 image N and a (2r+1) x (2r+1)
float32 filter F; ``"h"`` and ``"w"`` give a height and width other than n; ``"filter":
"separable"`` makes F an outer product, F[i][j] = F_y[i] * F_x[j] (08_separable needs one). The
output P has N's shape:

    P[row][col] = sum over i, j in [0, 2r] of F[i][j] * N[row - r + i][col - r + j],

a neighbour outside N (a "ghost cell") counting as 0. This is a correlation, as in the book and in
``scipy.ndimage.correlate(mode="constant")`` and ``torch.nn.functional.conv2d``; a convolution
proper flips F.

Two models of what a run costs:

* :func:`compulsory_model` (every variant's ``model``): what must cross DRAM whatever the
  kernel - read N once, write P once (8 bytes per output) - and the 2 (2r+1)^2 flops per output of
  the direct method (also for 08_separable, which does fewer: its GFLOP/s are "effective"). Its
  GB/s is the effective bandwidth, comparable with the copy bandwidth, and the roofline it draws
  is a true bound.
* :func:`book_model`: the book's count - every global-memory load a kernel issues counted as DRAM
  traffic, output writes left out - which gives the book's 0.25 OP/B (01), 0.5 OP/B (02) and, for
  a 32 x 32 input tile and a 5 x 5 filter, 9.57 OP/B (03, :func:`tiled_intensity`). Caches make
  the basic kernels far faster than this model predicts; the tiles make it come true.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

import pmpp
from pmpp.chapters.base import Chapter, CheckResult, Library, Model, Variant
from pmpp.chapters.draw import array_module, generator_for, host, to_module

FILTER_RADIUS = 2        # default radius: a 5 x 5 filter
IN_TILE_DIM = 32         # 03: input tile (= block) side; the output tile is IN_TILE_DIM - 2r
TILE_DIM = 32            # 04, 05: tile (= block) side
BLOCK_DIM_X = 32         # 01, 02, 06-08: threads per block row (a warp)
BLOCK_DIM_Y = 8          # ... and block rows
COARSE_FACTOR = 8        # 06-08: output rows per thread
MAX_ELEMENTS = 2 ** 31 - 1   # 01-06 index N and P with int: h * w must stay below 2^31

U32 = 2.0 ** -24         # unit roundoff of float32
U64 = 2.0 ** -53         # unit roundoff of float64

# The book's Fig. 7.14 (OP/B of 03 against input tile side and filter size), the entries quoted in
# the book's text: {(IN_TILE_DIM, FILTER_RADIUS): OP/B}; a side of None is the limit of a large tile.
BOOK_TABLE = {(8, 2): 3.13, (32, 2): 9.57, (None, 2): 12.5, (32, 4): 22.78, (None, 4): 40.5}


# --------------------------------------------------------------------------------------------
# Problem and inputs
# --------------------------------------------------------------------------------------------

def shape(problem: Mapping[str, Any]) -> tuple[int, int]:
    """(height, width) of the image: ``h`` and ``w`` if given, else n x n."""
    n = problem.get("n", 0)
    return int(problem.get("h", n)), int(problem.get("w", n))


def separable(problem: Mapping[str, Any]) -> bool:
    return problem.get("filter", "general") == "separable"


def _uniform(rng: np.random.Generator, shape) -> np.ndarray:
    """float32 uniform in [-1, 1): rng.random is exact in float32, *2 - 1 rounds only toward -1."""
    a = rng.random(shape, dtype=np.float32)
    a *= 2
    a -= 1
    return a


def _integers(rng: np.random.Generator, shape, bound: int) -> np.ndarray:
    return rng.integers(-bound, bound + 1, size=shape).astype(np.float32)


def _inputs(problem, xp, image: np.ndarray, factors) -> dict:
    """The inputs dict: image, filter (and its factors for a separable problem), poisoned output."""
    r = int(problem["r"])
    if separable(problem):
        f_y, f_x = factors(2 * r + 1), factors(2 * r + 1)
        f = np.outer(f_y, f_x).astype(np.float32)      # rounded; the reference uses the exact product
        extra = {"f_y": xp.asarray(f_y), "f_x": xp.asarray(f_x)}
    else:
        f = factors((2 * r + 1, 2 * r + 1))
        extra = {}
    h, w = image.shape
    # NaN: a correct kernel overwrites every element, and a NaN left behind fails any comparison.
    return {"x": xp.asarray(image), "f": xp.asarray(f), **extra,
            "out": xp.full((h, w), np.nan, dtype=np.float32)}


def make_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """``{"x": h x w image, "f": filter, ["f_y", "f_x": its factors,] "out": h x w of NaN}``, all
    float32 uniform in [-1, 1): the image drawn where ``xp`` keeps it, the filter by NumPy."""
    image = _uniform(generator_for(xp, rng), shape(problem))
    return _inputs(problem, xp, image, lambda s: _uniform(rng, s))


def make_integer_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """As :func:`make_inputs`, but integer-valued: image in [-8, 8], filter (or its factors) in
    [-4, 4] ([-2, 2]). Every product and partial sum is an integer of magnitude at most
    (2r+1)^2 * 8 * 4 (3200 for r = 4), far below 2^24, so float32 arithmetic is exact in any order
    and every variant must match the reference to the last bit."""
    bound = 2 if separable(problem) else 4
    image = _integers(generator_for(xp, rng), shape(problem), 8)
    return _inputs(problem, xp, image, lambda s: _integers(rng, s, bound))


# --------------------------------------------------------------------------------------------
# Reference and checking
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CorrelationReference:
    """The float64 correlation (``values``) and, for the tolerance, the correlation of |N| with
    |F| (``magnitudes``): both arrays of the image's shape, kept where the image is (NumPy or
    CuPy); ``value`` and ``magnitude`` are the same in NumPy."""

    values: Any
    magnitudes: Any

    @property
    def value(self) -> np.ndarray:
        return host(self.values)

    @property
    def magnitude(self) -> np.ndarray:
        return host(self.magnitudes)


def correlate(image, weights: np.ndarray, xp=np):
    """``image`` (h x w, on ``xp``) correlated with ``weights`` ((2r+1) x (2r+1), NumPy) with zero
    padding, in the image's dtype: one shifted slice of the padded image per filter tap."""
    h, w = image.shape
    r = (weights.shape[0] - 1) // 2
    padded = xp.zeros((h + 2 * r, w + 2 * r), dtype=image.dtype)
    padded[r:r + h, r:r + w] = image
    out = xp.zeros((h, w), dtype=image.dtype)
    for i, j in zip(*np.nonzero(weights)):
        out += image.dtype.type(weights[i, j]) * padded[i:i + h, j:j + w]
    return out


def _weights64(problem, inputs) -> np.ndarray:
    """The filter in float64; for a separable problem the exact outer product of its factors."""
    if separable(problem):
        f_y = np.asarray(pmpp.asnumpy(inputs["f_y"]), dtype=np.float64)
        f_x = np.asarray(pmpp.asnumpy(inputs["f_x"]), dtype=np.float64)
        return np.outer(f_y, f_x)                      # float32 x float32 is exact in float64
    return np.asarray(pmpp.asnumpy(inputs["f"]), dtype=np.float64)


def reference(problem: Mapping[str, Any], inputs: Mapping[str, Any]) -> CorrelationReference:
    """The float64 correlation, computed and kept where the inputs are (CuPy or NumPy)."""
    x = inputs["x"]
    xp = pmpp.get_array_module(x)
    x64 = x.astype(np.float64)
    weights = _weights64(problem, inputs)
    return CorrelationReference(correlate(x64, weights, xp), correlate(xp.abs(x64), np.abs(weights), xp))


def rounding_depth(r: int) -> int:
    """An upper bound on the float32 roundings between any product F[i][j] * N[.][.] and an
    output, over every variant and library routine, for radius r.

    A direct sum of K = (2r+1)^2 products, in any order, with or without fused multiply-adds,
    rounds each term at most K times (a product and K - 1 additions, or K FMAs). 08_separable
    rounds a term at most 2r+1 times in its horizontal pass and 2r+1 times in its vertical one.
    Libraries given the float32 filter of a separable problem add one rounding, of F_y[i] * F_x[j]
    itself. Hence max(K, 2(2r+1)) + 1."""
    k = (2 * r + 1) ** 2
    return max(k, 2 * (2 * r + 1)) + 1


def tolerance_factor(r: int) -> float:
    """gamma_d (float32) + gamma_K (float64 reference), with d = :func:`rounding_depth`.

    Higham (*Accuracy and Stability of Numerical Algorithms*, 2nd ed., sec. 3.1 and 4.2): a sum
    of products, each term rounded at most d times, is off by at most gamma_d * sum |F x|,
    gamma_d = d u / (1 - d u). So each output may differ from the exact value by at most this
    factor times ``magnitude`` (the correlation of |N| with |F|): rigorous, elementwise, and
    typically 10-100x larger than the error seen. An output whose neighbourhood is all zeros
    must be exactly 0."""
    d = rounding_depth(r)
    k = (2 * r + 1) ** 2 + 1
    return d * U32 / (1 - d * U32) + k * U64 / (1 - k * U64)


def check(output, ref: CorrelationReference, problem: Mapping[str, Any]) -> CheckResult:
    """Every element within :func:`tolerance_factor` * ``ref.magnitude`` of ``ref.value``; a NaN
    (an element never written) always fails. Compared where the reference is (on a GPU, there)."""
    xp = array_module(ref.values)
    out = to_module(xp, output)
    if out.shape != ref.values.shape:
        return CheckResult(False, math.inf, 0.0, f"output has shape {out.shape}, expected {ref.values.shape}")
    tolerance = tolerance_factor(int(problem["r"])) * ref.magnitudes
    error = xp.abs(out.astype(np.float64) - ref.values)
    error[xp.isnan(error)] = math.inf
    bad = ~(error <= tolerance)
    worst = float(error.max()) if error.size else 0.0
    wrong = int(xp.count_nonzero(bad))
    if not wrong:
        return CheckResult(True, worst, float(tolerance.max()) if tolerance.size else 0.0,
                           f"all {out.size} elements within tolerance (largest error {worst:.3g})")
    row, col = (int(i) for i in xp.argwhere(bad)[0])
    return CheckResult(False, worst, float(tolerance.max()),
                       f"{wrong} of {out.size} elements wrong; first at [{row}, {col}]: "
                       f"got {float(out[row, col])!r}, expected {float(ref.values[row, col])!r} "
                       f"(tolerance {float(tolerance[row, col]):.3g})")


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Geometry:
    """How a variant covers the image: threads per block and outputs per block (width, height)."""

    block: tuple[int, int]
    tile: tuple[int, int]

    def grid(self, h: int, w: int) -> tuple[int, int]:
        return -(-w // self.tile[0]), -(-h // self.tile[1])


def _defines(variant_defines: Mapping[str, Any], module) -> dict:
    """The defines the module was built with (the loader remembers them), over the variant's."""
    return {**variant_defines, **module.defines}


def _check_sizes(problem, inputs, module, d) -> tuple[int, int, int]:
    h, w = shape(problem)
    r = int(problem["r"])
    if h * w > MAX_ELEMENTS or h < 1 or w < 1:
        raise ValueError(f"image {h} x {w}: the kernels need 1 <= h * w < 2^31")
    if inputs["x"].shape != (h, w) or inputs["out"].shape != (h, w):
        raise ValueError(f"x and out must be {h} x {w} arrays, got {inputs['x'].shape} and {inputs['out'].shape}")
    if "FILTER_RADIUS" in d and int(d["FILTER_RADIUS"]) != r:
        raise ValueError(f"{module.filename} was compiled with FILTER_RADIUS={d['FILTER_RADIUS']} but the "
                         f"problem has r={r}: load it with defines={{'FILTER_RADIUS': {r}}}")
    return h, w, r


def _one_thread_per_output(d, r) -> Geometry:
    return Geometry((BLOCK_DIM_X, BLOCK_DIM_Y), (BLOCK_DIM_X, BLOCK_DIM_Y))


def _basic(kernel: str):
    """01: the filter and its radius are arguments; one thread per output."""

    def launch(module, problem, inputs):
        h, w, r = _check_sizes(problem, inputs, module, {})
        g = _one_thread_per_output({}, r)
        module.get_function(kernel)(g.grid(h, w), g.block, (inputs["x"], inputs["f"], inputs["out"], r, w, h))
        return inputs["out"]

    return launch


def _constant(kernel: str, geometry, defines: Mapping[str, Any], *, separable_filter: bool = False,
              gpu_safe: bool = True):
    """02-08: copy the filter into constant memory - ``F``, or its factors ``F_y`` and ``F_x`` for
    a ``separable_filter`` kernel - then one launch of ``kernel(N, P, width, height)``.
    ``geometry(defines, r)`` gives the :class:`Geometry`."""

    def launch(module, problem, inputs):
        if not gpu_safe and module.backend == "cupy":
            raise RuntimeError(f"{module.filename} reads past its shared memory: on a GPU that ends the "
                               "CUDA context. Run it on the CPU engine: backend='cpu', check=True")
        d = _defines(defines, module)
        h, w, r = _check_sizes(problem, inputs, module, d)
        if separable_filter:
            if "f_y" not in inputs:
                raise ValueError(f"{module.filename} needs a separable filter: problem['filter'] = 'separable'")
            module.copy_to_symbol("F_y", inputs["f_y"])
            module.copy_to_symbol("F_x", inputs["f_x"])
        else:
            module.copy_to_symbol("F", inputs["f"])
        g = geometry(d, r)
        module.get_function(kernel)(g.grid(h, w), g.block, (inputs["x"], inputs["out"], w, h))
        return inputs["out"]

    return launch


def _input_tile_block(d, r) -> Geometry:
    side = int(d["IN_TILE_DIM"])
    return Geometry((side, side), (side - 2 * r, side - 2 * r))


def _output_tile_block(d, r) -> Geometry:
    side = int(d["TILE_DIM"])
    return Geometry((side, side), (side, side))


def _coarsened(columns_per_thread: int):
    def geometry(d, r) -> Geometry:
        bx, by, c = int(d["BLOCK_DIM_X"]), int(d["BLOCK_DIM_Y"]), int(d["COARSE_FACTOR"])
        return Geometry((bx, by), (columns_per_thread * bx, by * c))

    return geometry


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------

def _taps(problem) -> int:
    return (2 * int(problem["r"]) + 1) ** 2


def compulsory_model(problem: Mapping[str, Any]) -> Model:
    """2 (2r+1)^2 flops per output (the direct method, ghost taps counted as the book does); N read
    once, P written once and the filter read once: the least any kernel can move through DRAM."""
    h, w = shape(problem)
    return Model(flops=2.0 * _taps(problem) * h * w, bytes=8.0 * h * w + 4.0 * _taps(problem))


def tiled_intensity(in_tile_dim: int | None, r: int) -> float:
    """The book's OP/B of 03 for an interior block (sec. 7.4): OUT_TILE_DIM^2 (2r+1)^2 multiply-adds
    (2 flops each) per IN_TILE_DIM^2 4-byte loads, OUT_TILE_DIM = IN_TILE_DIM - 2r; ``None`` for
    the limit of an infinitely large tile, (2r+1)^2 / 2. 0 when the tile has no output left."""
    taps = (2 * r + 1) ** 2
    if in_tile_dim is None:
        return taps / 2
    out_tile_dim = max(in_tile_dim - 2 * r, 0)
    return out_tile_dim ** 2 * taps * 2 / (in_tile_dim ** 2 * 4)


def rounds_to(value: float, printed: float) -> bool:
    """Whether ``value`` is what the book prints, rounded to two decimals (half up: 3.125 -> 3.13)."""
    return abs(value - printed) <= 0.005 + 1e-12


def _requested(loads_per_output: float):
    """A book-style model: 2 (2r+1)^2 flops per output, ``loads_per_output(problem)`` 4-byte
    global loads per output."""

    def model(problem) -> Model:
        h, w = shape(problem)
        return Model(flops=2.0 * _taps(problem) * h * w, bytes=4.0 * loads_per_output(problem) * h * w)

    return model


def _tile_loads(geometry, defines, loads_per_block):
    """Loads per output of a tiled kernel: each block of the grid loads ``loads_per_block(g, r)``
    elements (ghost cells included, as in the book), whatever part of its tile is inside N."""

    def loads(problem) -> float:
        h, w = shape(problem)
        r = int(problem["r"])
        g = geometry(defines, r)
        gx, gy = g.grid(h, w)
        return gx * gy * loads_per_block(g, r) / (h * w)

    return loads


def _separable_flops(problem) -> float:
    """Flops 08 executes per output: horizontal pass (2r+1)(COARSE_FACTOR + 2r) / COARSE_FACTOR
    multiply-adds (repeated on each thread's halo rows), vertical pass 2r+1."""
    r = int(problem["r"])
    return 2.0 * ((2 * r + 1) * (COARSE_FACTOR + 2 * r) / COARSE_FACTOR + (2 * r + 1))


# --------------------------------------------------------------------------------------------
# Library routines: the bar to beat
# --------------------------------------------------------------------------------------------

def _cupyx_run(problem, inputs):
    from cupyx.scipy import ndimage
    return ndimage.correlate(inputs["x"], inputs["f"], mode="constant", cval=0.0)


def _torch_available(backend: str) -> bool:
    if backend != "cupy" or importlib.util.find_spec("torch") is None:
        return False
    import torch
    return torch.cuda.is_available()


def _torch_run(problem, inputs):
    """cuDNN's convolution (PyTorch's conv2d is a correlation), TF32 off: a float32 result."""
    import cupy
    import torch
    x = torch.from_dlpack(inputs["x"])[None, None]
    f = torch.from_dlpack(inputs["f"])[None, None]
    allow_tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        out = torch.nn.functional.conv2d(x, f, padding=int(problem["r"]))
    finally:
        torch.backends.cudnn.allow_tf32 = allow_tf32
    return cupy.from_dlpack(out[0, 0])


def _scipy_available(backend: str) -> bool:
    return backend == "cpu" and importlib.util.find_spec("scipy") is not None


def _scipy_run(problem, inputs):
    from scipy import ndimage
    return ndimage.correlate(inputs["x"], inputs["f"], mode="constant", cval=0.0)


def _numpy_run(problem, inputs):
    return correlate(inputs["x"], np.asarray(inputs["f"]), np)


# --------------------------------------------------------------------------------------------
# The chapter
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CpuOnlyVariant(Variant):
    """A teaching example whose bug reads outside an array. On a GPU an access past a block's
    shared memory raises an exception that ends the CUDA context (every later CUDA call fails),
    so it is never launched there: ``pmpp run`` and ``pmpp bench`` skip it on a GPU."""

    def supports(self, problem: Mapping[str, Any], backend: str = "cupy") -> bool:
        return backend == "cpu" and super().supports(problem, backend)


_R = {"FILTER_RADIUS": FILTER_RADIUS}
_TILED = {**_R, "IN_TILE_DIM": IN_TILE_DIM}
_CACHED = {**_R, "TILE_DIM": TILE_DIM}
_COARSE = {**_R, "BLOCK_DIM_X": BLOCK_DIM_X, "BLOCK_DIM_Y": BLOCK_DIM_Y, "COARSE_FACTOR": COARSE_FACTOR}
_SCALAR_TILE = _coarsened(1)
_VECTOR_TILE = _coarsened(4)


def _halo4(r: int) -> int:
    return -(-r // 4) * 4


# Per variant: the book-style model (global loads requested, each counted as DRAM traffic).
_OWN_TILE_LOADS = _tile_loads(_output_tile_block, _CACHED, lambda g, r: g.tile[0] * g.tile[1])
_VECTOR_TILE_LOADS = _tile_loads(_VECTOR_TILE, _COARSE,
                                 lambda g, r: (g.tile[0] + 2 * _halo4(r)) * (g.tile[1] + 2 * r))
_BOOK_LOADS = {
    "01_basic": lambda p: 2 * _taps(p),                 # N and F per multiply-add
    "02_constant_memory": _taps,                        # N per multiply-add
    "03_tiled_halo": _tile_loads(_input_tile_block, _TILED, lambda g, r: g.block[0] * g.block[1]),
    # 04, 05: the tile's own elements; the halo is assumed to hit in L2 (the premise of sec. 7.5)
    "04_cached_halo_as_printed": _OWN_TILE_LOADS,
    "05_cached_halo": _OWN_TILE_LOADS,
    "06_register_tiled": _tile_loads(_SCALAR_TILE, _COARSE,
                                     lambda g, r: (g.tile[0] + 2 * r) * (g.tile[1] + 2 * r)),
    "07_vectorized": _VECTOR_TILE_LOADS,
    "08_separable": _VECTOR_TILE_LOADS,                 # the same tiles; fewer flops (below)
}


def book_model(variant: Variant | str, problem: Mapping[str, Any]) -> Model:
    """The book's model of one run of a variant: flops it executes, and 4 bytes for every element
    its threads load from global memory, as if none hit in a cache (writes not counted, as in the
    book). 01: 0.25 OP/B; 02: 0.5 OP/B; 03 at a 32 x 32 input tile and r = 2: 9.57 OP/B for an
    interior block (:func:`tiled_intensity`), a little less over a whole image whose edge tiles are
    partly outside it."""
    name = variant if isinstance(variant, str) else variant.name
    variant_problem = CHAPTER.variant(name).problem
    model = _requested(_BOOK_LOADS[name])({**problem, **variant_problem})
    if name == "08_separable":
        h, w = shape(problem)
        return Model(flops=_separable_flops(problem) * h * w, bytes=model.bytes)
    return model


_VARIANTS = (
    Variant("01_basic", "7.2 basic: one thread per output, filter in global memory", "PMPP 7.2",
            _basic("convolution_2D_basic_kernel"), compulsory_model),
    Variant("02_constant_memory", "7.3 filter in constant memory", "PMPP 7.3",
            _constant("convolution_2D_const_mem_kernel", _one_thread_per_output, _R),
            compulsory_model, defines=_R),
    Variant("03_tiled_halo", "7.4 tiled, halo cells in shared memory (block = input tile)", "PMPP 7.4",
            _constant("convolution_tiled_2D_const_mem_kernel", _input_tile_block, _TILED),
            compulsory_model, defines=_TILED),
    CpuOnlyVariant("04_cached_halo_as_printed", "7.5 tiled, halo from L2: the listing as printed (bug)",
                   "PMPP 7.5 (Fig. 7.15)",
                   _constant("convolution_cached_tiled_2D_const_mem_kernel", _output_tile_block, _CACHED,
                             gpu_safe=False),
                   compulsory_model, defines=_CACHED, racy=True),
    Variant("05_cached_halo", "7.5 tiled, halo from L2 (block = output tile)", "PMPP 7.5, corrected",
            _constant("convolution_cached_tiled_2D_const_mem_kernel", _output_tile_block, _CACHED),
            compulsory_model, defines=_CACHED),
    Variant("06_register_tiled", "register tiling: COARSE_FACTOR outputs down a column per thread",
            "beyond the book",
            _constant("convolution_register_tiled_kernel", _SCALAR_TILE, _COARSE),
            compulsory_model, defines=_COARSE),
    Variant("07_vectorized", "float4 loads and stores, 4 x COARSE_FACTOR outputs per thread",
            "beyond the book",
            _constant("convolution_vectorized_kernel", _VECTOR_TILE, _COARSE),
            compulsory_model, defines=_COARSE),
    Variant("08_separable", "separable filter: two 1-D passes fused in registers", "beyond the book",
            _constant("convolution_separable_kernel", _VECTOR_TILE, _COARSE, separable_filter=True),
            compulsory_model, defines=_COARSE, problem={"filter": "separable"}),
)
MAX_N = math.isqrt(MAX_ELEMENTS)      # the largest square image: 46340 x 46340
VARIANTS = tuple(replace(v, max_n=MAX_N) for v in _VARIANTS)


def _describe(problem: Mapping[str, Any]) -> str:
    h, w = shape(problem)
    k = 2 * int(problem["r"]) + 1
    return f"{h}x{w} float32, {k}x{k} filter" + (" (separable)" if separable(problem) else "")


CHAPTER = Chapter(
    name="convolution",
    title="Convolution (PMPP ch. 7)",
    kernel_dir="convolution",
    variants=VARIANTS,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    # 8192^2 float32: 256 MiB in, 256 MiB out - ten times the H100's 50 MB L2.
    problems={"gpu": {"n": 8192, "r": FILTER_RADIUS}, "cpu": {"n": 300, "r": FILTER_RADIUS}},
    test_sizes=(1, 5, 33, 131, 260),
    shrink=lambda p, f: {**p, "n": max(4, round(p["n"] / f ** 0.5))},       # n is the square's side
    library=(
        Library("cupyx.scipy.ndimage.correlate", _cupyx_run, lambda backend: backend == "cupy"),
        Library("torch conv2d (cuDNN, FP32)", _torch_run, _torch_available, imports=("torch",)),
        Library("scipy.ndimage.correlate", _scipy_run, _scipy_available),
        Library("numpy (shifted slices)", _numpy_run,
                lambda backend: backend == "cpu" and not _scipy_available(backend)),
    ),
    describe=_describe,
)
