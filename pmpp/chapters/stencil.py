"""Chapter 8 - Stencil (PMPP 4th ed.): the 3D seven-point stencil, from one thread per point to
register tiling, then aligned, vectorized and pipelined tiles.

The problem: one sweep over an ``n x n x n`` float32 grid, ``{"n": int}``, stored with x fastest
(``in[i, j, k]``: i = z plane, j = y row, k = x column). An interior point gets

    c0*in[i,j,k] + c1*in[i,j,k-1] + c2*in[i,j,k+1] + c3*in[i,j-1,k] + c4*in[i,j+1,k]
                 + c5*in[i-1,j,k] + c6*in[i+1,j,k]

with the coefficients c0..c6 passed as float kernel parameters. ``{"n": int, "steps": T}`` asks
for T sweeps, each the next one's input (08_temporal_blocking makes them in one pass over memory;
its variant's ``problem`` sets ``steps``, the reference and the models follow it).

**Boundary condition**: a point with any index 0 or n-1 holds the boundary value and stays
untouched at every step - every kernel copies it
from the input, so the output is a complete grid (the next sweep's input in a time loop) and
is checked element for element, boundary included.

Two models, because the book's and the memory system's bytes differ:

* :func:`book_intensity`: OP/B as the book counts it - 13 flops per output over the *loads each
  kernel issues to global memory* (stores not counted): 13/28 = 0.46 for 01_basic,
  (13/4)(1 - 2/T)^3 for the tiled kernels (1.37 at T = 8, 2.68 at T = 32, never above 3.25).
* ``Variant.model``: what must move through DRAM at the least - each input read once, each
  output written once, 8 bytes per point - so the results' GB/s is "effective bandwidth
  counting 8 bytes per point", comparable with the copy ceiling. 13/8 = 1.63 OP/B at most.
  For T steps both counts are T times one sweep's, so the GB/s of a temporally blocked variant
  is its *effective* bandwidth: T sweeps' bytes over its time, which may exceed the copy ceiling.

:func:`make_integer_inputs` gives grids on which every correct kernel is exact (the exercises'
grader uses them); :func:`sweeps` runs a variant in a time loop (heat diffusion, with
:func:`heat_coefficients`, :func:`heat` and :func:`wall_flux` for the physics it must obey).
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import replace
from typing import Any, Callable, Mapping

import numpy as np

import pmpp

from pmpp.chapters.base import BenchSet, Chapter, CheckResult, Library, Model, Variant
from pmpp.chapters.draw import generator_for, host

FLOPS_PER_POINT = 13     # 7 multiplies and 6 adds per interior point
BYTES_PER_POINT = 8      # the least DRAM traffic: each input read once, each output written once
MAX_N = 1625             # the largest n whose n^3 point indices fit the kernels' 32-bit unsigned ints
MAX_EXACT_STEPS = 4      # sweeps after which integer inputs are still exact in float32 (8 * 19^4 < 2^24)

U32 = 2.0 ** -24         # unit roundoff of float32
U64 = 2.0 ** -53         # unit roundoff of float64
TERMS = 7                # a point is a dot product of 7 terms


def gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n*u / (1 - n*u): the relative error bound of n roundings."""
    return n * u / (1 - n * u)


# --------------------------------------------------------------------------------------------
# Inputs and reference
# --------------------------------------------------------------------------------------------

def make_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """``{"in": n^3 float32 uniform in [-1, 1), "out": n^3 float32 all NaN, "c": 7 float32}``.

    The coefficients are random and distinct (uniform in [-1, 1)), so a kernel that swaps two
    neighbours (x-1 with x+1, y with z, ...) is caught; ``problem["coefficients"]`` fixes them
    instead (e.g. a heat equation's). ``out`` is poisoned: a point a kernel forgets stays NaN."""
    n = problem["n"]
    x = generator_for(xp, rng).random((n, n, n), dtype=np.float32)   # [0, 1), where xp keeps it
    x *= 2
    x -= 1
    given = problem.get("coefficients")
    c = np.asarray(given if given is not None else rng.uniform(-1, 1, TERMS), dtype=np.float32)
    return {"in": xp.asarray(x), "out": xp.full((n, n, n), np.nan, dtype=np.float32), "c": c}


