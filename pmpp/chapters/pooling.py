"""Beyond the book: MaxPool3D forward, as PyTorch's ``torch.nn.functional.max_pool3d`` computes it.

The problem: ``{"shape": (N, C, T, H, W), "kernel": k, "stride": s, "padding": p}``, float32.
The output has shape (N, C, OT, OH, OW) with OT = floor((T + 2p - k) / s) + 1 (likewise OH, OW;
no ceil mode); y[n, c, ot, oh, ow] is the max of x over the k x k x k window starting at
(ot*s - p, oh*s - p, ow*s - p), cells outside x counting as -infinity (never 0). As in PyTorch,
p <= k / 2, so every window holds at least one cell of x. A max never rounds: every output must
EQUAL the NumPy reference.

Variants, step by step: 01 generic, 02 strength-reduced indices, 03 unrolled per
kernel size with register caches, 04 no bounds checks without padding, 05 shared memory (the
failed attempt), 06 and 07 two other thread mappings (v4: w, h, N*C*t; v5: w, h, t), 08 a
third mapping for stride 1 (a column walk that reuses plane maxima), 09 the
mapping picked per shape (:func:`choose_mapping`).

:data:`SHAPES` are 25 shapes measured against PyTorch's ``max_pool3d``: kernel 2, 3, 8 with stride 1 and stride = kernel, on small and
large T*H*W and C, plus one with padding. :func:`shape_table` measures them; :func:`per_shape`
judges 09's choice on a recording of them.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Mapping

import numpy as np

from pmpp.chapters.base import BenchSet, Chapter, CheckResult, Library, Model, Variant, shrink_leading
from pmpp.chapters.draw import array_module, generator_for, to_module
from pmpp.chapters.elementwise import poisoned, torch_works

BLOCK_DIM = 256            # 01-04: threads per block of the 1D grid (one output each)
UNROLLED = (2, 3, 8)       # kernel sizes with their own template instance; K = 0: any other
TCHUNK = 16                # 08-09: outputs along t per thread of the column walk
MAX_THREADS = 1024         # per block
MAX_Z = 64                 # blockDim.z limit
MAX_GRID_YZ = 65535        # gridDim.y and gridDim.z limit
SHARED_BYTES = 48 * 1024   # 05: the tile must fit the default shared memory of a block
MAX_ELEMENTS = 2 ** 31 - 1  # int indices in every kernel


# --------------------------------------------------------------------------------------------
# Shapes, inputs, reference
# --------------------------------------------------------------------------------------------

def output_shape(problem: Mapping[str, Any]) -> tuple[int, int, int, int, int]:
    """(N, C, OT, OH, OW), floor mode: O = (I + 2p - k) // s + 1."""
    n, c, *spatial = problem["shape"]
    k, s, p = problem["kernel"], problem["stride"], problem["padding"]
    return (n, c, *((i + 2 * p - k) // s + 1 for i in spatial))


def validate(problem: Mapping[str, Any]) -> None:
    """Raise ValueError for a problem no kernel (and not PyTorch) takes."""
    k, s, p = problem["kernel"], problem["stride"], problem["padding"]
    if k < 1 or s < 1 or p < 0 or p > k // 2:
        raise ValueError(f"kernel {k}, stride {s}, padding {p}: need k >= 1, s >= 1, 0 <= p <= k // 2")
    shape, out = tuple(problem["shape"]), output_shape(problem)
    if len(shape) != 5 or min(out) < 1:
        raise ValueError(f"x {shape} with kernel {k}, padding {p} has no output")
    if math.prod(shape) > MAX_ELEMENTS or math.prod(out) > MAX_ELEMENTS or max(out[2:4]) > MAX_GRID_YZ:
        raise ValueError(f"x {shape} is too large for the kernels' int indices and grids")


def make_inputs(problem: Mapping[str, Any], xp, rng: np.random.Generator) -> dict:
    """``x``: float32 uniform in [-1, 1); ``y``: the output, NaN-poisoned."""
    validate(problem)
    x = generator_for(xp, rng).random(math.prod(problem["shape"]), dtype=np.float32) * 2 - 1
    return {"x": xp.asarray(x.reshape(problem["shape"])),
            "y": poisoned(xp, output_shape(problem), np.float32)}


def reference(problem: Mapping[str, Any], inputs: Mapping[str, Any]) -> np.ndarray:
    """Pad with -inf, then a max is separable - slide it along T, then H, then W. Computed where
    the input is (NumPy or CuPy): a max is exact anywhere."""
    k, s, p = problem["kernel"], problem["stride"], problem["padding"]
    out = inputs["x"]
    xp = array_module(out)
    if p:
        out = xp.pad(out, [(0, 0), (0, 0)] + [(p, p)] * 3, constant_values=-np.inf)
    for axis in (2, 3, 4):
        count = (out.shape[axis] - k) // s + 1
        window = [slice(None)] * 5
        slides = []
        for j in range(k):
            window[axis] = slice(j, j + s * (count - 1) + 1, s)
            slides.append(out[tuple(window)])
        out = functools.reduce(xp.maximum, slides)
    return out


def check(output, ref, problem: Mapping[str, Any]) -> CheckResult:
    """Exact: a max picks one of its inputs, so every output equals the reference (NaN never)."""
    xp = array_module(ref)
    out = to_module(xp, output)                      # compared where the reference is
    if out.shape != ref.shape:
        return CheckResult(False, math.inf, 0.0, f"expected shape {ref.shape}, got {out.shape}")
    wrong = int(xp.count_nonzero(~(out == ref)))
    return CheckResult(wrong == 0, float(wrong), 0.0, f"{wrong} of {out.size} outputs differ from the reference")


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------

def unrolled_k(problem) -> int:
    """The template's K: the kernel size if it has its own instance, else 0 (any size)."""
    return problem["kernel"] if problem["kernel"] in UNROLLED else 0


def _instance(kernel: str, problem, padded_param: bool = True) -> str:
    k = unrolled_k(problem)
    if not padded_param:
        return f"{kernel}<{k}>"
    return f"{kernel}<{k},{'true' if problem['padding'] else 'false'}>"


def _args(problem, inputs) -> tuple:
    n, c, t, h, w = problem["shape"]
    _, _, ot, oh, ow = output_shape(problem)
    sizes = (n * c, t, h, w, ot, oh, ow, problem["kernel"], problem["stride"], problem["padding"])
    return (inputs["x"], inputs["y"], *(np.int32(v) for v in sizes))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _one_per_output(kernel: str, *, template: bool, padded_param: bool = True):
    """01-04: a 1D grid, one thread per output."""

    def launch(module, problem, inputs):
        name = _instance(kernel, problem, padded_param) if template else kernel
        outputs = math.prod(output_shape(problem))
        module.get_function(name)(_cdiv(outputs, BLOCK_DIM), BLOCK_DIM, _args(problem, inputs))
        return inputs["y"]

    return launch


def shared_tile(problem) -> tuple[tuple[int, int], int]:
    """05: (block (tx, ty), bytes of the tile): 32 x 8 outputs, halved (ty first) until the
    k x ((ty-1)s + k) x ((tx-1)s + k) floats of input they need fit SHARED_BYTES."""
    _, _, _, oh, ow = output_shape(problem)
    k, s = problem["kernel"], problem["stride"]
    tx, ty = min(32, ow), min(8, oh)

    def size(tx, ty):
        return 4 * k * ((ty - 1) * s + k) * ((tx - 1) * s + k)

    while size(tx, ty) > SHARED_BYTES and (tx > 1 or ty > 1):
        if ty > 1:
            ty = _cdiv(ty, 2)
        else:
            tx = _cdiv(tx, 2)
    if size(tx, ty) > SHARED_BYTES:
        raise ValueError(f"kernel {k}: one window ({4 * k ** 3} bytes) does not fit in shared memory")
    return (tx, ty), size(tx, ty)


def _shared(module, problem, inputs):
    (tx, ty), nbytes = shared_tile(problem)
    n, c, ot, oh, ow = output_shape(problem)
    grid = (_cdiv(ow, tx) * _cdiv(oh, ty), ot, min(n * c, MAX_GRID_YZ))
    module.get_function(_instance("MaxPool3DShared", problem, padded_param=False))(
        grid, (tx, ty), _args(problem, inputs), shared_mem=nbytes)
    return inputs["y"]


def v4_geometry(problem) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """06 (lab v4): (grid, block); threads over w, h and the folded nc * ot."""
    n, c, ot, oh, ow = output_shape(problem)
    tx = min(MAX_THREADS, ow)
    ty = min(MAX_THREADS // tx, oh)
    tz = min(MAX_Z, MAX_THREADS // (tx * ty), n * c * ot)
    return (_cdiv(ow, tx), _cdiv(oh, ty), min(_cdiv(n * c * ot, tz), MAX_GRID_YZ)), (tx, ty, tz)


def v5_geometry(problem) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """07 (lab v5): (grid, block); threads over w, h, t of one volume, blocks over tiles and nc."""
    n, c, ot, oh, ow = output_shape(problem)
    tx = min(MAX_THREADS, ow)
    ty = min(MAX_THREADS // tx, oh)
    tz = min(MAX_THREADS // (tx * ty), ot, MAX_Z)
    return (_cdiv(ow, tx) * _cdiv(oh, ty), _cdiv(ot, tz), min(n * c, MAX_GRID_YZ)), (tx, ty, tz)


def walk_geometry(problem) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """08: (grid, block); threads over w, h of one volume, TCHUNK outputs along t each."""
    n, c, ot, oh, ow = output_shape(problem)
    tx = min(256, ow)
    ty = min(256 // tx, oh)
    return (_cdiv(ow, tx) * _cdiv(oh, ty), _cdiv(ot, TCHUNK), min(n * c, MAX_GRID_YZ)), (tx, ty, 1)


def walks(problem) -> bool:
    """Can the column walk run this problem? Stride 1, a kernel size with its own instance."""
    return problem["stride"] == 1 and problem["kernel"] in UNROLLED


def choose_mapping(problem) -> str:
    """09's pick: "walk" for stride 1 (k = 2, 3, 8) with at least 4 output planes of at least 64
    outputs - enough to reuse, enough threads; else "v5" if its block holds >= 256 threads;
    else "v4" (its z over nc * t fills the block where an output volume is small)."""
    _, _, ot, oh, ow = output_shape(problem)
    if walks(problem) and ot >= 4 and oh * ow >= 64:
        return "walk"
    _, block = v5_geometry(problem)
    return "v5" if math.prod(block) >= 256 else "v4"


_MAPPINGS = {"v4": ("MaxPool3DMappingNCT", v4_geometry), "v5": ("MaxPool3DMappingTHW", v5_geometry),
             "walk": ("MaxPool3DColumnWalk", walk_geometry)}


def _mapped(pick):
    """06-09: the mapping ``pick(problem)`` names, on its grid and block."""

    def launch(module, problem, inputs):
        kernel, geometry = _MAPPINGS[pick(problem)]
        grid, block = geometry(problem)
        module.get_function(_instance(kernel, problem))(grid, block, _args(problem, inputs))
        return inputs["y"]

    return launch


def _model(problem) -> Model:
    """Bytes: x read once and y written once (4 bytes each); operations: k^3 - 1 max per output."""
    n_out = math.prod(output_shape(problem))
    return Model(flops=float(n_out * (problem["kernel"] ** 3 - 1)),
                 bytes=float(4 * (math.prod(problem["shape"]) + n_out)))


def reuse(problem) -> float:
    """How many windows read an input cell, on average over the volume: (k / s)^3 where the
    windows tile it - 1 at s = k (no reuse: nothing for shared memory to keep), 27 for k = 3,
    s = 1. Loads a one-output-per-thread kernel makes per input cell."""
    n_in, n_out = math.prod(problem["shape"]), math.prod(output_shape(problem))
    return n_out * problem["kernel"] ** 3 / n_in


# --------------------------------------------------------------------------------------------
# Library routines
# --------------------------------------------------------------------------------------------

def _torch_run(problem, inputs):
    import cupy
    import torch
    y = torch.nn.functional.max_pool3d(torch.from_dlpack(inputs["x"]), kernel_size=problem["kernel"],
                                       stride=problem["stride"], padding=problem["padding"])
    return cupy.from_dlpack(y)


def _torch_smoke():
    import torch
    torch.nn.functional.max_pool3d(torch.zeros((1, 1, 4, 4, 4), device="cuda"), kernel_size=3,
                                   stride=1, padding=1)


# --------------------------------------------------------------------------------------------
# The chapter
# --------------------------------------------------------------------------------------------

def _instances(kernel: str, ks=(0, *UNROLLED)) -> tuple[str, ...]:
    return tuple(f"{kernel}<{k},{padded}>" for k in ks for padded in ("false", "true"))


_V4, _V5, _WALK = (_instances(name, ks) for name, ks in (
    ("MaxPool3DMappingNCT", (0, *UNROLLED)), ("MaxPool3DMappingTHW", (0, *UNROLLED)),
    ("MaxPool3DColumnWalk", UNROLLED)))

VARIANTS = (
    Variant("01_naive", "one thread per output, full index arithmetic", "beyond the book",
            _one_per_output("MaxPool3DNaive", template=False), _model),
    Variant("02_strength_reduced", "indices by addition, window clamped once", "beyond the book",
            _one_per_output("MaxPool3DStrengthReduced", template=False), _model),
    Variant("03_unrolled", "unrolled per kernel size, register cache", "beyond the book",
            _one_per_output("MaxPool3DUnrolled", template=True, padded_param=False), _model,
            name_expressions=tuple(f"MaxPool3DUnrolled<{k}>" for k in (0, *UNROLLED))),
    Variant("04_no_bounds", "no bounds checks without padding", "beyond the book",
            _one_per_output("MaxPool3DNoBounds", template=True), _model,
            name_expressions=_instances("MaxPool3DNoBounds")),
    Variant("05_shared_memory", "tile in shared memory (the failed attempt)", "beyond the book",
            _shared, _model, name_expressions=tuple(f"MaxPool3DShared<{k}>" for k in (0, *UNROLLED))),
    Variant("06_mapping_nct", "threads over w, h and N*C*t", "beyond the book",
            _mapped(lambda problem: "v4"), _model, name_expressions=_V4),
    Variant("07_mapping_thw", "threads over w, h, t", "beyond the book",
            _mapped(lambda problem: "v5"), _model, name_expressions=_V5),
    Variant("08_column_walk", "stride 1: walk t, reuse plane maxima", "beyond the book",
            _mapped(lambda problem: "walk" if walks(problem) else "v5"), _model,
            name_expressions=_V5 + _WALK),
    Variant("09_per_shape", "mapping picked per shape (v4, v5, walk)", "beyond the book",
            _mapped(choose_mapping), _model, name_expressions=_V4 + _V5 + _WALK),
)

GPU_SHAPE = (16, 32, 64, 64, 64)       # 512 MiB of float32: 10x the L2 of an H100


def _pool(shape, k, s, p=0) -> dict:
    return {"shape": tuple(shape), "kernel": k, "stride": s, "padding": p}


def shape_set(small_thw: int, large_thw: int, small_c: tuple[int, int], large_c: tuple[int, int]):
    """The 25 shapes of the table: each of (k, s) in (2, 2), (2, 1), (3, 3), (3, 1), (8, 8), (8, 1)
    on small T*H*W with small C, small T*H*W with large C, large T*H*W with small C, large with
    large; then kernel 3, stride 2, padding 1 on the largest. ``small_c``/``large_c``: (N, C)."""
    sizes = [(small_c, small_thw), (large_c, small_thw), (small_c, large_thw), (large_c, large_thw)]
    shapes = [_pool((*nc, thw, thw, thw), k, s) for k, s in ((2, 2), (2, 1), (3, 3), (3, 1), (8, 8), (8, 1))
              for nc, thw in sizes]
    return tuple(shapes + [_pool((*large_c, large_thw, large_thw, large_thw), 3, 2, 1)])


# On the GPU: 8^3 and 64^3 volumes, N*C = 2*8 and 1*64 (the largest 64 MiB, past the 50 MB L2);
# on the CPU engine the same 25 in miniature.
SHAPES = shape_set(8, 64, (2, 8), (1, 64))
SHAPES_CPU = shape_set(8, 12, (1, 2), (1, 8))

# Awkward problems every variant must handle: padding on every side, output sizes that round
# down, k not 2, 3 or 8 (the generic path), k = 1, stride between 1 and k, OT = 1.
TEST_PROBLEMS = (
    _pool((1, 1, 1, 1, 1), 1, 1), _pool((1, 1, 2, 2, 2), 2, 2), _pool((1, 1, 3, 5, 7), 3, 1, 1),
    _pool((2, 3, 9, 10, 11), 2, 2, 1), _pool((1, 2, 8, 9, 10), 8, 1), _pool((1, 1, 17, 18, 19), 8, 8, 4),
    _pool((2, 1, 7, 11, 13), 3, 2, 1), _pool((1, 3, 5, 6, 7), 5, 2, 2), _pool((3, 2, 4, 4, 33), 2, 1),
    _pool((1, 2, 20, 9, 70), 3, 1, 1),
)

def _test_cases(backend: str):
    """Every variant on each of TEST_PROBLEMS (and on a GPU the GPU problem, and it with a 3^3
    window at stride 1)."""
    gpu = CHAPTER.problems["gpu"]
    problems = list(TEST_PROBLEMS) + ([gpu, {**gpu, "kernel": 3, "stride": 1}] if backend == "cupy" else [])
    return [(variant, problem) for variant in CHAPTER.variants for problem in problems]


CHAPTER = Chapter(
    name="pooling",
    title="MaxPool3D: an operator lab, step by step (beyond the book)",
    kernel_dir="pooling",
    variants=VARIANTS,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    problems={"gpu": _pool(GPU_SHAPE, 2, 2), "cpu": _pool((2, 3, 16, 16, 16), 3, 1, 1)},
    test_cases=_test_cases,
    shrink=shrink_leading,
    library=(
        Library("torch.max_pool3d", _torch_run, lambda backend: backend == "cupy" and torch_works(_torch_smoke),
                imports=("torch",)),
        Library("numpy (separable)", lambda problem, inputs: reference(problem, inputs),
                lambda backend: backend == "cpu"),
    ),
    describe=lambda p: (f"x {tuple(p['shape'])} float32, kernel {p['kernel']}, stride {p['stride']}, "
                        f"padding {p['padding']}"),
    # `pmpp bench --all-problems` records, beside kernel 2 stride 2: kernel 3 stride 1, and the
    # 25 shapes of SHAPES.
    bench=(BenchSet("k3s1", (_pool(GPU_SHAPE, 3, 1),)), BenchSet("shapes", SHAPES)),
)


def shape_table(backend: str = "auto", variants=None) -> list[dict]:
    """Check and time every variant (or ``variants``) and the library routines on each of the 25
    shapes: :data:`SHAPES` on a GPU, :data:`SHAPES_CPU` on the CPU engine. Result entries."""
    from pmpp import runner
    from pmpp.backends import resolve_backend

    backend = resolve_backend(backend)
    return runner.measure_problems(CHAPTER, SHAPES if backend == "cupy" else SHAPES_CPU,
                                   backend=backend, variants=variants)


def relative_throughput(entries) -> dict[str, dict[str, float]]:
    """{problem: {variant: library time / variant time}}, against the first library routine
    measured on each problem (torch on a GPU, NumPy on the CPU engine): > 1 is faster."""
    table: dict[str, dict[str, float]] = {}
    for problem in dict.fromkeys(e["problem"] for e in entries):
        rows = [e for e in entries if e["problem"] == problem]
        library = [e for e in rows if e["kind"] == "library"]
        if library:
            table[problem] = {e["name"]: library[0]["median_us"] / e["median_us"]
                              for e in rows if e["kind"] == "variant"}
    return table


MAPPING_VARIANTS = ("06_mapping_nct", "07_mapping_thw", "08_column_walk")


def per_shape(entries, problems=SHAPES, *, noisy=None, library: str = "torch.max_pool3d") -> list[dict]:
    """09 against the mappings it chooses from, one row per problem of ``problems`` that
    ``entries`` (the recorded rows of one run) hold: ``pick`` (:func:`choose_mapping`), ``best``
    (the fastest steady one of 06-08), ``vs_best`` (09's time over that one's: 1 or less is "at
    least as fast"), ``vs_library`` (the library's time over 09's: above 1 is faster than the
    library) and ``noisy`` (the names among 06-09 and the library whose rows are noisy). A row
    with a noisy name is no claim: then ``steady`` is False, and ``vs_best``/``vs_library`` are
    None where they would rest on a noisy row. ``noisy`` is the rule (default
    :func:`pmpp.results.noisy`)."""
    if noisy is None:
        from pmpp.results import noisy
    rows = []
    for problem in problems:
        described = CHAPTER.describe(problem)
        by = {e["name"]: e for e in entries if e["problem"] == described}
        if not by:
            continue
        flagged = [n for n in (*MAPPING_VARIANTS, "09_per_shape", library) if n in by and noisy(by[n])]
        steady_mappings = [n for n in MAPPING_VARIANTS if n not in flagged] or list(MAPPING_VARIANTS)
        best = min(steady_mappings, key=lambda n: by[n]["median_us"])
        t09 = by["09_per_shape"]["median_us"]
        mapped_steady = not set(flagged) & {*MAPPING_VARIANTS, "09_per_shape"}
        library_steady = library in by and not set(flagged) & {library, "09_per_shape"}
        rows.append({"problem": described, "pick": choose_mapping(problem), "best": best,
                     "vs_best": t09 / by[best]["median_us"] if mapped_steady else None,
                     "vs_library": by[library]["median_us"] / t09 if library_steady else None,
                     "noisy": flagged, "steady": not flagged})
    return rows
