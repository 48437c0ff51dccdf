"""Grading as a course uses it: the given file, reproducible, points, a class at a time."""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pmpp import chapters, exercises
from pmpp.course import autograders, grading, notebook_grading
from pmpp.course.classroom import collect
from pmpp.cli import main
from pmpp.runner import problem_for

COARSENED = exercises.find("reduction/05_coarsened")


def planted(folder, old, new, name="05_coarsened.cu"):
    """The instructor's solution with one change planted in it."""
    text = COARSENED.path.read_text()
    assert old in text, f"the solution no longer contains {old!r}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text.replace(old, new))
    return path


def stub(folder, name="05_coarsened.cu"):
    path = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(f"// {exercises.STUB_MARK}\n" + COARSENED.path.read_text())
    return path


def test_the_given_relative_path_is_graded_not_the_workbooks_file(tmp_path, monkeypatch):
    local = stub(tmp_path / "kernels/reduction")
    monkeypatch.chdir(tmp_path)
    report = grading.grade("reduction/05_coarsened", "kernels/reduction/05_coarsened.cu")
    assert report.submission == str(local) and not report.passed
    assert report.sha256 == __import__("hashlib").sha256(local.read_bytes()).hexdigest()
    assert local.name in str(report) and report.sha256[:12] in str(report)


def test_a_stub_scores_nothing_and_says_why(tmp_path):
    report = grading.grade("reduction/05", stub(tmp_path))
    assert report.points == 0 and all("not implemented yet" in c.reason for c in report.checks)


def test_points_are_the_manifests_and_partial_credit_is_given(tmp_path):
    full = grading.grade("reduction/05", seed=1)
    assert full.passed and full.points == full.max_points
    sizes = len(chapters.get("reduction").test_sizes) + 1          # and one drawn from the seed
    expected = COARSENED.points["compiles"] + sizes * (COARSENED.points["correct"] + COARSENED.points["exact"]) \
        + COARSENED.points["performance"] * len(COARSENED.performance)
    assert full.max_points == expected
    # Drops the last element: the float check forgives it, the exact checks do not.
    dropped = grading.grade("reduction/05", planted(tmp_path, "< n)", "< n - 1)"), seed=1)
    assert 0 < dropped.points < dropped.max_points and not dropped.passed


def test_a_kernel_written_for_the_known_sizes_meets_one_drawn_from_the_seed(tmp_path):
    # right at the chapter's fixed sizes only: wrong (zero) at any other
    known = " || ".join(f"n == {n}u" for n in chapters.get("reduction").test_sizes)
    path = planted(tmp_path, "float sum = 0.0f;", f"float sum = 0.0f; if (!({known})) return;")
    report = grading.grade("reduction/05", path, seed=11)
    drawn = [c for c in report.checks if c.size and int(c.size[2:]) not in chapters.get("reduction").test_sizes]
    assert drawn and not any(c.passed for c in drawn) and not report.passed
    assert all(c.passed for c in report.checks
               if c.ran and c.name.startswith(("compiles", "correct", "exact")) and c not in drawn)
    sizes = {c.size for c in grading.grade("reduction/05", path, seed=12).checks if c.size} - {c.size for c in report.checks}
    assert sizes, "another seed draws another size"


def test_the_same_seed_gives_the_same_verdict(tmp_path):
    path = planted(tmp_path, "< n)", "< n - 1)")
    first, second = (grading.grade("reduction/05", path, seed=12345).as_dict() for _ in range(2))
    for verdict in (first, second):
        verdict.pop("time")
    assert first == second and first["seed"] == 12345


def test_a_fresh_seed_is_drawn_and_recorded():
    seeds = {grading.grade("reduction/05").seed for _ in range(3)}
    assert len(seeds) == 3 and all(isinstance(s, int) for s in seeds)


def test_identical_failures_are_folded_into_one_line(tmp_path):
    report = grading.grade("reduction/05", planted(tmp_path, "atomicAdd(output, ", "atomicAdd(output + 1, "))
    failing = [line for line in str(report).splitlines() if "[FAIL] correct at" in line]
    assert len(failing) == 1 and "n=1, n=31, n=1000, n=1048579" in failing[0], str(report)


