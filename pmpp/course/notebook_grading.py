"""Grading a notebook's exercises: the student's notebook, run with the instructor's tests.

``pmpp grade 10_reduction alice/10_reduction.ipynb`` does what nbgrader's autograder does: each
test cell (first line ``# tests: N points``, nbgrader ``grade_id`` ``tests-K``) of the student's
notebook is replaced by the instructor's, hidden tests included; the notebook runs top to bottom
(a cell that raises does not stop it); a test cell that ran without an error earns its points.
A test cell the student deleted earns nothing and says so; one that fails says what it printed.

An exercise a test cell grades (``exercises.grade(name)``) is the student's kernel file, found in
the submission's folder (beside the notebook, or in ``kernels/`` of the student's copy of the
workbook), never the grader's own copy: a file that is not there fails, saying so. The grader
then grades those files itself, outside the notebook (whose code could replace
``exercises.grade``), and the cell's points need both verdicts.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
from pathlib import Path

from ..exercises import exercises, find
from .grading import SUBMISSION_ENV, Check, GradeReport, find_submitted, grade, workbook_version
from ..errors import BackendUnavailableError
from ..notebooks import CELL_TIMEOUT, cell_source, nbgrader_metadata, notebook_paths, run

HIDDEN = "### BEGIN HIDDEN TESTS"
NO_HIDDEN_TESTS = ("; this copy of the notebook has no hidden tests (a student's release): the course's "
                   "own grading, with them, may give fewer points")


def is_notebook_exercise(name: str) -> bool:
    """``10_reduction`` or ``10_reduction.ipynb``: one of the workbook's notebooks."""
    if "/" in name:
        return False
    try:
        notebook_paths([name])
        return True
    except ValueError:
        return False


def grade_notebook(notebook: str, path, *, instructor=None, student=None,
                   timeout: int = CELL_TIMEOUT, missing: str | None = None) -> GradeReport:
    """Grade the student's notebook ``path`` against the instructor's (default: the workbook's
    ``notebook``); return the report."""
    instructor_path = Path(instructor) if instructor else notebook_paths([notebook])[0]
    tests = _test_cells(json.loads(instructor_path.read_text()))
    submission = Path(path).expanduser().resolve()
    report = GradeReport(f"notebooks/{instructor_path.stem}", "" if missing else str(submission),
                         student=student,
                         time=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                         workbook=workbook_version(),
                         contained="not contained: a notebook runs as ordinary Python"
                                   + ("" if any(HIDDEN in t["source"] for t in tests) else NO_HIDDEN_TESTS))
    try:
        data = submission.read_bytes() if not missing else None
        nb = json.loads(data) if data else None
    except (OSError, ValueError) as exc:
        missing = f"cannot read the notebook {submission}: {getattr(exc, 'strerror', None) or exc}"
    if data and not missing:
        report.sha256 = hashlib.sha256(data).hexdigest()
    if missing:
        report.checks = [Check(_name(t), False, f"not run: {missing}", 0.0, t["points"]) for t in tests]
        return report
    with _kernels_from(_student_root(submission)):
        errors = _run_with_tests(nb, tests, instructor_path.parent, timeout)
    kernels = {}                 # exercise -> the grader's own verdict on the student's file
    for t in tests:
        reason = errors.get(t["grade_id"], "") or _kernel_verdicts(t, _student_root(submission), kernels)
        report.checks.append(Check(_name(t), not reason, reason,
                                   0.0 if reason else t["points"], t["points"]))
    return report


def _kernel_verdicts(test: dict, folder: Path, graded: dict) -> str:
    """Why a test cell that grades kernel exercises fails when the grader grades them itself, out
    of the notebook's reach ("" if they pass): the cell ran inside the student's notebook, whose
    code could have replaced ``exercises.grade``; its points need the grader's verdict too."""
    for name in _exercises_named(test["source"]):
        if name not in graded:
            path, missing = find_submitted(folder, find(name).path.name)
            graded[name] = grade(name, path, missing=missing)
        if not graded[name].passed:
            failed = "; ".join(f"{c.name}: {c.reason}" for c in graded[name].checks if not c.passed)
            return f"{name}, graded by the grader: {failed}"
    return ""


def _exercises_named(source: str) -> list[str]:
    """The kernel exercises a test cell's source names ("reduction/05_coarsened")."""
    return [e.name for e in exercises() if f'"{e.name}"' in source or f"'{e.name}'" in source]


def _student_root(notebook: Path) -> Path:
    """The folder of a student's submission: the notebook's, or above it when the notebook sits in
    a copy of the workbook's ``notebooks/`` (its kernels then in ``kernels/`` beside that)."""
    folder = notebook.parent
    return folder.parent if folder.name == "notebooks" else folder


@contextlib.contextmanager
def _kernels_from(folder: Path):
    """While the notebook runs, an exercise it grades is the student's file in ``folder`` (see
    :data:`pmpp.course.grading.SUBMISSION_ENV`); the notebook's kernel process inherits the setting."""
    before = os.environ.get(SUBMISSION_ENV)
    os.environ[SUBMISSION_ENV] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SUBMISSION_ENV, None)
        else:
            os.environ[SUBMISSION_ENV] = before


def _name(test: dict) -> str:
    first = test["source"].lstrip().split("\n", 1)[0]
    return f"{test['grade_id']} ({first.lstrip('# ').strip()})"


def _test_cells(nb: dict) -> list[dict]:
    """The instructor's test cells: grade_id, points, source (hidden tests included)."""
    cells = []
    for cell in nbgrader_metadata(nb)["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            cells.append({"grade_id": meta["grade_id"], "points": float(meta["points"]),
                          "source": cell_source(cell)})
    return cells


def _run_with_tests(nb: dict, tests: list[dict], folder: Path, timeout: int) -> dict:
    """Execute the student's notebook with the instructor's test cells put back; return
    {grade_id: why it failed} for the test cells that did not pass."""
    by_id = {t["grade_id"]: t for t in tests}
    present = set()
    for cell in nbgrader_metadata(nb)["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in by_id:
            cell["source"] = by_id[grade_id]["source"]
            present.add(grade_id)
    try:
        ran = run(nb, folder, timeout=timeout, allow_errors=True)
    except BackendUnavailableError:
        raise
    except Exception as exc:                     # the kernel died, or a cell ran past the timeout
        return {t: f"the notebook did not finish: {type(exc).__name__}: {exc}" for t in by_id}
    failed = {t: "the test cell was deleted from the notebook" for t in by_id if t not in present}
    for cell in ran["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id not in by_id:
            continue
        if cell.get("execution_count") is None:
            failed[grade_id] = "not run"
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                failed[grade_id] = f"{out['ename']}: {out['evalue']}".rstrip(": ") + _printed(cell)
    return failed


def _printed(cell: dict, limit: int = 1500) -> str:
    """What a failed test cell printed before it failed (a grading report says why), shortened."""
    text = "".join(cell_source({"source": out.get("text", "")}) for out in cell.get("outputs", [])
                   if out.get("output_type") == "stream").strip()
    if not text:
        return ""
    return "; the cell printed:\n" + (text if len(text) <= limit else "...\n" + text[-limit:])
