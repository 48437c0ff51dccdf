"""Gradescope's and PrairieLearn's autograders: pmpp's verdicts in their results formats, and an
autograder for each that grades on their machines (no GPU there: the CPU engine, with its race,
bounds and barrier checks).

    pmpp grade reduction/05_coarsened alice.cu --gradescope results.json
    pmpp course gradescope reduction/05_coarsened reduction/14_warp_shuffle -o autograder.zip
    pmpp course prairielearn reduction/05_coarsened -o serverFilesCourse/pmpp_grader

The autograder holds the student release of the workbook (solutions stubbed: a submission that
reads the autograder's files finds none) and grades each exercise's file, found by name in the
submission (``05_coarsened.cu``), the way ``pmpp grade`` does. A GPU check is not run there, and
the results say so rather than count it as missed points.

Formats: Gradescope's autograder specification (results.json: score, output, tests with name,
score, max_score, status, output, visibility; a leaderboard) and PrairieLearn's external grading
(results.json: gradable, score in [0, 1], message, output, tests with points and max_points).
"""
from __future__ import annotations

import json
import os
import shlex
import stat
import sys
import zipfile
from pathlib import Path
from typing import Sequence

from ..backends import gpu_available
from ..exercises import find
from .grading import DEFAULT_TIMEOUT, GradeReport, find_submitted, grade

GRADESCOPE_ROOT = "/autograder"      # source/ (the zip), submission/, results/results.json
PRAIRIELEARN_ROOT = "/grade"         # serverFilesCourse/, student/, results/results.json
ROOT_ENV = "PMPP_AUTOGRADER_ROOT"    # another root, to run an autograder outside its machine
GPU_NOT_RUN = "no GPU on this grader: the GPU check and GPU time were not run, and count for nothing"


def grade_folder(exercises: Sequence[str], folder, *, seed=None, timeout=DEFAULT_TIMEOUT) -> list[GradeReport]:
    """Grade each exercise's file, found by name under ``folder`` (a submission that lacks one
    fails that exercise, saying which file it needs)."""
    reports = []
    for exercise in exercises:
        path, missing = find_submitted(Path(folder), find(exercise).path.name)
        reports.append(grade(exercise, path, seed=seed, timeout=timeout, missing=missing))
    return reports


def _summary(reports: Sequence[GradeReport], gpu: bool) -> str:
    text = "\n\n".join(str(r) for r in reports)
    return text if gpu else f"{text}\n\n{GPU_NOT_RUN}"


def gradescope_results(reports: Sequence[GradeReport], *, visibility: str = "visible",
                       gpu: bool = False) -> dict:
    """Gradescope's results.json for ``reports`` (one per exercise): a test per check, the
    verdicts as the output, and a leaderboard of GPU times where a GPU timed the submission."""
    tests = [{"name": f"{r.exercise}: {c.name}", "score": c.points, "max_score": c.max_points,
              **({"status": "passed" if c.passed else "failed"} if c.ran else {}),
              "output": c.reason or "passed", "visibility": visibility}
             for r in reports for c in r.checks]
    results = {"score": sum(r.points for r in reports), "output": _summary(reports, gpu),
               "visibility": visibility, "stdout_visibility": "hidden", "tests": tests,
               "extra_data": {"seeds": {r.exercise: r.seed for r in reports},
                              "sha256": {r.exercise: r.sha256 for r in reports},
                              "workbook": reports[0].workbook if reports else ""}}
    timed = [r for r in reports if r.gpu_time_us is not None]
    if timed:
        results["leaderboard"] = [{"name": f"{r.exercise} GPU time (us)", "value": round(r.gpu_time_us, 1),
                                   "order": "asc"} for r in timed]
    return results


def prairielearn_results(reports: Sequence[GradeReport], *, gpu: bool = False) -> dict:
    """PrairieLearn's results.json for ``reports``: the score as a fraction of the points, a test
    per check. A submission with none of the exercises' files is not gradable (no attempt lost)."""
    max_points = sum(r.max_points for r in reports)
    if reports and all(not r.submission for r in reports):
        needed = ", ".join(find(r.exercise).path.name for r in reports)
        return {"gradable": False, "format_errors": [f"submit {needed}"], "message": f"submit {needed}"}
    tests = [{"name": f"{r.exercise}: {c.name}", "points": c.points, "max_points": c.max_points,
              "message": "" if c.passed or not c.ran else c.reason, "output": c.reason or "passed"}
             for r in reports for c in r.checks]
    return {"gradable": True, "score": sum(r.points for r in reports) / max_points if max_points else 0.0,
            "message": "passed" if all(r.passed for r in reports) else "some checks failed",
            "output": _summary(reports, gpu), "tests": tests}