def test_a_verdict_records_student_seed_time_and_workbook():
    verdict = json.loads(grading.grade("reduction/05", student="alice", seed=3).to_json())
    assert verdict["student"] == "alice" and verdict["seed"] == 3
    assert verdict["time"].endswith("+00:00") and verdict["workbook"].startswith("pmpp ")
    assert verdict["points"] == verdict["max_points"] > 0 and verdict["contained"]


@pytest.mark.parametrize("name", chapters.names())
def test_no_float_check_accepts_an_all_zero_answer(name):
    # A stub that writes nothing (or 0) must not pass the tolerance check at any graded size.
    chapter = chapters.get(name)
    variant = chapter.variants[0]
    for n in chapter.test_sizes or (None,):
        problem = problem_for(variant, {**chapter.problems["cpu"], **({} if n is None else {"n": n})})
        for seed in range(5):
            inputs = chapter.make_inputs(problem, np, np.random.default_rng(seed))
            reference = chapter.reference(problem, inputs)
            values = np.asarray(getattr(reference, "value", reference), np.float64)
            zeros = np.zeros(values.shape or (1,), np.float32)
            if not np.any(values):
                continue                 # zero is the right answer (e.g. a histogram of nothing)
            assert not chapter.check(zeros, reference, problem).ok, (name, n, seed)


def test_a_time_faster_than_the_bytes_allow_is_a_measurement_error():
    assert grading.plausible_time(100.0, 64e6, 3350.0) == ""          # 64 MB takes >= 19.1 us
    verdict = grading.plausible_time(5.0, 64e6, 3350.0)
    assert verdict.startswith("measurement error") and "19.10 us" in verdict


# ----------------------------------------------------------------------------------------------
# A class at a time

@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    root = tmp_path_factory.mktemp("submissions")
    planted(root / "alice" / "kernels" / "reduction", "", "")                     # right
    planted(root / "bob", "< n)", "< n - 1)")                                      # drops one
    stub(root / "carol")                                                           # did nothing
    (root / "dave").mkdir()                                                        # no file
    (root / "dave" / "notes.txt").write_text("sorry")
    return root


def test_a_folder_of_student_folders_is_collected(classroom):
    found = {s.student: s for s in collect("reduction/05", [classroom])}
    assert sorted(found) == ["alice", "bob", "carol", "dave"]
    assert found["alice"].path.name == "05_coarsened.cu" and found["dave"].path is None
    assert "no 05_coarsened.cu" in found["dave"].problem


def test_a_class_becomes_one_csv_with_points_and_feedback(classroom, tmp_path, capsys):
    grades, feedback, verdicts = tmp_path / "grades.csv", tmp_path / "feedback", tmp_path / "all.json"
    status = main(["grade", "reduction/05", str(classroom), "--seed", "9", "--jobs", "2",
                   "--csv", str(grades), "--feedback", str(feedback), "--json", str(verdicts),
                   "--leaderboard", str(tmp_path / "board")])
    assert status == 1                                         # not everyone passed
    rows = {r["student"]: r for r in csv.DictReader(grades.open())}
    assert sorted(rows) == ["alice", "bob", "carol", "dave"]
    total = rows["alice"]["total"]
    assert all(r["total"] == total and r["checks"] == rows["alice"]["checks"] for r in rows.values())
    assert rows["alice"]["points"] == total and rows["alice"]["passed"] == "True"
    assert 0 < float(rows["bob"]["points"]) < float(total)
    assert rows["carol"]["points"] == rows["dave"]["points"] == "0"
    assert {r["seed"] for r in rows.values()} == {"9"}
    assert "not implemented yet" in (feedback / "carol.txt").read_text()
    assert "no submission" in (feedback / "dave.txt").read_text()
    assert {v["student"] for v in json.loads(verdicts.read_text())} == set(rows)
    board = list(csv.DictReader((tmp_path / "board" / "leaderboard.csv").open()))
    metric = COARSENED.performance[0].metric
    assert [r["student"] for r in board][:1] == ["alice"] and board[0]["rank"] == "1"
    assert 0 < float(board[0][metric]) <= COARSENED.performance[0].at_most
    assert all(r["rank"] == "" for r in board[1:])                 # the others did not pass
    assert "<td>alice</td>" in (tmp_path / "board" / "leaderboard.html").read_text()


