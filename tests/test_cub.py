"""CUB's routines called directly (pmpp.libraries.cub): the reduction, scan and histogram chapters'
bar to beat. On the CPU: why a row cannot run, the build cache's key, nvcc's build and CUB's version
(where nvcc is installed). On a GPU: each CUB row's output passes its chapter's check at awkward
sizes on fresh random inputs, and CuPy's rows are labelled as CuPy is set up."""
from __future__ import annotations

import re
import numpy as np
import pytest

from pmpp import runner
from pmpp.chapters import histogram, reduction, scan
from pmpp.compilecheck import find_nvcc, nvcc_available
from pmpp.errors import CompileError
from pmpp.libraries import cub, cupy_routines

CHAPTERS = (reduction.CHAPTER, scan.CHAPTER, histogram.CHAPTER)
SIZES = (1, 1000, 2 ** 20 + 7)
needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="needs nvcc (the CUDA toolkit)")


def cub_row(chapter):
    rows = [lib for lib in chapter.library if lib.name.startswith("cub::")]
    assert len(rows) == 1, f"{chapter.name}: expected one CUB row, got {[lib.name for lib in rows]}"
    return rows[0]


def cupy_rows(chapter, routine):
    return {lib.name: lib for lib in chapter.library if lib.name.startswith(routine)}


# ------------------------------------------------------------------------------------------
# Without a GPU
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.name)
def test_cub_row_is_unavailable_on_the_cpu_engine_and_says_what_to_install(chapter):
    assert not cub_row(chapter).available("cpu")
    reason = cub.why_unavailable("cpu")
    assert "NVIDIA GPU" in reason and "CuPy" in reason


def test_without_nvcc_the_reason_names_the_cuda_toolkit(monkeypatch):
    monkeypatch.setattr(cub, "nvcc_available", lambda: False)
    reason = cub.why_unavailable("cupy")
    assert "nvcc" in reason and "CUDA toolkit" in reason
    assert not cub.available("cupy")


def test_with_nvcc_on_a_gpu_backend_nothing_is_missing(monkeypatch):
    monkeypatch.setattr(cub, "nvcc_available", lambda: True)
    assert cub.why_unavailable("cupy") is None


def test_the_cache_key_follows_source_nvcc_and_architecture(monkeypatch, tmp_path):
    monkeypatch.setenv("PMPP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cub, "_nvcc_version", lambda nvcc: "release 13.0")
    first = cub.library_path("nvcc", "sm_90")
    assert first.parent == tmp_path / "cub"
    assert cub.library_path("nvcc", "sm_90") == first
    assert cub.library_path("nvcc", "sm_80") != first
    monkeypatch.setattr(cub, "_nvcc_version", lambda nvcc: "release 13.1")
    assert cub.library_path("nvcc", "sm_90") != first
    changed = tmp_path / "changed.cu"
    changed.write_text(cub.SOURCE.read_text() + "\n// changed\n")
    monkeypatch.setattr(cub, "_nvcc_version", lambda nvcc: "release 13.0")
    monkeypatch.setattr(cub, "SOURCE", changed)
    assert cub.library_path("nvcc", "sm_90") != first


def _header_cub_version() -> str:
    """CUB_VERSION as nvcc's preprocessor expands it from CUB's headers."""
    import subprocess
    probe = "#include <cub/version.cuh>\npmpp_probe CUB_VERSION\n"
    out = subprocess.run([find_nvcc(), "-E", "-x", "cu", "-"], input=probe, capture_output=True,
                         text=True, check=True).stdout
    number = int(re.search(r"pmpp_probe(?:\s|#[^\n]*)*(\d+)", out).group(1))   # past line markers
    return f"{number // 100000}.{number // 100 % 1000}.{number % 100}"


@pytest.mark.slow
@needs_nvcc
def test_nvcc_builds_a_library_that_reports_the_headers_cub_version(monkeypatch, tmp_path):
    """Built for sm_90 here (no GPU is needed to build or to ask the version), cached, and loaded."""
    import ctypes
    monkeypatch.setenv("PMPP_CACHE_DIR", str(tmp_path))
    path = cub.build(arch="sm_90")
    assert path.is_file() and path.parent == tmp_path / "cub"
    assert cub.build(arch="sm_90") == path                       # the second time: from the cache
    library = ctypes.CDLL(str(path))
    for routine in cub._ROUTINES:
        assert hasattr(library, f"pmpp_cub_{routine}")
    assert cub._version_text(library.pmpp_cub_version()) == _header_cub_version()


@needs_nvcc
def test_a_source_nvcc_refuses_raises_a_compile_error_with_its_log(monkeypatch, tmp_path):
    monkeypatch.setenv("PMPP_CACHE_DIR", str(tmp_path))
    broken = tmp_path / "broken.cu"
    broken.write_text('extern "C" int pmpp_cub_version() { return undeclared_name; }\n')
    monkeypatch.setattr(cub, "SOURCE", broken)
    with pytest.raises(CompileError, match="undeclared_name"):
        cub.build(arch="sm_90")
    assert not list((tmp_path / "cub").glob("*.so"))


# ------------------------------------------------------------------------------------------
# On a GPU: every CUB row passes its chapter's check
# ------------------------------------------------------------------------------------------

def _run_and_check(chapter, problem):
    import cupy
    inputs = chapter.make_inputs(problem, cupy, np.random.default_rng())
    reference = chapter.reference(problem, inputs)
    output = cub_row(chapter).run(problem, inputs)
    result = chapter.check(output, reference, problem)
    assert result, f"{cub_row(chapter).name} on {chapter.describe(problem)}: {result.detail}"


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ("sum", "max"))
def test_device_reduce_passes_the_reduction_check(n, op):
    _run_and_check(reduction.CHAPTER, {"n": n, "op": op})


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", tuple(scan.DTYPES))
@pytest.mark.parametrize("kind", scan.KINDS)
def test_device_scan_passes_the_scan_check(n, dtype, kind):
    _run_and_check(scan.CHAPTER, {"n": n, "dtype": dtype, "kind": kind})


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bins,input", [(256, "uniform"), (256, "skewed"), (7, "text"), (7, "uniform")])
def test_histogram_even_passes_the_histogram_check(n, bins, input):
    """7 bins on uniform bytes too: '{' and '|', just past 'z', must not count as y-z."""
    _run_and_check(histogram.CHAPTER, {"n": n, "bins": bins, "input": input})


