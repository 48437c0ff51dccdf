"""The notebooks' setup cell for Google Colab and Kaggle, run in a real Jupyter kernel with the
hosted runtime faked: its environment variable set, pmpp hidden from the kernel, a local git
repository as WORKBOOK, pip replaced by a stub that records what it was asked, and nvidia-smi by a
stub that reports a T4."""
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from pmpp import cli, hosted

ROOT = Path(__file__).parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
HOSTED_VARIABLES = ("COLAB_RELEASE_TAG", "KAGGLE_KERNEL_RUN_TYPE")

# Run first in the kernel: the workbook's own editable install is taken away, so that pmpp is not
# importable, as on a fresh Colab runtime; and CuPy is made missing.
HIDE_PMPP = """\
import importlib.util, sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.modules["cupy"] = None
assert importlib.util.find_spec("pmpp") is None, "pmpp is still importable: the test cannot hide it"
"""
REPORT = """\
import json, os, pmpp
print(json.dumps({"cwd": os.getcwd(), "pmpp": pmpp.__file__, "kernels": str(pmpp.kernels_dir())}))
"""


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture(scope="module")
def workbook_url(tmp_path_factory):
    """A git repository holding this workbook's package, kernels and notebooks folder."""
    repo = tmp_path_factory.mktemp("origin") / "workbook"
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    for folder in ("pmpp", "kernels"):
        shutil.copytree(ROOT / folder, repo / folder, ignore=junk)
    (repo / "notebooks").mkdir()
    (repo / "notebooks" / "README").write_text("the notebooks\n")
    shutil.copy(ROOT / "pyproject.toml", repo)
    return git_repository(repo)


def git_repository(folder: Path) -> str:
    """Commit everything in ``folder`` to a new git repository there; return its file:// URL."""
    git = ["git", "-C", str(folder), "-c", "user.name=pmpp", "-c", "user.email=pmpp@example.org"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "commit"], check=True)
    return folder.as_uri()


@pytest.fixture
def stubs(tmp_path):
    """pip and nvidia-smi stand-ins; pip writes each call's arguments to ``record``."""
    folder = tmp_path / "stubs"
    (folder / "pip").mkdir(parents=True)
    (folder / "pip" / "__init__.py").write_text("")
    (folder / "pip" / "__main__.py").write_text(
        "import json, os, sys\n"
        "with open(os.environ['PIP_RECORD'], 'a') as record:\n"
        "    record.write(json.dumps(sys.argv[1:]) + '\\n')\n")
    executable(folder / "gpu" / "nvidia-smi", '#!/bin/sh\necho "Tesla T4, 7.5"\n')
    return folder


