"""The student release: what it holds and leaves out, its markers and leak check, updating a
release in place, the student's README and Quickstart; its notebooks run top to bottom with every
exercise stubbed; and nbgrader, for instructors who use it, generates and autogrades the notebooks."""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pmpp import chapters, exercises, load
from pmpp.course import release
from pmpp.markers import MarkerError

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def student_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("release") / "workbook"
    release.release(root)
    return root


def released_env(root):
    # The released pmpp package first on the path: its kernels/ (the stubs) are the ones run.
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


def files_of(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(root).parts}


# ----------------------------------------------------------------------------------------------
# A workbook of three kernels and a notebook, to release in a fraction of a second

SUM = """\
// Sum: a shared-memory tree per block, one atomicAdd per block.
extern "C" __global__ void Sum(const float* x, float* out, unsigned int n) {
    // BEGIN SOLUTION
    __shared__ float partial_s[256];
    unsigned int t = threadIdx.x;
    partial_s[t] = blockIdx.x * blockDim.x + t < n ? x[blockIdx.x * blockDim.x + t] : 0.0f;
    for (unsigned int stride = blockDim.x / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (t < stride) {
            partial_s[t] += partial_s[t + stride];
        }
    }
    if (t == 0) {
        atomicAdd(out, partial_s[0]);
    }
    // END SOLUTION
}
"""
COPY = """\
extern "C" __global__ void Copy(const float* x, float* y, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i];
    }
}
"""
LATER = """\
// Builds on 02_sum: the same tree, of scaled inputs.
extern "C" __global__ void ScaledSum(const float* x, float* out, unsigned int n, float scale) {
    __shared__ float partial_s[256];
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + t;
    partial_s[t] = i < n ? scale * x[i] : 0.0f;
    // BEGIN SOLUTION demo/02_sum
    for (unsigned int stride = blockDim.x / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (t < stride) {
            partial_s[t] += partial_s[t + stride];
        }
    }
    // END SOLUTION demo/02_sum
    if (t == 0) {
        atomicAdd(out, partial_s[0]);
    }
}
"""
WARM_UP = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
TESTS = "# tests: 1 point\nassert double(2) == 4\n### BEGIN HIDDEN TESTS\nassert double(3) == 6\n### END HIDDEN TESTS"