def make_integer_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """As :func:`make_inputs`, with small integers: grid values in [-8, 8] and 7 distinct
    coefficients in [-4, 4]. Every product and partial sum is an integer of magnitude at most
    7 * 8 * 4 = 224, exact in float32 whatever the order - so every correct kernel must match the
    reference bit for bit, and a wrong neighbour or a wrong coefficient cannot hide in rounding.
    After T sweeps a value is at most 8 * 19^T (19: the largest sum of 7 distinct |c| <= 4), below
    2^24 for T <= 4 (:data:`MAX_EXACT_STEPS`): still exact."""
    if problem.get("steps", 1) > MAX_EXACT_STEPS:
        raise ValueError(f"integer inputs stay exact in float32 for at most {MAX_EXACT_STEPS} steps, "
                         f"not {problem['steps']}: use make_inputs (a rounding tolerance) instead")
    n = problem["n"]
    x = generator_for(xp, rng).integers(-8, 9, size=(n, n, n)).astype(np.float32)
    c = rng.choice(np.arange(-4, 5), size=TERMS, replace=False).astype(np.float32)
    return {"in": xp.asarray(x), "out": xp.full((n, n, n), np.nan, dtype=np.float32), "c": c}


def sweep(x, c, dtype=np.float64):
    """One sweep in array code (NumPy, or CuPy on CuPy arrays), computed in ``dtype``: interior
    points get the stencil, boundary points are copied. The reference (float64) and the CPU
    library routine (float32)."""
    x = x.astype(dtype, copy=False)
    c0, c1, c2, c3, c4, c5, c6 = (dtype(v) for v in np.asarray(c, dtype=np.float32))
    out = x.copy()
    inner = (slice(1, -1),) * 3
    out[inner] = (c0 * x[inner] + c1 * x[1:-1, 1:-1, :-2] + c2 * x[1:-1, 1:-1, 2:]
                  + c3 * x[1:-1, :-2, 1:-1] + c4 * x[1:-1, 2:, 1:-1]
                  + c5 * x[:-2, 1:-1, 1:-1] + c6 * x[2:, 1:-1, 1:-1])
    return out


def repeated_sweep(x, c, steps: int, dtype=np.float64):
    """``steps`` sweeps of :func:`sweep`, each the next one's input."""
    for _ in range(steps):
        x = sweep(x, c, dtype)
    return x


class StencilReference:
    """The float64 reference of ``steps`` sweeps of the input ``x`` (NumPy, or CuPy on a GPU):
    :attr:`values` computes the whole grid where ``x`` is (what an exact check compares against);
    :meth:`slabs` a slab of planes at a time on the host (at n = 512 a float64 grid is 1 GiB),
    each point's tolerance with it."""

    SLAB = 32        # planes per slab

    def __init__(self, x, c: np.ndarray, steps: int = 1):
        self.x = x
        self.c = np.asarray(host(c), dtype=np.float32)
        self.steps = steps

    @property
    def values(self):
        """The whole float64 reference grid, where the input is."""
        return repeated_sweep(self.x, self.c, self.steps)

    def __array__(self, dtype=None, copy=None):
        values = host(self.values)
        return values if dtype is None else values.astype(dtype)

    def slabs(self):
        """``(lo, hi, values, tolerance)`` for planes [lo, hi): values in float64; tolerance 0 at
        boundary points (a copy is exact) and :func:`point_tolerance` inside. A slab is swept
        with ``steps`` planes on each side: each sweep leaves the outermost plane as it was (a
        wrong value, where it is not the grid's boundary) and spoils one plane more inward, so
        after ``steps`` sweeps the slab itself is right."""
        n, steps = self.x.shape[0], self.steps
        for lo in range(0, n, self.SLAB):
            hi = min(lo + self.SLAB, n)
            a, b = max(lo - steps, 0), min(hi + steps, n)   # the slab and the planes it depends on
            x = host(self.x[a:b])
            values = repeated_sweep(x, self.c, steps)[lo - a:hi - a]
            scale = repeated_sweep(np.abs(x), np.abs(self.c), steps)[lo - a:hi - a]
            tolerance = point_tolerance(scale, steps)
            _zero_boundary(tolerance, lo, n)
            yield lo, hi, values, tolerance


