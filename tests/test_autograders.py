"""Gradescope's and PrairieLearn's autograders: the results formats, and each autograder run here
in a folder laid out as on its machine."""
import json
import os
import subprocess
import sys
import zipfile

import pytest

from pmpp import exercises
from pmpp.course import autograders
from pmpp.course.grading import Check, GradeReport

COARSENED = exercises.find("reduction/05_coarsened")


def report(*checks, exercise="reduction/05_coarsened", submission="/s/05_coarsened.cu", gpu_time_us=None):
    return GradeReport(exercise, submission, seed=7, workbook="0.0", checks=list(checks), gpu_time_us=gpu_time_us)


def test_gradescope_results_have_a_test_per_check_and_the_total():
    r = report(Check("compiles", True, "", 1, 1), Check("correct at n=31", False, "3 of 31 wrong", 0, 2))
    results = autograders.gradescope_results([r])
    assert results["score"] == 1 and [t["status"] for t in results["tests"]] == ["passed", "failed"]
    assert results["tests"][1] == {"name": "reduction/05_coarsened: correct at n=31", "score": 0, "max_score": 2,
                                   "status": "failed", "output": "3 of 31 wrong", "visibility": "visible"}
    assert autograders.GPU_NOT_RUN in results["output"] and "leaderboard" not in results
    timed = autograders.gradescope_results([report(Check("compiles", True, "", 1, 1), gpu_time_us=12.34)], gpu=True)
    assert timed["leaderboard"] == [{"name": "reduction/05_coarsened GPU time (us)", "value": 12.3, "order": "asc"}]
    assert autograders.GPU_NOT_RUN not in timed["output"]


def test_prairielearn_results_score_a_fraction_and_a_missing_file_is_not_gradable():
    r = report(Check("compiles", True, "", 1, 1), Check("correct", False, "wrong", 0, 3))
    results = autograders.prairielearn_results([r])
    assert results["gradable"] and results["score"] == 0.25
    assert results["tests"][1]["points"] == 0 and results["tests"][1]["max_points"] == 3
    nothing = autograders.prairielearn_results([report(Check("compiles", False, "not run", 0, 1), submission="")])
    assert nothing["gradable"] is False and "05_coarsened.cu" in nothing["format_errors"][0]


def _run(script, root):
    env = {**os.environ, autograders.ROOT_ENV: str(root), "PMPP_PYTHON": sys.executable}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((root / "results" / "results.json").read_text())


@pytest.mark.slow
def test_the_gradescope_autograder_grades_a_submission_as_gradescope_runs_it(tmp_path):
    zip_path = autograders.build_gradescope(["reduction/05_coarsened"], tmp_path / "autograder.zip")
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
        assert {"setup.sh", "run_autograder"} <= set(names)
        z.extractall(root / "source")
        released = z.read("workbook/kernels/reduction/05_coarsened.cu").decode()
    assert exercises.STUB_MARK in released and "BEGIN SOLUTION" not in released   # no solution to read
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(0o755)
    (root / "submission").mkdir()
    (root / "submission" / "05_coarsened.cu").write_text(COARSENED.path.read_text())
    right = _run(root / "source" / "run_autograder", root)
    assert right["score"] == sum(t["max_score"] for t in right["tests"]) > 0
    ran = [t for t in right["tests"] if "status" in t]        # the GPU check did not run: no GPU there
    assert ran and all(t["status"] == "passed" for t in ran)
    assert all("not run" in t["output"] and t["max_score"] == 0 for t in right["tests"] if "status" not in t)
    (root / "submission" / "05_coarsened.cu").write_text(
        COARSENED.path.read_text().replace("float sum = 0.0f;", "float sum = 0.0f; return;"))
    wrong = _run(root / "source" / "run_autograder", root)
    assert wrong["score"] < right["score"] and any(t["status"] == "failed" for t in wrong["tests"])


@pytest.mark.slow
def test_the_prairielearn_grader_refuses_a_missing_file_and_grades_a_stub_as_nothing(tmp_path):
    out = autograders.build_prairielearn(["reduction/05_coarsened"], tmp_path / "serverFilesCourse" / "pmpp_grader")
    options = json.loads((out / "info.json.externalGradingOptions").read_text())["externalGradingOptions"]
    assert options["entrypoint"] == "/grade/serverFilesCourse/pmpp_grader/run.sh"
    root = tmp_path / "grade"
    (root / "student").mkdir(parents=True)
    assert _run(out / "run.sh", root)["gradable"] is False
    (root / "student" / "05_coarsened.cu").write_text(f"// {exercises.STUB_MARK}\n" + COARSENED.path.read_text())
    stubbed = _run(out / "run.sh", root)
    assert stubbed["gradable"] and stubbed["score"] == 0.0 and "not implemented yet" in stubbed["output"]


def test_pmpp_grade_writes_both_platforms_results(tmp_path, capsys):
    from pmpp.cli import main
    stub = tmp_path / "05_coarsened.cu"
    stub.write_text(f"// {exercises.STUB_MARK}\n" + COARSENED.path.read_text())
    assert main(["grade", "reduction/05_coarsened", str(stub), "--seed", "1",
                 "--gradescope", str(tmp_path / "gs.json"), "--prairielearn", str(tmp_path / "pl.json")]) == 1
    gs, pl = (json.loads((tmp_path / name).read_text()) for name in ("gs.json", "pl.json"))
    assert gs["score"] == 0 and gs["tests"] and all("not implemented yet" in t["output"] for t in gs["tests"])
    assert pl["gradable"] and pl["score"] == 0.0
    assert "FAIL 0/" in capsys.readouterr().out
