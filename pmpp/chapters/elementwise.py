"""Beyond the book: elementwise kernels (after OneFlow's elementwise template,
``oneflow/core/cuda/elementwise.cuh``, and its blog post "How to implement an efficient elementwise CUDA kernel").

The problem: ``z = op(x, y)`` over ``n`` elements of ``dtype`` (float32 or float16),
``{"n": int, "dtype": "float32" | "float16", "op": "mul" | "silu_mul"}``:

* ``mul``: z = x * y. IEEE multiplication is correctly rounded, in float16 too (the product of
  two halves is exact in float32, then rounded once), so every kernel must match NumPy's
  ``x * y`` in the same dtype BIT FOR BIT;
* ``silu_mul``: z = silu(x) * y = x / (1 + exp(-x)) * y, the "fused example": computed in float
  and rounded to ``dtype`` at the end, judged against a float64 reference with the tolerance of
  :func:`silu_mul_tolerance`.

Variants: 01 one thread per element; 02 grid-stride loop on a grid sized from the SM count;
03 16-byte packs (float4, or eight halves as four half2); 04 silu then multiply as two kernels
(what a framework runs); 05 the two fused into one. 01-03 compute ``mul``, 04-05 ``silu_mul``.

This module also holds what the three chapters beyond the book (``pooling``, ``elementwise``,
``upsample``) share: :func:`grid_size`, :func:`poisoned` and :func:`torch_works`.
"""
from __future__ import annotations

import functools
import importlib.util
from typing import Any, Callable, Mapping

import numpy as np

from pmpp.chapters.base import BenchSet, Chapter, CheckResult, Library, Model, Variant
from pmpp.chapters.draw import array_module, generator_for, to_module

BLOCK_DIM = 256          # threads per block, every kernel of the chapter
THREADS_PER_SM = 2048    # resident threads per SM on an H100 (and an A100): one wave fills them
WAVES = 32               # 02: OneFlow's kNumWaves - the grid fills the GPU this many times
PACK_WAVES = 64          # 03-05: up to this many waves, about one 16-byte pack per thread
PACK_BYTES = 16          # one uint4 / float4: the widest load a thread can issue
MAX_N = 2 ** 31          # unsigned 32-bit indices: i + stride must not wrap
DTYPES = ("float32", "float16")
CTYPE = {"float32": "float", "float16": "__half"}
OPS = {"mul": "z = x * y", "silu_mul": "z = silu(x) * y"}
SILU_MUL_FLOPS = 4       # per element: exp, add, divide, multiply (the negation is free)

U32 = 2.0 ** -24         # unit roundoff of float32
U16 = 2.0 ** -11         # unit roundoff of float16
TINY = {"float32": 2.0 ** -149, "float16": 2.0 ** -24}   # spacing of the subnormals


# --------------------------------------------------------------------------------------------
# Shared by the chapters beyond the book
# --------------------------------------------------------------------------------------------