def point_tolerance(scale, steps: int = 1):
    """The largest error of a correct float32 kernel at one interior point, whose exact value is
    sum_m c_m x_m and ``scale`` = sum_m |c_m||x_m| (after T = ``steps`` sweeps: the exact value is
    S^T x and ``scale`` = |S|^T |x|, with S the sweep and |S| the sweep with |c|).

    Every kernel computes that dot product of 7 terms in float32, in some order, with or
    without fused multiply-adds: each term passes through at most 7 roundings (its multiply and
    6 adds), so |computed - exact| <= gamma_7 * scale (Higham, *Accuracy and Stability of
    Numerical Algorithms*, 2nd ed., sec. 3.1), with gamma_7 = 7u/(1 - 7u), u = 2^-24. The
    coefficients and inputs are exactly the float32 values the kernel sees; the float64
    reference adds its own gamma_7 in u = 2^-53. NaN never passes.

    Over T sweeps, with g = gamma_7: the computed x^_t = fl(S x^_(t-1)) obeys
    |x^_t - S x^_(t-1)| <= g |S| |x^_(t-1)|, so |x^_t| <= (1 + g)^t |S|^t |x| and, by induction,
    |x^_T - S^T x| <= ((1 + g)^T - 1) |S|^T |x| - for T = 1 the bound above."""
    def grown(u):
        return (1 + gamma(TERMS, u)) ** steps - 1
    return (grown(U32) + grown(U64)) * scale


def _zero_boundary(tolerance: np.ndarray, lo: int, n: int) -> None:
    """Tolerance 0 at the boundary points of planes [lo, lo + len) of an n^3 grid."""
    for axis in (1, 2):
        index = [slice(None)] * 3
        for edge in (0, n - 1):
            index[axis] = edge
            tolerance[tuple(index)] = 0
    for plane in (0, n - 1):
        if lo <= plane < lo + tolerance.shape[0]:
            tolerance[plane - lo] = 0


def reference(problem: Mapping[str, Any], inputs: Mapping[str, Any]) -> StencilReference:
    return StencilReference(inputs["in"], inputs["c"], problem.get("steps", 1))


# --------------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------------

def check(output, ref: StencilReference, problem: Mapping[str, Any]) -> CheckResult:
    """Every element: boundary points equal to the input exactly, interior points within
    :func:`point_tolerance` of the float64 reference. ``error`` is the worst interior error as a
    fraction of its point's tolerance (inf if any element is wrong, NaN included), against a
    ``tolerance`` of 1."""
    n = problem["n"]
    out = np.asarray(pmpp.asnumpy(output))
    if out.shape != (n, n, n) or out.dtype != np.float32:
        return CheckResult(False, math.inf, 1.0, f"expected a {n}^3 float32 grid, got {out.dtype} {out.shape}")
    wrong, worst, first = 0, 0.0, None
    for lo, hi, values, tolerance in ref.slabs():
        got = out[lo:hi].astype(np.float64)
        diff = np.abs(got - values)
        bad = ~(diff <= tolerance)                       # NaN compares False: bad
        if bad.any():
            wrong += int(bad.sum())
            if first is None:
                i, j, k = np.argwhere(bad)[0]
                first = (lo + int(i), int(j), int(k), float(got[i, j, k]), float(values[i, j, k]),
                         float(tolerance[i, j, k]))
        ratio = np.divide(diff, tolerance, out=np.zeros_like(diff), where=(tolerance > 0) & ~bad)
        worst = max(worst, float(ratio.max(initial=0.0)))
    if wrong:
        i, j, k, got, expected, allowed = first
        return CheckResult(False, math.inf, 1.0,
                           f"{wrong} of {n ** 3} points wrong; first at (i, j, k) = ({i}, {j}, {k}): "
                           f"got {got!r}, expected {expected!r} (allowed error {allowed:.3g})")
    return CheckResult(True, worst, 1.0, f"all {n ** 3} points right; worst interior error "
                                         f"{worst:.3g} of its tolerance")


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------

def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _launch(kernel: str, shape: Callable[[Mapping[str, int]], tuple], defaults: Mapping[str, int]):
    """Launch ``kernel(in, out, n, c0..c6)`` once. ``shape(defines)`` gives (block, tile): the
    block's threads and the output points one block covers, per axis (x, y, z); the grid covers
    the n^3 grid with tiles. The kernel writes every point of ``inputs["out"]``, returned."""

    def launch(module, problem, inputs):
        n = int(problem["n"])
        block, tile = shape({**defaults, **module.defines})
        grid = tuple(_cdiv(n, t) for t in tile)
        c = [float(v) for v in inputs["c"]]
        module.get_function(kernel)(grid, block, (inputs["in"], inputs["out"], np.uint32(n), *c))
        return inputs["out"]

    return launch