def test_the_leaderboard_ranks_by_gpu_time_then_by_the_counters():
    from pmpp.course import leaderboard
    metric = COARSENED.performance[0].metric

    def report(student, passed, count, gpu_us=None):
        checks = [grading.Check("compiles on the CPU engine", passed, "", 1.0 if passed else 0.0, 1.0),
                  grading.Check(f"performance: {metric} at most 570", True, "", 1.0, 1.0, measured=count)]
        return grading.GradeReport("reduction/05_coarsened", f"{student}.cu", student=student, checks=checks,
                                   gpu_time_us=gpu_us, gpu="NVIDIA H200" if gpu_us else "")

    untimed = leaderboard.rows([report("ann", True, 300.0), report("ben", True, 200.0), report("cy", False, 10.0)])
    assert [(r["student"], r["rank"]) for r in untimed] == [("ben", 1), ("ann", 2), ("cy", "")]
    timed = leaderboard.rows([report("ann", True, 300.0, 90.0), report("ben", True, 200.0, 120.0)])
    assert [r["student"] for r in timed] == ["ann", "ben"]        # the GPU time first, then the counts


def test_grading_output_into_a_closed_pipe_ends_quietly():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(f"{sys.executable} -m pmpp.cli grade reduction/05 --seed 1 --quiet | head -1",
                         shell=True, capture_output=True, text=True, env=env)
    assert run.stdout.startswith("reduction/05_coarsened: PASS") and "Traceback" not in run.stderr


# ----------------------------------------------------------------------------------------------
# Notebook exercises

def _notebook(*sources):
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    return json.loads(nbformat.writes(nb))


@pytest.fixture(scope="module")
def warm_up(tmp_path_factory):
    """An instructor's notebook with a Python warm-up, its visible and hidden tests; and the
    student's copy, as released (solution stubbed, hidden tests gone, nbgrader metadata kept)."""
    from pmpp import notebooks
    root = tmp_path_factory.mktemp("notebook")
    visible = "# tests: 2 points\nassert double(0) == 0\n"
    instructor = notebooks.nbgrader_metadata(_notebook(
        "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
        "# tests: 1 point\nassert double(2) == 4",
        visible + "### BEGIN HIDDEN TESTS\nassert double(-3) == -6\n### END HIDDEN TESTS"))
    (root / "warm_up.ipynb").write_text(notebooks.notebook_text(instructor))
    released = json.loads(json.dumps(instructor))
    released["cells"][2]["source"] = visible
    return root / "warm_up.ipynb", released


def _answer(released, body, folder, drop_tests=False):
    nb = json.loads(json.dumps(released))
    nb["cells"][0]["source"] = f"def double(x):\n    {body}"
    if drop_tests:
        nb["cells"] = nb["cells"][:2]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "warm_up.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_a_notebook_is_graded_with_its_hidden_tests_put_back(warm_up, tmp_path):
    from pmpp.course.notebook_grading import grade_notebook
    instructor, released = warm_up
    assert "double(-3)" not in json.dumps(released)
    grade = lambda body, **kw: grade_notebook("warm_up", _answer(released, body, tmp_path / body[:6], **kw),
                                              instructor=instructor)
    right = grade("return x + x")
    assert right.passed and right.points == right.max_points == 3
    # Passes the visible tests, fails the hidden one: partial credit, with the assertion named.
    only_visible = grade("return abs(2 * x)")
    assert [c.passed for c in only_visible.checks] == [True, False]
    assert only_visible.points == 1 and "AssertionError" in only_visible.checks[1].reason
    not_done = grade("raise NotImplementedError()")
    assert not_done.points == 0
    deleted = grade("return 2 * x", drop_tests=True)
    assert deleted.points == 1 and "deleted" in deleted.checks[1].reason
    assert notebook_grading.NO_HIDDEN_TESTS not in str(right)
    # a student's self-check against their release, which has no hidden tests, says so
    release_copy = tmp_path / "release" / "warm_up.ipynb"
    release_copy.parent.mkdir()
    release_copy.write_text(json.dumps(released))
    self_check = grade_notebook("warm_up", _answer(released, "return abs(2 * x)", tmp_path / "self"),
                                instructor=release_copy)
    assert self_check.points == 3 and notebook_grading.NO_HIDDEN_TESTS in str(self_check)


