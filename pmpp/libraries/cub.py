"""CUB's device-wide routines, called directly: ``DeviceReduce``, ``DeviceScan``, ``DeviceHistogram``.

``cub_routines.cu`` beside this file wraps each routine in an ``extern "C"`` function. On first use
it is built with the local nvcc into ``$PMPP_CACHE_DIR/cub/`` (a file per source, nvcc and GPU
architecture), loaded with ctypes, and called on CuPy's current stream - so the CUDA events that
time a run enclose it. CUB's temporary storage comes from CuPy's allocator, once per routine and
size, outside the timed calls.

    from pmpp.libraries import cub
    cub.reduce(x, "sum")                  # a 1-element CuPy array
    cub.scan(x, y, "inclusive")           # y, written
    cub.histogram(data, counts)           # 256 or 7 uint32 bins, written
    cub.version()                         # "3.0.1": CUB_VERSION of the headers it was built with
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pmpp.compilecheck import find_nvcc, nvcc_available
from pmpp.errors import BackendUnavailableError, CompileError
from pmpp.results import LIBRARY_VERSIONS

SOURCE = Path(__file__).with_name("cub_routines.cu")
NVCC_FLAGS = ("-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC")
LETTERS, BYTES = 7, 256          # the histogram chapter's binnings
_ROUTINES = ("reduce_sum_f32", "reduce_max_f32", "inclusive_sum_f32", "inclusive_sum_i32",
             "exclusive_sum_f32", "exclusive_sum_i32", "histogram_bytes", "histogram_letters")

_library: ctypes.CDLL | None = None
_temp_storage: dict[str, tuple[int, object]] = {}     # routine -> (n, CuPy buffer)


# --------------------------------------------------------------------------------------------
# Whether it can run here

def why_unavailable(backend: str) -> str | None:
    """Why CUB's routines cannot run on ``backend`` ("cupy" or "cpu"), saying what to install;
    None if they can."""
    if backend != "cupy":
        return ("CUB runs on an NVIDIA GPU only: on a machine with one, install CuPy for its CUDA "
                "(cupy-cuda12x or cupy-cuda13x) and the CUDA toolkit")
    if not nvcc_available():
        return ("needs nvcc to build CUB's routines: install the CUDA toolkit (nvcc and its headers, "
                "which hold CUB) or set CUDA_HOME to where it is")
    return None


def why_not_on_gpu(backend: str) -> str | None:
    """What :func:`why_unavailable` says on a GPU (nvcc missing, say); None on the CPU engine,
    where the NumPy routines are the bar."""
    return why_unavailable(backend) if backend == "cupy" else None


def available(backend: str) -> bool:
    return why_unavailable(backend) is None


# --------------------------------------------------------------------------------------------
# Building and loading

def _arch() -> str:
    import cupy
    return f"sm_{cupy.cuda.Device().compute_capability}"


def _nvcc_version(nvcc: str) -> str:
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout


def library_path(nvcc: str, arch: str) -> Path:
    """Where the library built from this source by this nvcc for ``arch`` is kept."""
    from pmpp.paths import cache_dir
    key = hashlib.sha256(SOURCE.read_bytes() + _nvcc_version(nvcc).encode() + arch.encode()
                         + " ".join(NVCC_FLAGS).encode()).hexdigest()[:20]
    return cache_dir() / "cub" / f"libpmpp_cub-{arch}-{key}.so"


def build(nvcc: str | None = None, arch: str | None = None) -> Path:
    """The shared library, built first if this source, nvcc and architecture have none yet."""
    nvcc = nvcc or find_nvcc()
    arch = arch or _arch()
    path = library_path(nvcc, arch)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    print(f"building CUB's routines for {arch} with nvcc (once; cached in {path.parent})",
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        part = Path(tmp) / path.name
        done = subprocess.run([nvcc, *NVCC_FLAGS, f"-arch={arch}", "-o", str(part), str(SOURCE)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            log = done.stderr + done.stdout
            raise CompileError(f"nvcc could not build {SOURCE.name} for {arch}; its output ends:\n"
                               f"{log[-3000:]}", filename=str(SOURCE), log=log)
        os.replace(part, path)      # whole or not at all, if another process builds it too
    return path


def _load() -> ctypes.CDLL:
    global _library
    if _library is None:
        from pmpp.backends import gpu_available
        reason = why_unavailable("cupy" if gpu_available() else "cpu")
        if reason is not None:
            raise BackendUnavailableError(reason)
        lib = ctypes.CDLL(str(build()))
        lib.pmpp_cub_version.restype = ctypes.c_int
        lib.pmpp_cub_error_string.restype = ctypes.c_char_p
        lib.pmpp_cub_error_string.argtypes = (ctypes.c_int,)
        for name in _ROUTINES:
            fn = getattr(lib, f"pmpp_cub_{name}")
            fn.restype = ctypes.c_int
            fn.argtypes = (ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p)
        _library = lib
    return _library


def version() -> str:
    """CUB's version, from ``CUB_VERSION`` in the headers the library was built with (builds it)."""
    return _version_text(_load().pmpp_cub_version())