@pytest.mark.gpu
@pytest.mark.parametrize("chapter", (reduction.CHAPTER, scan.CHAPTER), ids=lambda c: c.name)
def test_exact_inputs_give_the_exact_result(chapter):
    """Integer-valued inputs: CUB's result must equal the reference bit for bit, as the runner judges."""
    import cupy
    problem = dict(chapter.problems["cpu"], n=2 ** 20 + 7)
    inputs = chapter.make_exact_inputs(problem, cupy, np.random.default_rng())
    result = runner.exact_check(cub_row(chapter).run(problem, inputs), chapter.reference(problem, inputs))
    assert result, result.detail


@pytest.mark.gpu
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.name)
def test_measure_times_the_cub_row_and_records_its_version(chapter):
    problem = dict(chapter.problems["cpu"], n=1000)
    entries = runner.measure(chapter, backend="cupy", problem=problem, variants=[], torch=False,
                             repeats={"warmup": 1, "repeat": 3})
    row = next(e for e in entries if e["name"] == cub_row(chapter).name)
    assert row["correct"] is True and row["median_us"] > 0
    assert cub.loaded_version() == cub.version() == _header_cub_version()


@pytest.mark.gpu
def test_wrong_output_types_are_refused_with_what_cub_takes():
    import cupy
    with pytest.raises(TypeError, match="float32"):
        cub.reduce(cupy.zeros(8, dtype=cupy.float64))
    with pytest.raises(ValueError, match="256 or 7"):
        cub.histogram(cupy.zeros(8, dtype=cupy.uint8), cupy.zeros(10, dtype=cupy.uint32))


# ------------------------------------------------------------------------------------------
# CuPy's rows: "(CUB)" exactly when CuPy goes through CUB
# ------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("chapter,routine", [(reduction.CHAPTER, "cupy.sum"), (scan.CHAPTER, "cupy.cumsum")],
                         ids=("reduction", "scan"))
def test_cupy_rows_say_cub_exactly_when_cupy_uses_it(chapter, routine):
    from cupy._core import _accelerator
    rows = cupy_rows(chapter, routine)
    assert set(rows) == {routine, f"{routine} (CUB)"}
    before = list(_accelerator.get_routine_accelerators())
    try:
        for accelerators, labelled in ((["cub"], f"{routine} (CUB)"), ([], routine)):
            _accelerator.set_routine_accelerators(accelerators)
            assert cupy_routines.uses_cub() == bool(accelerators)
            assert [name for name, lib in rows.items() if lib.available("cupy")] == [labelled]
    finally:
        _accelerator.set_routine_accelerators(before)     # CuPy takes its own values back