def run_cells(tmp_path, stubs, cells, *, hosted_as=None, gpu=False):
    """Execute ``cells`` in a fresh kernel working in ``tmp_path/work``; return (outputs per cell,
    the pip calls recorded, the working folder)."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    record = tmp_path / "pip-calls.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in HOSTED_VARIABLES and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(stubs), PIP_RECORD=str(record), MPLBACKEND="Agg")
    if hosted_as:
        env[hosted_as] = "test"
    if gpu:
        env["PATH"] = os.pathsep.join([str(stubs / "gpu"), env["PATH"]])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(work)}}).execute(env=env)
    calls = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return [cell.outputs for cell in nb.cells], calls, work


def printed(outputs) -> str:
    return "".join(o.get("text", "") for o in outputs
                   if o["output_type"] == "stream" and o["name"] == "stdout")


def error(outputs):
    return next((o for o in outputs if o["output_type"] == "error"), None)


# ----------------------------------------------------------------------------------------------
# The committed notebooks

@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_opens_with_the_setup_cell(path):
    code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    first = code[0]
    assert first.source == hosted.setup_cell(), \
        f"{path.name}: the first code cell is not the setup cell of pmpp.hosted (or is out of date)"
    assert "nbgrader" not in first.metadata
    assert not any(hosted.is_setup_cell(c) for c in code[1:]), f"{path.name} has the setup cell twice"


# ----------------------------------------------------------------------------------------------
# The cell, run in a kernel

def test_on_colab_the_cell_clones_installs_and_works_from_the_clone(tmp_path, stubs, workbook_url):
    setup = hosted.setup_cell(workbook_url)
    outputs, calls, work = run_cells(tmp_path, stubs, [HIDE_PMPP, setup, setup, REPORT],
                                     hosted_as="COLAB_RELEASE_TAG", gpu=True)
    assert not any(error(o) for o in outputs), [error(o) for o in outputs if error(o)]
    clone = work / "pmpp-workbook"
    assert (clone / ".git").is_dir()
    assert calls == [["install", "-q", "-e", f"{clone}[gpu]"]], "one install, with CuPy for the GPU"
    where = json.loads(printed(outputs[3]))
    assert Path(where["cwd"]) == clone / "notebooks"
    assert Path(where["pmpp"]) == clone / "pmpp" / "__init__.py"
    assert Path(where["kernels"]) == clone / "kernels"
    assert "GPU: Tesla T4, compute capability 7.5 (sm_75), but CuPy is not installed" in printed(outputs[1])


def test_on_kaggle_without_a_gpu_the_cell_installs_no_cupy(tmp_path, stubs, workbook_url, monkeypatch):
    git_folder = Path(shutil.which("git")).parent
    if (git_folder / "nvidia-smi").exists():
        pytest.skip("nvidia-smi is installed beside git: this machine cannot pretend to have no GPU")
    monkeypatch.setenv("PATH", str(git_folder))          # git, and no nvidia-smi, for the kernel
    outputs, calls, work = run_cells(tmp_path, stubs, [HIDE_PMPP, hosted.setup_cell(workbook_url)],
                                     hosted_as="KAGGLE_KERNEL_RUN_TYPE")
    assert error(outputs[1]) is None, error(outputs[1])
    assert calls == [["install", "-q", "-e", str(work / "pmpp-workbook")]]
    assert printed(outputs[1]).startswith("No NVIDIA GPU found: kernels run on pmpp's CPU engine")


ASK_FOR_THE_URL = "Set WORKBOOK at the top of this cell"


@pytest.mark.parametrize("hosted_as, advice", [("COLAB_RELEASE_TAG", ASK_FOR_THE_URL),
                                               ("KAGGLE_KERNEL_RUN_TYPE", ASK_FOR_THE_URL),
                                               (None, "run `pip install -e .`")])
def test_without_a_workbook_url_the_cell_stops_and_says_what_to_set(tmp_path, stubs, hosted_as, advice):
    outputs, calls, work = run_cells(tmp_path, stubs, [HIDE_PMPP, hosted.setup_cell(), "print('ran on')"],
                                     hosted_as=hosted_as)
    stop = error(outputs[1])
    assert stop is not None and stop["ename"] == "SystemExit"
    assert stop["evalue"].startswith("pmpp is not installed.") and advice in stop["evalue"]
    assert calls == [] and not (work / "pmpp-workbook").exists()


def test_a_url_that_does_not_clone_stops_the_cell_with_git_s_reason(tmp_path, stubs):
    missing = (tmp_path / "no-such-repository").as_uri()
    outputs, calls, _ = run_cells(tmp_path, stubs, [HIDE_PMPP, hosted.setup_cell(missing)],
                                  hosted_as="COLAB_RELEASE_TAG")
    stop = error(outputs[1])
    assert stop["ename"] == "SystemExit" and stop["evalue"].startswith(f"could not clone {missing}")
    assert "turn Internet on" in stop["evalue"] and calls == []


def test_a_repository_without_pmpp_stops_the_cell(tmp_path, stubs):
    other = tmp_path / "other"
    other.mkdir()
    (other / "README.md").write_text("not the workbook\n")
    url = git_repository(other)
    outputs, _, _ = run_cells(tmp_path, stubs, [HIDE_PMPP, hosted.setup_cell(url)],
                              hosted_as="COLAB_RELEASE_TAG")
    stop = error(outputs[1])
    assert stop["ename"] == "SystemExit"
    assert stop["evalue"] == f"{url} holds no pmpp package: set WORKBOOK to the workbook's git URL"


def test_where_pmpp_is_importable_the_cell_installs_nothing(tmp_path, stubs):
    outputs, calls, _ = run_cells(tmp_path, stubs, [hosted.setup_cell("file:///unused"), REPORT])
    assert not any(error(o) for o in outputs), [error(o) for o in outputs if error(o)]
    assert calls == []
    assert Path(json.loads(printed(outputs[1]))["cwd"]) == ROOT / "notebooks"
    assert printed(outputs[0]).startswith(("GPU: ", "No NVIDIA GPU found"))


# ----------------------------------------------------------------------------------------------
# The GPU line

@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)


def test_describe_gpu_without_any_gpu(monkeypatch, no_cupy):
    monkeypatch.setattr(hosted.shutil, "which", lambda name: None)
    line = hosted.describe_gpu()
    assert line.startswith("No NVIDIA GPU found: kernels run on pmpp's CPU engine")
    assert "Change runtime type" in line


def test_describe_gpu_reads_nvidia_smi_when_cupy_is_missing(monkeypatch, no_cupy, stubs):
    monkeypatch.setenv("PATH", f"{stubs / 'gpu'}{os.pathsep}{os.environ['PATH']}")
    line = hosted.describe_gpu()
    assert line.startswith("GPU: Tesla T4, compute capability 7.5 (sm_75), but CuPy is not installed")
    assert "pip install cupy-cuda12x" in line


def test_describe_gpu_when_nvidia_smi_finds_no_driver(monkeypatch, no_cupy, tmp_path):
    failing = executable(tmp_path / "bin" / "nvidia-smi",
                         "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate "
                         "with the NVIDIA driver.'\nexit 9\n")
    monkeypatch.setenv("PATH", f"{failing.parent}{os.pathsep}{os.environ['PATH']}")
    assert hosted.describe_gpu().startswith("No NVIDIA GPU found")


# ----------------------------------------------------------------------------------------------
# Adding the cell to a notebook, and the student release

def test_with_setup_cell_adds_the_cell_before_the_first_code_cell_once():
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# Title"},
                    {"cell_type": "code", "metadata": {}, "outputs": [], "source": "import pmpp"}]}
    hosted.with_setup_cell(nb)
    hosted.with_setup_cell(nb)
    assert [c["cell_type"] for c in nb["cells"]] == ["markdown", "code", "code"]
    assert hosted.is_setup_cell(nb["cells"][1]) and nb["cells"][2]["source"] == "import pmpp"


def test_with_setup_cell_rewrites_a_stale_cell_and_drops_its_outputs():
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "execution_count": 3,
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": "GPU: old\n"}],
                     "source": hosted.FIRST_LINE + "\nWORKBOOK = ''\n"}]}
    cell = hosted.with_setup_cell(nb, "https://git.example.org/course/workbook.git")["cells"][0]
    assert cell["source"] == hosted.setup_cell("https://git.example.org/course/workbook.git")
    assert cell["outputs"] == [] and cell["execution_count"] is None
    assert 'WORKBOOK = "https://git.example.org/course/workbook.git"' in cell["source"]


def test_setup_cell_refuses_a_url_of_several_lines():
    with pytest.raises(ValueError, match="one line"):
        hosted.setup_cell("https://a.example.org/x.git\nimport os")


def test_release_url_fills_workbook_in_every_released_notebook(tmp_path, capsys):
    url = "https://git.example.org/course/pmpp-student.git"
    assert cli.main(["release", str(tmp_path / "student"), "--url", url]) == 0
    released = sorted((tmp_path / "student" / "notebooks").glob("*.ipynb"))
    assert [p.name for p in released] == [p.name for p in NOTEBOOKS]
    for path in released:
        code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        assert code[0].source == hosted.setup_cell(url), path.name
        assert code[0].outputs == []
