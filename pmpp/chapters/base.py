"""What a chapter is: its problem, its variants, and the model each variant is measured against.

A chapter module (``pmpp/chapters/reduction.py``, ...) defines, in one place:

* how to make inputs (``make_inputs``) and the NumPy reference (``reference``);
* how each variant is launched (``Variant.launch``) and its flop/byte model (``Variant.model``);
* how an output is judged against the reference (``check``);
* the library routines that are the bar to beat (``library``).

Everything else — running all variants, timing, tables, plots, results files — is generic and
lives in ``pmpp.runner``, ``pmpp.timing``, ``pmpp.plots`` and ``pmpp.results``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence


@dataclass(frozen=True)
class Model:
    """The analytical cost of one run: floating-point (or integer) operations and the bytes
    that must move through device memory. ``intensity`` is OP/B, as the book quotes it."""

    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")


@dataclass(frozen=True)
class Variant:
    """One kernel file of a chapter, and how to run it.

    ``launch(module, problem, inputs)`` loads nothing itself: it gets the loaded module, launches
    the kernel(s) — as many passes as the algorithm needs — and returns the output array.
    ``model(problem)`` returns the :class:`Model` of one run.
    """

    name: str                      # file stem, e.g. "01_simple"
    title: str                     # what a student sees, e.g. "10.3 simple (divergent)"
    source: str                    # "PMPP 10.3", "Harris reduce0", "beyond the book"
    launch: Callable[..., Any]
    model: Callable[[Mapping[str, Any]], Model]
    defines: Mapping[str, Any] = field(default_factory=dict)
    name_expressions: Sequence[str] = ()
    racy: bool = False             # a teaching example of a bug: never the "best" variant
    max_n: int | None = None       # largest problem the variant supports, if limited
    problem: Mapping[str, Any] = field(default_factory=dict)  # overrides, e.g. {"op": "max"}
    gpu_only: bool = False         # uses what the CPU engine cannot run (e.g. tensor-core wmma/mma)
    min_arch: int = 0              # the GPU it needs, as in sm_90: 90 (e.g. bulk copies); 0 for any
    file: str = ""                 # the kernel file's stem where it is not ``name`` (see configured)
    # The compile-time parameters ``pmpp tune`` may set, each with its legal values (the default,
    # in ``defines``, among them), and which combinations are legal (None: all of them).
    tunables: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    legal: Callable[[Mapping[str, Any]], bool] | None = None

    def configured(self, **defines: Any) -> "Variant":
        """This variant with some of its compile-time parameters set otherwise, named for them
        (``05_coarsened COARSE_FACTOR=8``): what a parameter sweep times. Same kernel file."""
        setting = " ".join(f"{k}={v}" for k, v in defines.items())
        return replace(self.with_defines(**defines), name=f"{self.name} {setting}")

    def with_defines(self, **defines: Any) -> "Variant":
        """This variant, under its own name, built with some compile-time parameters set otherwise
        (a tuned configuration). Same kernel file."""
        if unknown := sorted(set(defines) - set(self.defines)):
            raise KeyError(f"{self.name} has no compile-time parameter {', '.join(unknown)}; "
                           f"its parameters are {', '.join(self.defines) or 'none'}")
        return replace(self, file=self.file or self.name, defines={**self.defines, **defines})

    def config(self) -> dict:
        """The values of its tunable parameters it is built with."""
        return {k: self.defines[k] for k in self.tunables}

    def supports(self, problem: Mapping[str, Any], backend: str = "cupy") -> bool:
        if self.gpu_only and backend != "cupy":
            return False
        if backend == "cupy" and self.too_old_gpu() is not None:
            return False
        return self.max_n is None or problem.get("n", 0) <= self.max_n

    def too_old_gpu(self) -> int | None:
        """The current GPU's sm_XY number if the variant needs a newer one (``min_arch``), else None."""
        arch = current_arch() if self.min_arch else None
        return arch if arch is not None and arch < self.min_arch else None


def current_arch() -> int | None:
    """The current GPU as in sm_XY (90 for compute capability 9.0); None without one (the GPU
    backend says what is missing when it is used)."""
    try:
        import cupy
        return int(cupy.cuda.Device().compute_capability)
    except (ImportError, RuntimeError):
        return None


@dataclass(frozen=True)
class Library:
    """A library routine that does the same job: the bar to beat."""

    name: str                      # e.g. "cupy.sum (CUB)"
    run: Callable[[Mapping[str, Any], Mapping[str, Any]], Any]   # run(problem, inputs) -> output
    available: Callable[[str], bool] = lambda backend: True      # available(backend) -> usable?
    # Modules that run() and available() import which take seconds to import ("torch"): `pmpp run`
    # leaves such a routine out unless asked (a row says so), `pmpp bench` measures it.
    imports: Sequence[str] = ()
    # why_not(backend) -> why it cannot run where it is meant to (a row of `pmpp run` says so), or
    # None: e.g. CUB's routines on a GPU machine without nvcc.
    why_not: Callable[[str], str | None] = lambda backend: None


