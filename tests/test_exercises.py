"""Exercises: the student release and the autograder, with planted bugs."""
import json

import pytest

from pmpp import exercises
from pmpp.cli import main

COARSENED = exercises.find("reduction/05_coarsened")


def planted(tmp_path, old, new, name="submission.cu"):
    """The instructor's solution with one bug planted in it."""
    text = COARSENED.path.read_text()
    assert old in text, f"the solution no longer contains {old!r}"
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def variant_before(ex):
    """(the exercise's chapter, the variant it improves on: the one before it, passing over
    deliberately racy ones)."""
    from pmpp import chapters
    chapter = chapters.get(ex.chapter)
    names = [v.name for v in chapter.variants]
    return chapter, next(v for v in reversed(chapter.variants[:names.index(ex.variant)]) if not v.racy)


def reasons(report):
    return " | ".join(c.reason for c in report.checks if not c.passed)


@pytest.mark.parametrize("exercise", [e.name for e in exercises.exercises()])
def test_instructor_solutions_pass(exercise):
    report = exercises.grade(exercise)
    assert report.passed, str(report)


def test_a_right_kernel_that_ignores_the_lesson_misses_its_performance_points(tmp_path):
    # elementwise/03_packed written with 4-byte loads: right at every size, but four times the loads
    packed = exercises.find("elementwise/03_packed")
    text = packed.path.read_text()
    begin, end = text.index("// BEGIN SOLUTION"), text.index("// END SOLUTION")
    scalar = tmp_path / "03_packed.cu"
    scalar.write_text(text[:begin] + "unsigned int g = blockIdx.x * BLOCK_DIM + threadIdx.x;\n"
                      "    for (unsigned int i = g; i < n; i += BLOCK_DIM * gridDim.x) z[i] = mul(x[i], y[i]);\n    "
                      + text[end:])
    report = exercises.grade("elementwise/03_packed", scalar, seed=5)
    performance = [c for c in report.checks if c.name.startswith("performance")]
    assert performance and all(c.passed for c in report.checks if c not in performance and c.ran), str(report)
    assert not performance[0].passed and performance[0].points == 0
    assert "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum = 65536, more than 18000" in performance[0].reason


def test_a_wrong_kernel_is_not_scored_on_speed(tmp_path):
    report = exercises.grade("reduction/05_coarsened", planted(tmp_path, "float sum = 0.0f;", "float sum = 1.0f;"),
                             seed=3)
    performance = [c for c in report.checks if c.name.startswith("performance")]
    assert performance and all(not c.passed and "not run" in c.reason for c in performance)


@pytest.mark.slow
@pytest.mark.parametrize("exercise", [e.name for e in exercises.exercises() if e.performance])
def test_each_performance_criterion_is_missed_by_the_variant_before_the_exercise(exercise):
    from pmpp.profiling.explain import count_variant
    ex = exercises.find(exercise)
    chapter, before = variant_before(ex)
    counted = count_variant(chapter, before.name).metrics()
    for criterion in ex.performance:
        assert counted[criterion.metric] > criterion.at_most, (before, criterion)


def test_a_kernel_that_does_nothing_gets_nothing_for_correctness(tmp_path):
    # the output it leaves is the grader's fresh one, not an earlier launch's answer
    text = COARSENED.path.read_text()
    begin, end = text.index("// BEGIN SOLUTION"), text.index("// END SOLUTION")
    path = tmp_path / "05_coarsened.cu"
    path.write_text(text[:begin] + text[end:])
    report = exercises.grade("reduction/05_coarsened", path, seed=2)
    assert all(not c.passed for c in report.checks if c.name.startswith(("correct", "exact")))


