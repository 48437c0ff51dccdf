"""The committed notebooks: readable without running, assignable, and nbgrader's format."""
import json
import re
from pathlib import Path

import pytest

from pmpp import exercises, notebooks

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
CHAPTERS = [p for p in NOTEBOOKS if not p.name.startswith("00_")]


def cells(path, kind=None):
    nb = json.loads(path.read_text())
    return [c for c in nb["cells"] if kind is None or c["cell_type"] == kind]


def source(cell):
    return "".join(cell["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_with_outputs_and_no_errors(path):
    code = cells(path, "code")
    assert all(c["execution_count"] is not None for c in code), \
        f"{path.name} is not committed executed: jupyter nbconvert --to notebook --execute --inplace {path}"
    errors = [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors, f"{path.name} was committed with an error: {errors[0]['ename']}: {errors[0]['evalue']}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_as_executed_on_a_gpu(path):
    # The committed outputs are what a reader sees on GitHub: their "measured here" cells must be a
    # GPU's, never the CPU engine's times. The setup cell's first line says where the cells ran.
    first = next(("".join(o.get("text", "")) for c in cells(path, "code") for o in c["outputs"]
                  if o.get("output_type") == "stream"), "")
    assert first.startswith("GPU: ") and "Kernels run on it through CuPy" in first, \
        f"{path.name} was not executed on a GPU (its first output: {first[:120]!r}); run `pmpp notebooks` on one"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_are_images_not_text(path):
    assert "%matplotlib inline" in source(cells(path, "code")[0]), "set the inline backend first"
    for cell in cells(path, "code"):
        for output in cell["outputs"]:
            data = output.get("data", {})
            # Jupyter keeps a text form beside every image; a figure with only the text did not render.
            assert "<Figure size" not in "".join(data.get("text/plain", "")) or "image/png" in data, \
                f"a figure printed as text in {path.name}:\n{source(cell)}"
        if re.search(r"\bplots\.\w+\(|\bplt\.(show|subplots|figure)\(", source(cell)):
            assert any("image/png" in o.get("data", {}) for o in cell["outputs"]), \
                f"a cell that draws emitted no PNG in {path.name}:\n{source(cell)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbgrader_metadata_matches_the_markers(path):
    nb = json.loads(path.read_text())
    assert notebooks.notebook_text(notebooks.nbgrader_metadata(nb)) == path.read_text(), \
        f"{path.name}: nbgrader metadata out of date; run `pmpp exercises --nbgrader`"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_each_chapter_ends_with_exercises(path):
    text = [source(c) for c in cells(path)]
    heading = next((i for i, t in enumerate(text) if t.startswith("## Exercises")), None)
    assert heading is not None, f"{path.name} has no '## Exercises' section"
    after = "\n".join(text[heading:])
    graded = {e.name for e in exercises.exercises()}
    named = set(re.findall(r"pmpp grade ([\w/]+)", after)) & graded
    assert len(named) >= 2, f"{path.name}: at least two exercises with their `pmpp grade` command"
    assert "Hint" in after and "### BEGIN SOLUTION" in after and "### BEGIN HIDDEN TESTS" in after


def test_no_reference_a_reader_cannot_find():
    unfindable = re.compile(r"seeds/|lab report|seed 0\d\d", re.IGNORECASE)
    for path in NOTEBOOKS:
        for cell in cells(path):
            assert not unfindable.search(source(cell)), f"{path.name}: {source(cell)[:200]}"


def test_no_reference_a_reader_cannot_find_in_kernels_or_package():
    unfindable = re.compile(r"seeds/|lab report|seed 0\d\d|the lab's", re.IGNORECASE)
    root = Path(__file__).parent.parent
    files = [*root.glob("kernels/**/*.cu"), *root.glob("pmpp/**/*.py"), root / "README.md",
             *root.glob("docs/*.md")]
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not unfindable.search(line), f"{path.relative_to(root)}:{number}: {line}"


def test_execute_keeps_outputs_figures_and_reports_errors(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient", reason="pip install -e '.[notebooks]'")
    from pmpp import notebooks
    path = tmp_path / "probe.ipynb"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%matplotlib inline\nimport matplotlib.pyplot as plt\nprint(6 * 7)"),
        nbformat.v4.new_code_cell("plt.plot([1, 2], [3, 4]);"),
        nbformat.v4.new_code_cell("# tests: 1 point\nassert 1 + 1 == 3, 'wrong on purpose'"),
        nbformat.v4.new_code_cell("print('after the error')")])
    nbformat.write(nb, path)
    errors = notebooks.execute(path)
    assert len(errors) == 1 and errors[0].startswith("cell 2: AssertionError: wrong on purpose")
    ran = json.loads(path.read_text())
    assert "42" in "".join(ran["cells"][0]["outputs"][0]["text"])
    assert any("image/png" in o.get("data", {}) for o in ran["cells"][1]["outputs"])
    assert ran["cells"][2]["metadata"]["nbgrader"]["points"] == 1          # metadata stamped
    assert ran["cells"][3]["outputs"] == []                                 # stopped at the error


def test_unknown_notebook_name_lists_the_notebooks():
    from pmpp import notebooks
    with pytest.raises(ValueError, match="there are: 00_start_here"):
        notebooks.notebook_paths(["99_nothing"])
