"""Beyond the book: UpsampleNearest2D, forward and backward (after OneFlow's specialised 2x kernels in
``oneflow/user/kernels/upsample_nearest_kernel.cu``, against PyTorch's ``UpSampleNearest2d.cu``).

The problem: ``{"shape": (N, C, H, W), "scale": s, "dtype": "float32" | "float16",
"direction": "forward" | "backward"}``, ``shape`` being the small side:

* forward: ``y = x`` repeated s times along H and W, y of shape (N, C, sH, sW) -
  y[nc, oh, ow] = x[nc, floor(oh / s), floor(ow / s)]; a copy, so checked BIT FOR BIT;
* backward: ``dx[nc, h, w]`` = the sum of the s x s values of ``dy`` (N, C, sH, sW) above it,
  summed in float and rounded to ``dtype`` once; checked against float64 with the tolerance of
  :func:`backward_tolerance`.

Variants: 01 generic forward (index mapping, any scale), 02 2x forward (a Pack2 written twice),
03 2x forward with 16-byte accesses; 04 generic backward, 05 2x backward (sum of four Pack2
halves), 06 2x backward with 16-byte accesses. 01-03 are forward, 04-06 backward (their
``problem`` says so); 02, 03, 05, 06 need scale 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from pmpp.args import check_aligned
from pmpp.chapters.base import BenchSet, Chapter, CheckResult, Library, Model, Variant, shrink_leading
from pmpp.chapters.draw import array_module, generator_for, host, on_host, to_module
from pmpp.chapters.elementwise import (BLOCK_DIM, CTYPE, DTYPES, PACK_BYTES, PACK_WAVES, U16, U32,
                                       grid_size, poisoned, torch_works)

MAX_ELEMENTS = 2 ** 31 - 1     # the kernels index with unsigned 32-bit ints


@dataclass(frozen=True)
class UpsampleVariant(Variant):
    """A variant that may handle scale 2 only."""

    only_2x: bool = False

    def supports(self, problem: Mapping[str, Any], backend: str = "cupy") -> bool:
        return (not self.only_2x or problem["scale"] == 2) and super().supports(problem, backend)


# --------------------------------------------------------------------------------------------
# Shapes, inputs, reference
# --------------------------------------------------------------------------------------------

def large_shape(problem: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(N, C, sH, sW): the forward's output, the backward's dy."""
    n, c, h, w = problem["shape"]
    s = problem["scale"]
    return n, c, s * h, s * w


def _validate(problem: Mapping[str, Any]) -> None:
    n, c, oh, ow = large_shape(problem)
    h, w = problem["shape"][2:]
    if n * c * oh * ow > MAX_ELEMENTS or max(oh * h, ow * w) + max(h, w) >= 2 ** 32:
        raise ValueError(f"{problem['shape']} x{problem['scale']} is too large for 32-bit indices")


def make_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """Forward: ``x`` (the small shape) and ``y``, NaN; backward: ``dy`` (the large shape) and
    ``dx``, NaN. Values uniform in [-1, 1), rounded to ``dtype``."""
    _validate(problem)
    dtype = np.dtype(problem["dtype"])
    small, large = tuple(problem["shape"]), large_shape(problem)
    source, target = (small, large) if problem["direction"] == "forward" else (large, small)
    rng = generator_for(xp, rng)                     # drawn where xp keeps them
    values = (rng.random(int(np.prod(source)), dtype=np.float32) * 2 - 1).astype(dtype).reshape(source)
    names = ("x", "y") if problem["direction"] == "forward" else ("dy", "dx")
    return {names[0]: xp.asarray(values), names[1]: poisoned(xp, target, dtype)}


class BlockSums(np.ndarray):
    """The backward's reference: float64 block sums, carrying ``abs_sums`` (the sums of |dy|),
    which the tolerance needs (check sees the reference, not the input)."""

    abs_sums: np.ndarray


class DeviceBlockSums:
    """The backward's reference for inputs on a GPU, left there: ``values`` and ``abs_sums``
    (CuPy); ``numpy.asarray`` of it copies the values to the host."""

    def __init__(self, values, abs_sums):
        self.values, self.abs_sums = values, abs_sums

    @property
    def shape(self) -> tuple:
        return tuple(self.values.shape)

    def __array__(self, dtype=None, copy=None):
        values = host(self.values)
        return values if dtype is None else values.astype(dtype)