def write_json(data: dict, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


# ---------------------------------------------------------------------------------------------
# The autograders

_GRADESCOPE_SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, on its Ubuntu image: the CPU engine's compiler and Boost,
# then the workbook (the student release in this zip) and what it needs.
set -euo pipefail
apt-get update
apt-get install -y --no-install-recommends python3 python3-pip python3-venv g++ libboost-context-dev
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --upgrade pip
/autograder/venv/bin/pip install -e /autograder/source/workbook
"""

_RUN = """#!/usr/bin/env bash
# {what}: grade the submission, write the results. The kernels and the grader are the workbook's
# student release, beside this script (or under {source}).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
workbook="$here/workbook"
[ -d "$workbook" ] || workbook="{source}/workbook"
export PMPP_KERNELS="$workbook/kernels"
cd "$workbook"
exec "${{PMPP_PYTHON:-{python}}}" -m pmpp.course.autograders {kind} {exercises}
"""


def _run_script(kind: str, exercises: Sequence[str], python: str, source: str) -> str:
    what = {"gradescope": "Gradescope runs this for each submission",
            "prairielearn": "PrairieLearn's entrypoint, run for each submission"}[kind]
    return _RUN.format(what=what, python=python, source=source, kind=kind,
                       exercises=" ".join(shlex.quote(e) for e in exercises))


def _checked(exercises: Sequence[str]) -> list[str]:
    if not exercises:
        raise ValueError("name the exercises the autograder grades, e.g. reduction/05_coarsened")
    return [find(e).name for e in exercises]


def _workbook_files(source_dir=None) -> dict[str, bytes]:
    from .release import student_files
    from ..source import kernels_dir
    return student_files(Path(source_dir) if source_dir else kernels_dir().parent)


def build_gradescope(exercises: Sequence[str], out, *, source_dir=None) -> Path:
    """``out``: a Gradescope autograder zip for ``exercises`` (setup.sh, run_autograder, and the
    student release under workbook/)."""
    exercises = _checked(exercises)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        _add(z, "setup.sh", _GRADESCOPE_SETUP, executable=True)
        _add(z, "run_autograder", _run_script("gradescope", exercises, "/autograder/venv/bin/python3",
                                              f"{GRADESCOPE_ROOT}/source"), executable=True)
        for rel, data in sorted(_workbook_files(source_dir).items()):
            _add(z, f"workbook/{rel}", data)
    return out


def _add(z: zipfile.ZipFile, name: str, data, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)


_PRAIRIELEARN_DOCKERFILE = """# An image for the pmpp grader: Python, the CPU engine's compiler and Boost, and the workbook.
# Build it beside this folder's workbook/ (docker build -t pmpp-grader .) and name it as the
# question's externalGradingOptions.image.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends g++ libboost-context-dev \\
    && rm -rf /var/lib/apt/lists/*
COPY workbook /opt/pmpp-workbook
RUN pip install --no-cache-dir -e /opt/pmpp-workbook
"""


def build_prairielearn(exercises: Sequence[str], out, *, source_dir=None) -> Path:
    """``out`` (a folder for the course's serverFilesCourse/): run.sh, the entrypoint; the student
    release under workbook/; a Dockerfile for the grader image; info.json's external grading
    options to copy into each question."""
    exercises = _checked(exercises)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    run_sh = out / "run.sh"
    run_sh.write_text(_run_script("prairielearn", exercises, "python3",
                                  f"{PRAIRIELEARN_ROOT}/serverFilesCourse/{out.name}"))
    run_sh.chmod(0o755)
    (out / "Dockerfile").write_text(_PRAIRIELEARN_DOCKERFILE)
    options = {"externalGradingOptions": {
        "enabled": True, "image": "pmpp-grader", "serverFilesCourse": [f"{out.name}/"],
        "entrypoint": f"{PRAIRIELEARN_ROOT}/serverFilesCourse/{out.name}/run.sh", "timeout": 600}}
    (out / "info.json.externalGradingOptions").write_text(json.dumps(options, indent=2) + "\n")
    for rel, data in _workbook_files(source_dir).items():
        path = out / "workbook" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return out


def run(kind: str, exercises: Sequence[str], root=None) -> int:
    """What an autograder runs for one submission: grade ``root``'s submission (Gradescope:
    submission/, PrairieLearn: student/) and write ``root``/results/results.json."""
    root = Path(root or os.environ.get(ROOT_ENV) or {"gradescope": GRADESCOPE_ROOT,
                                                       "prairielearn": PRAIRIELEARN_ROOT}[kind])
    folder = root / ("submission" if kind == "gradescope" else "student")
    reports = grade_folder(exercises, folder)
    gpu = gpu_available()
    results = (gradescope_results(reports, gpu=gpu) if kind == "gradescope"
               else prairielearn_results(reports, gpu=gpu))
    write_json(results, root / "results" / "results.json")
    print("\n\n".join(str(r) for r in reports))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("gradescope", "prairielearn"):
        sys.exit("usage: python -m pmpp.course.autograders gradescope|prairielearn EXERCISE...")
    sys.exit(run(sys.argv[1], sys.argv[2:]))
