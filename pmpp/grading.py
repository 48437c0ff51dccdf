"""Grading: a submission checked against the chapter's reference.

:func:`grade` checks a submission on fresh random inputs and awkward sizes, on the CPU engine with
its race, bounds and barrier checks and a timeout, and on the GPU when there is one (with its time
beside the reference solution's). Every failure is a verdict with a reason, never a traceback.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import chapters
from .backends import gpu_available
from .errors import (CompileError, KernelCheckError, KernelCrashError, KernelTimeoutError,
                     PmppError)
from .exercises import STUB_MARK, find
from .source import resolve

DEFAULT_TIMEOUT = 30.0


@dataclass
class Check:
    name: str
    passed: bool
    reason: str = ""


@dataclass
class GradeReport:
    exercise: str
    submission: str
    checks: list = field(default_factory=list)
    gpu_time_us: float | None = None
    reference_time_us: float | None = None

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "passed": self.passed}, indent=2)

    def __str__(self) -> str:
        lines = [f"{self.exercise}: {'PASS' if self.passed else 'FAIL'} ({self.submission})"]
        for c in self.checks:
            lines.append(f"  [{'pass' if c.passed else 'FAIL'}] {c.name}" + (f": {c.reason}" if c.reason else ""))
        if self.gpu_time_us is not None:
            ref = f", reference solution {self.reference_time_us:.1f} us" if self.reference_time_us else ""
            lines.append(f"  GPU time {self.gpu_time_us:.1f} us{ref}")
        return "\n".join(lines)


def grade(exercise: str, path=None, *, timeout: float = DEFAULT_TIMEOUT, seed=None) -> GradeReport:
    """Grade a submission (default: the exercise's own kernel file) and return the report."""
    ex = find(exercise)
    submission = Path(path) if path else ex.path
    report = GradeReport(ex.name, str(submission))
    chapter = chapters.get(ex.chapter)
    variant = chapter.variant(ex.variant)
    try:
        text = resolve(submission).read_text()
    except (OSError, FileNotFoundError) as exc:
        report.checks.append(Check("submission file", False, str(exc)))
        return report
    stubbed = STUB_MARK in text
    if not _run_check(report, "compiles", lambda: _compile(chapter, variant, submission, timeout)):
        return report
    for n in chapter.test_sizes or (None,):       # a chapter without sizes: its CPU problem
        problem = {**chapter.problems["cpu"], **({} if n is None else {"n": n})}
        n = chapter.describe(problem) if n is None else n
        _run_check(report, f"correct at n={n} (CPU engine: races, bounds, barriers checked)",
                   lambda: _verify(chapter, variant, problem, submission, timeout, seed, check=True),
                   stubbed)
        if chapter.make_exact_inputs is not None:
            _run_check(report, f"exact at n={n} on inputs every correct order sums exactly",
                       lambda: _verify(chapter, variant, problem, submission, timeout, seed,
                                       check=False, exact=True), stubbed)
    if gpu_available() and report.passed:
        _grade_on_gpu(report, chapter, variant, submission, ex, seed)
    return report


def _compile(chapter, variant, submission, timeout):
    from .runner import load_variant
    load_variant(chapter, variant, backend="cpu", check=True, path=submission, timeout=timeout)
    return ""


def _verify(chapter, variant, problem, submission, timeout, seed, *, check, backend="cpu",
            exact=False):
    from .runner import verify
    result = verify(chapter, variant, problem, backend=backend, check=check, path=submission,
                    timeout=timeout, seed=seed, exact=exact)
    if not result.ok:
        raise AssertionError(f"wrong result: {result.detail or result.error}")
    return ""


def _run_check(report, name, action, stubbed=False) -> bool:
    """Run one check; record pass, or fail with a reason — whatever goes wrong."""
    try:
        report.checks.append(Check(name, True, action() or ""))
        return True
    except CompileError as exc:
        reason = f"does not compile: {str(exc).splitlines()[0]}"
    except KernelTimeoutError as exc:
        reason = f"did not finish in time (hangs?): {exc}"
    except KernelCrashError as exc:
        reason = f"crashed: {exc}"
    except KernelCheckError as exc:
        reason = f"{type(exc).__name__}: {exc}"
    except AssertionError as exc:
        reason = str(exc)
    except (PmppError, TypeError, ValueError, KeyError, OSError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    if stubbed:
        reason = f"not implemented yet (the stub is still in place): {reason}"
    report.checks.append(Check(name, False, reason))
    return False


def _grade_on_gpu(report, chapter, variant, submission, ex, seed):
    from .runner import default_problem, load_variant, problem_for
    from .timing import bench
    problem = problem_for(variant, default_problem(chapter, "cupy"))
    if not _run_check(report, f"correct on the GPU ({chapter.describe(problem)})",
                      lambda: _verify(chapter, variant, problem, submission, None, seed,
                                      check=False, backend="cupy",
                                      exact=chapter.make_exact_inputs is not None)):
        return
    import cupy
    import numpy as np
    inputs = chapter.make_inputs(problem, cupy, np.random.default_rng(seed))

    def time_of(path):
        module = load_variant(chapter, variant, backend="cupy", path=path)
        return bench(lambda: variant.launch(module, problem, inputs), backend="cupy").median_us

    report.gpu_time_us = time_of(submission)
    reference = ex.path.read_text()
    if STUB_MARK not in reference and Path(submission).resolve() != ex.path.resolve():
        report.reference_time_us = time_of(ex.path)


def grade_main(exercise: str, path, json_out=None, timeout=DEFAULT_TIMEOUT) -> int:
    """The ``pmpp grade`` command: print the verdict, write JSON if asked; 0 if it passed."""
    report = grade(exercise, path, timeout=timeout)
    print(report)
    if json_out == "-":
        print(report.to_json())
    elif json_out:
        Path(json_out).write_text(report.to_json() + "\n")
    return 0 if report.passed else 1