def grid_size(module, items: int, block: int = BLOCK_DIM, waves: int = WAVES) -> int:
    """Blocks for a grid-stride kernel: enough for one item per thread, but at most ``waves``
    times what fills every SM once (THREADS_PER_SM threads each); at least one."""
    fill = int(module.device_sm_count) * max(1, THREADS_PER_SM // block) * waves
    return max(1, min(-(-items // block), fill))


def poisoned(xp, shape, dtype):
    """An output buffer full of NaN: an element a kernel forgets to write never matches."""
    return xp.full(shape, np.nan, dtype=dtype)


@functools.lru_cache(maxsize=None)
def torch_works(smoke: Callable[[], Any] | None = None) -> bool:
    """Is PyTorch installed with CUDA - and does ``smoke()`` (a tiny call of the routine about to
    be measured, if given) run? A library that is not there is skipped, never an error."""
    if importlib.util.find_spec("torch") is None:
        return False
    import torch
    if not torch.cuda.is_available():
        return False
    try:
        if smoke is not None:
            smoke()
            torch.cuda.synchronize()
    except Exception:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Inputs, reference, checking
# --------------------------------------------------------------------------------------------

def make_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """``x`` and ``y``: n values uniform in [-4, 4), rounded to ``dtype``; ``z``: the output,
    NaN-poisoned; ``t``: the unfused variant's temporary (silu_mul only), poisoned too."""
    n, dtype = problem["n"], np.dtype(problem["dtype"])
    rng = generator_for(xp, rng)                     # drawn where xp keeps them
    x, y = ((rng.random(n, dtype=np.float32) * 8 - 4).astype(dtype) for _ in range(2))
    inputs = {"x": xp.asarray(x), "y": xp.asarray(y), "z": poisoned(xp, n, dtype)}
    if problem["op"] == "silu_mul":
        inputs["t"] = poisoned(xp, n, dtype)
    return inputs


def reference(problem: Mapping[str, Any], inputs: Mapping[str, Any]) -> np.ndarray:
    """``mul``: x * y in ``dtype`` (correctly rounded); ``silu_mul``: float64. Computed where the
    inputs are (NumPy or CuPy: IEEE products and float64 are the same there)."""
    x, y = inputs["x"], inputs["y"]
    if problem["op"] == "mul":
        return x * y
    xp = array_module(x)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    return x64 / (1.0 + xp.exp(-x64)) * y64


def silu_mul_tolerance(dtype: str) -> tuple[float, float]:
    """(relative, absolute) tolerance of silu(x) * y: |z - ref| <= rel * |ref| + abs.

    In float: expf is within 2 ulp (CUDA's documented bound; glibc's is 1) - a relative error of
    at most 4u (u = 2^-24); 1 + e adds u, and e's error passes into 1 + e at most whole; the
    division adds u and the multiply by y another: 7u to first order, for any of the evaluation
    orders here and in the libraries. Allowed: 16u, room for second-order terms. In float16 the
    float result is rounded to half (u16 = 2^-11) - twice by the unfused variant and by PyTorch
    (silu, then the product): 2 u16 + 16u. Products that underflow into half's subnormals are
    off by up to half their spacing (2^-25) per rounding: abs = 2^-24. Quotients and products
    have no cancellation, so a relative bound is the right shape."""
    if dtype == "float16":
        return 2 * U16 + 16 * U32, TINY["float16"]
    return 16 * U32, TINY["float32"]


def check(output, ref, problem: Mapping[str, Any]) -> CheckResult:
    """``mul``: bit-for-bit equality; ``silu_mul``: within :func:`silu_mul_tolerance`. NaN (an
    element never written) fails both."""
    xp = array_module(ref)
    out = to_module(xp, output).reshape(-1)          # compared where the reference is
    ref = to_module(xp, ref).reshape(-1)
    if out.shape != ref.shape:
        return CheckResult(False, np.inf, 0.0, f"expected {ref.size} elements, got {out.size}")
    if problem["op"] == "mul":
        if out.dtype != ref.dtype:
            return CheckResult(False, np.inf, 0.0, f"expected {ref.dtype}, got {out.dtype}")
        bits = f"u{out.dtype.itemsize}"                # compare the bits: -0.0 is not +0.0
        wrong = int(xp.count_nonzero(out.view(bits) != ref.view(bits)))
        return CheckResult(wrong == 0, float(wrong), 0.0,
                           f"{wrong} of {out.size} elements differ from x * y (bit-exact check)")
    rel, absolute = silu_mul_tolerance(problem["dtype"])
    err = xp.abs(out.astype(np.float64) - ref)
    bound = rel * xp.abs(ref) + absolute
    bad = int(xp.count_nonzero(~(err <= bound)))    # NaN compares False: counted as bad
    worst = float((err / bound).max()) if out.size and not bad else (np.inf if bad else 0.0)
    return CheckResult(not bad, worst, 1.0,
                       f"{bad} of {out.size} elements outside rel {rel:.3g} + abs {absolute:.3g}"
                       f" (worst error / bound {worst:.3g})")


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------

def _name(kernel: str, problem) -> str:
    return f"{kernel}<{CTYPE[problem['dtype']]}>"


def _per_pack(problem) -> int:
    return PACK_BYTES // np.dtype(problem["dtype"]).itemsize


def _naive(kernel: str):
    """One thread per element: ceil(n / BLOCK_DIM) blocks."""

    def launch(module, problem, inputs):
        n = int(inputs["x"].size)
        if n:
            module.get_function(_name(kernel, problem))(
                -(-n // BLOCK_DIM), BLOCK_DIM, (inputs["x"], inputs["y"], inputs["z"], np.uint32(n)))
        return inputs["z"]

    return launch


def _grid_stride(kernel: str, *, packed: bool):
    """A grid-stride kernel on the grid of :func:`grid_size`: one element (or one 16-byte pack)
    per thread per step."""

    def launch(module, problem, inputs):
        n = int(inputs["x"].size)
        if n:
            items, waves = (-(-n // _per_pack(problem)), PACK_WAVES) if packed else (n, WAVES)
            grid = grid_size(module, items, BLOCK_DIM, waves)
            module.get_function(_name(kernel, problem))(
                grid, BLOCK_DIM, (inputs["x"], inputs["y"], inputs["z"], np.uint32(n)))
        return inputs["z"]

    return launch


def _unfused(module, problem, inputs):
    """04: t = silu(x), then z = t * y - two packed kernels, as a framework runs silu(x) * y."""
    n = int(inputs["x"].size)
    if n:
        grid = grid_size(module, -(-n // _per_pack(problem)), BLOCK_DIM, PACK_WAVES)
        module.get_function(_name("PackedSiluKernel", problem))(
            grid, BLOCK_DIM, (inputs["x"], inputs["t"], np.uint32(n)))
        module.get_function(_name("PackedMulKernel", problem))(
            grid, BLOCK_DIM, (inputs["t"], inputs["y"], inputs["z"], np.uint32(n)))
    return inputs["z"]


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------

def _model(arrays: int, flops_per_element: int):
    """``arrays`` arrays of n elements through device memory; ``flops_per_element`` operations."""

    def model(problem):
        n = problem["n"]
        return Model(flops=float(flops_per_element * n),
                     bytes=float(arrays * n * np.dtype(problem["dtype"]).itemsize))

    return model


# --------------------------------------------------------------------------------------------
# Library routines
# --------------------------------------------------------------------------------------------

def _torch_run(problem, inputs):
    import cupy
    import torch
    x, y = torch.from_dlpack(inputs["x"]), torch.from_dlpack(inputs["y"])
    if problem["op"] == "mul":
        torch.mul(x, y, out=torch.from_dlpack(inputs["z"]))
        return inputs["z"]
    return cupy.from_dlpack(torch.nn.functional.silu(x) * y)      # two kernels, like 04


def _torch_smoke():
    import torch
    x = torch.ones(8, device="cuda", dtype=torch.float16)
    torch.mul(x, x, out=torch.empty_like(x))
    torch.nn.functional.silu(x)


def _cupy_run(problem, inputs):
    import cupy
    x, y = inputs["x"], inputs["y"]
    if problem["op"] == "mul":
        return cupy.multiply(x, y, out=inputs["z"])
    x32 = x.astype(cupy.float32)          # one kernel per operation, in float, rounded once
    return (x32 / (1 + cupy.exp(-x32)) * y).astype(x.dtype)


def _numpy_run(problem, inputs):
    x, y = inputs["x"], inputs["y"]
    if problem["op"] == "mul":
        return np.multiply(x, y, out=inputs["z"])
    x64 = x.astype(np.float64)
    return (x64 / (1 + np.exp(-x64)) * y).astype(x.dtype)


# --------------------------------------------------------------------------------------------
# The chapter
# --------------------------------------------------------------------------------------------

def _instances(kernel: str, *more: str) -> tuple[str, ...]:
    return tuple(f"{k}<{c}>" for k in (kernel, *more) for c in CTYPE.values())


_MUL = {"op": "mul"}
_SILU = {"op": "silu_mul"}

VARIANTS = (
    Variant("01_naive", "one thread per element, scalar loads", "beyond the book",
            _naive("NaiveMulKernel"), _model(3, 1), name_expressions=_instances("NaiveMulKernel"),
            problem=_MUL, max_n=MAX_N),
    Variant("02_grid_stride", "grid-stride loop, grid from the SM count", "OneFlow elementwise.cuh",
            _grid_stride("GridStrideMulKernel", packed=False), _model(3, 1),
            name_expressions=_instances("GridStrideMulKernel"), problem=_MUL, max_n=MAX_N),
    Variant("03_packed", "16-byte packs: float4 / 4 x half2", "OneFlow elementwise.cuh",
            _grid_stride("PackedMulKernel", packed=True), _model(3, 1),
            name_expressions=_instances("PackedMulKernel"), problem=_MUL, max_n=MAX_N),
    Variant("04_unfused_silu_mul", "silu(x) * y as two kernels (5 arrays moved)", "beyond the book",
            _unfused, _model(5, SILU_MUL_FLOPS),
            name_expressions=_instances("PackedSiluKernel", "PackedMulKernel"), problem=_SILU, max_n=MAX_N),
    Variant("05_fused_silu_mul", "silu(x) * y fused into one kernel", "OneFlow elementwise.cuh",
            _grid_stride("FusedSiluMulKernel", packed=True), _model(3, SILU_MUL_FLOPS),
            name_expressions=_instances("FusedSiluMulKernel"), problem=_SILU, max_n=MAX_N),
)

GPU_N = 2 ** 26          # 256 MiB of float32 per array: 15x the 50 MB L2 of an H100 for 3 arrays

def _test_cases(backend: str):
    """Every variant in both dtypes at each test size (and on a GPU the GPU size)."""
    sizes = list(CHAPTER.test_sizes) + ([CHAPTER.problems["gpu"]["n"]] if backend == "cupy" else [])
    for variant in CHAPTER.variants:
        for dtype in DTYPES:
            for n in sizes:
                yield variant, {**CHAPTER.problems["cpu"], "n": n, "dtype": dtype}


CHAPTER = Chapter(
    name="elementwise",
    title="Elementwise: packed loads, grid-stride loops, fusion (beyond the book)",
    kernel_dir="elementwise",
    variants=VARIANTS,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    problems={"gpu": {"n": GPU_N, "dtype": "float32", "op": "mul"},
              "cpu": {"n": 2 ** 20, "dtype": "float32", "op": "mul"}},
    test_sizes=(1, 7, 1000, 4099, 2 ** 16 + 3),
    test_cases=_test_cases,
    library=(
        Library("torch", _torch_run, lambda backend: backend == "cupy" and torch_works(_torch_smoke),
                imports=("torch",)),
        Library("cupy", _cupy_run, lambda backend: backend == "cupy"),
        Library("numpy", _numpy_run, lambda backend: backend == "cpu"),
    ),
    describe=lambda p: f"n={p['n']} {p['dtype']} {OPS[p['op']]}",
    # `pmpp bench --all-problems` records, beside float32 x*y: the fused example and float16.
    bench=tuple(BenchSet(f"{dtype}_{op}" if op != "mul" else dtype, ({"n": GPU_N, "dtype": dtype, "op": op},),
                         names)
                for dtype in DTYPES
                for op, names in (("mul", ["01_naive", "02_grid_stride", "03_packed"]),
                                  ("silu_mul", ["04_unfused_silu_mul", "05_fused_silu_mul"]))
                if (dtype, op) != ("float32", "mul")),
)