@dataclass(frozen=True)
class BenchSet:
    """Problems that ``pmpp bench`` measures beyond the chapter's default one (another dtype,
    another shape, a table of shapes), recorded under ``"<chapter>:<key>"`` in a results file so
    that the chapter's own key holds the default problem only."""

    key: str                                       # e.g. "float16", "sweep"
    problems: Sequence[Mapping[str, Any]]
    variants: Sequence[Any] | None = None          # names or Variants; None: all that take it


def shrink_n(problem: Mapping[str, Any], factor: float) -> dict:
    """``problem`` with ``n`` (its length) ``factor`` times smaller."""
    return {**problem, "n": max(1, round(problem["n"] / factor))}


def shrink_leading(problem: Mapping[str, Any], factor: float) -> dict:
    """``problem`` with the product of the first two dimensions of ``shape`` (batch and channels,
    which no kernel's tiling depends on) ``factor`` times smaller, the other dimensions kept."""
    n, c, *rest = problem["shape"]
    return {**problem, "shape": (1, max(1, round(n * c / factor)), *rest)}


@dataclass(frozen=True)
class Chapter:
    name: str                      # "reduction"
    title: str                     # "Reduction (PMPP ch. 10)"
    kernel_dir: str                # folder under kernels/, e.g. "reduction"
    variants: Sequence[Variant]
    make_inputs: Callable[..., Mapping[str, Any]]      # make_inputs(problem, xp, rng) -> inputs
    reference: Callable[[Mapping[str, Any], Mapping[str, Any]], Any]  # (problem, inputs) -> ref (NumPy)
    check: Callable[..., "CheckResult"]  # check(output, ref, problem) -> CheckResult
    problems: Mapping[str, Mapping[str, Any]]          # {"gpu": {...}, "cpu": {...}} default sizes
    test_sizes: Sequence[int] = ()                     # awkward sizes every variant must handle
    library: Sequence[Library] = ()
    describe: Callable[[Mapping[str, Any]], str] = lambda p: ", ".join(f"{k}={v}" for k, v in p.items())
    # Inputs on which every correct variant must match the reference EXACTLY (e.g. integer-valued
    # floats for a sum): catches a dropped or doubled element that a rounding tolerance could hide.
    make_exact_inputs: Callable[..., Mapping[str, Any]] | None = None
    bench: Sequence[BenchSet] = ()                     # what `pmpp bench` records besides "gpu"
    # The every-variant test matrix (see cases): the chapter's own (variant, problem) pairs for a
    # backend, where test_sizes at the CPU problem are not all there is (dtypes, kinds, shapes).
    test_cases: Callable[[str], Iterable[tuple[Variant, Mapping[str, Any]]]] | None = None
    # The variants that run the largest of test_sizes on the CPU engine (None: every one); the
    # others take minutes there, and share their launch shape with one of these.
    cpu_largest: Collection[str] | None = None
    # shrink(problem, factor): the problem with about 1/factor of its work and its other parameters
    # (filter, tile-relevant shape) kept: what pmpp.predict counts on the CPU engine to scale up.
    shrink: Callable[[Mapping[str, Any], float], dict] = shrink_n

    def cases(self, backend: str) -> list[tuple[Variant, dict]]:
        """The every-variant test matrix: (variant, problem) pairs, each of which must match the
        reference on fresh random inputs on ``backend`` ("cpu" or "cupy"). The chapter's own
        ``test_cases``, else every variant that is not a teaching example of a bug at the CPU
        problem with each of ``test_sizes``, and on a GPU at the GPU problem too. Pairs the backend
        cannot run are left out: a variant only a GPU runs, a problem longer than a variant takes,
        and on the CPU engine the largest test size for variants not in ``cpu_largest``."""
        if self.test_cases is not None:
            pairs = self.test_cases(backend)
        else:
            sizes = list(self.test_sizes) + ([self.problems["gpu"]["n"]] if backend == "cupy" else [])
            pairs = ((v, {**self.problems["cpu"], "n": n}) for v in self.variants if not v.racy for n in sizes)
        largest = max(self.test_sizes, default=None)
        return [(v, {**p, **v.problem}) for v, p in pairs
                if v.supports({**p, **v.problem}, backend)
                and not (backend == "cpu" and self.cpu_largest is not None and p.get("n") == largest
                         and v.name not in self.cpu_largest)]

    def bench_sets(self) -> list[tuple[str, BenchSet]]:
        """(results key, set) for everything ``pmpp bench`` records, the default problem first."""
        sets = [(self.name, BenchSet("", (self.problems["gpu"],)))]
        return sets + [(f"{self.name}:{s.key}", s) for s in self.bench]

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name or v.name.split("_", 1)[0] == name:
                return v
        names = ", ".join(v.name for v in self.variants)
        raise KeyError(f"chapter {self.name!r} has no variant {name!r}; its variants are: {names}")

    def kernel_path(self, variant: Variant) -> str:
        return f"{self.kernel_dir}/{variant.file or variant.name}.cu"


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    error: float                   # e.g. relative error, or number of wrong elements
    tolerance: float
    detail: str = ""

    def __bool__(self) -> bool:
        return self.ok
