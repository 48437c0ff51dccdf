"""Chapter 7, second part - multi-channel convolution as implicit GEMM, step by step against cuDNN
(the SIMT GEMM tiling hierarchy of NVIDIA's CUTLASS documentation, "Efficient GEMM in CUDA":
block tiles in shared memory, warp tiles, thread tiles of outer products, double buffering).

The problem, ``{"n", "c", "h", "w", "k", "r", "s", "stride", "pad"}`` (plus ``"precision"``,
``"fp32"`` unless a variant says ``"tf32"``)::

    output[n][k][p][q] = sum over c < C, r < R, s < S of
                         input[n][c][p*stride - pad + r][q*stride - pad + s] * filter[k][c][r][s]

float32, input N x C x H x W (NCHW), filter K x C x R x S (KCRS), output N x K x Oh x Ow with
Oh = (H + 2 pad - R) // stride + 1 (Ow likewise); input outside the image counts as 0. It is a
matrix product - M = K filters, N = N*Oh*Ow output pixels, a reduction over C*R*S - whose right
operand, the im2col matrix, is never stored: each kernel gathers the pieces it needs ("implicit"
GEMM). GFLOP/s = 2*N*K*Oh*Ow*C*R*S / t.

Every kernel in ``kernels/implicit_gemm/`` handles any shape within 32-bit indexing (see
:func:`check_problem`); 08 runs on a GPU only (tensor-core ``mma.sync``, which the CPU engine cannot
run), and 10 on a Hopper GPU only (sm_90a: ``wgmma`` fed by TMA copies). The bar to beat is cuDNN
through ``torch.nn.functional.conv2d``: FP32 with TF32 disabled, and TF32 enabled for the TF32
variants.

The sweep of shapes (N=8, C in {32, 64}, H=W in {64, 128}, K in {128, 256}, 3x3, pad 1) is
:func:`sweep`; on a GPU, ``pmpp bench implicit_gemm --all-problems`` measures it and writes it
into the results file under the key :data:`SWEEP_KEY`, beside the chapter's own entries.
"""
from __future__ import annotations

import importlib.util
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

import pmpp
from pmpp.chapters.base import BenchSet, Chapter, CheckResult, Library, Model, Variant
from pmpp.chapters.draw import array_module, generator_for, host, to_module

U32 = 2.0 ** -24          # unit roundoff of float32, round to nearest
U64 = 2.0 ** -53          # unit roundoff of float64
U_TF32 = 2.0 ** -10       # TF32 keeps 10 of float32's 23 mantissa bits: rounding errs by at most
                          # 2^-11, truncation (what the tensor cores do to unrounded inputs) by 2^-10
INT32_LIMIT = 2 ** 31     # the kernels index with 32-bit ints
RSCK_ALIGN = 4            # 07/08: rows of the rearranged filter padded to a multiple of 4 floats

GPU_PROBLEM = {"n": 8, "c": 64, "h": 128, "w": 128, "k": 128, "r": 3, "s": 3, "stride": 1, "pad": 1}
CPU_PROBLEM = {"n": 2, "c": 8, "h": 13, "w": 13, "k": 16, "r": 3, "s": 3, "stride": 1, "pad": 1}

# The sweep of shapes; 8 x 64 x 128 x 128, K = 128 is the chapter's GPU problem.
SWEEP = tuple({"n": 8, "c": c, "h": hw, "w": hw, "k": k, "r": 3, "s": 3, "stride": 1, "pad": 1}
              for k in (128, 256) for c in (32, 64) for hw in (64, 128))
SWEEP_KEY = "implicit_gemm:sweep"      # where `pmpp bench --all-problems` records the sweep


# --------------------------------------------------------------------------------------------
# Problem, inputs and reference
# --------------------------------------------------------------------------------------------