@pytest.mark.slow
def test_a_notebooks_kernel_check_grades_the_students_kernel_not_the_graders(tmp_path):
    # the grader's workbook holds the instructor's solution; each student's folder holds their own
    from pmpp import notebooks
    from pmpp.course.notebook_grading import grade_notebook
    check = ("# tests: 2 points\nfrom pmpp import exercises\nreport = exercises.grade('reduction/05_coarsened')\n"
             "print(report)\n### BEGIN HIDDEN TESTS\nassert report.passed\n### END HIDDEN TESTS")
    instructor = tmp_path / "grader" / "kernel_check.ipynb"
    instructor.parent.mkdir()
    instructor.write_text(notebooks.notebook_text(notebooks.nbgrader_metadata(_notebook("x = 1", check))))
    released = json.loads(instructor.read_text())

    def graded(student, kernel=None, first_cell=None):
        folder = tmp_path / student
        (folder / "notebooks").mkdir(parents=True)
        nb = json.loads(json.dumps(released))
        if first_cell:
            nb["cells"][0]["source"] = first_cell
        (folder / "notebooks" / "kernel_check.ipynb").write_text(json.dumps(nb))
        if kernel is not None:
            (folder / "kernels" / "reduction").mkdir(parents=True)
            (folder / "kernels" / "reduction" / "05_coarsened.cu").write_text(kernel)
        return grade_notebook("kernel_check", folder / "notebooks" / "kernel_check.ipynb", instructor=instructor)

    nothing = graded("no_kernel")
    assert nothing.points == 0 and "no 05_coarsened.cu" in nothing.checks[0].reason + str(nothing)
    stubbed = graded("stubbed", f"// {exercises.STUB_MARK}\n" + COARSENED.path.read_text())
    assert stubbed.points == 0
    half = COARSENED.path.read_text().replace("float sum = 0.0f;", "float sum = 0.0f; return;")
    assert graded("wrong", half).points == 0
    assert graded("done", COARSENED.path.read_text()).points == 2
    # the notebook's own code replaces the grading call; the grader grades the kernel itself
    cheat = ("from pmpp import exercises\nclass Passed:\n    passed = True\n"
             "exercises.grade = lambda *args, **kwargs: Passed()")
    cheated = graded("cheat", first_cell=cheat)
    assert cheated.points == 0 and "graded by the grader" in cheated.checks[0].reason, str(cheated)


def test_a_grader_without_the_notebook_packages_stops_before_scoring_anyone(monkeypatch, tmp_path):
    import sys

    from pmpp import notebooks
    from pmpp.course import classroom
    from pmpp.errors import BackendUnavailableError
    monkeypatch.setitem(sys.modules, "nbclient", None)          # as if it were not installed
    with pytest.raises(BackendUnavailableError, match="nbclient.*pip install"):
        notebooks.require_execution()
    submissions = [classroom.Submission(name, tmp_path / name / "10_reduction.ipynb") for name in ("ann", "ben")]
    scored = []
    with pytest.raises(BackendUnavailableError, match="nbclient"):
        classroom.grade_class("10_reduction", submissions, on_report=scored.append)
    assert scored == []


def test_notebook_submissions_are_collected_by_the_notebooks_name(tmp_path):
    for student in ("ann", "ben"):
        (tmp_path / student / ".ipynb_checkpoints").mkdir(parents=True)
        (tmp_path / student / "10_reduction.ipynb").write_text("{}")
        (tmp_path / student / ".ipynb_checkpoints" / "10_reduction.ipynb").write_text("{}")
    found = collect("10_reduction", [tmp_path])
    assert [(s.student, s.path.name, s.path.parent.name) for s in found] == [
        ("ann", "10_reduction.ipynb", "ann"), ("ben", "10_reduction.ipynb", "ben")]