def _shape_basic(d):           # one thread per point
    block = (d["BLOCK_X"], d["BLOCK_Y"], d["BLOCK_Z"])
    return block, block


def _shape_cube(d):            # T^3 threads load a T^3 tile, the inner (T-2)^3 compute
    t = d["IN_TILE_DIM"]
    return (t, t, t), (t - 2,) * 3


def _shape_planes(d):          # T^2 threads walk T-2 planes, the inner (T-2)^2 compute
    t = d["IN_TILE_DIM"]
    return (t, t, 1), (t - 2,) * 3


def _shape_aligned(d, points_per_thread=1):   # every thread computes; Z_TILE planes per block
    block = (d["BLOCK_X"], d["BLOCK_Y"], 1)
    return block, (points_per_thread * d["BLOCK_X"], d["BLOCK_Y"], d["Z_TILE"])


def _shape_vector(d):          # 4 points per thread in x
    return _shape_aligned(d, 4)


def _shape_temporal(d):        # a 4*BLOCK_X x BLOCK_Y tile whose outputs leave a halo of one lane and T rows
    block = (d["BLOCK_X"], d["BLOCK_Y"], 1)
    return block, (4 * d["BLOCK_X"] - 8, d["BLOCK_Y"] - 2 * d["TIME_STEPS"], d["Z_TILE"])


def temporal_shared_bytes(d) -> int:
    """08's dynamic shared memory: two buffers of each level's plane but the last, float4 per thread."""
    return 2 * d["TIME_STEPS"] * d["BLOCK_Y"] * d["BLOCK_X"] * 16


def _temporal_launch(kernel: str, defaults: Mapping[str, int]):
    """Launch ``kernel(in, out, n, c0..c6)`` once: TIME_STEPS sweeps, which must be the problem's
    ``steps`` (what the reference applies)."""

    def launch(module, problem, inputs):
        d = {**defaults, **module.defines}
        steps = problem.get("steps", 1)
        if steps != d["TIME_STEPS"]:
            raise ValueError(f"the kernel was compiled for TIME_STEPS={d['TIME_STEPS']} sweeps but the problem "
                             f"asks for steps={steps}: give both the same number")
        n = int(problem["n"])
        block, tile = _shape_temporal(d)
        grid = tuple(_cdiv(n, t) for t in tile)
        c = [float(v) for v in inputs["c"]]
        module.get_function(kernel)(grid, block, (inputs["in"], inputs["out"], np.uint32(n), *c),
                                    shared_mem=temporal_shared_bytes(d))
        return inputs["out"]

    return launch


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------

def dram_model(problem: Mapping[str, Any]) -> Model:
    """13 flops per interior point; 8 bytes per point: the least any sweep can move. For
    ``steps`` sweeps, that many times one sweep's: the bytes of ``steps`` single-step sweeps, so
    that a temporally blocked variant's GB/s is its effective bandwidth, per step comparable
    with the single-step variants' and with the copy ceiling."""
    n, steps = problem["n"], problem.get("steps", 1)
    return Model(flops=steps * FLOPS_PER_POINT * max(n - 2, 0) ** 3, bytes=steps * BYTES_PER_POINT * n ** 3)


def tile_intensity(t: float) -> float:
    """The book's OP/B of a T^3 input tile computing its inner (T-2)^3 outputs:
    13 (T-2)^3 / (4 T^3) = (13/4)(1 - 2/T)^3. Also 8.4/8.5's T^2 plane walking T-2 planes."""
    return FLOPS_PER_POINT / 4 * (1 - 2 / t) ** 3


def streaming_loads(x: int, y: int, z: int) -> float:
    """Loads per output of a block that computes an x * y * z tile walking along z (05-07):
    its x*y points of z + 2 planes (one before, one after), plus per computed plane a halo row
    above and below (2x) and a point left and right of each row (2y)."""
    return (x * y * (z + 2) + 2 * z * (x + y)) / (x * y * z)


def temporal_loads(d) -> float:
    """Loads per output and step of 08: a 4*BLOCK_X x BLOCK_Y tile of Z_TILE + 2T planes read once
    for (4*BLOCK_X - 8) x (BLOCK_Y - 2T) x Z_TILE outputs of T steps each."""
    (x, y, _), (out_x, out_y, z) = _shape_temporal(d)
    steps = d["TIME_STEPS"]
    return 4 * x * y * (z + 2 * steps) / (out_x * out_y * z * steps)


