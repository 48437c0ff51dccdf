"""Running a chapter: check every variant against the NumPy reference, time it, and put it beside
the library routine. The command line (``pmpp run``, ``pmpp bench``) and the notebooks use this."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from .backends import resolve_backend
from .chapters import Chapter, CheckResult, Variant
from .loader import load

# Repeats per timing: GPU runs are short and noisy, CPU-engine runs are long and only indicative.
REPEATS = {"cupy": dict(warmup=5, repeat=30), "cpu": dict(warmup=1, repeat=3)}


def load_variant(chapter: Chapter, variant: Variant, *, backend="auto", check=False, path=None,
                 timeout=None):
    """Load a variant's kernel file — or ``path``, another file standing in for it (a student's)."""
    return load(path or chapter.kernel_path(variant), backend=backend, defines=variant.defines,
                name_expressions=variant.name_expressions, check=check, timeout=timeout)


def array_module(backend: str):
    if backend == "cupy":
        import cupy
        return cupy
    return np


def default_problem(chapter: Chapter, backend: str) -> dict:
    return dict(chapter.problems["gpu" if backend == "cupy" else "cpu"])


def problem_for(variant: Variant, problem: Mapping[str, Any]) -> dict:
    return {**problem, **variant.problem}


def verify(chapter: Chapter, variant: Variant, problem: Mapping[str, Any] | None = None, *,
           backend="auto", seed=None, check=False, path=None, timeout=None,
           exact=False) -> CheckResult:
    """Run one variant once on fresh random inputs and judge it against the reference.
    ``exact=True`` uses the chapter's exactly-summable inputs and demands bit-for-bit equality."""
    backend = "cpu" if check else resolve_backend(backend)
    module = load_variant(chapter, variant, backend=backend, check=check, path=path, timeout=timeout)
    problem = problem_for(variant, problem or default_problem(chapter, backend))
    make = chapter.make_exact_inputs if exact else chapter.make_inputs
    inputs = make(problem, array_module(backend), np.random.default_rng(seed))
    output = variant.launch(module, problem, inputs)
    reference = chapter.reference(problem, inputs)
    return exact_check(output, reference) if exact else chapter.check(output, reference, problem)


def exact_check(output, reference) -> CheckResult:
    """Every element equal to the reference, bit for bit (as float64)."""
    from . import asnumpy
    got = np.asarray(asnumpy(output), np.float64).reshape(-1)
    want = np.asarray(reference, np.float64).reshape(-1)
    wrong = int(np.sum(got != want)) if got.shape == want.shape else max(got.size, want.size)
    detail = "exact" if not wrong else f"{wrong} of {want.size} elements differ from the exact result"
    return CheckResult(wrong == 0, float(wrong), 0.0, detail)


def measure(chapter: Chapter, *, backend="auto", problem=None, variants: Iterable[str] | None = None,
            library=True, seed=None) -> list[dict]:
    """Check and time each variant (and the library routines) on one problem: result entries
    as ``pmpp.results`` stores them."""
    from .results import make_entry
    from .timing import bench

    backend = resolve_backend(backend)
    xp = array_module(backend)
    base = dict(problem or default_problem(chapter, backend))
    rng = np.random.default_rng(seed)
    chosen = [chapter.variant(v) for v in variants] if variants else list(chapter.variants)
    entries = []
    for variant in chosen:
        p = problem_for(variant, base)
        if not variant.supports(p, backend):
            continue
        module = load_variant(chapter, variant, backend=backend)
        inputs = chapter.make_inputs(p, xp, rng)
        result = chapter.check(variant.launch(module, p, inputs), chapter.reference(p, inputs), p)
        timing = bench(lambda: variant.launch(module, p, inputs), backend=backend, **REPEATS[backend])
        entries.append(make_entry(variant.name, "variant", chapter.describe(p), timing,
                                  variant.model(p), bool(result)))
    if library:
        entries += _measure_library(chapter, base, xp, rng, backend)
    return entries


def _measure_library(chapter, problem, xp, rng, backend) -> list[dict]:
    from .results import make_entry
    from .timing import bench

    model = chapter.variants[0].model(problem)
    entries = []
    for lib in chapter.library:
        if not lib.available(backend):
            continue
        inputs = chapter.make_inputs(problem, xp, rng)
        result = chapter.check(lib.run(problem, inputs), chapter.reference(problem, inputs), problem)
        timing = bench(lambda: lib.run(problem, inputs), backend=backend, **REPEATS[backend])
        entries.append(make_entry(lib.name, "library", chapter.describe(problem), timing, model, bool(result)))
    return entries


def format_table(entries: list[dict]) -> str:
    """A plain-text table of entries, one row each."""
    header = f"{'variant':<28} {'ok':<4} {'median us':>11} {'GB/s':>9} {'GFLOP/s':>9} {'OP/B':>6}"
    rows = [header, "-" * len(header)]
    for e in entries:
        name = e["name"] + (" [library]" if e["kind"] == "library" else "")
        rows.append(f"{name:<28} {'yes' if e['correct'] else 'NO':<4} {e['median_us']:>11.1f} "
                    f"{e['gbps']:>9.1f} {e['gflops']:>9.2f} {e['intensity']:>6.2f}")
    return "\n".join(rows)