def output_size(problem: Mapping[str, Any]) -> tuple[int, int]:
    """(Oh, Ow) = ((H + 2 pad - R) // stride + 1, (W + 2 pad - S) // stride + 1)."""
    stride, pad = problem["stride"], problem["pad"]
    return ((problem["h"] + 2 * pad - problem["r"]) // stride + 1,
            (problem["w"] + 2 * pad - problem["s"]) // stride + 1)


def check_problem(problem: Mapping[str, Any]) -> None:
    """Raise ValueError for a shape the kernels cannot take: sizes below 1, an empty output, or
    indices past 32-bit ints."""
    for key in ("n", "c", "h", "w", "k", "r", "s", "stride"):
        if int(problem[key]) < 1:
            raise ValueError(f"{key} must be at least 1, got {problem[key]}")
    if problem["pad"] < 0:
        raise ValueError(f"pad must be at least 0, got {problem['pad']}")
    oh, ow = output_size(problem)
    if oh < 1 or ow < 1:
        raise ValueError(f"the filter ({problem['r']}x{problem['s']}) is larger than the padded input: "
                         f"output {oh}x{ow}")
    n, c, h, w, k, r, s = (problem[x] for x in ("n", "c", "h", "w", "k", "r", "s"))
    kp = -(-k // RSCK_ALIGN) * RSCK_ALIGN
    # With margins for the indices the kernels form past the ends (a pixel past the last image,
    # a channel tile past C, 07/08's (r, s) one past the last) without loading from them.
    for name, count in (("(N + 2) * (C + 16) * H * W", (n + 2) * (c + 16) * h * w),
                        ("N * K * Oh * Ow", n * k * oh * ow), ("(R * S + 1) * (C + 16) * K", (r * s + 1) * (c + 16) * kp)):
        if count >= INT32_LIMIT:
            raise ValueError(f"{name} = {count} does not fit the kernels' 32-bit indices")


def make_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """``{"x": input, "w": filter}``, float32 uniform in [-1, 1), and ``"out"``, the output buffer
    filled with NaN (an output the kernel never writes stays NaN and fails the check)."""
    check_problem(problem)
    rng = generator_for(xp, rng)                     # drawn where xp keeps them
    x = rng.random(_input_shape(problem), dtype=np.float32) * 2 - 1      # exact, then rounds toward -1
    w = rng.random(_filter_shape(problem), dtype=np.float32) * 2 - 1
    return _inputs(problem, xp, x, w)


def make_integer_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator, bound: int = 2) -> dict:
    """As :func:`make_inputs`, with integers in [-bound, bound]. Every product and partial sum is
    then an integer of magnitude at most C*R*S*bound^2, exact in float32 (and in TF32, whose 11-bit
    significand holds the inputs) while that is below 2^24: every variant must match exactly."""
    check_problem(problem)
    rng = generator_for(xp, rng)
    x = rng.integers(-bound, bound + 1, size=_input_shape(problem)).astype(np.float32)
    w = rng.integers(-bound, bound + 1, size=_filter_shape(problem)).astype(np.float32)
    return _inputs(problem, xp, x, w)


def _input_shape(p):
    return (p["n"], p["c"], p["h"], p["w"])


def _filter_shape(p):
    return (p["k"], p["c"], p["r"], p["s"])


def _output_shape(p):
    return (p["n"], p["k"], *output_size(p))


def _inputs(problem, xp, x, w) -> dict:
    return {"x": xp.asarray(x), "w": xp.asarray(w),
            "out": xp.full(_output_shape(problem), np.nan, dtype=np.float32)}


def im2col(image: np.ndarray, r: int, s: int, stride: int, pad: int) -> np.ndarray:
    """The im2col matrix of one image (C x H x W): row (c, r, s), column (p, q) holds
    image[c][p*stride - pad + r][q*stride - pad + s], 0 outside - shape (C*R*S, Oh*Ow), a copy."""
    c = image.shape[0]
    padded = np.pad(image, ((0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (r, s), axis=(1, 2))[:, ::stride, ::stride]
    oh, ow = windows.shape[1:3]                                   # windows[c, p, q, r, s]
    return windows.transpose(0, 3, 4, 1, 2).reshape(c * r * s, oh * ow)


@dataclass(frozen=True)
class ConvReference:
    """The float64 convolution (``values``, N x K x Oh x Ow) and, per output, the sum of
    |filter * input| over its terms (``abs_values``), which the tolerance of :func:`check` scales:
    kept where the inputs are (NumPy or CuPy); ``value`` and ``abs_value`` are the same in NumPy."""

    values: Any
    abs_values: Any

    @property
    def value(self) -> np.ndarray:
        return host(self.values)

    @property
    def abs_value(self) -> np.ndarray:
        return host(self.abs_values)


def reference(problem: Mapping[str, Any], inputs: Mapping[str, Any]) -> ConvReference:
    """In float64 where the inputs are (NumPy or CuPy), for the value and for |.|: per filter tap
    (r, s), one matrix product of the K x C filter slice with the C x (N Oh Ow) input pixels that
    tap reads - the im2col product, one tap's rows at a time."""
    xp = array_module(inputs["x"])
    x = inputs["x"].astype(np.float64)
    w = to_module(xp, inputs["w"]).astype(np.float64)                       # K x C x R x S
    stride, pad = problem["stride"], problem["pad"]
    oh, ow = output_size(problem)
    padded = xp.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    value = xp.zeros(_output_shape(problem))
    abs_value = xp.zeros_like(value)
    for r in range(problem["r"]):
        for s in range(problem["s"]):
            pixels = padded[:, :, r:r + stride * (oh - 1) + 1:stride, s:s + stride * (ow - 1) + 1:stride]
            tap = w[:, :, r, s]
            value += xp.tensordot(tap, pixels, axes=([1], [1])).transpose(1, 0, 2, 3)
            abs_value += xp.tensordot(abs(tap), abs(pixels), axes=([1], [1])).transpose(1, 0, 2, 3)
    return ConvReference(value, abs_value)


# --------------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Result:
    """An output computed at a stated precision - cuDNN with TF32 allowed, judged as TF32 while
    the problem (shared with the FP32 routines) says FP32."""

    array: Any
    precision: str


def gamma(m: int, u: float) -> float:
    """Higham's gamma_m = m u / (1 - m u)."""
    return m * u / (1 - m * u) if m * u < 1 else math.inf


def tolerance(problem: Mapping[str, Any], precision: str | None = None) -> float:
    """The largest error a correct kernel can make on an output, as a multiple of that output's
    sum of |filter * input| over its m = C*R*S terms.

    FP32: each product rounds once and each term goes through at most m - 1 additions, in
    whatever order a kernel sums them (or one rounding per fused multiply-add), so the error is at
    most gamma_m(2^-24) * sum |w x| (Higham, *Accuracy and Stability of Numerical Algorithms*,
    2nd ed., sec. 3.1). TF32: both operands are first rounded or truncated to 10 mantissa bits
    (relative error <= 2^-10 each, so <= 2 * 2^-10 + 2^-20 per product), then products are summed in
    FP32 (gamma_m with u = 2^-23, allowing the tensor cores to truncate): ~2e-3, the "~1e-3
    relative" of TF32. Plus the float64 reference's own gamma_m(2^-53). A worst case: typical
    errors are 100x smaller, and a dropped or doubled term is caught by the exact integer test.
    """
    m = problem["c"] * problem["r"] * problem["s"]
    precision = precision or problem.get("precision", "fp32")
    if precision == "fp32":
        bound = gamma(m, U32)
    elif precision == "tf32":
        operands = 2 * U_TF32 + U_TF32 ** 2
        bound = operands + (1 + operands) * gamma(m, 2 * U32)
    else:
        raise ValueError(f"precision must be 'fp32' or 'tf32', got {precision!r}")
    return bound + gamma(m, U64)


def check(output, ref: ConvReference, problem: Mapping[str, Any]) -> CheckResult:
    """Every output within :func:`tolerance` x its sum |w x| of the float64 reference (NaN never)."""
    precision = getattr(output, "precision", problem.get("precision", "fp32"))
    xp = array_module(ref.values)
    out = to_module(xp, getattr(output, "array", output)).astype(np.float64)
    factor = tolerance(problem, precision)
    if out.shape != ref.values.shape:
        return CheckResult(False, math.inf, factor, f"output of shape {out.shape}, expected {ref.values.shape}")
    error = xp.abs(out - ref.values)
    bad = ~(error <= factor * ref.abs_values)                    # NaN compares False: bad
    safe = xp.where(ref.abs_values > 0, ref.abs_values, 1.0)
    relative = xp.where(ref.abs_values > 0, error / safe, xp.where(error > 0, np.inf, 0.0))
    worst = float(xp.where(xp.isnan(relative), np.inf, relative).max()) if relative.size else 0.0
    detail = (f"{precision}: max error {worst:.3g} x sum|w x| (tolerance {factor:.3g} x sum|w x|)")
    wrong = int(xp.count_nonzero(bad))
    if wrong:
        where = tuple(int(i) for i in xp.argwhere(bad)[0])
        detail = (f"{wrong} of {bad.size} outputs wrong, first at [n, k, p, q] = {list(where)}: "
                  f"{float(out[where])!r}, expected {float(ref.values[where])!r}; {detail}")
    return CheckResult(not wrong, worst, factor, detail)


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------

def _sizes(problem) -> tuple[int, ...]:
    """The kernels' size arguments: N, C, H, W, K, R, S, stride, pad, Oh, Ow."""
    return (*(int(problem[x]) for x in ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")),
            *output_size(problem))


def _pixels(problem) -> int:
    oh, ow = output_size(problem)
    return problem["n"] * oh * ow


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _defines(module, variant_defines: Mapping[str, Any]) -> dict:
    return {**variant_defines, **module.defines}


def _launch_naive(module, problem, inputs):
    """01: one thread per output, BLOCK_DIM threads per block."""
    check_problem(problem)
    block = int(_defines(module, {"BLOCK_DIM": 256})["BLOCK_DIM"])
    total = _pixels(problem) * problem["k"]
    module.get_function("ImplicitGemmNaiveKernel")(
        _cdiv(total, block), block, (inputs["x"], inputs["w"], inputs["out"], *_sizes(problem)))
    return inputs["out"]


def _tiled(kernel: str, *, tile: int | None = None, threads: int = 256, square_block: bool = False):
    """02-06: a block per tile x tile outputs (tile from the TILE define if None), grid (pixel
    tiles, filter tiles); ``square_block``: a TILE x TILE block (02) instead of a 1D one."""

    def launch(module, problem, inputs):
        check_problem(problem)
        t = tile or int(_defines(module, {"TILE": 16})["TILE"])
        block = (t, t) if square_block else (threads if tile else t * t)
        grid = (_cdiv(_pixels(problem), t), _cdiv(problem["k"], t))
        module.get_function(kernel)(grid, block, (inputs["x"], inputs["w"], inputs["out"], *_sizes(problem)))
        return inputs["out"]

    return launch


def _rearranged_filter(module, problem, w):
    """07, 08: the filter as RSCK, rows of K padded to Kp (a multiple of 4): (filter_t, Kp)."""
    xp = pmpp.get_array_module(w)
    k, rs = problem["k"], problem["r"] * problem["s"]
    kp = _cdiv(k, RSCK_ALIGN) * RSCK_ALIGN
    filter_t = xp.empty(rs * problem["c"] * kp, dtype=np.float32)
    module.get_function("FilterToRSCKKernel")(_cdiv(filter_t.size, 256), 256,
                                              (w, filter_t, k, problem["c"], rs, kp))
    return filter_t, kp


def _rsc(kernel: str, threads: int = 256, shared_bytes=None):
    """07, 08, 09: rearrange the filter, then a block of ``threads`` per 128 x 128 outputs (256 for
    07 and 08; 128 for 09, 16 x 8 outputs per thread), with ``shared_bytes(defines)`` of dynamic
    shared memory where given."""

    def launch(module, problem, inputs):
        check_problem(problem)
        filter_t, kp = _rearranged_filter(module, problem, inputs["w"])
        grid = (_cdiv(_pixels(problem), 128), _cdiv(problem["k"], 128))
        shared = shared_bytes(module.defines) if shared_bytes else 0
        module.get_function(kernel)(grid, threads, (inputs["x"], filter_t, inputs["out"], *_sizes(problem), kp),
                                    shared_mem=shared)
        return inputs["out"]

    return launch


def register_blocking_shared_bytes(defines: Mapping[str, Any]) -> int:
    """09's dynamic shared memory: STAGES x TILE_K channels of a 128-filter and a 128-pixel tile."""
    d = {**REGISTER_BLOCKING, **defines}
    return d["STAGES"] * d["TILE_K"] * (128 + 128) * 4


# --------------------------------------------------------------------------------------------
# 10: wgmma fed by the TMA (sm_90a)
# --------------------------------------------------------------------------------------------

WGMMA_TILE = 128          # 10: filters and pixels per block
WGMMA_CHANNELS = 32       # 10: channels per pipeline stage (one 128-byte row)
WGMMA = {"STAGES": 3, "MIN_BLOCKS": 2}   # 10's file's defaults
MAX_SHARED_PER_SM = 227 * 1024     # an sm_90 SM's shared memory a kernel may have


def wgmma_shared_bytes(defines: Mapping[str, Any]) -> int:
    """10's dynamic shared memory: STAGES x (filter tile, pixel tile), an mbarrier per stage and
    1 KB to align the swizzled tiles."""
    stages = {**WGMMA, **defines}["STAGES"]
    return stages * 2 * WGMMA_TILE * WGMMA_CHANNELS * 4 + 1024 + 8 * stages
TENSOR_MAP = np.dtype([("words", np.uint64, (16,))])       # CUtensorMap: 128 opaque bytes
_F32, _SWIZZLE_128B, _L2_256B = 7, 3, 3                    # cuda.h's CUtensorMap* enum values
_MAX_DYNAMIC_SHARED = 8                  # cuda.h: CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


def _encode_tiled(address: int, dims, strides, box) -> np.void:
    """A tiled tensor map of float32 (cuTensorMapEncodeTiled, CUDA driver API): ``dims`` innermost
    first, ``strides`` in bytes for dims 1.., ``box`` the tile one copy brings, 128-byte swizzle,
    zeros outside the tensor."""
    import ctypes
    rank = len(dims)
    storage = (ctypes.c_uint64 * 32)()                                # a map must sit on 128 bytes
    at = (ctypes.addressof(storage) + 127) & ~127
    status = _libcuda().cuTensorMapEncodeTiled(
        ctypes.c_void_p(at), _F32, rank, ctypes.c_void_p(address), (ctypes.c_uint64 * rank)(*dims),
        (ctypes.c_uint64 * (rank - 1))(*strides), (ctypes.c_uint32 * rank)(*box),
        (ctypes.c_uint32 * rank)(*[1] * rank), 0, _SWIZZLE_128B, _L2_256B, 0)
    if status != 0:
        raise ValueError(f"cuTensorMapEncodeTiled refused dims {dims}, strides {strides}, box {box}: "
                         f"CUresult {status} (see cuda.h)")
    words = np.ctypeslib.as_array((ctypes.c_uint64 * 16).from_address(at)).copy()
    return np.array((words,), TENSOR_MAP)[()]


def _libcuda():
    import ctypes
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    return lib


_SM90A: dict = {}


def _sm90a_kernels(module):
    """10's kernels built for sm_90a, which wgmma needs. CuPy's RawModule appends its own -arch
    (sm_90 on an H100) and NVRTC refuses a second one, so NVRTC is called here directly."""
    key = (module.source, tuple(sorted(module.defines.items())))
    if key not in _SM90A:
        import cupy
        from cupy_backends.cuda.libs import nvrtc
        from pmpp.source import define_options
        options = ("-arch=sm_90a", "-DWGMMA_REQUIRED", *define_options(module.defines))
        program = nvrtc.createProgram(module.source, module.filename, (), ())
        try:
            nvrtc.compileProgram(program, options)
        except nvrtc.NVRTCError:
            raise ValueError(f"{module.filename} did not compile for sm_90a:\n"
                             f"{nvrtc.getProgramLog(program)}") from None
        cubin = nvrtc.getCUBIN(program)
        nvrtc.destroyProgram(program)
        raw = cupy.cuda.function.Module()
        raw.load(cubin)
        kernels = {name: raw.get_function(name) for name in
                   ("FilterToRSKCKernel", "InputToNHWCKernel", "ImplicitGemmWgmmaKernel")}
        cupy.cuda.driver.funcSetAttribute(kernels["ImplicitGemmWgmmaKernel"].ptr, _MAX_DYNAMIC_SHARED,
                                          wgmma_shared_bytes(module.defines))   # past 48 KB: opt in
        _SM90A[key] = kernels
    return _SM90A[key]


def _pixel_box(ow: int) -> tuple[int, int]:
    """(TW, TH): the block's 128 pixels as TH output rows of TW columns, TW a power of two
    covering Ow where it can (8 <= TW <= 128)."""
    tw = min(WGMMA_TILE, max(8, 1 << (ow - 1).bit_length()))
    return tw, WGMMA_TILE // tw


def _launch_wgmma(module, problem, inputs):
    """10: filter to (r, s) x K x C and input to NHWC (split into stride x stride phases), both
    TF32 with channels padded to a multiple of 4; then one warpgroup per 128 x 128 outputs."""
    import cupy
    check_problem(problem)
    kernels = _sm90a_kernels(module)
    n, c, h, w, k, r, s, stride, pad, oh, ow = _sizes(problem)
    cp = _cdiv(c, 4) * 4
    hq, wq = _cdiv(h, stride), _cdiv(w, stride)
    if n * h > 65535:
        raise ValueError(f"10 transforms the input with a grid of N * H = {n * h} rows; at most 65535")
    i32 = np.int32
    filter_k = cupy.empty(r * s * k * cp, dtype=np.uint32)
    kernels["FilterToRSKCKernel"]((_cdiv(filter_k.size, 256),), (256,),
                                  (inputs["w"], filter_k, i32(k), i32(c), i32(r * s), i32(cp)))
    alloc = cupy.zeros if stride > 1 else cupy.empty       # phases past the edge must read 0
    x_t = alloc(n * stride * stride * hq * wq * cp, dtype=np.uint32)
    kernels["InputToNHWCKernel"]((_cdiv(w, 32), n * h, _cdiv(cp, 32)), (32, 8),
                                 (inputs["x"], x_t, i32(n), i32(c), i32(h), i32(w), i32(cp), i32(stride),
                                  i32(hq), i32(wq)))
    tw, th = _pixel_box(ow)
    filter_map = _encode_tiled(filter_k.data.ptr, (cp, k, r * s), (cp * 4, k * cp * 4),
                               (WGMMA_CHANNELS, WGMMA_TILE, 1))
    input_map = _encode_tiled(x_t.data.ptr, (cp, wq, hq, n * stride * stride),
                              (cp * 4, wq * cp * 4, hq * wq * cp * 4), (WGMMA_CHANNELS, tw, th, 1))
    grid = (n * _cdiv(oh, th) * _cdiv(ow, tw), _cdiv(k, WGMMA_TILE))
    kernels["ImplicitGemmWgmmaKernel"](grid, (128,), (filter_map, input_map, inputs["out"], i32(k), i32(cp),
                                                      i32(r), i32(s), i32(stride), i32(pad), i32(oh), i32(ow),
                                                      i32(tw)), shared_mem=wgmma_shared_bytes(module.defines))
    return inputs["out"]


def _wgmma_model(problem):
    """As 07/08's model, and the input's trip through the transform (read, written as NHWC,
    read by the TMA)."""
    base = _model(rearranges_filter=True)(problem)
    p = problem
    extra = 2 * p["n"] * p["h"] * p["w"] * _cdiv(p["c"], 4) * 4
    return Model(flops=base.flops, bytes=base.bytes + 4.0 * extra)


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------

def flops(problem: Mapping[str, Any]) -> float:
    """2 * N * K * Oh * Ow * C * R * S: a multiply and an add per filter tap per output."""
    return 2.0 * _pixels(problem) * problem["k"] * problem["c"] * problem["r"] * problem["s"]


def _model(rearranges_filter: bool = False):
    """What must move through device memory: input and filter read once, output written once
    (caches serve every re-read), plus 07/08's rearranged filter (written, then read)."""

    def model(problem):
        p = problem
        floats = p["n"] * p["c"] * p["h"] * p["w"] + p["k"] * p["c"] * p["r"] * p["s"] + _pixels(p) * p["k"]
        if rearranges_filter:
            floats += 2 * p["r"] * p["s"] * p["c"] * _cdiv(p["k"], RSCK_ALIGN) * RSCK_ALIGN
        return Model(flops=flops(p), bytes=4.0 * floats)

    return model


def load_intensity(tile_m: int, tile_n: int) -> float:
    """FLOP per byte that a block computing tile_m filters x tile_n pixels loads from global
    memory (L2 or DRAM): per reduction index it loads tile_m filter and
    tile_n im2col values (4 bytes each) for tile_m * tile_n multiply-adds (2 FLOP each), so
    tile_m * tile_n / (2 (tile_m + tile_n)). One output per thread, no reuse (01): 1 x 1, 0.25 OP/B,
    the book's figure for its basic kernel; square tiles maximize it for a given tile area."""
    return tile_m * tile_n / (2.0 * (tile_m + tile_n))


# --------------------------------------------------------------------------------------------
# Tile sizes from bounds (Volkov & Demmel, "Benchmarking GPUs to tune dense linear algebra",
# SC'08; Nath, Tomov & Dongarra, "An Improved MAGMA GEMM for Fermi GPUs", 2010)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GPUFigures:
    """What bounds a GEMM tile on one GPU: FP32 rate, DRAM bandwidth, shared memory and registers
    per SM. Rates in FLOP/s and bytes/s, sizes in bytes and 32-bit registers."""

    name: str
    sm_count: int
    fp32_flops: float             # FP32 FMA rate, FLOP/s
    dram_bandwidth: float         # bytes/s that DRAM delivers to a kernel that reads
    shared_per_sm: int            # the largest shared-memory carveout of an SM
    registers_per_sm: int
    max_threads_per_sm: int
    source: str

    @property
    def ridge(self) -> float:
        """FLOP per DRAM byte at which the FP32 roof and the bandwidth roof meet."""
        return self.fp32_flops / self.dram_bandwidth


KB = 1024
# Sources. SM counts, shared memory and registers per SM: the CUDA C++ Programming Guide's table of
# compute capabilities (7.5: 64 KB, 8.0: 164 KB, 9.0: 228 KB of shared memory per SM; 64 K 32-bit
# registers per SM and at most 255 per thread on all four; 1,024 threads per SM on 7.5, 2,048 on
# 8.0 and 9.0) and the data sheets' SM counts, as in pmpp.occupancy.GPUS. Rates:
#  * T4: NVIDIA T4 data sheet: 8.1 TFLOPS FP32, 320 GB/s GDDR6.
#  * A100: NVIDIA A100 data sheet, A100 80GB SXM: 19.5 TFLOPS FP32, 2,039 GB/s HBM2e.
#  * H100: measured, results/nvidia-h100-80gb-hbm3-59550f7.json "ceilings": fp32_gflops 65,021
#    and read_gbs 3,024 (the H100 SXM data sheet says 67 TFLOPS and 3.35 TB/s).
#  * H200: measured, results/nvidia-h200-8d4b08b.json "ceilings": fp32_gflops 64,961 and read_gbs
#    4,336 (the H200 SXM data sheet says 67 TFLOPS and 4.8 TB/s); 132 SMs as that file's device.
GPU_FIGURES = {g.name: g for g in (
    GPUFigures("T4", 40, 8.1e12, 320e9, 64 * KB, 65536, 1024, "T4 data sheet"),
    GPUFigures("A100", 108, 19.5e12, 2039e9, 164 * KB, 65536, 2048, "A100 80GB SXM data sheet"),
    GPUFigures("H100", 132, 65.021e12, 3024e9, 228 * KB, 65536, 2048, "measured, results/ (59550f7)"),
    GPUFigures("H200", 132, 64.961e12, 4336e9, 228 * KB, 65536, 2048, "measured, results/ (8d4b08b)"),
)}
MAX_REGISTERS_PER_THREAD = 255


def smallest_square_tile(gpu: GPUFigures) -> float:
    """The LOWER bound from bandwidth: a block of T x T outputs loads 4 (T + T) bytes per reduction
    index for T^2 multiply-adds, T / 4 FLOP per byte (:func:`load_intensity`); if every such load
    came from DRAM, the kernel is compute bound only when T / 4 reaches the ridge point, so
    T >= 4 x ridge."""
    return 4 * gpu.ridge


def tile_shared_bytes(tile_m: int, tile_n: int, tile_k: int, stages: int = 1) -> int:
    """Shared memory for a block's tiles: tile_m x tile_k filter and tile_k x tile_n im2col
    floats, ``stages`` copies of each (2 for double buffering)."""
    return 4 * (tile_m + tile_n) * tile_k * stages


def largest_square_tile_by_shared(gpu: GPUFigures, tile_k: int, stages: int, blocks_per_sm: int) -> float:
    """The UPPER bound from shared memory: ``blocks_per_sm`` blocks of T x T tiles, each holding
    ``stages`` copies of 4 (T + T) tile_k bytes, must fit in the SM: T <= shared / (8 tile_k stages blocks)."""
    return gpu.shared_per_sm / (8 * tile_k * stages * blocks_per_sm)


def thread_registers(thread_m: int, thread_n: int) -> int:
    """Registers a thread needs at least for a thread_m x thread_n patch of outputs: its
    accumulators, and the thread_m + thread_n values (fragments) whose outer product it adds."""
    return thread_m * thread_n + thread_m + thread_n


def register_budget(gpu: GPUFigures, threads_per_block: int, blocks_per_sm: int) -> int:
    """The UPPER bound from the register file: registers per thread when ``blocks_per_sm`` blocks of
    ``threads_per_block`` threads share the SM's registers, and never more than 255."""
    return min(MAX_REGISTERS_PER_THREAD, gpu.registers_per_sm // (threads_per_block * blocks_per_sm))


def largest_thread_tile(budget: int) -> int:
    """The largest t for which a square t x t thread patch fits ``budget`` registers
    (t^2 + 2t <= budget, :func:`thread_registers`)."""
    return math.isqrt(budget + 1) - 1


# The tiles the variants use: the defines of their kernel files (TILE_M, TILE_N, TILE_K - TILE_C in
# 10 -, STAGES where the file defines it, THREADS), the copies of each shared tile where it has
# no STAGES (06-08: two, double buffering), and each thread's patch of outputs (thread_m x
# thread_n; 08 and 10 hold their accumulators in the tensor cores' fragment layout instead).
TILE_SHAPES = {
    "04_thread_tile": dict(tile_m=64, tile_n=64, tile_k=4, stages=1, threads=256, thread=(4, 4)),
    "05_large_tile": dict(tile_m=128, tile_n=128, tile_k=8, stages=1, threads=256, thread=(8, 8)),
    "06_double_buffer": dict(tile_m=128, tile_n=128, tile_k=8, stages=2, threads=256, thread=(8, 8)),
    "07_rsc_order": dict(tile_m=128, tile_n=128, tile_k=16, stages=2, threads=256, thread=(8, 8)),
    "08_tf32_mma": dict(tile_m=128, tile_n=128, tile_k=16, stages=2, threads=256, thread=None),
    "09_register_blocking": dict(tile_m=128, tile_n=128, tile_k=16, stages=3, threads=128, thread=(16, 8)),
    "10_wgmma_tma": dict(tile_m=128, tile_n=128, tile_k=32, stages=3, threads=128, thread=None),
}


def kernel_defines(variant: Variant | str) -> dict[str, int]:
    """The integer ``#define``s of a variant's kernel file (the variant's own defines win)."""
    variant = CHAPTER.variant(variant) if isinstance(variant, str) else variant
    text = pmpp.kernel_source(f"{CHAPTER.kernel_dir}/{variant.name}.cu")
    found = {name: int(value) for name, value in re.findall(r"^#define (\w+) (\d+)\b", text, re.M)}
    return {**found, **{k: int(v) for k, v in variant.defines.items() if str(v).isdigit()}}


# --------------------------------------------------------------------------------------------
# Library routines: the bar to beat
# --------------------------------------------------------------------------------------------

def _torch_available(backend: str) -> bool:
    if backend != "cupy" or importlib.util.find_spec("torch") is None:
        return False
    import torch
    return torch.cuda.is_available()


def _cudnn(tf32: bool):
    """``torch.nn.functional.conv2d`` on the same CuPy arrays (no copies), cuDNN with TF32 allowed
    or not. cuDNN picks its algorithm by its own heuristics (torch's default, benchmark mode off)."""

    def run(problem, inputs):
        import cupy
        import torch
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        x, w = torch.from_dlpack(inputs["x"]), torch.from_dlpack(inputs["w"])
        y = torch.nn.functional.conv2d(x, w, stride=problem["stride"], padding=problem["pad"])
        out = cupy.from_dlpack(y)
        return Result(out, "tf32") if tf32 else out

    return run


def _numpy_run(problem, inputs):
    """im2col and a float32 matrix product per image."""
    x, w = pmpp.asnumpy(inputs["x"]), pmpp.asnumpy(inputs["w"]).reshape(problem["k"], -1)
    return np.stack([(w @ im2col(x[n], problem["r"], problem["s"], problem["stride"], problem["pad"]))
                     .reshape(_output_shape(problem)[1:]) for n in range(problem["n"])])


# --------------------------------------------------------------------------------------------
# What the GPU executes per step: the main loop's instruction mix
# --------------------------------------------------------------------------------------------

_SASS_LINE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s*(?:@!?U?P[T0-9]+\s+)?([A-Z0-9]+)")


def main_loop_mix(listing: str, kernel: str) -> Counter:
    """Opcode counts (``"FFMA"``, ``"LDS"``, ``"HMMA"``, ...) of the longest loop of ``kernel`` in a
    SASS listing (``pmpp.compilecheck.sass``): the instructions from the target of a backward
    branch to the branch. In 05-08 that is one step of the reduction, with any rarely taken
    branch inside it (07's and 08's change of (r, s)) counted too."""
    body = listing.split(f"Function : {kernel}\n", 1)[1].split("Function : ", 1)[0]
    lines = [m for m in map(_SASS_LINE.match, body.splitlines()) if m]
    address = {int(m.group(1), 16): i for i, m in enumerate(lines)}
    loops = []
    for i, m in enumerate(lines):
        target = re.search(r"\bBRA\s+(0x[0-9a-f]+)", m.string)
        if m.group(2) == "BRA" and target and int(target.group(1), 16) < int(m.group(1), 16):
            loops.append((address[int(target.group(1), 16)], i))
    if not loops:
        raise ValueError(f"{kernel} has no loop in this listing")
    start, end = max(loops, key=lambda loop: loop[1] - loop[0])
    return Counter(m.group(2) for m in lines[start:end + 1])


# --------------------------------------------------------------------------------------------
# 08 on the CPU engine: its two PTX instructions written out in CUDA C
# --------------------------------------------------------------------------------------------

EMULATED_TF32 = """__device__ __forceinline__ unsigned to_tf32(float x) {
    return (__float_as_uint(x) + 0x1000u) & 0xffffe000u;   // cvt.rna.tf32.f32: nearest, ties away
}"""

EMULATED_MMA = """__device__ __forceinline__ void mma_16x8x8(float* d, const unsigned* a, const unsigned* b) {
    // mma.sync.m16n8k8: lane (g, t) holds a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4];
    // b = B[t][g], B[t+4][g]; d = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1].
    unsigned lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    for (int k = 0; k < 8; ++k) {
        unsigned from = k % 4;                     // lanes g * 4 + from hold A[.][k], B[k][.]
        float a_top = __uint_as_float(__shfl_sync(0xffffffffu, k < 4 ? a[0] : a[2], g * 4 + from));
        float a_bottom = __uint_as_float(__shfl_sync(0xffffffffu, k < 4 ? a[1] : a[3], g * 4 + from));
        float b_even = __uint_as_float(__shfl_sync(0xffffffffu, k < 4 ? b[0] : b[1], 2 * t * 4 + from));
        float b_odd = __uint_as_float(__shfl_sync(0xffffffffu, k < 4 ? b[0] : b[1], (2 * t + 1) * 4 + from));
        d[0] += a_top * b_even;
        d[1] += a_top * b_odd;
        d[2] += a_bottom * b_even;
        d[3] += a_bottom * b_odd;
    }
}"""


def emulated_tf32_source(text: str | None = None) -> str:
    """08's kernel (``text``, by default the file) with its two inline-PTX helpers, ``to_tf32``
    and ``mma_16x8x8``, replaced by CUDA C that does the same - TF32 rounding, and the warp's
    16 x 8 x 8 product gathered from the fragments by shuffles, with the PTX ISA's fragment
    layout - so that the CPU engine can run it: ``pmpp.load(source=emulated_tf32_source(),
    backend="cpu")``. What the emulation checks is everything around the tensor cores: tiles,
    fragment loads, double buffering, epilogue. It is as fast as it looks: slow."""
    text = text if text is not None else pmpp.kernel_source("implicit_gemm/08_tf32_mma.cu")
    for name, body in (("to_tf32", EMULATED_TF32), ("mma_16x8x8", EMULATED_MMA)):
        pattern = re.compile(r"__device__ __forceinline__ \w+ " + name + r"\(.*?\n\}", re.S)
        if len(pattern.findall(text)) != 1:
            raise ValueError(f"the kernel should define {name} exactly once, as 08_tf32_mma.cu does")
        text = pattern.sub(lambda _: body, text)
    return text


# --------------------------------------------------------------------------------------------
# The chapter
# --------------------------------------------------------------------------------------------

TILES = {"01_naive": (1, 1), "02_shared_tiles": (16, 16), "03_warp_tile": (16, 16),
         "04_thread_tile": (64, 64), "05_large_tile": (128, 128), "06_double_buffer": (128, 128),
         "07_rsc_order": (128, 128), "08_tf32_mma": (128, 128),
         "09_register_blocking": (128, 128), "10_wgmma_tma": (128, 128)}
"""The output tile (filters x pixels) a block computes, for :func:`load_intensity`."""

REGISTER_BLOCKING = {"TILE_K": 16, "STAGES": 3, "MIN_BLOCKS": 2, "THREAD_M": 16}   # 09's file's defaults

VARIANTS = (
    Variant("01_naive", "naive: one output per thread", "PMPP 7.2",
            _launch_naive, _model(), defines={"BLOCK_DIM": 256}),
    Variant("02_shared_tiles", "16 x 16 shared-memory tiles of filter and im2col", "PMPP 5.4",
            _tiled("ImplicitGemmSharedTilesKernel", square_block=True), _model(), defines={"TILE": 16}),
    Variant("03_warp_tile", "warp tile: a warp computes 4 x 8 outputs", "CUTLASS warp tile",
            _tiled("ImplicitGemmWarpTileKernel"), _model(), defines={"TILE": 16}),
    Variant("04_thread_tile", "thread tile: 4 x 4 outer products, 64 x 64 tiles", "CUTLASS thread tile",
            _tiled("ImplicitGemmThreadTileKernel", tile=64), _model()),
    Variant("05_large_tile", "128 x 128 tiles, 8 x 8 per thread", "CUTLASS thread tile",
            _tiled("ImplicitGemmLargeTileKernel", tile=128), _model()),
    Variant("06_double_buffer", "double buffering: next tiles load during the FMAs", "beyond the book",
            _tiled("ImplicitGemmDoubleBufferKernel", tile=128), _model()),
    Variant("07_rsc_order", "reduction over (r, s) outside, c inside; RSCK filter", "beyond the book",
            _rsc("ImplicitGemmRscKernel"), _model(rearranges_filter=True)),
    Variant("08_tf32_mma", "TF32 tensor cores: mma.sync.m16n8k8", "beyond the book",
            _rsc("ImplicitGemmTf32Kernel"), _model(rearranges_filter=True),
            problem={"precision": "tf32"}, gpu_only=True, min_arch=80),
    Variant("09_register_blocking", "16 x 8 outputs per thread, 128 threads, cp.async stages",
            "beyond the book",
            _rsc("ImplicitGemmRegisterBlockingKernel", threads=128, shared_bytes=register_blocking_shared_bytes),
            _model(rearranges_filter=True), defines=REGISTER_BLOCKING,
            # What `pmpp tune` may set: the step's channels, the stages in flight, the registers'
            # promise of blocks per SM (as long as that many blocks' stages fit in an SM's shared
            # memory), the thread's patch
            tunables={"TILE_K": (8, 16, 32), "STAGES": (2, 3, 4, 5, 6), "MIN_BLOCKS": (1, 2, 3), "THREAD_M": (8, 16)},
            legal=lambda d: d["MIN_BLOCKS"] * register_blocking_shared_bytes(d) <= MAX_SHARED_PER_SM),
    Variant("10_wgmma_tma", "Hopper: wgmma from shared memory, TMA loads, 3 stages", "beyond the book",
            _launch_wgmma, _wgmma_model, problem={"precision": "tf32"}, gpu_only=True, min_arch=90,
            defines=WGMMA,
            # What `pmpp tune` may set: the stages in flight and the registers' promise of blocks per
            # SM, as long as that many blocks' stages fit in an SM's shared memory
            tunables={"STAGES": (2, 3, 4, 5, 6), "MIN_BLOCKS": (1, 2)},
            legal=lambda d: d["MIN_BLOCKS"] * wgmma_shared_bytes(d) <= MAX_SHARED_PER_SM),
)


def describe(problem: Mapping[str, Any]) -> str:
    p = problem
    return (f"N={p['n']} C={p['c']} H={p['h']} W={p['w']} K={p['k']} {p['r']}x{p['s']} "
            f"stride {p['stride']} pad {p['pad']} {p.get('precision', 'fp32')}")


def conv_problem(n, c, h, w, k, r, s, stride, pad):
    """A problem of N images of C x H x W, K filters of R x S at a stride and a padding."""
    return {"n": n, "c": c, "h": h, "w": w, "k": k, "r": r, "s": s, "stride": stride, "pad": pad}


# Awkward shapes every variant must handle: all ones; primes with a non-square filter and stride 2;
# K past one 128 tile with C not a multiple of 16 and a 5x5 filter; stride 3 without padding;
# padding as wide as the filter (outputs whose window is all padding); and the CPU problem (3 pixel
# tiles, the last partial). Each is a few milliseconds for every variant on the CPU engine.
TEST_SHAPES = {
    "cpu_problem": dict(CPU_PROBLEM),
    "all_ones": conv_problem(1, 1, 1, 1, 1, 1, 1, 1, 0),
    "primes_stride2": conv_problem(3, 3, 7, 5, 17, 3, 2, 2, 1),
    "k130_c20_5x5": conv_problem(1, 20, 11, 9, 130, 5, 5, 1, 2),
    "stride3_no_pad": conv_problem(2, 5, 6, 6, 3, 3, 3, 3, 0),
    "pad_past_filter": conv_problem(1, 2, 5, 5, 4, 3, 3, 1, 3),
}


def _test_cases(backend: str):
    """Every variant on each of TEST_SHAPES (and on a GPU the GPU problem)."""
    shapes = list(TEST_SHAPES.values()) + ([dict(GPU_PROBLEM)] if backend == "cupy" else [])
    return [(variant, shape) for variant in CHAPTER.variants for shape in shapes]


def _shrink(problem: Mapping[str, Any], factor: float) -> dict:
    """The problem with about 1/factor of its work: one image first, then a smaller one (the output
    channels K and the reduction C x R x S, which set the GEMM's tiles, are kept)."""
    images = max(1, round(problem["n"] / factor))
    side = max(1, round((problem["h"] * problem["w"] * problem["n"] / (images * factor)) ** 0.5))
    return {**problem, "n": images, "h": min(problem["h"], side), "w": min(problem["w"], side)}


CHAPTER = Chapter(
    name="implicit_gemm",
    title="Convolution as implicit GEMM (PMPP ch. 7, multi-channel)",
    kernel_dir="implicit_gemm",
    variants=VARIANTS,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    # The GPU problem is compute bound (~190 FLOP per compulsory byte): that its 34 MB input fits
    # in the H100's 50 MB L2 changes little. It is the size the issue's cuDNN figures are for.
    problems={"gpu": dict(GPU_PROBLEM), "cpu": dict(CPU_PROBLEM)},
    test_sizes=(1, 3),            # batch sizes N for `pmpp run`; the tests add awkward shapes
    test_cases=_test_cases,
    shrink=_shrink,
    library=(
        Library("cuDNN FP32 (torch conv2d)", _cudnn(tf32=False), _torch_available, imports=("torch",)),
        Library("cuDNN TF32 (torch conv2d)", _cudnn(tf32=True), _torch_available, imports=("torch",)),
        Library("numpy im2col + matmul", _numpy_run, lambda backend: backend == "cpu"),
    ),
    describe=describe,
    bench=(BenchSet("sweep", SWEEP),),          # recorded under SWEEP_KEY
)


# --------------------------------------------------------------------------------------------
# The sweep of shapes
# --------------------------------------------------------------------------------------------

def sweep(problems: Sequence[Mapping[str, Any]] = SWEEP, *, backend="auto",
          variants: Sequence[str] | None = None) -> list[dict]:
    """Check and time the variants (all by default) and the library routines on each problem:
    ``pmpp.runner.measure`` entries, each naming its problem."""
    from pmpp import runner
    return runner.measure_problems(CHAPTER, problems, backend=backend, variants=variants)


def sweep_rows(entries: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Per problem of a sweep: the fastest correct FP32 variant and the TF32 variant, each beside
    cuDNN at the same precision (``None`` where an entry is missing)."""
    rows = []
    for problem in dict.fromkeys(_fp32_problem(e["problem"]) for e in entries):
        mine = [e for e in entries if _fp32_problem(e["problem"]) == problem]
        fp32 = [e for e in mine if e["kind"] == "variant" and e["correct"] and e["problem"].endswith("fp32")]
        named = {e["name"]: e for e in mine}
        rows.append({"problem": problem,
                     "best_fp32": min(fp32, key=lambda e: e["median_us"]) if fp32 else None,
                     "cudnn_fp32": named.get("cuDNN FP32 (torch conv2d)"),
                     "tf32": named.get("08_tf32_mma"),
                     "cudnn_tf32": named.get("cuDNN TF32 (torch conv2d)")})
    return rows


def _fp32_problem(description: str) -> str:
    return description.removesuffix(" tf32").removesuffix(" fp32")


def sweep_table(entries: Sequence[Mapping[str, Any]]) -> str:
    """The sweep as text: per problem, TFLOP/s of the best FP32 variant and of 08 beside cuDNN's,
    and their ratios (ours / cuDNN's speed)."""

    def tflops(e):
        return f"{e['gflops'] / 1e3:7.3g}" if e else "      -"

    def ratio(mine, theirs):
        return f"{theirs['median_us'] / mine['median_us']:6.2f}x" if mine and theirs else "      -"

    lines = [f"{'problem':<46} {'best FP32':<17} {'TF/s':>7} {'cuDNN':>7} {'ratio':>7}  "
             f"{'08 TF/s':>7} {'cuDNN':>7} {'ratio':>7}"]
    for row in sweep_rows(entries):
        best = row["best_fp32"]
        lines.append(f"{row['problem']:<46} {best['name'] if best else '-':<17} {tflops(best)} "
                     f"{tflops(row['cudnn_fp32'])} {ratio(best, row['cudnn_fp32'])}  {tflops(row['tf32'])} "
                     f"{tflops(row['cudnn_tf32'])} {ratio(row['tf32'], row['cudnn_tf32'])}")
    return "\n".join(lines)