def notebook(*sources):
    cells = [{"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None}
             for s in sources]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.fixture
def tiny(tmp_path):
    """A workbook with one exercise (demo/02_sum), a variant before it and one built on it."""
    root = tmp_path / "source"
    files = {"kernels/exercises.toml": '[exercise."demo/02_sum"]\n',
             "kernels/demo/01_copy.cu": COPY, "kernels/demo/02_sum.cu": SUM,
             "kernels/demo/03_scaled.cu": LATER, "notebooks/demo.ipynb": notebook(WARM_UP, TESTS),
             "docs/student-README.md": "# The student's README\n", "README.md": "# The instructor's README\n",
             "pyproject.toml": "[project]\nname = 'demo'\n", "pmpp/__init__.py": ""}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{path.name} no longer holds {old!r}"
    path.write_text(text.replace(old, new, 1))


# ----------------------------------------------------------------------------------------------
# Markers

def test_release_replaces_solutions_with_stubs(student_tree):
    text = (student_tree / "kernels/reduction/05_coarsened.cu").read_text()
    assert exercises.STUB_MARK in text and "// BEGIN SOLUTION" not in text and "atomicAdd" not in text
    assert not (student_tree / "tests").exists()


@pytest.mark.parametrize("old, new, where", [
    ("    // END SOLUTION\n", "    // END SOLUTON\n", "02_sum.cu:16"),
    ("    // BEGIN SOLUTION\n", "    //BEGIN SOLUTION\n", "02_sum.cu:3"),
    ("    // BEGIN SOLUTION\n", "    // begin solution\n", "02_sum.cu:3"),
    ("    // END SOLUTION\n", "", "02_sum.cu:3"),                                   # BEGIN, no END
    ("        __syncthreads();\n", "        // BEGIN SOLUTION\n", "02_sum.cu:8"),  # nested
    ("    // BEGIN SOLUTION\n", "", "02_sum.cu:15"),                                 # END, no BEGIN
    ("    atomicAdd(out, partial_s[0]);\n    }\n", "    atomicAdd(out, partial_s[0]);\n    } // END SOLUTION\n",
     "02_sum.cu:15"),                                                                 # not alone on its line
])
def test_release_refuses_a_malformed_marker_before_writing(tiny, tmp_path, old, new, where):
    edit(tiny / "kernels/demo/02_sum.cu", old, new)
    with pytest.raises(MarkerError, match=re.escape(where)):
        release.release(tmp_path / "student", source_dir=tiny)
    assert not (tmp_path / "student").exists()


@pytest.mark.parametrize("file, old, new, message", [
    ("kernels/demo/03_scaled.cu", "SOLUTION demo/02_sum\n    for", "SOLUTION\n    for",
     "03_scaled.cu:7: this file is not an exercise"),
    ("kernels/demo/03_scaled.cu", "BEGIN SOLUTION demo/02_sum", "BEGIN SOLUTION demo/09_nothing",
     "03_scaled.cu:7: no exercise 'demo/09_nothing'"),
    ("kernels/demo/03_scaled.cu", "END SOLUTION demo/02_sum", "END SOLUTION demo/01_copy",
     "03_scaled.cu:14: END SOLUTION demo/01_copy closes the region of demo/02_sum"),
    ("kernels/demo/02_sum.cu", "    // BEGIN SOLUTION\n", "", "02_sum.cu:15: END SOLUTION without a BEGIN"),
    ("notebooks/demo.ipynb", "### END SOLUTION", "", "demo.ipynb, cell 0, line 2: ### BEGIN SOLUTION is never closed"),
    ("notebooks/demo.ipynb", "### BEGIN HIDDEN TESTS", "## BEGIN HIDDEN TESTS", "demo.ipynb, cell 1, line 3"),
    ("kernels/exercises.toml", "", '[exercise."demo/01_copy"]\n', "exercise demo/01_copy (kernels/exercises.toml) has no solution region"),
])
def test_release_refuses_markers_that_do_not_name_an_exercise_or_do_not_match(tiny, tmp_path, file, old, new,
                                                                              message):
    path = tiny / file
    path.write_text(new + path.read_text() if not old else path.read_text().replace(old, new, 1))
    with pytest.raises(MarkerError, match=re.escape(message)):
        release.release(tmp_path / "student", source_dir=tiny)
    assert not (tmp_path / "student").exists()


def test_a_variant_built_on_an_exercise_gets_a_stub_that_names_it(tiny, tmp_path):
    release.release(tmp_path / "student", source_dir=tiny)
    later = (tmp_path / "student/kernels/demo/03_scaled.cu").read_text()
    assert "partial_s[t] += partial_s[t + stride]" not in later and "SOLUTION" not in later
    assert "This part is exercise demo/02_sum's answer" in later
    assert f"{exercises.STUB_MARK} (part of exercise demo/02_sum)" in later
    assert "partial_s[t] = i < n ? scale * x[i] : 0.0f;" in later                # the rest stays


def test_releasing_a_solution_keeps_it_in_every_file(tiny, tmp_path):
    release.release(tmp_path / "student", source_dir=tiny, solutions=["demo/02_sum"])
    for name in ("02_sum", "03_scaled"):
        text = (tmp_path / f"student/kernels/demo/{name}.cu").read_text()
        assert "partial_s[t] += partial_s[t + stride];" in text
        assert "SOLUTION" not in text and exercises.STUB_MARK not in text


# ----------------------------------------------------------------------------------------------
# The leak check

def test_the_release_holds_no_solution(student_tree):
    assert release.check_folder(student_tree) == []


def test_the_leak_check_finds_a_solution_copied_into_another_file(student_tree, tmp_path):
    # reduction/14_warp_shuffle's loop, re-indented and commented, in a file of notes.
    shutil.copytree(student_tree / "kernels", tmp_path / "kernels")
    (tmp_path / "notes.md").write_text(
        "```cuda\nfor (unsigned int offset = 16;  offset > 0; offset /= 2)   // halve\n{\n"
        "  sum += __shfl_down_sync(FULL_MASK, sum, offset);\n}\n```\n")
    found = release.check_folder(tmp_path)
    assert [(leak.file, leak.exercise) for leak in found] == [("notes.md", "reduction/14_warp_shuffle")]
    assert "sum += __shfl_down_sync(FULL_MASK, sum, offset);" in str(found[0])


def test_release_refuses_to_ship_a_solution_left_unmarked(tiny, tmp_path):
    copied = SUM.replace("    // BEGIN SOLUTION\n", "").replace("    // END SOLUTION\n", "")
    (tiny / "kernels/demo/04_copied.cu").write_text(copied.replace("Sum(", "Copied("))
    with pytest.raises(release.LeakError) as error:
        release.release(tmp_path / "student", source_dir=tiny)
    message = str(error.value)
    assert "kernels/demo/04_copied.cu holds exercise demo/02_sum's solution" in message
    assert "partial_s[t] += partial_s[t + stride];" in message
    assert not (tmp_path / "student").exists()


def test_release_refuses_a_notebook_solution_repeated_in_another_cell(tiny, tmp_path):
    warm_up = ("def double(x):\n    ### BEGIN SOLUTION\n    doubled_value = x + x  # the answer\n    return doubled_value // 1\n"
               "    ### END SOLUTION")
    answer = "def twice(x):\n    doubled_value   =   x + x\n    return doubled_value // 1   # floor division, not a comment"
    (tiny / "notebooks/demo.ipynb").write_text(notebook(warm_up, answer))
    with pytest.raises(release.LeakError, match=r"notebooks/demo.ipynb holds exercise notebooks/demo.ipynb, cell 0"):
        release.release(tmp_path / "student", source_dir=tiny)


# ----------------------------------------------------------------------------------------------
# What is released: the workbook's list, not git's

@pytest.mark.slow
def test_the_released_set_does_not_depend_on_git_or_stray_files(tmp_path):
    ignore = shutil.ignore_patterns(".git", ".venv", ".ci", "*.egg-info", "tests")
    plain, tracked = tmp_path / "plain", tmp_path / "tracked"
    for copy in (plain, tracked):
        shutil.copytree(ROOT, copy, ignore=ignore)
    git(tracked, "init", "-q")
    git(tracked, "add", "-A")
    git(tracked, "commit", "-q", "-m", "the workbook")
    for copy in (plain, tracked):                     # untracked in `tracked`, and never in git in `plain`
        shutil.copy(copy / "notebooks/10_reduction.ipynb", copy / "notebooks/13_extra.ipynb")
        for junk in ("kernels/reduction/05_coarsened.cu~", "kernels/reduction/05_coarsened.cu.orig",
                     "pmpp/release.py.bak", "notebooks/.#10_reduction.ipynb", "pmpp/__pycache__/x.pyc",
                     "notebooks/.ipynb_checkpoints/10_reduction-checkpoint.ipynb", "pmpp/x.egg-info/PKG-INFO"):
            (copy / junk).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(copy / "kernels/reduction/05_coarsened.cu", copy / junk)
    expected = sorted(release.released_paths(ROOT) + ["notebooks/13_extra.ipynb"])
    assert release.released_paths(plain) == release.released_paths(tracked) == expected
    assert not any(p.startswith(("tests/", ".ci/", ".git/")) for p in expected)
    assert {"pyproject.toml", "kernels/exercises.toml", "pmpp/backends/cpu/include/cuda/barrier"} <= set(expected)
    assert files_of(release.release(tmp_path / "a", source_dir=plain).folder) == \
        files_of(release.release(tmp_path / "b", source_dir=tracked).folder)


# ----------------------------------------------------------------------------------------------
# Releasing again: in place

def git(root, *args):
    return subprocess.run(["git", "-c", "user.name=pmpp", "-c", "user.email=pmpp@example.org", *args],
                          cwd=root, capture_output=True, text=True, check=True).stdout


def test_releasing_again_updates_in_place_and_keeps_git(tiny, tmp_path):
    student = tmp_path / "student"
    release.release(student, source_dir=tiny)
    git(student, "init", "-q")
    git(student, "add", "-A")
    git(student, "commit", "-q", "-m", "release 1")
    (student / "mine.txt").write_text("the student's own file")
    edit(tiny / "kernels/demo/01_copy.cu", "y[i] = x[i];", "y[i] = 2.0f * x[i];")
    (tiny / "kernels/demo/03_scaled.cu").unlink()
    again = release.release(student, source_dir=tiny)
    assert (student / ".git").is_dir() and (student / "mine.txt").read_text() == "the student's own file"
    assert again.changed == ["kernels/demo/01_copy.cu"] and again.removed == ["kernels/demo/03_scaled.cu"]
    status = sorted(git(student, "status", "--porcelain").splitlines())
    assert status == [" D kernels/demo/03_scaled.cu", " M .pmpp-release", " M kernels/demo/01_copy.cu",
                      "?? mine.txt"]


@pytest.mark.slow
def test_releasing_twice_gives_identical_files(student_tree, tmp_path):
    again = release.release(tmp_path / "again")
    assert files_of(student_tree) == files_of(again.folder)
    assert release.release(again.folder).changed == []


def test_release_refuses_a_folder_with_other_files(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not empty"):
        release.release(tmp_path)


def test_release_refuses_to_overwrite_a_file_it_did_not_write(tiny, tmp_path):
    student = tmp_path / "student"
    release.release(student, source_dir=tiny)
    (student / "kernels/demo/04_new.cu").write_text("// the student's")
    (tiny / "kernels/demo/04_new.cu").write_text(COPY)
    with pytest.raises(ValueError, match="kernels/demo/04_new.cu"):
        release.release(student, source_dir=tiny)
    assert (student / "kernels/demo/04_new.cu").read_text() == "// the student's"


# ----------------------------------------------------------------------------------------------
# What a student gets

def test_released_stubs_fail_grading_as_not_implemented(student_tree):
    for e in exercises.exercises():
        report = exercises.grade(e.name, student_tree / "kernels" / e.chapter / f"{e.variant}.cu")
        failed = " | ".join(c.reason for c in report.checks if not c.passed)
        assert not report.passed and "not implemented yet" in failed, str(report)


@pytest.mark.slow
def test_released_variants_built_on_exercises_compile(student_tree):
    built_on = 0
    for chapter in map(chapters.get, chapters.names()):
        for variant in chapter.variants:
            path = student_tree / "kernels" / chapter.kernel_path(variant)
            if "(part of exercise " in path.read_text():
                load(str(path), backend="cpu", defines=variant.defines, name_expressions=variant.name_expressions)
                built_on += 1
    assert built_on > 0


def test_released_notebooks_have_no_outputs_solutions_or_hidden_tests(student_tree):
    for path in (student_tree / "notebooks").glob("*.ipynb"):
        nb = json.loads(path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
        text = "".join("".join(c["source"]) for c in code)
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    reduction = (student_tree / "notebooks/10_reduction.ipynb").read_text()
    assert "raise NotImplementedError()" in reduction


def test_the_students_readme_is_not_the_instructors(student_tree):
    readme = (student_tree / "README.md").read_text()
    assert readme != (ROOT / "README.md").read_text()
    for instructor_only in ("For instructors", "pytest", "tests/", "nbval", "pmpp release", "BEGIN SOLUTION",
                            "<!-- include"):
        assert instructor_only not in readme, instructor_only
    for student in ("pmpp exercises", "pmpp grade reduction/05_coarsened path/to/file.cu", "## Setup",
                    "## Quickstart", "## Using pmpp from Python"):
        assert student in readme, student
    named = set(re.findall(r"`((?:kernels|notebooks|docs|pmpp|results)/[^`<>*\s]*)`", readme))
    assert named and all((student_tree / path).exists() for path in named), named
    assert not (student_tree / release.STUDENT_README).exists()


def quickstart(readme: str) -> list[str]:
    """The commands of README's Quickstart block, one per line, comments dropped."""
    section = readme.split("## Quickstart", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_students_quickstart_passes_in_the_release(student_tree, tmp_path):
    # `pip install` is the environment's business: the released package runs from PYTHONPATH, and
    # `pmpp` is its command line.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pmpp").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c "
                                  "'import sys; from pmpp.cli import main; sys.exit(main())' \"$@\"\n")
    (bin_dir / "pmpp").chmod(0o755)
    env = {**released_env(student_tree), "PMPP_BACKEND": "cpu",
           "PATH": os.pathsep.join([str(bin_dir), os.environ["PATH"]])}
    commands = quickstart((student_tree / "README.md").read_text())
    assert any(c.startswith("pmpp run") for c in commands), commands
    for command in commands:
        if command.startswith("pip install"):
            extras = re.findall(r"\[(\w+)\]", command)
            assert all(f"\n{e} = " in (student_tree / "pyproject.toml").read_text() for e in extras)
            continue
        run = subprocess.run(["bash", "-c", command], cwd=student_tree, env=env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0, f"{command}: {run.stdout[-3000:]}{run.stderr[-3000:]}"
        if command.startswith("pmpp run"):
            assert "exercise, not implemented yet" in run.stdout and "FAILED" not in run.stdout + run.stderr
            assert "`pmpp grade " in run.stdout


def test_released_code_is_the_one_the_notebooks_import(student_tree):
    probe = subprocess.run([sys.executable, "-c", "import pmpp; print(pmpp.kernels_dir())"],
                           cwd=student_tree, env=released_env(student_tree), capture_output=True, text=True,
                           check=True)
    assert Path(probe.stdout.strip()) == student_tree / "kernels"


def test_the_release_reuses_the_workbooks_engine_builds(student_tree, tmp_path):
    """Another copy of the same engine names its headers as the workbook's does in what it builds,
    so a class's release sharing PMPP_CACHE_DIR with the workbook does not compile a kernel twice."""
    code = ("import pmpp\nfrom pmpp.backends.cpu import toolchain\n"
            "pmpp.load('reduction/03_shared_memory.cu', backend='cpu')\nprint(toolchain.INCLUDE_DIR)")
    cache = tmp_path / "cache"

    def build(cwd, env):
        run = subprocess.run([sys.executable, "-c", code], cwd=cwd, env={**env, "PMPP_CACHE_DIR": str(cache)},
                             capture_output=True, text=True, check=True)
        return run.stdout.strip(), sorted(p.name for p in (cache / "cpu").glob("mod-*.so"))

    workbook_engine, built = build(ROOT, os.environ)
    released_engine, after = build(student_tree, released_env(student_tree))
    assert released_engine.startswith(str(student_tree)) and not workbook_engine.startswith(str(student_tree))
    assert built and after == built


@pytest.mark.slow
@pytest.mark.parametrize("notebook", [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb"))])
def test_released_notebook_runs_under_nbval(student_tree, notebook):
    # One notebook a test, so that a parallel run (pytest -n) spreads them over the workers.
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "-q", "-p", "no:cacheprovider",
                          f"notebooks/{notebook}"], cwd=student_tree, env=released_env(student_tree),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout.splitlines()[-1]


@pytest.mark.slow
def test_a_stubbed_variant_is_skipped_with_what_to_do(student_tree, capsys):
    env = released_env(student_tree)
    code = ("from pmpp import chapters, exercises, runner\n"
            "chapter = chapters.get('reduction')\n"
            "kept = [v.name for v in exercises.implemented(chapter)]\n"
            "assert '05_coarsened' not in kept and '03_shared_memory' in kept\n"
            "with exercises.skip_if_not_implemented():\n"
            "    runner.verify(chapter, chapter.variant('05_coarsened'))\n"
            "    print('ran the stub')\n"
            "entries = runner.measure(chapter, variants=['03_shared_memory', '05_coarsened'], library=False)\n"
            "assert [e['name'] for e in entries] == ['03_shared_memory']\n"
            "assert runner.measure(chapter, variants=[], library=False) == []   # none written: none run\n"
            "with exercises.skip_if_not_implemented():\n"
            "    runner.verify(chapter, chapter.variant('15_vectorized'))\n"
            "    print('ran the stub')\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=student_tree, env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    line = ("exercise: implement kernels/reduction/05_coarsened.cu, "
            "then run `pmpp grade reduction/05_coarsened`")
    assert run.stdout.count(line) == 3 and "ran the stub" not in run.stdout
    # A later variant that builds on an exercise is not one: it says which exercise it waits for.
    built_on = ("skipped reduction/15_vectorized: it builds on exercise reduction/14_warp_shuffle, whose "
                "answer it holds as a stub until released")
    assert run.stdout.count(built_on) == 2, run.stdout
    assert "`pmpp grade reduction/14_warp_shuffle`" in run.stdout and "pmpp grade reduction/15" not in run.stdout


# ----------------------------------------------------------------------------------------------
# nbgrader

def course(tmp_path, assignments):
    pytest.importorskip("nbgrader", reason="nbgrader is not installed (pip install -e '.[course]')")
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(tmp_path)!r}\n"
        f"c.CourseDirectory.db_assignments = {[dict(name=a) for a in assignments]!r}\n"
        "c.CourseDirectory.db_students = [dict(id='solution'), dict(id='stub')]\n")
    return tmp_path


def nbgrader_cli(root, *args):
    run = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--force"], cwd=root,
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return run


@pytest.mark.slow
def test_nbgrader_generates_every_chapter_notebook(tmp_path):
    names = [p.stem for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    root = course(tmp_path, names)
    for name in names:
        (root / "source" / name).mkdir(parents=True)
        shutil.copy(ROOT / "notebooks" / f"{name}.ipynb", root / "source" / name)
        nbgrader_cli(root, "generate_assignment", name)
        released = (root / "release" / name / f"{name}.ipynb").read_text()
        assert "BEGIN SOLUTION" not in released and "HIDDEN TESTS" not in released


@pytest.mark.slow
def test_nbgrader_autogrades_a_chapter(tmp_path):
    # The instructor's notebook scores every point; the student version, with the Python warm-up
    # left as `raise NotImplementedError()`, loses the warm-up's points.
    name = "10_reduction"
    root = course(tmp_path, [name])
    (root / "source" / name).mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / f"{name}.ipynb", root / "source" / name)
    nbgrader_cli(root, "generate_assignment", name)
    for student, origin in (("solution", "source"), ("stub", "release")):
        (root / "submitted" / student / name).mkdir(parents=True)
        shutil.copy(root / origin / name / f"{name}.ipynb", root / "submitted" / student / name)
    nbgrader_cli(root, "autograde", name)
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        solution = gradebook.find_submission(name, "solution")
        stub = gradebook.find_submission(name, "stub")
        assert solution.max_score > 0 and solution.score == solution.max_score
        assert stub.score < stub.max_score


@pytest.mark.slow
def test_a_students_finished_kernel_grades_in_the_release(student_tree, tmp_path):
    # The student replaces the stub, its marker line included, as anyone would, and runs the
    # command the stub names, from the release's root and from another folder with the file's path.
    import shutil
    released = student_tree / "kernels/reduction/05_coarsened.cu"
    stubbed = released.read_text()
    finished = re.sub(r"[ \t]*// (BEGIN|END) SOLUTION\n", "",
                      (release.kernels_dir() / "reduction/05_coarsened.cu").read_text())
    try:
        released.write_text(finished)
        env = released_env(student_tree)
        grade = [sys.executable, "-m", "pmpp.cli", "grade", "reduction/05_coarsened", "--seed", "4"]
        listed = subprocess.run([sys.executable, "-m", "pmpp.cli", "exercises"], cwd=student_tree,
                                env=env, capture_output=True, text=True)
        assert "reduction/05_coarsened" in listed.stdout
        here = subprocess.run(grade, cwd=student_tree, env=env, capture_output=True, text=True)
        assert here.returncode == 0 and "reduction/05_coarsened: PASS" in here.stdout, here.stdout + here.stderr
        elsewhere = tmp_path / "mine"
        elsewhere.mkdir()
        shutil.copy(released, elsewhere / "05_coarsened.cu")
        given = subprocess.run(grade + ["05_coarsened.cu"], cwd=elsewhere, env=env,
                               capture_output=True, text=True)
        assert given.returncode == 0 and str(elsewhere / "05_coarsened.cu") in given.stdout
    finally:
        released.write_text(stubbed)
