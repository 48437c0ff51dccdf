"""Running a chapter: check every variant against the NumPy reference, time it, and put it beside
the library routine. The command line (``pmpp run``, ``pmpp bench``) and the notebooks use this."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from .backends import resolve_backend
from .chapters import Chapter, CheckResult, Variant
from .errors import BackendUnavailableError, ExerciseNotImplemented
from .exercises import implemented, require_implemented
from .loader import load

# Repeats per timing: GPU runs are short and noisy, CPU-engine runs are long and only indicative.
# The launch that is checked comes first and warms up too, so one warm-up fewer follows it.
REPEATS = {"cupy": dict(warmup=5, repeat=30), "cpu": dict(warmup=1, repeat=3)}
# `pmpp run` on a GPU: the same 30 repeats, but a variant that takes long (a contended atomic, a
# naive kernel) stops after 0.2 s of them - never fewer than 5 - so that a run over every chapter
# takes seconds. `pmpp bench`, which records the numbers, takes all 30.
QUICK_REPEATS = {"cupy": dict(warmup=2, repeat=30, budget_s=0.2), "cpu": REPEATS["cpu"]}


def load_variant(chapter: Chapter, variant: Variant, *, backend="auto", check=False, path=None,
                 timeout=None, count=False):
    """Load a variant's kernel file — or ``path``, another file standing in for it (a student's).
    ``count=True``: the CPU engine's count build (see :mod:`pmpp.counters`). A variant whose own
    file is an exercise's stub raises :class:`~pmpp.ExerciseNotImplemented`."""
    if path is None:
        require_implemented(chapter, variant)
    arch = variant.too_old_gpu() if resolve_backend(backend) == "cupy" else None
    if arch is not None:
        raise BackendUnavailableError(
            f"{variant.name} needs a GPU of compute capability {variant.min_arch / 10:.1f} or newer "
            f"(sm_{variant.min_arch}); this GPU is {arch / 10:.1f}. Run it on the CPU engine "
            f"(backend='cpu') or choose an earlier variant.")
    return load(path or chapter.kernel_path(variant), backend=backend, defines=variant.defines,
                name_expressions=variant.name_expressions, check=check, timeout=timeout, count=count,
                strict=True)


def precompile(plan: Iterable[tuple[Chapter, Iterable[Variant]]], backend: str, jobs: int | None = None,
               *, force: bool = False) -> int:
    """On a GPU, compile what a run of ``plan`` ((chapter, variants) pairs) needs in parallel
    processes, into CuPy's kernel cache on disk, where the run that follows finds it: every
    variant's kernels, and CuPy's own kernels for each chapter's inputs, reference and checks (one
    variant per chapter and problem is checked at the chapter's smallest awkward size). One NVRTC compile after
    another took most of a first run. Done only when CuPy's cache holds fewer kernels than the
    plan has variants (a first run; ``force``: always). Returns the number of jobs run. A variant
    that fails is left to the run, which reports it."""
    work = to_precompile(plan, backend) if backend == "cupy" else []
    if len(work) < 2 or not (force or _cached_kernels() < len(work)):
        return 0
    from . import chapters
    first_of_problem = {}      # a variant's own problem (another op, dtype, bins) needs other kernels
    for chapter, variant in work:
        problem = chapters.get(chapter).variant(variant).problem
        first_of_problem.setdefault((chapter, repr(sorted(problem.items()))), (chapter, variant))
    checked = [(chapter, variant, True) for chapter, variant in first_of_problem.values()]
    return _compile_in_processes(checked + [(c, v, False) for c, v in work], jobs)