# Loads each output costs, per variant, as the book counts them (an infinite grid, no cache).
_LOADS = {
    "01_basic": lambda d: 7,
    "02_shared_memory_tiling": lambda d: (d["IN_TILE_DIM"] / (d["IN_TILE_DIM"] - 2)) ** 3,
    "03_thread_coarsening": lambda d: (d["IN_TILE_DIM"] / (d["IN_TILE_DIM"] - 2)) ** 3,
    "04_register_tiling": lambda d: (d["IN_TILE_DIM"] / (d["IN_TILE_DIM"] - 2)) ** 3,
    "05_aligned_tiles": lambda d: streaming_loads(*_shape_aligned(d)[1]),
    "06_vectorized": lambda d: streaming_loads(*_shape_vector(d)[1]),
    "07_pipelined": lambda d: streaming_loads(*_shape_vector(d)[1]),
    "08_temporal_blocking": temporal_loads,     # per output and step
}


def book_intensity(variant: Variant, defines: Mapping[str, Any] | None = None) -> float:
    """OP/B as the book counts it: 13 flops per output over 4 bytes per global load issued (stores
    not counted), per step for 08. 01: 13/28 = 0.46; 02 (T = 8): 1.37; 03/04 (T = 32): 2.68."""
    loads = _LOADS[variant.name]({**variant.defines, **(defines or {})})
    return FLOPS_PER_POINT / (4 * loads)


# --------------------------------------------------------------------------------------------
# A stencil sweep in a time loop: heat diffusion
# --------------------------------------------------------------------------------------------

def heat_coefficients(alpha: float) -> np.ndarray:
    """The explicit heat equation u' = u + alpha * (sum of the 6 neighbours - 6u): c0 = 1 - 6 alpha,
    c1..c6 = alpha. For 0 < alpha <= 1/6 every coefficient is >= 0 and they sum to 1, so each new
    value is a weighted mean of old ones (stable; no new maximum or minimum)."""
    return np.array([1 - 6 * alpha] + [alpha] * 6, dtype=np.float32)


def hot_cube(n: int, xp=np):
    """Initial condition: interior at 1, walls (the boundary, held fixed by every sweep) at 0."""
    u = xp.zeros((n, n, n), dtype=np.float32)
    u[1:-1, 1:-1, 1:-1] = 1
    return u


def heat(u) -> float:
    """The heat inside: the float64 sum of the interior points."""
    return float(np.asarray(pmpp.asnumpy(u))[1:-1, 1:-1, 1:-1].sum(dtype=np.float64))


def wall_flux(u, alpha: float) -> float:
    """The heat one sweep adds to the interior: alpha * sum over each interior point next to a
    wall of (wall value - its value). Inside, what a point gives its neighbour the neighbour
    receives, so only the walls change the total; with walls at 0 this is <= 0."""
    u = np.asarray(pmpp.asnumpy(u), dtype=np.float64)
    total = 0.0
    for axis in range(3):
        for wall, beside in ((0, 1), (-1, -2)):
            face = np.take(u, wall, axis)[1:-1, 1:-1]
            inside = np.take(u, beside, axis)[1:-1, 1:-1]
            total += float((face - inside).sum())
    return alpha * total


def sweeps(variant: Variant, module, u0, c, steps: int) -> list[np.ndarray]:
    """``steps`` sweeps of ``variant`` from the grid ``u0`` (an array on the module's backend),
    ping-ponging two buffers: each sweep's output is the next one's input. Returns the grids
    u0, u1, ..., u_steps as NumPy arrays."""
    xp = pmpp.get_array_module(u0)
    src, dst = u0.copy(), xp.empty_like(u0)
    problem = {"n": int(u0.shape[0])}
    history = [np.array(pmpp.asnumpy(u0))]
    for _ in range(steps):
        variant.launch(module, problem, {"in": src, "out": dst, "c": c})
        src, dst = dst, src
        history.append(np.array(pmpp.asnumpy(src)))
    return history


# --------------------------------------------------------------------------------------------
# Library routines: the bar to beat
# --------------------------------------------------------------------------------------------

