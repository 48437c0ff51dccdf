"""Exercises: the kernel variants a course assigns, listed in ``kernels/exercises.toml``.

A kernel file marks an exercise's solution, as nbgrader does::

    // BEGIN SOLUTION
    ...the instructor's code...
    // END SOLUTION

A later variant that repeats part of an exercise's answer marks that part with the exercise's
name (``// BEGIN SOLUTION reduction/14_warp_shuffle``), so the release stubs it too
(:mod:`pmpp.markers`). Notebook code cells mark theirs with ``### BEGIN SOLUTION`` / ``### END SOLUTION`` and hide
tests between ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``.

* This module: which exercises there are (the list, not the markers, so an exercise stays known
  once a student has replaced its stub), and whether a kernel file is still a stub.
* :mod:`pmpp.course.release` writes the student tree; :mod:`pmpp.course.grading` grades submissions
  (:func:`grade` is re-exported here for the notebooks' grading cells).
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import chapters
from .errors import ExerciseNotImplemented
from .markers import STUB_MARK, stubs_in
from .errors import CompileError
from .source import expand_includes, kernels_dir

if sys.version_info >= (3, 11):
    import tomllib
else:                                   # pragma: no cover - Python 3.10
    import tomli as tomllib

BEGIN, END = "// BEGIN SOLUTION", "// END SOLUTION"
MANIFEST = "exercises.toml"


# ----------------------------------------------------------------------------------------------
# Which exercises there are

@dataclass(frozen=True)
class Criterion:
    """A performance criterion, from the CPU engine's counters (no GPU needed, no timer to game):
    ``metric`` (an Nsight Compute name, see :data:`pmpp.counters.METRICS`), summed over the
    launches of one run at the chapter's CPU problem, at most ``at_most``; ``why`` says what it
    asks of the kernel."""
    metric: str
    at_most: float
    why: str


@dataclass(frozen=True)
class GpuTimeCriterion:
    """A performance criterion on a GPU: the submission's median time at most ``within`` times the
    reference solution's, the two timed in one run, in alternating rounds (``[exercise."x".gpu_time]
    within = 1.2`` in exercises.toml). Without a GPU it is not run."""
    within: float


@dataclass(frozen=True)
class Exercise:
    name: str          # "reduction/05_coarsened"
    chapter: str
    variant: str
    points: dict = field(default_factory=dict, compare=False, hash=False)
    performance: tuple = field(default=(), compare=False, hash=False)   # Criterion, ...
    gpu_time: GpuTimeCriterion | None = field(default=None, compare=False, hash=False)

    @property
    def path(self) -> Path:
        return kernels_dir() / self.chapter / f"{self.variant}.cu"


def manifest(kernels=None) -> dict:
    """``kernels/exercises.toml`` (of the workbook, or of the folder ``kernels``), parsed."""
    path = Path(kernels or kernels_dir()) / MANIFEST
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path} is not valid TOML: {exc}") from None


def exercises() -> list[Exercise]:
    """Every exercise of ``kernels/exercises.toml``, in its order."""
    data = manifest()
    defaults = data.get("points", {})
    found = []
    for name, entry in data.get("exercise", {}).items():
        chapter_name, _, variant_name = name.partition("/")
        chapter = chapters.get(chapter_name)
        variant = chapter.variant(variant_name)
        found.append(Exercise(name, chapter.name, variant.name, {**defaults, **entry.get("points", {})},
                              tuple(_criterion(name, c) for c in entry.get("performance", ())),
                              _gpu_time(name, entry.get("gpu_time"))))
    return found


def _gpu_time(exercise: str, entry) -> GpuTimeCriterion | None:
    if entry is None:
        return None
    within = entry.get("within") if isinstance(entry, dict) and set(entry) == {"within"} else None
    if isinstance(within, bool) or not isinstance(within, (int, float)) or within < 1:
        raise ValueError(f"{MANIFEST}: {exercise}'s gpu_time is {entry}; give it one number, within, at least 1: "
                         f"the most times the reference solution's GPU time a submission may take, e.g. "
                         f"[exercise.\"{exercise}\".gpu_time] within = 1.2")
    return GpuTimeCriterion(float(within))


def _criterion(exercise: str, entry: dict) -> Criterion:
    from .counters import METRICS
    if entry.get("metric") not in METRICS or not isinstance(entry.get("at_most"), (int, float)):
        raise ValueError(f"{MANIFEST}: {exercise}'s performance criterion {entry} needs a metric the CPU "
                         f"engine counts (see pmpp.counters.METRICS) and a number at_most")
    return Criterion(entry["metric"], float(entry["at_most"]), entry.get("why", ""))


def find(name: str) -> Exercise:
    """``"reduction/05_coarsened"`` or ``"reduction/05"``."""
    chapter_name, _, variant_name = name.partition("/")
    for exercise in exercises():
        if exercise.chapter == chapter_name and variant_name in (exercise.variant,
                                                                 exercise.variant.split("_", 1)[0]):
            return exercise
    listing = ", ".join(e.name for e in exercises()) or "none"
    raise KeyError(f"no exercise {name!r}; the exercises are: {listing}")


def kernel_text(path) -> str:
    """A kernel file's text with the headers it includes (``#include "x"``) written in: a stub in
    a shared header stubs every variant that includes it."""
    path = Path(path)
    text = path.read_text()
    try:
        return expand_includes(text, str(path), path.parent)
    except CompileError:
        return text    # an include nested too deep: the build says so


def is_stub(path) -> bool:
    """Whether a kernel file, or a header it includes, still holds an exercise's stub (as in a
    student release)."""
    path = Path(path)
    return path.is_file() and STUB_MARK in kernel_text(path)


def require_implemented(chapter, variant) -> None:
    """Raise :class:`ExerciseNotImplemented` if the variant's kernel file is still a stub."""
    path = kernels_dir() / chapter.kernel_path(variant)
    if is_stub(path):
        own, builds_on = stubs_in(kernel_text(path))
        raise ExerciseNotImplemented(f"{chapter.name}/{variant.name}",
                                     f"kernels/{chapter.kernel_path(variant)}", builds_on, own)


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




def grade(exercise, path=None, **options):
    """Grade a submission; see :func:`pmpp.course.grading.grade`."""
    from .course.grading import grade as grade_submission
    return grade_submission(exercise, path, **options)
