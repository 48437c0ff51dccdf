"""pmpp: a CUDA workbook for *Programming Massively Parallel Processors*.

Load a kernel file, launch it the way CuPy does, check it against NumPy, and measure it::

    import pmpp
    mod = pmpp.load("reduction/03_shared_memory.cu", defines={"BLOCK_DIM": 256})
    kernel = mod.get_function("SharedMemorySumReductionKernel")
    kernel(grid, block, (x, out, x.size))

Kernels run on the GPU through CuPy when there is one, else on the CPU engine
(``pmpp.backend_info()`` says which, and why).
"""
from __future__ import annotations

import numpy as np

from .backends import backend_info, gpu_available, resolve_backend
from . import counters, occupancy   # modules that are also called: pmpp.counters(...), pmpp.occupancy(...)
from .counters import Counters
from .device import Ceilings, ceilings
from .errors import (BackendUnavailableError, BarrierDivergenceError, CompileError,
                     ExerciseNotImplemented, KernelCheckError, KernelCrashError, KernelTimeoutError, OutOfBoundsError,
                     PmppError, RaceError)
from .loader import Function, Module, load
from .source import kernels_dir
from .timing import Timing, bench

__version__ = "0.1.0"

__all__ = [
    "load", "Module", "Function", "counters", "Counters", "occupancy", "predict", "xp", "get_array_module", "asnumpy", "active_backend",
    "backend_info", "gpu_available", "kernel_source", "kernels_dir", "bench", "Timing",
    "ceilings", "Ceilings",
    "PmppError", "CompileError", "BackendUnavailableError", "KernelCheckError", "OutOfBoundsError",
    "RaceError", "BarrierDivergenceError", "KernelCrashError", "KernelTimeoutError",
    "ExerciseNotImplemented",
]


def active_backend() -> str:
    """``"cupy"`` or ``"cpu"``: where ``pmpp.load(...)`` runs kernels by default."""
    return resolve_backend("auto")


def get_array_module(*arrays):
    """``cupy`` if any argument is a CuPy array, else ``numpy`` (like ``cupy.get_array_module``)."""
    for a in arrays:
        if type(a).__module__.split(".")[0] == "cupy":
            import cupy
            return cupy
    return np


def asnumpy(array) -> np.ndarray:
    """A NumPy copy of a CuPy or NumPy array (like ``cupy.asnumpy``)."""
    return array.get() if hasattr(array, "get") and get_array_module(array) is not np else np.asarray(array)


def kernel_source(path: str) -> str:
    """The text of a kernel file under ``kernels/``, for showing the listing in a notebook."""
    from .source import resolve
    return resolve(path).read_text()


# What the workbook measures lives in pmpp.profiling; the notebooks and students name its modules
# as pmpp's own (``from pmpp import explain``).
_PROFILING = ("explain", "ncu", "validate", "goals", "profile", "count_cost")


def predict(kernel, grid, block, args, shared_mem: int = 0, gpu: str = "H100"):
    """The predicted time of this launch on ``gpu`` (``.time_us``) and the resource that bounds it
    (``.bound``), from the CPU engine's counts: see :func:`pmpp.profiling.predict.predict`."""
    import importlib
    model = importlib.import_module(".profiling.predict", __name__)   # loaded when first used, as _PROFILING
    return model.predict(kernel, grid, block, args, shared_mem, gpu)


def __getattr__(name):
    if name in _PROFILING:
        import importlib
        return importlib.import_module(f".profiling.{name}", __name__)
    if name == "xp":   # the active backend's array module, decided when first asked for
        if active_backend() == "cupy":
            import cupy
            return cupy
        return np
    raise AttributeError(f"module 'pmpp' has no attribute {name!r}")