def correlation_weights(c) -> np.ndarray:
    """The 3x3x3 correlation kernel of the stencil: w[1+di, 1+dj, 1+dk] weighs in[i+di, j+dj, k+dk]."""
    c = np.asarray(c, dtype=np.float32)
    w = np.zeros((3, 3, 3), dtype=np.float32)
    w[1, 1, 1], w[1, 1, 0], w[1, 1, 2], w[1, 0, 1], w[1, 2, 1], w[0, 1, 1], w[2, 1, 1] = c
    return w


def copy_boundary(out, x) -> None:
    """out's six faces = x's (works on NumPy, CuPy and torch arrays)."""
    for edge in (0, -1):
        out[edge] = x[edge]
        out[:, edge] = x[:, edge]
        out[:, :, edge] = x[:, :, edge]


def _correlate_run(ndimage: str):
    """``ndimage.correlate`` (27 taps, 20 of them zero) of the grid, then the boundary copied."""

    def run(problem, inputs):
        module = importlib.import_module(ndimage)
        xp = pmpp.get_array_module(inputs["in"])
        x = inputs["in"]
        out = module.correlate(x, xp.asarray(correlation_weights(inputs["c"])), mode="constant")
        copy_boundary(out, x)
        return out

    return run


def _numpy_run(problem, inputs):
    return sweep(inputs["in"], inputs["c"], np.float32)


def _torch_run(problem, inputs):
    """``torch.nn.functional.conv3d`` (cuDNN; a correlation, as here) on the interior, TF32 off."""
    import torch
    x = torch.from_dlpack(inputs["in"])
    out = torch.from_dlpack(inputs["out"])
    w = torch.as_tensor(correlation_weights(inputs["c"]), device=x.device)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        inner = torch.nn.functional.conv3d(x[None, None], w[None, None])[0, 0]
    out[1:-1, 1:-1, 1:-1] = inner
    copy_boundary(out, x)
    return inputs["out"]


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _torch_available(backend: str) -> bool:
    if backend != "cupy" or not _installed("torch"):
        return False
    import torch
    return torch.cuda.is_available()


# --------------------------------------------------------------------------------------------
# The chapter
# --------------------------------------------------------------------------------------------

_BASIC = {"BLOCK_X": 8, "BLOCK_Y": 8, "BLOCK_Z": 8}
BLOCK_SHAPES = ((8, 8, 8), (16, 8, 4), (32, 4, 4), (32, 8, 2), (32, 16, 1), (64, 4, 2), (128, 2, 2),
                (256, 2, 1))            # 01_basic's blocks of 512 threads that `pmpp bench --all-problems` sweeps
_CUBE = {"IN_TILE_DIM": 8}
_PLANES = {"IN_TILE_DIM": 32}
_ALIGNED = {"BLOCK_X": 32, "BLOCK_Y": 8, "Z_TILE": 32}
_PIPELINED = {**_ALIGNED, "Z_TILE": 64, "PREFETCH": 2}
_TEMPORAL = {"BLOCK_X": 16, "BLOCK_Y": 32, "Z_TILE": 128, "TIME_STEPS": 4, "PREFETCH": 2}


def _variant(name, title, source, kernel, shape, defines):
    return Variant(name, title, source, _launch(kernel, shape, defines), dram_model,
                   defines=defines, max_n=MAX_N)


def temporal_variant(defines: Mapping[str, int] = _TEMPORAL) -> Variant:
    """08 with ``defines`` (the chapter's by default): TIME_STEPS sweeps per launch, and a
    problem of as many ``steps``, so that its check, reference and model count them all."""
    defines = {**_TEMPORAL, **defines}
    steps = defines["TIME_STEPS"]
    return Variant("08_temporal_blocking", f"temporal blocking: {steps} sweeps per pass over memory",
                   "beyond the book (Nguyen et al. SC'10)",
                   _temporal_launch("TemporalBlockingStencilKernel", defines), dram_model,
                   defines=defines, max_n=MAX_N, problem={"steps": steps})


