"""The student release: the workbook with every exercise's solution replaced by a stub.

:func:`release` writes the student tree: solutions replaced by stubs that compile and fail
grading with "not implemented yet", notebook outputs stripped, hidden tests and the test suite
removed. Releasing twice gives identical files.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from .exercises import BEGIN, STUB_MARK
from .notebooks import notebook_text
from .source import kernels_dir

_CU_SOLUTION = re.compile(r"^([ \t]*)// BEGIN SOLUTION[^\n]*\n.*?^[ \t]*// END SOLUTION[^\n]*\n",
                          re.MULTILINE | re.DOTALL)
_NB_SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION[^\n]*\n.*?^[ \t]*### END SOLUTION[^\n]*(\n|$)",
                          re.MULTILINE | re.DOTALL)
_NB_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*(\n|$)",
                        re.MULTILINE | re.DOTALL)


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