def file_writing_submission(tmp_path):
    victim = tmp_path / "written-by-the-kernel.txt"
    path = planted(tmp_path / "student", "float sum = 0.0f;",
                   f'float sum = 0.0f; {{ FILE* f = fopen("{victim}", "w"); if (f) fclose(f); }}')
    path.write_text("#include <cstdio>\n" + path.read_text())
    return path, victim


def test_a_submission_calling_host_functions_does_not_compile(tmp_path):
    path, victim = file_writing_submission(tmp_path)
    report = grading.grade("reduction/05", path, seed=1)
    assert report.points == 0 and not victim.exists()
    assert 'calling a __host__ function("fopen")' in report.checks[0].reason, str(report)


def test_a_hostile_submission_gets_a_verdict_and_changes_nothing(tmp_path, monkeypatch):
    from pmpp.backends.cpu import sandbox
    if not sandbox.available()[0]:
        pytest.skip(f"no sandbox here: {sandbox.available()[1]}")
    monkeypatch.setenv("PMPP_DEVICE_CHECK", "0")     # what gets past the compile is contained too
    path, victim = file_writing_submission(tmp_path)
    report = grading.grade("reduction/05", path, seed=1)
    assert not report.passed and not victim.exists()
    assert report.contained.startswith("contained:")
    on_the_engine = [c for c in report.checks[1:] if c.ran and c.name.startswith(("correct", "exact"))
                     and "on the GPU" not in c.name]
    assert on_the_engine and all("may not touch files" in c.reason for c in on_the_engine), str(report)


def test_a_kernel_holding_another_exercises_stub_says_which(tmp_path):
    text = COARSENED.path.read_text().replace("float sum = 0.0f;", "float sum = 0.0f;\n"
        f"    // {exercises.STUB_MARK} (part of exercise reduction/14_warp_shuffle)")
    path = tmp_path / "05_coarsened.cu"
    path.write_text(text)
    report = grading.grade("reduction/05", path)
    assert report.points == 0 and "reduction/14_warp_shuffle" in report.checks[0].reason


@pytest.mark.slow
def test_a_gradebook_has_a_column_per_exercise_and_the_same_total_for_everyone(tmp_path):
    import csv as csv_module
    from pmpp.cli import main
    (tmp_path / "class" / "ann").mkdir(parents=True)
    (tmp_path / "class" / "ann" / "05_coarsened.cu").write_text(COARSENED.path.read_text())
    stub(tmp_path / "class" / "ben")
    (tmp_path / "class" / "ben" / "14_warp_shuffle.cu").write_text(f"// {exercises.STUB_MARK}\n")
    items = ["reduction/05_coarsened", "reduction/14_warp_shuffle"]
    assert main(["gradebook", str(tmp_path / "class"), *items, "--csv", str(tmp_path / "book.csv"),
                 "--seed", "4", "--jobs", "2", "--feedback", str(tmp_path / "feedback")]) == 0
    rows = {r["student"]: r for r in csv_module.DictReader(open(tmp_path / "book.csv"))}
    assert set(rows) == {"ann", "ben"} and rows["ann"]["max_total"] == rows["ben"]["max_total"]
    assert float(rows["ann"][items[0]]) > 0 and float(rows["ann"][items[1]]) == 0 == float(rows["ben"]["total"])
    assert float(rows["ann"]["total"]) == float(rows["ann"][items[0]])
    ann = (tmp_path / "feedback" / "ann.txt").read_text()
    assert "reduction/05_coarsened: PASS" in ann and "no submission: no 14_warp_shuffle.cu" in ann


def test_each_check_is_printed_once(capsys):
    from pmpp.cli import main
    assert main(["grade", "reduction/05_coarsened", str(COARSENED.path), "--seed", "1"]) == 0
    out = capsys.readouterr()
    printed = out.out + out.err
    for check in grading.plan(COARSENED, 1):
        verdict = "not run" if check.kind == "gpu" and not grading.gpu_available() else "pass"
        assert printed.count(f"[{verdict}] {check.name}") == 1 and printed.count(check.name) == 1, check.name


