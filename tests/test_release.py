"""The student release as a student gets it: its notebooks run top to bottom with every exercise
stubbed; and nbgrader, for instructors who use it, generates and autogrades the notebooks."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pmpp import release

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def student_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("release") / "workbook"
    release.release(root)
    return root


def released_env(root):
    # The released pmpp package first on the path: its kernels/ (the stubs) are the ones run.
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
def test_released_notebooks_run_under_nbval(student_tree):
    probe = subprocess.run([sys.executable, "-c", "import pmpp; print(pmpp.kernels_dir())"],
                           cwd=student_tree, env=released_env(student_tree), capture_output=True, text=True,
                           check=True)
    assert Path(probe.stdout.strip()) == student_tree / "kernels"
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "-q", "-p", "no:cacheprovider",
                          "notebooks"], cwd=student_tree, env=released_env(student_tree),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout.splitlines()[-1]


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
            "assert [e['name'] for e in entries] == ['03_shared_memory']\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=student_tree, env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    line = ("exercise: implement kernels/reduction/05_coarsened.cu, "
            "then run `pmpp grade reduction/05_coarsened`")
    assert run.stdout.count(line) == 3 and "ran the stub" not in run.stdout


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