VARIANTS = (
    _variant("01_basic", "8.2 basic: one thread per point, 7 global loads", "PMPP 8.2",
             "BasicStencilKernel", _shape_basic, _BASIC),
    _variant("02_shared_memory_tiling", "8.3 shared-memory tiling: T^3 input tile (T = 8)", "PMPP 8.3",
             "SharedMemoryTilingStencilKernel", _shape_cube, _CUBE),
    _variant("03_thread_coarsening", "8.4 thread coarsening in z: 3 planes in shared (T = 32)", "PMPP 8.4",
             "ThreadCoarseningStencilKernel", _shape_planes, _PLANES),
    _variant("04_register_tiling", "8.5 register tiling: z neighbours in registers", "PMPP 8.5",
             "RegisterTilingStencilKernel", _shape_planes, _PLANES),
    _variant("05_aligned_tiles", "aligned 32-wide tiles, every thread computes", "beyond the book",
             "AlignedTilesStencilKernel", _shape_aligned, _ALIGNED),
    _variant("06_vectorized", "float4: 4 points per thread, shuffles for x", "beyond the book",
             "VectorizedStencilKernel", _shape_vector, _ALIGNED),
    _variant("07_pipelined", "loads 2 planes ahead, double-buffered, 1 barrier", "beyond the book",
             "PipelinedStencilKernel", _shape_vector, _PIPELINED),
    temporal_variant(),
)

# What `pmpp tune` may set: 01's block shape, the plane tile of 03 and 04, and the aligned kernels'
# block, the planes a block walks and how far ahead it loads (08's TIME_STEPS stays: it is the problem).
def _whole_warps(d: Mapping[str, Any]) -> bool:
    threads = d["BLOCK_X"] * d["BLOCK_Y"] * d.get("BLOCK_Z", 1)
    return threads % 32 == 0 and threads <= 1024


def _temporal_fits(d: Mapping[str, Any]) -> bool:
    return _whole_warps(d) and d["BLOCK_Y"] > 2 * d["TIME_STEPS"]


TUNABLES = {
    "01_basic": ({"BLOCK_X": (8, 16, 32, 64, 128, 256), "BLOCK_Y": (1, 2, 4, 8, 16), "BLOCK_Z": (1, 2, 4, 8)},
                 lambda d: _whole_warps(d) and d["BLOCK_X"] * d["BLOCK_Y"] * d["BLOCK_Z"] >= 128),
    "03_thread_coarsening": ({"IN_TILE_DIM": (16, 32)}, None),
    "04_register_tiling": ({"IN_TILE_DIM": (16, 32)}, None),
    "07_pipelined": ({"BLOCK_X": (8, 16, 32), "BLOCK_Y": (4, 8, 16, 32), "Z_TILE": (16, 32, 64, 128),
                      "PREFETCH": (1, 2, 3)}, _whole_warps),
    "08_temporal_blocking": ({"BLOCK_X": (8, 16, 32), "BLOCK_Y": (16, 24, 32, 48, 64), "Z_TILE": (64, 128, 256),
                              "PREFETCH": (1, 2, 3)}, _temporal_fits),
}
VARIANTS = tuple(replace(v, tunables=TUNABLES[v.name][0], legal=TUNABLES[v.name][1]) if v.name in TUNABLES else v
                 for v in VARIANTS)

CHAPTER = Chapter(
    name="stencil",
    title="Stencil (PMPP ch. 8)",
    kernel_dir="stencil",
    variants=VARIANTS,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    problems={"gpu": {"n": 512}, "cpu": {"n": 64}},
    test_sizes=(1, 2, 3, 4, 37, 68),
    shrink=lambda p, f: {**p, "n": max(4, round(p["n"] / f ** (1 / 3)))},   # n is the cube's side
    library=(
        Library("cupyx correlate", _correlate_run("cupyx.scipy.ndimage"),
                lambda backend: backend == "cupy"),
        Library("torch conv3d (cuDNN)", _torch_run, _torch_available, imports=("torch",)),
        Library("numpy slices", _numpy_run, lambda backend: backend == "cpu"),
        Library("scipy correlate", _correlate_run("scipy.ndimage"),
                lambda backend: backend == "cpu" and _installed("scipy")),
    ),
    describe=lambda p: f"n={p['n']} ({p['n']}^3 float32 points)"
                       + (f", {p['steps']} sweeps" if p.get("steps", 1) > 1 else ""),
    make_exact_inputs=make_integer_inputs,
    # 01 with each block shape: how wide a piece of a row each warp reads
    bench=(BenchSet("block_shape", ({"n": 512},),
                    tuple(VARIANTS[0].configured(BLOCK_X=x, BLOCK_Y=y, BLOCK_Z=z) for x, y, z in BLOCK_SHAPES)),),
)