@pytest.mark.slow
def test_without_a_gpu_the_gpu_check_is_shown_as_not_run_and_the_points_do_not_change(monkeypatch):
    monkeypatch.setattr(grading, "gpu_available", lambda: False)
    report = grading.grade("reduction/05", seed=1)
    on_gpu = [c for c in report.checks if "on the GPU" in c.name]
    assert len(on_gpu) == 1 and not on_gpu[0].ran and on_gpu[0].max_points == 0
    assert report.passed and report.points == report.max_points
    assert "[not run] correct on the GPU" in str(report) and "counts for nothing" in str(report)
    # The GPU's verdict is worth no points where it runs either: every machine totals the same.
    assert COARSENED.points["gpu"] == 0
    results = autograders.gradescope_results([report])
    assert "status" not in next(t for t in results["tests"] if "on the GPU" in t["name"])


# ----------------------------------------------------------------------------------------------
# A GPU time criterion: the submission against the reference solution, timed in one run

def with_gpu_time(monkeypatch, within):
    """reduction/05_coarsened as if exercises.toml gave it ``gpu_time.within``."""
    import dataclasses
    timed = dataclasses.replace(COARSENED, gpu_time=exercises.GpuTimeCriterion(within))
    monkeypatch.setattr(grading, "find", lambda name: timed)
    return timed


@pytest.mark.parametrize("entry", [{"within": 0.5}, {"within": "fast"}, {"within": 1.2, "rounds": 3}, 1.2])
def test_a_gpu_time_criterion_that_cannot_be_applied_says_how_to_write_it(entry):
    with pytest.raises(ValueError, match=r"within = 1.2"):
        exercises._gpu_time("reduction/05_coarsened", entry)


def test_without_a_gpu_the_gpu_time_criterion_is_not_run_and_the_points_do_not_change(monkeypatch):
    monkeypatch.setattr(grading, "gpu_available", lambda: False)
    plain = grading.grade("reduction/05_coarsened", str(COARSENED.path), seed=3)
    with_gpu_time(monkeypatch, 1.2)
    timed = grading.grade("reduction/05_coarsened", str(COARSENED.path), seed=3)
    check = timed.checks[-1]
    assert check.name.startswith("GPU time at most 1.2x the reference solution's") and not check.ran
    assert timed.points == plain.points and timed.max_points == plain.max_points and timed.passed




@pytest.mark.gpu
def test_on_a_gpu_a_submission_slower_than_the_reference_by_more_than_the_factor_fails(monkeypatch, tmp_path):
    with_gpu_time(monkeypatch, 1.2)
    text = COARSENED.path.read_text()
    # right, but at the GPU's size (not the CPU engine's) it first reads half the input for nothing
    spin = ("    if (n > (1u << 24)) { float waste = 0.0f;\n"
            "        for (unsigned int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += 2 * gridDim.x * blockDim.x)\n"
            "            waste += input[j];\n"
            "        if (waste == 1.5e30f) output[0] = waste; }\n")   # never so: the loads are kept
    slow = tmp_path / "05_coarsened.cu"
    head, brace, rest = text.partition("{\n")
    slow.write_text(head + brace + spin + rest)
    report = grading.grade("reduction/05_coarsened", str(slow), seed=5)
    check = report.checks[-1]
    assert check.ran and not check.passed and "x the reference solution's" in check.reason, check.reason
    same = grading.grade("reduction/05_coarsened", str(COARSENED.path), seed=5)
    assert same.checks[-1].passed and same.checks[-1].measured > 0


@pytest.mark.gpu
def test_a_kernel_that_stops_working_after_its_first_launches_is_not_timed_doing_nothing(monkeypatch, tmp_path):
    with_gpu_time(monkeypatch, 1.2)
    text = COARSENED.path.read_text()
    head, brace, rest = text.partition("{\n")
    counter = "__device__ unsigned int launches = 0;\n"
    # right at every size the checks use, on the GPU too, until its fourth launch at the GPU's size
    skip = "    if (n > (1u << 24) && launches > 3) return;\n"
    count = "    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&launches, 1u);\n"
    gamed = tmp_path / "05_coarsened.cu"
    gamed.write_text(counter + head + brace + skip + count + rest)
    report = grading.grade("reduction/05_coarsened", str(gamed), seed=5)
    assert next(c for c in report.checks if c.name.startswith("correct on the GPU")).passed
    check = report.checks[-1]
    assert check.ran and not check.passed and "timed launches" in check.reason, check.reason