def reference(problem: Mapping[str, Any], inputs: Mapping[str, Any]):
    """Forward: ``repeat`` along H and W (in dtype); backward: the s x s block sums in float64 (a
    :class:`BlockSums`, or on a GPU a :class:`DeviceBlockSums`). Computed where the inputs are."""
    s = problem["scale"]
    if problem["direction"] == "forward":
        x = inputs["x"]
        xp = array_module(x)
        return xp.repeat(xp.repeat(x, s, axis=2), s, axis=3)
    n, c, h, w = problem["shape"]
    blocks = inputs["dy"].astype(np.float64).reshape(n, c, h, s, w, s)
    values, abs_sums = blocks.sum(axis=(3, 5)), abs(blocks).sum(axis=(3, 5))
    if not on_host(array_module(blocks)):
        return DeviceBlockSums(values, abs_sums)
    ref = values.view(BlockSums)
    ref.abs_sums = abs_sums
    return ref


def backward_tolerance(problem: Mapping[str, Any]) -> tuple[float, float, float]:
    """(gamma, rounding, tiny): |dx - ref| <= gamma (1 + rounding) S + rounding |ref| + tiny, with
    S the sum of |dy| over the block.

    Each dx is s^2 values added in float with s^2 - 1 additions, in an order that differs between
    kernels (and libraries); whatever the order, the float sum f is within gamma_{s^2-1} S of the
    exact one (Higham 4.2), gamma_k = k u / (1 - k u), u = 2^-24. float32: that is all
    (rounding = tiny = 0). float16 rounds f once more: |rn(f) - f| <= u16 |f| <= u16 (|ref| +
    gamma S), u16 = 2^-11, or, where f is below half's smallest normal (2^-14), at most half the
    subnormal spacing: tiny = 2^-25."""
    k = problem["scale"] ** 2 - 1
    gamma = k * U32 / (1 - k * U32)
    if problem["dtype"] == "float16":
        return gamma, U16, 2.0 ** -25
    return gamma, 0.0, 0.0


def check(output, ref, problem: Mapping[str, Any]) -> CheckResult:
    """Forward: every output bit for bit the input it copies; backward: every dx within
    :func:`backward_tolerance`. Compared where the reference is (on a GPU, there)."""
    values = getattr(ref, "values", ref)
    xp = array_module(values)
    out = to_module(xp, output)
    if out.shape != tuple(ref.shape):
        return CheckResult(False, np.inf, 0.0, f"expected shape {tuple(ref.shape)}, got {out.shape}")
    if problem["direction"] == "forward":                # a copy: the bits must be equal
        bits = f"u{out.dtype.itemsize}"
        wrong = int(xp.count_nonzero(out.view(bits) != values.astype(out.dtype).view(bits)))
        return CheckResult(wrong == 0 and out.dtype == values.dtype, float(wrong), 0.0,
                           f"{wrong} of {out.size} outputs differ from the input they copy")
    abs_sums = getattr(ref, "abs_sums", None)
    if abs_sums is None:
        raise TypeError("check needs the reference made by upsample.reference (it carries sum |dy|)")
    gamma, rounding, tiny = backward_tolerance(problem)
    values = to_module(xp, values)
    bound = gamma * (1 + rounding) * abs_sums + rounding * xp.abs(values) + tiny
    err = xp.abs(out.astype(np.float64) - values)
    bad = int(xp.count_nonzero(~(err <= bound)))
    ratio = err / xp.maximum(bound, np.finfo(np.float64).tiny)     # an exact zero has bound 0
    worst = float(ratio.max()) if out.size and not bad else (np.inf if bad else 0.0)
    return CheckResult(not bad, worst, 1.0,
                       f"{bad} of {out.size} dx outside the bound (worst error / bound {worst:.3g})")


# --------------------------------------------------------------------------------------------
# Launching: every kernel is a grid-stride loop on a grid from the SM count
# --------------------------------------------------------------------------------------------

