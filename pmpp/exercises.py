"""Exercises: the next variant, left for the student — releasing it and grading it.

An exercise is a chapter variant whose kernel file marks its solution, as nbgrader does::

    // BEGIN SOLUTION
    ...the instructor's code...
    // END SOLUTION

Notebook code cells mark theirs with ``### BEGIN SOLUTION`` / ``### END SOLUTION`` and hide
tests between ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``.

* :func:`release` writes the student tree: solutions replaced by stubs that compile and fail
  grading with "not implemented yet", notebook outputs stripped, hidden tests and the test suite
  removed. Releasing twice gives identical files.
* :func:`grade` checks a submission against the chapter's reference on fresh random inputs and
  awkward sizes, on the CPU engine with its race, bounds and barrier checks and a timeout, and on
  the GPU when there is one (with its time beside the reference solution's). Every failure is a
  verdict with a reason, never a traceback.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import chapters
from .backends import gpu_available
from .errors import (CompileError, KernelCheckError, KernelCrashError, KernelTimeoutError,
                     PmppError)
from .source import kernels_dir, resolve

BEGIN, END = "// BEGIN SOLUTION", "// END SOLUTION"
STUB_MARK = "pmpp: not implemented yet"
_CU_SOLUTION = re.compile(r"^([ \t]*)// BEGIN SOLUTION[^\n]*\n.*?^[ \t]*// END SOLUTION[^\n]*\n",
                          re.MULTILINE | re.DOTALL)
_NB_SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION[^\n]*\n.*?^[ \t]*### END SOLUTION[^\n]*(\n|$)",
                          re.MULTILINE | re.DOTALL)
_NB_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*(\n|$)",
                        re.MULTILINE | re.DOTALL)
DEFAULT_TIMEOUT = 30.0


# ----------------------------------------------------------------------------------------------
# Which exercises there are

@dataclass(frozen=True)
class Exercise:
    name: str          # "reduction/05_coarsened"
    chapter: str
    variant: str

    @property
    def path(self) -> Path:
        return kernels_dir() / self.chapter / f"{self.variant}.cu"


def exercises() -> list[Exercise]:
    """Every variant whose kernel file marks a solution (in the instructor tree), or still carries
    a stub (in a student tree)."""
    found = []
    for name in chapters.names():
        chapter = chapters.get(name)
        for variant in chapter.variants:
            path = kernels_dir() / chapter.kernel_path(variant)
            text = path.read_text() if path.exists() else ""
            if BEGIN in text or STUB_MARK in text:
                found.append(Exercise(f"{chapter.name}/{variant.name}", chapter.name, variant.name))
    return found


def find(name: str) -> Exercise:
    """``"reduction/05_coarsened"`` or ``"reduction/05"``."""
    chapter_name, _, variant_name = name.partition("/")
    for exercise in exercises():
        if exercise.chapter == chapter_name and variant_name in (exercise.variant,
                                                                 exercise.variant.split("_", 1)[0]):
            return exercise
    listing = ", ".join(e.name for e in exercises()) or "none"
    raise KeyError(f"no exercise {name!r}; the exercises are: {listing}")


# ----------------------------------------------------------------------------------------------
# Student release

def stub_kernel(text: str, exercise: str) -> str:
    """Replace each solution region of a .cu file by a stub that compiles and does nothing."""
    def stub(match):
        pad = match.group(1)
        return (f"{pad}// EXERCISE {exercise}: write this part. Until you do, grading says\n"
                f"{pad}// \"not implemented yet\". Check your work with: pmpp grade {exercise}\n"
                f"{pad}// {STUB_MARK}\n")
    return _CU_SOLUTION.sub(stub, text)


def stub_cell(source: str) -> str:
    """nbgrader's convention: solutions become ``raise NotImplementedError()``; hidden tests go."""
    source = _NB_HIDDEN.sub("", source)
    return _NB_SOLUTION.sub(lambda m: f"{m.group(1)}# YOUR CODE HERE\n{m.group(1)}raise NotImplementedError()\n",
                            source).rstrip("\n")


def student_notebook(text: str) -> str:
    nb = json.loads(text)
    for cell in nb.get("cells", []):
        cell.get("metadata", {}).pop("execution", None)
        if cell.get("cell_type") == "code":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = stub_cell(source)
            cell["outputs"] = []
            cell["execution_count"] = None
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


# What an instructor keeps to themselves: the test suite (it tests the solutions) and CI.
_NOT_RELEASED = ("tests/", ".ci/", ".git/")


def release(student_dir, source_dir=None) -> list[Path]:
    """Write the student version of the workbook into ``student_dir``; return the files written."""
    source = Path(source_dir) if source_dir else kernels_dir().parent
    target = Path(student_dir).resolve()
    if target == source.resolve() or source.resolve() in target.parents:
        raise ValueError(f"the student tree {target} must be outside the instructor tree {source}")
    if target.exists() and any(target.iterdir()) and not (target / ".pmpp-release").exists():
        raise ValueError(f"{target} is not empty and is not an earlier student release; "
                         "choose an empty folder")
    if target.exists():
        shutil.rmtree(target)
    written = []
    for rel in _tracked_files(source):
        if rel.startswith(_NOT_RELEASED):
            continue
        text_or_bytes = _student_version(source / rel, rel)
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        (out.write_text if isinstance(text_or_bytes, str) else out.write_bytes)(text_or_bytes)
        written.append(out)
    (target / ".pmpp-release").write_text("student release of the pmpp workbook\n")
    return written


def _student_version(path: Path, rel: str):
    if rel.endswith(".cu"):
        text = path.read_text()
        return stub_kernel(text, _exercise_name(rel)) if BEGIN in text else text
    if rel.endswith(".ipynb"):
        return student_notebook(path.read_text())
    return path.read_bytes()


def _exercise_name(rel: str) -> str:
    parts = Path(rel).with_suffix("").parts            # ("kernels", "reduction", "05_coarsened")
    return "/".join(parts[-2:])


def _tracked_files(root: Path) -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
        files = [f for f in out.stdout.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    return sorted(f for f in files if (root / f).is_file() and "__pycache__" not in f)


# ----------------------------------------------------------------------------------------------
# Grading

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
                                      check=False, backend="cupy")):
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