@pytest.mark.slow
def test_a_kernel_that_replays_its_first_launch_is_wrong_at_the_next(tmp_path):
    # a __device__ flag kept between launches: computes once, then leaves the output alone
    path = planted(tmp_path, "float sum = 0.0f;", "if (pmppDone) return; float sum = 0.0f;", "05_coarsened.cu")
    path.write_text(path.read_text().replace('extern "C" __global__', '__device__ int pmppDone = 0;\nextern "C" __global__', 1)
                    .replace("atomicAdd(output, input_s[0]);", "atomicAdd(output, input_s[0]); pmppDone = 1;"))
    report = exercises.grade("reduction/05_coarsened", path, seed=2)
    # each build (checked, plain) computes at its first size; every later size is replayed
    later = [c for c in report.checks if c.name.startswith(("correct", "exact")) and c.size != "n=1"]
    assert later and not any(c.passed for c in later) and "wrong result" in later[0].reason, str(report)


def test_each_chapter_with_exercises_has_at_least_two():
    per_chapter = {}
    for e in exercises.exercises():
        per_chapter[e.chapter] = per_chapter.get(e.chapter, 0) + 1
    assert per_chapter and all(count >= 2 for count in per_chapter.values())


def test_racy_submission_gets_a_race_verdict(tmp_path):
    report = exercises.grade("reduction/05", planted(tmp_path, "__syncthreads();", ""))
    assert not report.passed and "RaceError" in reasons(report) and "input_s" in reasons(report)


def test_out_of_bounds_submission_gets_a_bounds_verdict(tmp_path):
    path = planted(tmp_path, "if (i + tile * BLOCK_DIM < n) {", "if (true) {")
    report = exercises.grade("reduction/05", path)
    assert not report.passed and "OutOfBoundsError" in reasons(report) and "'input'" in reasons(report)


def test_hanging_submission_times_out(tmp_path):
    path = planted(tmp_path, "float sum = 0.0f;", "float sum = 0.0f; volatile int spin = 1; while (spin) {}")
    report = exercises.grade("reduction/05", path, timeout=3)
    first, *rest = report.checks[1:]
    assert "did not finish within 3 s at n=1" in first.reason and "pmpp grade --timeout" in first.reason
    assert rest and all(c.reason == "not run: the kernel did not finish at n=1" for c in rest)


def test_submission_that_does_not_compile_names_the_line(tmp_path):
    path = planted(tmp_path, "float sum = 0.0f;", "float sum = 0.0f x;")
    report = exercises.grade("reduction/05", path)
    compiles, *rest = report.checks
    assert "does not compile" in compiles.reason and "submission.cu:" in compiles.reason
    assert len(report.checks) == len(exercises.grade("reduction/05").checks)
    assert all(c.reason == "not run: the submission does not compile" and c.points == 0 for c in rest)


def test_dropped_element_is_caught_by_the_exact_check(tmp_path):
    # The last element is dropped at every size; it is 0 (and so invisible) with probability
    # 1/17 per size, so at least one of the exact checks fails but with odds of 17^-4.
    report = exercises.grade("reduction/05", planted(tmp_path, "< n)", "< n - 1)"))
    failed = [c.name for c in report.checks if not c.passed]
    assert not report.passed and any(name.startswith("exact at") for name in failed)


def test_missing_submission_file_is_a_verdict(tmp_path):
    report = exercises.grade("reduction/05", tmp_path / "nothing.cu")
    assert not report.passed and report.points == 0 and report.sha256 is None
    assert all("cannot read the submission" in c.reason and "nothing.cu" in c.reason
               for c in report.checks)


def test_unknown_exercise_lists_the_exercises():
    with pytest.raises(KeyError, match="reduction/05_coarsened"):
        exercises.find("reduction/99")