def _generic(kernel: str):
    """01 / 04: ``kernel(src, dst, nc, H, W, OH, OW)``, one thread per element of the output of
    the direction (y forward, dx backward)."""

    def launch(module, problem, inputs):
        src, dst = _arrays(problem, inputs)
        n, c, h, w = problem["shape"]
        _, _, oh, ow = large_shape(problem)
        if dst.size:
            grid = grid_size(module, int(dst.size), BLOCK_DIM, PACK_WAVES)
            module.get_function(_name(kernel, problem))(
                grid, BLOCK_DIM, (src, dst, np.uint32(n * c), np.uint32(h), np.uint32(w),
                                  np.uint32(oh), np.uint32(ow)))
        return dst

    return launch


def _twice(kernel: str, *, wide: bool, thread_bytes: int = PACK_BYTES):
    """02 / 05 (one thread per small-side element) and 03 / 06 / 07 (one per ``thread_bytes`` of a
    small-side row, where W allows): ``kernel(src, dst, n, H, W)``, n = elements of the small side."""

    def launch(module, problem, inputs):
        src, dst = _arrays(problem, inputs)
        _, _, h, w = problem["shape"]
        n = int(np.prod(problem["shape"]))
        if not wide:       # 02 stores, 05 loads, Pack2s: two values at once, aligned to their size
            packed = {"y": dst} if problem["direction"] == "forward" else {"dy": src}
            check_aligned(2 * np.dtype(problem["dtype"]).itemsize, **packed)
        if n:
            per_thread = thread_bytes // np.dtype(problem["dtype"]).itemsize if wide else 1
            grid = grid_size(module, -(-n // per_thread), BLOCK_DIM, PACK_WAVES)
            module.get_function(_name(kernel, problem))(
                grid, BLOCK_DIM, (src, dst, np.uint32(n), np.uint32(h), np.uint32(w)))
        return dst

    return launch


def _arrays(problem, inputs):
    return (inputs["x"], inputs["y"]) if problem["direction"] == "forward" else (inputs["dy"], inputs["dx"])


def _name(kernel: str, problem) -> str:
    return f"{kernel}<{CTYPE[problem['dtype']]}>"


def _model(problem) -> Model:
    """Bytes: the small side once and the large side (s^2 times as many values) once, either way;
    operations: none forward (a copy), s^2 - 1 additions per dx backward."""
    small = int(np.prod(problem["shape"]))
    s2 = problem["scale"] ** 2
    adds = (s2 - 1) * small if problem["direction"] == "backward" else 0
    return Model(flops=float(adds), bytes=float((1 + s2) * small * np.dtype(problem["dtype"]).itemsize))


# --------------------------------------------------------------------------------------------
# Library routines
# --------------------------------------------------------------------------------------------

def _torch_run(problem, inputs):
    import cupy
    import torch
    s = problem["scale"]
    if problem["direction"] == "forward":
        y = torch.nn.functional.interpolate(torch.from_dlpack(inputs["x"]), scale_factor=s, mode="nearest")
    else:
        _, _, oh, ow = large_shape(problem)
        y = torch.ops.aten.upsample_nearest2d_backward(torch.from_dlpack(inputs["dy"]), [oh, ow],
                                                       list(problem["shape"]))
    return cupy.from_dlpack(y)


def _torch_smoke():
    import torch
    x = torch.ones((1, 1, 2, 2), device="cuda")
    torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest")
    torch.ops.aten.upsample_nearest2d_backward(torch.ones((1, 1, 4, 4), device="cuda"), [4, 4], [1, 1, 2, 2])


def _numpy_run(problem, inputs):
    ref = reference(problem, inputs)
    return np.asarray(ref).astype(problem["dtype"])


# --------------------------------------------------------------------------------------------
# The chapter
# --------------------------------------------------------------------------------------------

def _instances(kernel: str) -> tuple[str, ...]:
    return tuple(f"{kernel}<{c}>" for c in CTYPE.values())


_FWD = {"direction": "forward"}
_BWD = {"direction": "backward"}

VARIANTS = (
    UpsampleVariant("01_generic_forward", "forward: generic index mapping, one thread per output",
                    "PyTorch's kernel", _generic("UpsampleNearest2DGenericForward"), _model,
                    name_expressions=_instances("UpsampleNearest2DGenericForward"), problem=_FWD),
    UpsampleVariant("02_2x_forward", "forward 2x: a Pack2 written to two rows", "OneFlow upsample_nearest_kernel.cu",
                    _twice("UpsampleNearest2D2xForward", wide=False), _model,
                    name_expressions=_instances("UpsampleNearest2D2xForward"), problem=_FWD, only_2x=True),
    UpsampleVariant("03_2x_forward_wide", "forward 2x: 16-byte loads and stores", "beyond OneFlow's kernel",
                    _twice("UpsampleNearest2D2xForwardWide", wide=True), _model,
                    name_expressions=_instances("UpsampleNearest2D2xForwardWide"), problem=_FWD, only_2x=True),
    UpsampleVariant("04_generic_backward", "backward: generic, sums over the mapped outputs",
                    "PyTorch's kernel", _generic("UpsampleNearest2DGenericBackward"), _model,
                    name_expressions=_instances("UpsampleNearest2DGenericBackward"), problem=_BWD),
    UpsampleVariant("05_2x_backward", "backward 2x: two Pack2 loads, a sum of four", "OneFlow upsample_nearest_kernel.cu",
                    _twice("UpsampleNearest2D2xBackward", wide=False), _model,
                    name_expressions=_instances("UpsampleNearest2D2xBackward"), problem=_BWD, only_2x=True),
    UpsampleVariant("06_2x_backward_wide", "backward 2x: 16-byte loads and stores", "beyond OneFlow's kernel",
                    _twice("UpsampleNearest2D2xBackwardWide", wide=True), _model,
                    name_expressions=_instances("UpsampleNearest2D2xBackwardWide"), problem=_BWD, only_2x=True),
    UpsampleVariant("07_2x_backward_coalesced", "backward 2x: contiguous warp loads, 8-byte stores",
                    "beyond OneFlow's kernel", _twice("UpsampleNearest2D2xBackwardCoalesced", wide=True, thread_bytes=8),
                    _model, name_expressions=_instances("UpsampleNearest2D2xBackwardCoalesced"), problem=_BWD,
                    only_2x=True),
)

GPU_SHAPE = (16, 32, 80, 80)   # OneFlow's benchmark shape (nn.Upsample, scale 2): 13 MB in, 52 MB out in float32 (L2 of an H100: 50 MB)

# Awkward shapes every variant must handle: one element, W odd (no 16-byte path), W even but not a
# multiple of 4 (07's 8-byte path for float only), W a multiple of 4 but not of 8 (16-byte path for
# float only), primes, a plane that is not a multiple of the block.
TEST_SHAPES = ((1, 1, 1, 1), (1, 1, 1, 7), (2, 3, 5, 9), (1, 2, 3, 10), (1, 2, 3, 12), (2, 3, 8, 16),
               (1, 3, 17, 40))

def _test_cases(backend: str):
    """Every variant in both dtypes on each of TEST_SHAPES (and on a GPU the GPU shape), scale 2."""
    shapes = list(TEST_SHAPES) + ([CHAPTER.problems["gpu"]["shape"]] if backend == "cupy" else [])
    for variant in CHAPTER.variants:
        for dtype in DTYPES:
            for shape in shapes:
                yield variant, {**CHAPTER.problems["cpu"], "shape": shape, "dtype": dtype, "scale": 2}


CHAPTER = Chapter(
    name="upsample",
    title="UpsampleNearest2D forward and backward (beyond the book)",
    kernel_dir="upsample",
    variants=VARIANTS,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    problems={"gpu": {"shape": GPU_SHAPE, "scale": 2, "dtype": "float32", "direction": "forward"},
              "cpu": {"shape": (2, 4, 40, 40), "scale": 2, "dtype": "float32", "direction": "forward"}},
    test_cases=_test_cases,
    shrink=shrink_leading,
    library=(
        Library("torch", _torch_run, lambda backend: backend == "cupy" and torch_works(_torch_smoke),
                imports=("torch",)),
        Library("numpy", _numpy_run, lambda backend: backend == "cpu"),
    ),
    describe=lambda p: (f"{p['direction']} x{p['scale']} {p['dtype']}, "
                        f"small side {tuple(p['shape'])}, large side {large_shape(p)}"),
    # `pmpp bench --all-problems` records, beside the float32 forward: the backward, and float16.
    bench=tuple(BenchSet(f"{dtype}_{direction}",
                         ({"shape": GPU_SHAPE, "scale": 2, "dtype": dtype, "direction": direction},),
                         [v.name for v in VARIANTS if v.problem["direction"] == direction])
                for dtype in DTYPES for direction in ("forward", "backward")
                if (dtype, direction) != ("float32", "forward")),
)
