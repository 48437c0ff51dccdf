"""Re-execute the workbook's notebooks in place, so that they are committed with their outputs
(figures as PNG, tables) and read on GitHub without running; then stamp nbgrader's metadata.

On a GPU the notebooks measure live; without one they run on the CPU engine and show the
recordings in ``results/``. A cell that raises is kept with its error output and reported."""
from __future__ import annotations

import json
from pathlib import Path

from .errors import BackendUnavailableError
from .exercises import nbgrader_metadata, notebook_text
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
    try:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as exc:
        raise BackendUnavailableError(
            f"executing notebooks needs nbclient and nbformat ({exc}); pip install -e '.[notebooks]'") from None
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            allow_errors=False, resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except CellExecutionError:
        pass                                     # the error is in the cell's outputs, read below
    data = json.loads(nbformat.writes(nb))
    path.write_text(notebook_text(nbgrader_metadata(data)))
    return [f"cell {i}: {o['ename']}: {o['evalue']}" for i, cell in enumerate(data["cells"])
            for o in cell.get("outputs", []) if o.get("output_type") == "error"]
