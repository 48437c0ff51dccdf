"""Hosted notebooks (Google Colab, Kaggle): every notebook's setup cell, and the GPU line it prints.

:data:`SETUP_CELL` is the first code cell of each notebook. It has to run before ``pmpp`` can be
imported, so the installing is in the cell itself: where ``pmpp`` is importable it installs nothing;
otherwise it clones the git URL in ``WORKBOOK``, installs the clone (``pip install -e``, with CuPy
where there is a GPU) and puts it on ``sys.path``. Either way it then works from the ``notebooks/``
folder beside the ``pmpp`` it found and prints :func:`describe_gpu`. ``pmpp release --url`` fills
``WORKBOOK`` in for students (:func:`with_setup_cell`).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess

from . import backends

CELL_ID = "hosted-setup"
FIRST_LINE = ("# Setup for Google Colab and Kaggle. "
              "Where pmpp is installed (your own machine) it installs nothing.")

SETUP_CELL = FIRST_LINE + '''
# Hosted: set WORKBOOK to the git URL of the workbook this notebook comes from, then run the cell.
WORKBOOK = ""

%matplotlib inline

def _setup_pmpp(url, folder="pmpp-workbook"):
    import importlib.util, os, shutil, subprocess, sys
    from pathlib import Path

    def run(command, failed):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{failed}\\n{done.stderr.strip()}")

    spec = importlib.util.find_spec("pmpp")
    if spec is None or spec.origin is None:          # missing, or a stray folder named pmpp
        if not url:
            hosted = "COLAB_RELEASE_TAG" in os.environ or "KAGGLE_KERNEL_RUN_TYPE" in os.environ
            raise SystemExit("pmpp is not installed. " + (
                "Set WORKBOOK at the top of this cell to the workbook's git URL (your course gives it), "
                "then run the cell again." if hosted else
                "From the workbook's folder run `pip install -e .`, then restart the kernel."))
        clone = Path.cwd() / folder
        if not (clone / ".git").is_dir():
            run(["git", "clone", "--depth", "1", url, str(clone)],
                f"could not clone {url}: check the URL (on Kaggle, turn Internet on in the settings)")
        extra = "[gpu]" if shutil.which("nvidia-smi") else ""
        run([sys.executable, "-m", "pip", "install", "-q", "-e", f"{clone}{extra}"],
            f"pip could not install {clone}{extra}")
        sys.path.insert(0, str(clone))        # this process does not read the new install's .pth
        importlib.invalidate_caches()
        spec = importlib.util.find_spec("pmpp")
        if spec is None:
            raise SystemExit(f"{url} holds no pmpp package: set WORKBOOK to the workbook's git URL")
    notebooks = Path(spec.origin).parent.parent / "notebooks"
    if notebooks.is_dir():
        os.chdir(notebooks)
    from pmpp.hosted import describe_gpu
    print(describe_gpu())


_setup_pmpp(WORKBOOK)'''

_WORKBOOK_LINE = re.compile(r'^WORKBOOK = .*$', re.MULTILINE)


def setup_cell(workbook: str = "") -> str:
    """The setup cell's text, with ``WORKBOOK`` set to ``workbook`` (a git URL; "" asks for one)."""
    if "\n" in workbook:
        raise ValueError(f"the workbook URL {workbook!r} must be one line")
    return _WORKBOOK_LINE.sub(lambda _: f"WORKBOOK = {json.dumps(workbook)}", SETUP_CELL, count=1)


def is_setup_cell(cell) -> bool:
    return cell.get("cell_type") == "code" and _text(cell).startswith(FIRST_LINE)


def with_setup_cell(nb: dict, workbook: str = "") -> dict:
    """``nb`` (a notebook as a dict) with the setup cell as its first code cell, added or rewritten;
    a rewritten cell loses its outputs unless its text is unchanged."""
    text = setup_cell(workbook)
    cells = nb.setdefault("cells", [])
    existing = next((cell for cell in cells if is_setup_cell(cell)), None)
    if existing is None:
        first_code = next((i for i, cell in enumerate(cells) if cell.get("cell_type") == "code"), len(cells))
        cells.insert(first_code, {"cell_type": "code", "execution_count": None, "id": CELL_ID,
                                  "metadata": {}, "outputs": [], "source": text})
    elif _text(existing) != text:
        existing.update(source=text, outputs=[], execution_count=None)
    return nb


def _text(cell) -> str:
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


# ----------------------------------------------------------------------------------------------
# Which GPU the cell found

def describe_gpu() -> str:
    """One line: the GPU's name and compute capability (from CuPy, else ``nvidia-smi``), or that
    there is none and kernels run on the CPU engine."""
    cupy_gpu, cupy_problem = backends.cupy_gpu()
    if cupy_gpu:
        return f"GPU: {_gpu_text(*cupy_gpu)}. Kernels run on it through CuPy."
    smi_gpu = _gpu_from_nvidia_smi()
    if smi_gpu:
        return (f"GPU: {_gpu_text(*smi_gpu)}, but {cupy_problem}: kernels run on pmpp's CPU engine. "
                "For the GPU: pip install cupy-cuda12x (cupy-cuda13x for CUDA 13), then restart the kernel.")
    return ("No NVIDIA GPU found: kernels run on pmpp's CPU engine (results checked, times are CPU "
            "times). For a GPU: on Colab, Runtime > Change runtime type > T4 GPU; on Kaggle, the "
            "GPU T4 x2 accelerator in the notebook's settings.")


def _gpu_text(name: str, major: int, minor: int) -> str:
    return f"{name}, compute capability {major}.{minor} (sm_{major}{minor})"


def _gpu_from_nvidia_smi():
    """(name, major, minor) of the first GPU ``nvidia-smi`` lists, or None."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.match(r"^(.+?),\s*(\d+)\.(\d+)\s*$", done.stdout.strip().splitlines()[0]) \
        if done.returncode == 0 and done.stdout.strip() else None
    return (found[1].strip(), int(found[2]), int(found[3])) if found else None
