"""Exercises: the next variant, left for the student — releasing it and grading it.

An exercise is a chapter variant whose kernel file marks its solution, as nbgrader does::

    // BEGIN SOLUTION
    ...the instructor's code...
    // END SOLUTION

Notebook code cells mark theirs with ``### BEGIN SOLUTION`` / ``### END SOLUTION`` and hide
tests between ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``.

* The notebooks' exercise cells carry nbgrader's cell metadata, made from the markers by
  :func:`nbgrader_metadata` (a solution cell holds ``### BEGIN SOLUTION``; a test cell's first line
  is ``# tests: N points``), so nbgrader's ``generate_assignment`` and ``autograde`` work on them.
* :func:`release` writes the student tree: solutions replaced by stubs that compile and fail
  grading with "not implemented yet", notebook outputs stripped, hidden tests and the test suite
  removed. Releasing twice gives identical files.
* :func:`grade` checks a submission against the chapter's reference on fresh random inputs and
  awkward sizes, on the CPU engine with its race, bounds and barrier checks and a timeout, and on
  the GPU when there is one (with its time beside the reference solution's). Every failure is a
  verdict with a reason, never a traceback.
"""
from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import chapters
from .backends import gpu_available
from .errors import (CompileError, ExerciseNotImplemented, KernelCheckError, KernelCrashError,
                     KernelTimeoutError, PmppError)
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


def is_stub(path) -> bool:
    """Whether a kernel file still holds an exercise's stub (as in a student release)."""
    path = Path(path)
    return path.is_file() and STUB_MARK in path.read_text()


def require_implemented(chapter, variant) -> None:
    """Raise :class:`ExerciseNotImplemented` if the variant's kernel file is still a stub."""
    path = kernels_dir() / chapter.kernel_path(variant)
    if is_stub(path):
        raise ExerciseNotImplemented(f"{chapter.name}/{variant.name}",
                                     f"kernels/{chapter.kernel_path(variant)}")


def implemented(chapter, variants=None) -> list:
    """The chapter's variants (or ``variants``) whose kernels are written; for each exercise still
    stubbed, print what to do instead. Loops over "every variant" use this, so that a notebook
    runs top to bottom in a student release."""
    kept = []
    for variant in variants or chapter.variants:
        try:
            require_implemented(chapter, variant)
            kept.append(variant)
        except ExerciseNotImplemented as exc:
            print(exc)
    return kept


@contextlib.contextmanager
def skip_if_not_implemented():
    """Run a block that needs an exercise's kernel; if that kernel is still a stub, print what to
    do and skip the rest of the block instead of failing::

        with exercises.skip_if_not_implemented():
            assert run_and_check("05_coarsened").ok
    """
    try:
        yield
    except ExerciseNotImplemented as exc:
        print(exc)


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


_TESTS_LINE = re.compile(r"#\s*tests:\s*(\d+)\s*points?\b")


def nbgrader_metadata(nb: dict) -> dict:
    """Give each code cell the nbgrader metadata its markers call for, in place; return ``nb``.

    * a cell with ``### BEGIN SOLUTION``: an autograded answer (``solution``);
    * a cell whose first line is ``# tests: N points``: autograder tests worth N points (``grade``,
      ``locked``), hidden tests allowed;
    * any other cell: no nbgrader metadata (nbgrader treats it as ordinary code).

    A cell with both is refused: nbgrader would then grade the student's own asserts."""
    solutions = tests = 0
    for cell in nb.get("cells", []):
        cell.get("metadata", {}).pop("nbgrader", None)
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        first = source.lstrip().split("\n", 1)[0]
        points = _TESTS_LINE.fullmatch(first.strip())
        has_solution = "### BEGIN SOLUTION" in source
        if has_solution and points:
            raise ValueError("a cell is both a solution and a test; put the tests in the next cell:\n"
                             + source)
        if "### BEGIN HIDDEN TESTS" in source and not points:
            raise ValueError("hidden tests belong in a test cell, whose first line is "
                             "'# tests: N points':\n" + source)
        if has_solution:
            solutions += 1
            meta = {"grade": False, "grade_id": f"solution-{solutions}", "locked": False,
                    "solution": True}
        elif points:
            tests += 1
            meta = {"grade": True, "grade_id": f"tests-{tests}", "locked": True,
                    "points": int(points.group(1)), "solution": False}
        else:
            continue
        cell.setdefault("metadata", {})["nbgrader"] = {**meta, "schema_version": 3, "task": False}
    return nb


def notebook_text(nb: dict) -> str:
    """A notebook as Jupyter (nbformat) writes it."""
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def stamp_notebooks(folder=None) -> list[Path]:
    """Write :func:`nbgrader_metadata` into every notebook of ``folder`` (default: the workbook's
    notebooks/) whose metadata is not already up to date; return the notebooks changed."""
    changed = []
    for path in sorted(Path(folder or kernels_dir().parent / "notebooks").glob("*.ipynb")):
        text = path.read_text()
        stamped = notebook_text(nbgrader_metadata(json.loads(text)))
        if stamped != text:
            path.write_text(stamped)
            changed.append(path)
    return changed


def student_notebook(text: str) -> str:
    nb = json.loads(text)
    for cell in nb.get("cells", []):
        cell.get("metadata", {}).pop("execution", None)
        if cell.get("cell_type") == "code":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = stub_cell(source)
            cell["outputs"] = []
            cell["execution_count"] = None
    return notebook_text(nb)


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