def _cached_kernels() -> int:
    """How many files CuPy's kernel cache holds ($CUPY_CACHE_DIR, default ~/.cupy/kernel_cache)."""
    import os
    from pathlib import Path
    folder = Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")
    return sum(1 for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


def _compile_in_processes(work: list[tuple[str, str, bool]], jobs: int | None) -> int:
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    jobs = max(1, min(jobs or os.cpu_count() or 1, len(work), 16))
    try:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            list(pool.map(_compile_quietly, work))
    except (BrokenProcessPool, RuntimeError, OSError):
        # no processes here (e.g. a script that calls pmpp.cli.main without the
        # `if __name__ == "__main__":` guard that spawning needs): the run compiles as it goes
        return 0
    return len(work)


def to_precompile(plan: Iterable[tuple[Chapter, Iterable[Variant]]], backend: str) -> list[tuple[str, str]]:
    """(chapter, variant) names of the variants in ``plan`` that run on ``backend`` at some size
    (one limited to a block runs at the chapter's awkward sizes)."""
    work = []
    for chapter, variants in plan:
        for variant in variants:
            problem = problem_for(variant, default_problem(chapter, backend))
            if "n" in problem:
                problem["n"] = 1
            if variant.supports(problem, backend):
                work.append((chapter.name, variant.name))
    return work


def _compile_quietly(job: tuple[str, str, bool]) -> None:
    from . import chapters
    chapter = chapters.get(job[0])
    variant = chapter.variant(job[1])
    small = [{**chapter.problems["cpu"], "n": n} for n in chapter.test_sizes[:1]]
    try:
        if job[2] and small and variant.supports(small[0], "cupy"):
            verify(chapter, variant, small[0], backend="cupy")
        else:
            load_variant(chapter, variant, backend="cupy")
    except Exception:      # the run itself reports it, with its message
        pass


def split_stubs(chapter: Chapter, variants: Iterable[Variant]) -> tuple[list[Variant], list[str]]:
    """The variants whose kernels are written, and for each one still a stub (a student release)
    the line to show instead of a result: not a failure, an exercise and its grade command."""
    written, notes = [], []
    for variant in variants:
        try:
            require_implemented(chapter, variant)
            written.append(variant)
        except ExerciseNotImplemented as exc:
            notes.append(_stub_note(variant, exc))
    return written, notes


def _stub_note(variant: Variant, exc: ExerciseNotImplemented) -> str:
    if exc.is_exercise:
        return f"{variant.name}: exercise, not implemented yet - write {exc.path}, then `pmpp grade {exc.exercise}`"
    names = " and ".join(exc.builds_on)
    grade = " and ".join(f"`pmpp grade {name}`" for name in exc.builds_on)
    return (f"{variant.name}: builds on exercise {names}, not implemented yet - it runs once that "
            f"solution is released; {grade} grades your answer")


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
    """Every element equal to the reference, bit for bit (as float64), compared where the output
    is (on a GPU: on the GPU, only the verdict comes back). ``reference``: an array or a number, or
    an object whose ``values`` are the reference array."""
    from . import get_array_module
    xp = get_array_module(output)
    got = output.reshape(-1) if hasattr(output, "reshape") else np.asarray(output).reshape(-1)
    want = xp.asarray(getattr(reference, "values", reference), dtype=np.float64).reshape(-1)
    if got.shape != want.shape:
        return CheckResult(False, float(max(got.size, want.size)), 0.0,
                           f"expected {want.size} elements, got {got.size}")
    differ = got != want                  # float32 or int32 against float64: compared in float64
    wrong = int(xp.count_nonzero(differ))
    if not wrong:
        return CheckResult(True, 0.0, 0.0, "exact")
    first = int(xp.argmax(differ))
    where = f"element {first}: " if want.size > 1 else ""
    return CheckResult(False, float(wrong), 0.0,
                       f"{wrong} of {want.size} elements differ from the exact result; "
                       f"{where}got {float(got[first])!r}, expected {float(want[first])!r}")


def measure(chapter: Chapter, *, backend="auto", problem=None,
            variants: Iterable[str | Variant] | None = None, library=True, seed=None,
            skipped=False, repeats=None, torch=True, progress=None) -> list[dict]:
    """Check and time each variant (and the library routines) on one problem: result entries
    as ``pmpp.results`` stores them. ``variants``: names, or variants themselves (e.g. one
    re-targeted to other inputs); by default all of the chapter's (an empty list: none).

    Inputs are drawn once per distinct problem (fresh random ones on every call; on a GPU, drawn
    on the GPU) and the reference computed once for them, where the inputs are; each run gets its
    own copy, so every variant writes into a freshly poisoned output and none can pass on what an
    earlier one left there. A chapter with exactly summable inputs (sums, scans) is run and judged
    on those, bit for bit: at a GPU's size a rounding tolerance would be wide enough to hide a
    wrong answer (the time does not depend on the values).

    ``skipped=True`` adds a row for each variant that cannot run here (and, with ``torch=False``,
    each PyTorch routine left out because importing PyTorch takes seconds): no time, ``correct``
    None, and ``"skipped"`` saying why (see :func:`why_not`). ``repeats``: :func:`pmpp.bench`'s
    arguments (default :data:`REPEATS` for the backend). ``progress``: an object with
    ``advance(label)`` (see :mod:`pmpp.progress`), told after each row. A row of a variant with
    tunables keeps the configuration it was built with (``"config"``; :mod:`pmpp.tuning`)."""
    backend = resolve_backend(backend)
    cases = _Cases(chapter, array_module(backend), np.random.default_rng(seed))
    judge = _judge(chapter)
    timing_args = dict(repeats or REPEATS[backend])
    base = dict(problem or default_problem(chapter, backend))
    wanted = [chapter.variant(v) if isinstance(v, str) else v
              for v in (chapter.variants if variants is None else variants)]
    chosen = implemented(chapter, wanted) if wanted else []
    entries = []
    for variant in chosen:
        p = problem_for(variant, base)
        reason = why_not(variant, p, backend)
        if reason is not None:
            if skipped:
                entries.append(skipped_entry(variant.name, "variant", chapter.describe(p), reason))
        else:
            module = load_variant(chapter, variant, backend=backend)
            inputs, reference = cases.get(p)
            entries.append(_checked_and_timed(
                variant.name, "variant", chapter.describe(p), variant.model(p), backend, timing_args,
                lambda: variant.launch(module, p, inputs), lambda out: judge(out, reference, p)))
            if variant.tunables:
                entries[-1]["config"] = variant.config()
        _advance(progress, f"{chapter.name}/{variant.name}")
    if library:
        model = chapter.variants[0].model(base)
        for lib in chapter.library:
            if not torch and "torch" in lib.imports:
                if skipped and backend == "cupy":
                    entries.append(skipped_entry(lib.name, "library", chapter.describe(base),
                                                 "PyTorch not imported (seconds); --torch measures it"))
            elif lib.available(backend):
                inputs, reference = cases.get(base)
                entries.append(_checked_and_timed(
                    lib.name, "library", chapter.describe(base), model, backend, timing_args,
                    lambda: lib.run(base, inputs), lambda out: judge(out, reference, base)))
            elif skipped and (reason := lib.why_not(backend)):
                entries.append(skipped_entry(lib.name, "library", chapter.describe(base), reason))
            _advance(progress, f"{chapter.name}/{lib.name}")
    return entries


REMEASURES = 2     # times a GPU row whose repeats disagree (Timing.noisy) is timed again


def _checked_and_timed(name, kind, problem, model, backend, timing_args, run, judge) -> dict:
    """Run once and judge the output, then time: the judged run was the first warm-up. On a GPU a
    noisy timing is taken again, up to :data:`REMEASURES` times, and the steadiest one kept; a row
    still noisy after that says so (``"noisy": true``), and no claim may rest on it."""
    from .results import make_entry
    from .timing import bench

    correct = bool(judge(run()))
    warmup = max(0, timing_args.get("warmup", 0) - 1)
    timing = bench(run, backend=backend, **{**timing_args, "warmup": warmup})
    again = 0
    while timing.noisy and backend == "cupy" and again < REMEASURES:
        again += 1
        retry = bench(run, backend=backend, **timing_args)
        timing = min(timing, retry, key=lambda t: t.median_us / t.min_us)
    entry = make_entry(name, kind, problem, timing, model, correct)
    if again:
        entry["remeasured"] = again
    return entry


def _advance(progress, label: str) -> None:
    if progress is not None:
        progress.advance(label)


def why_not(variant: Variant, problem: Mapping[str, Any], backend: str) -> str | None:
    """Why ``variant`` cannot run ``problem`` on ``backend`` (None if it can): the words of a
    table's row. The same test as :meth:`Variant.supports`, reasons added."""
    if variant.supports(problem, backend):
        return None
    if variant.gpu_only and backend != "cupy":
        needs = f"; needs sm_{variant.min_arch} or newer" if variant.min_arch else ""
        return f"GPU only (tensor cores: the CPU engine cannot run them{needs})"
    if backend == "cupy" and variant.too_old_gpu() is not None:
        return f"needs sm_{variant.min_arch}; this GPU is sm_{variant.too_old_gpu()}"
    if variant.max_n is not None and problem.get("n", 0) > variant.max_n:
        return f"handles at most n={variant.max_n} elements, this problem has n={problem.get('n')}"
    if backend == "cupy" and variant.supports(problem, "cpu"):
        return "CPU engine only (a teaching example that would corrupt the GPU context)"
    return "does not take this problem"


def skipped_entry(name: str, kind: str, problem: str, reason: str) -> dict:
    """A row for what was not run: the fields of :func:`pmpp.results.make_entry`, times None,
    ``correct`` None, and ``"skipped"``: why."""
    return {"name": name, "kind": kind, "problem": problem, "median_us": None, "min_us": None,
            "max_us": None, "gbps": None, "gflops": None, "intensity": None, "correct": None,
            "clock": None, "skipped": reason}


def timed(entries: Iterable[dict]) -> list[dict]:
    """The entries that were run (what a results file, a plot or a roofline takes)."""
    return [e for e in entries if not e.get("skipped")]


def measure_problems(chapter: Chapter, problems: Iterable[Mapping[str, Any]], *, backend="auto",
                     variants: Iterable[str | Variant] | None = None, report=None, **options) -> list[dict]:
    """:func:`measure` on each problem in turn (a sweep, a table of shapes, a benchmark set): all
    the entries, each naming its problem. ``report(problem, entries)``, if given, is called after
    each problem (the command line prints a table); ``options`` go to :func:`measure`."""
    found = []
    for problem in problems:
        entries = measure(chapter, backend=backend, problem=dict(problem), variants=variants, **options)
        if report is not None:
            report(problem, entries)
        found += entries
    return found


def _judge(chapter: Chapter):
    """How :func:`measure` judges an output: exactly on exactly summable inputs, else the
    chapter's check."""
    if chapter.make_exact_inputs is not None:
        return lambda output, reference, problem: exact_check(output, reference)
    return chapter.check


class _Cases:
    """Inputs and reference per distinct problem, made once (exactly summable ones where the
    chapter has them); :meth:`get` hands out a copy."""

    def __init__(self, chapter: Chapter, xp, rng):
        self.chapter, self.xp, self.rng = chapter, xp, rng
        self.made: dict[str, tuple[Mapping[str, Any], Any]] = {}

    def get(self, problem: Mapping[str, Any]):
        key = repr(sorted(problem.items()))
        if key not in self.made:
            make = self.chapter.make_exact_inputs or self.chapter.make_inputs
            inputs = make(problem, self.xp, self.rng)
            self.made[key] = (inputs, self.chapter.reference(problem, inputs))
        inputs, reference = self.made[key]
        return {k: _copy(v) for k, v in inputs.items()}, reference


def _copy(value):
    return value.copy() if hasattr(value, "copy") and hasattr(value, "shape") else value


def format_table(entries: list[dict]) -> str:
    """A plain-text table of entries, one row each; a row that was not run says why. Entries with a
    predicted GPU time (``predicted_us``, :func:`pmpp.profiling.predict.add_predictions`) get a
    column for it and for the resource that bounds it."""
    names = [e["name"] + (" [library]" if e["kind"] == "library" else "") for e in entries]
    w = max([28, *map(len, names)])
    gpu = next((e["predicted_gpu"] for e in entries if e.get("predicted_gpu")), None)
    predicted = f" {'pred. ' + gpu + ' us':>15} {'bound by':<13}" if gpu else ""
    header = f"{'variant':<{w}} {'ok':<4} {'median us':>11} {'GB/s':>9} {'GFLOP/s':>9} {'OP/B':>6}" + predicted
    rows = [header, "-" * len(header)]
    for name, e in zip(names, entries):
        if e.get("skipped"):
            rows.append(f"{name:<{w}} {'-':<4} not run: {e['skipped']}")
            continue
        row = (f"{name:<{w}} {'yes' if e['correct'] else 'NO':<4} {e['median_us']:>11.1f} "
               f"{_number(e['gbps'], 9, 1)} {_number(e['gflops'], 9, 2)} {_number(e['intensity'], 6, 2)}")
        if gpu:
            row += f" {_number(e.get('predicted_us'), 15, 1)} {e.get('predicted_bound', '-'):<13}"
        rows.append(row)
    return "\n".join(rows)


def _number(value, width: int, decimals: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{decimals}f}"