def loaded_version() -> str | None:
    """CUB's version if the library is loaded in this process (a run used it), else None: what a
    results file records beside the other versions."""
    return None if _library is None else _version_text(_library.pmpp_cub_version())


def _version_text(number: int) -> str:
    return f"{number // 100000}.{number // 100 % 1000}.{number % 100}"


LIBRARY_VERSIONS["cub"] = loaded_version


# --------------------------------------------------------------------------------------------
# Calling

def _call(routine: str, source, target, n: int) -> None:
    """Run ``pmpp_cub_<routine>`` from ``source`` into ``target`` (CuPy arrays) on the current stream."""
    import cupy
    fn = getattr(_load(), f"pmpp_cub_{routine}")
    stream = cupy.cuda.get_current_stream().ptr
    temp = _temp(routine, fn, source, target, n, stream)
    size = ctypes.c_size_t(temp.nbytes)
    _raise_on_error(fn(temp.data.ptr, ctypes.byref(size), source.data.ptr, target.data.ptr, n, stream),
                    routine)


def _temp(routine: str, fn, source, target, n: int, stream: int):
    """CUB's temporary storage for ``routine`` on ``n`` items: asked for and allocated once per
    size (a null ``temp`` makes CUB only say how much it needs)."""
    import cupy
    held = _temp_storage.get(routine)
    if held is None or held[0] != n:
        size = ctypes.c_size_t(0)
        _raise_on_error(fn(None, ctypes.byref(size), source.data.ptr, target.data.ptr, n, stream), routine)
        # never 0 bytes: a null pointer would be taken for another size query
        held = (n, cupy.empty(max(size.value, 1), dtype=cupy.uint8))
        _temp_storage[routine] = held
    return held[1]


def _raise_on_error(status: int, routine: str) -> None:
    if status != 0:
        message = _library.pmpp_cub_error_string(status).decode(errors="replace")
        raise RuntimeError(f"CUB {routine} failed: CUDA error {status} ({message})")


def _flat(array, dtypes: tuple[str, ...], what: str):
    if array.dtype.name not in dtypes or not array.flags.c_contiguous:
        raise TypeError(f"CUB's {what} takes a contiguous array of {' or '.join(dtypes)}, "
                        f"got {array.dtype.name} of shape {array.shape}")
    return array.reshape(-1)


def reduce(x, op: str = "sum"):
    """``cub::DeviceReduce::Sum`` or ``Max`` of float32 ``x``: a 1-element float32 CuPy array."""
    import cupy
    if op not in ("sum", "max"):
        raise ValueError(f"op must be 'sum' or 'max', got {op!r}")
    x = _flat(x, ("float32",), "DeviceReduce")
    out = cupy.empty(1, dtype=cupy.float32)
    _call(f"reduce_{op}_f32", x, out, x.size)
    return out


def scan(x, out, kind: str = "inclusive"):
    """``cub::DeviceScan::InclusiveSum`` or ``ExclusiveSum`` of ``x`` (float32 or int32) into
    ``out`` (same dtype and size); returns ``out``."""
    if kind not in ("inclusive", "exclusive"):
        raise ValueError(f"kind must be 'inclusive' or 'exclusive', got {kind!r}")
    x = _flat(x, ("float32", "int32"), "DeviceScan")
    target = _flat(out, (x.dtype.name,), "DeviceScan output")
    if target.size != x.size:
        raise ValueError(f"the output has {target.size} elements, the input {x.size}")
    _call(f"{kind}_sum_{'f32' if x.dtype.name == 'float32' else 'i32'}", x, target, x.size)
    return out


def histogram(data, counts):
    """``cub::DeviceHistogram::HistogramEven`` of the bytes ``data`` into ``counts`` (uint32; CUB
    zeroes it first): 256 bins, one per byte value, or 7 - the letters a-d, e-h, ..., y-z, every
    other byte ignored (each byte mapped to its alphabet position / 4 on the way in, then 7 even
    bins). Returns ``counts``."""
    data = _flat(data, ("uint8",), "DeviceHistogram")
    bins = _flat(counts, ("uint32",), "DeviceHistogram output")
    if bins.size not in (BYTES, LETTERS):
        raise ValueError(f"CUB's histogram here counts {BYTES} or {LETTERS} bins, not {bins.size}")
    _call("histogram_bytes" if bins.size == BYTES else "histogram_letters", data, bins, data.size)
    return counts