def test_grade_command_writes_json_verdict(tmp_path, capsys):
    out = tmp_path / "verdict.json"
    racy = planted(tmp_path, "__syncthreads();", "")
    assert main(["grade", "reduction/05_coarsened", str(racy), "--json", str(out)]) == 1
    verdict = json.loads(out.read_text())
    assert verdict["passed"] is False and verdict["exercise"] == "reduction/05_coarsened"
    assert any("RaceError" in c["reason"] for c in verdict["checks"])
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.gpu
def test_gpu_grading_checks_full_size_and_times_against_the_reference(tmp_path):
    # On a GPU, a submission that passes the CPU-engine checks is also checked at the chapter's
    # GPU size and timed beside the instructor's solution.
    report = exercises.grade(COARSENED.name, planted(tmp_path, "", ""))
    assert report.passed, str(report)
    assert any(c.name.startswith("correct on the GPU") for c in report.checks)
    assert report.gpu_time_us > 0 and report.reference_time_us > 0
    assert "GPU time" in str(report)


def test_a_stub_in_an_included_header_stubs_the_kernels_that_include_it(tmp_path):
    (tmp_path / "shared.cuh").write_text("__device__ int helper() {\n"
                                         f"    // {exercises.STUB_MARK} (part of exercise demo/01_sum)\n"
                                         "    return 0;\n}\n")
    kernel = tmp_path / "02_uses_it.cu"
    kernel.write_text('#include "shared.cuh"\n__global__ void k(int* out) { *out = helper(); }\n')
    plain = tmp_path / "03_plain.cu"
    plain.write_text("__global__ void k(int* out) { *out = 1; }\n")
    assert exercises.is_stub(kernel) and not exercises.is_stub(plain)
    own, builds_on = exercises.stubs_in(exercises.kernel_text(kernel))
    assert not own and builds_on == ["demo/01_sum"]


@pytest.mark.gpu
@pytest.mark.parametrize("exercise", [e.name for e in exercises.exercises() if e.gpu_time])
def test_each_gpu_time_criterion_is_missed_by_the_variant_before_the_exercise(exercise):
    import cupy
    import numpy as np

    from pmpp.course.grading import alternating_medians
    from pmpp.runner import default_problem, load_variant, problem_for
    ex = exercises.find(exercise)
    chapter, before = variant_before(ex)
    runs = {}
    for variant in (before, chapter.variant(ex.variant)):
        problem = problem_for(variant, default_problem(chapter, "cupy"))
        inputs = chapter.make_inputs(problem, cupy, np.random.default_rng(1))
        module = load_variant(chapter, variant, backend="cupy")
        runs[variant.name] = (lambda v, m, p, i: lambda: v.launch(m, p, i))(variant, module, problem, inputs)
    medians = alternating_medians(runs)
    assert medians[before.name] > ex.gpu_time.within * medians[ex.variant], medians


def test_a_kernel_that_recognises_an_input_it_has_seen_meets_fresh_ones(tmp_path):
    # The exploit: remember one grading's input by a checksum (its first element) and answer it
    # from memory. Inputs are drawn from the seed anew at every grading, so it is never met again.
    import numpy as np

    from pmpp import chapters
    from pmpp.course.grading import plan
    from pmpp.runner import problem_for
    chapter = chapters.get("reduction")
    variant = chapter.variant("05_coarsened")
    index, planned = next((i, p) for i, p in enumerate(plan(COARSENED, 7))
                          if p.kind == "correct" and p.problem["n"] == 1000)
    problem = problem_for(variant, planned.problem)
    seen = chapter.make_inputs(problem, np, np.random.default_rng([7, index]))
    first = float(np.asarray(seen["x"]).reshape(-1)[0])
    answer = float(chapter.reference(problem, seen))
    text = COARSENED.path.read_text()
    begin, end = text.index("// BEGIN SOLUTION"), text.index("// END SOLUTION")
    memory = (f"    if (n == 1000u && input[0] == {first.hex()}f) {{\n"
              f"        if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(output, {answer.hex()}f);\n"
              "    }\n")
    path = tmp_path / "05_coarsened.cu"
    path.write_text(text[:begin] + memory + text[end:])
    correct = lambda report: [c.passed for c in report.checks if c.name.startswith("correct at")]
    assert correct(exercises.grade("reduction/05_coarsened", path, seed=7))[2], "it does know the input it saw"
    assert not any(correct(exercises.grade("reduction/05_coarsened", path, seed=8)))
