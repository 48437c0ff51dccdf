"""Re-execute the workbook's notebooks in place, so that they are committed with their outputs
(figures as PNG, tables) and read on GitHub without running; then stamp nbgrader's metadata.

On a GPU the notebooks measure live; without one they run on the CPU engine and show the
recordings in ``results/``. A cell that raises is kept with its error output and reported."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .errors import BackendUnavailableError
from .source import kernels_dir

CELL_TIMEOUT = 1800      # seconds; the exercise grading cells run the CPU engine's checks


def notebook_paths(names=()) -> list[Path]:
    """The workbook's notebooks, or those named (``10_reduction`` or ``10_reduction.ipynb``)."""
    folder = kernels_dir().parent / "notebooks"
    every = sorted(folder.glob("*.ipynb"))
    if not names:
        return every
    by_stem = {p.stem: p for p in every}
    missing = [n for n in names if Path(n).stem not in by_stem]
    if missing:
        raise ValueError(f"no notebook {', '.join(missing)} in {folder}; there are: {', '.join(by_stem)}")
    return [by_stem[Path(n).stem] for n in names]


def execute(path: Path, timeout: int = CELL_TIMEOUT) -> list[str]:
    """Run one notebook top to bottom in its folder, write it back with its outputs and nbgrader
    metadata; return the errors its cells raised ("cell N: Name: message"), empty if none."""
    data = run(json.loads(path.read_text()), path.parent, timeout=timeout)
    path.write_text(notebook_text(nbgrader_metadata(data)))
    return [f"cell {i}: {o['ename']}: {o['evalue']}" for i, cell in enumerate(data["cells"])
            for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def require_execution() -> None:
    """Raise BackendUnavailableError, saying what to install, unless notebooks can be executed here."""
    try:
        import ipykernel  # noqa: F401  (the kernel nbclient starts)
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError as exc:
        raise BackendUnavailableError(
            f"executing notebooks needs nbclient, nbformat and ipykernel ({exc}); "
            "pip install -e '.[notebooks]'") from None


def run(nb: dict, folder: Path, *, timeout: int = CELL_TIMEOUT, allow_errors=False) -> dict:
    """Execute a notebook (as JSON) in ``folder`` and return it with its outputs. A cell that raises
    keeps its error output; it stops the run unless ``allow_errors``. A kernel that dies or a cell
    past ``timeout`` raises (nbclient's errors)."""
    require_execution()
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    notebook = nbformat.reads(json.dumps(nb), as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", record_timing=False,
                            allow_errors=allow_errors, resources={"metadata": {"path": str(folder)}})
    try:
        client.execute()
    except CellExecutionError:
        pass                                     # the error is in the cell's outputs
    return json.loads(nbformat.writes(notebook))


def cell_source(cell: dict) -> str:
    """A cell's source as one string (nbformat allows a list of lines)."""
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


# ----------------------------------------------------------------------------------------------
# nbgrader's cell metadata

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
        source = cell_source(cell)
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
