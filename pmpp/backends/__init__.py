"""Where kernels run: ``cupy`` (the GPU, through CuPy's RawModule) or ``cpu`` (the CPU engine)."""
from __future__ import annotations

import functools
import os

from ..errors import BackendUnavailableError

BACKENDS = ("cupy", "cpu")
_ALIASES = {"gpu": "cupy", "cuda": "cupy", "cupy": "cupy", "cpu": "cpu"}


def cupy_gpu() -> tuple[tuple[str, int, int] | None, str]:
    """((name, major, minor), "") for CuPy's current GPU, or (None, why CuPy cannot use one)."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed"
    except Exception as exc:  # a broken CUDA install can fail at import
        return None, f"CuPy failed to import ({exc})"
    try:
        if not cupy.cuda.is_available():
            return None, "CuPy is installed but found no CUDA GPU (no device or no driver)"
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    except Exception as exc:
        return None, f"CuPy could not use the GPU ({exc})"
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return (name, int(props["major"]), int(props["minor"])), ""


@functools.lru_cache(maxsize=None)
def gpu_status() -> tuple[bool, str]:
    """(is a CUDA GPU usable through CuPy?, one sentence saying why or why not)."""
    gpu, why_not = cupy_gpu()
    if gpu is None:
        return False, why_not
    import cupy
    return True, f"{gpu[0]} (CuPy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()})"


def gpu_available() -> bool:
    return gpu_status()[0]


def resolve_backend(requested: str | None = "auto") -> str:
    """``"auto"`` -> the GPU when CuPy can use one, else the CPU engine; ``PMPP_BACKEND``
    overrides ``"auto"``."""
    requested = (requested or "auto").lower()
    if requested == "auto":
        requested = os.environ.get("PMPP_BACKEND", "auto").lower() or "auto"
    if requested == "auto":
        return "cupy" if gpu_available() else "cpu"
    if requested not in _ALIASES:
        raise ValueError(f"unknown backend {requested!r}: use 'auto', 'cupy' (GPU) or 'cpu' "
                         "(also settable with the PMPP_BACKEND environment variable)")
    backend = _ALIASES[requested]
    if backend == "cupy" and not gpu_available():
        raise BackendUnavailableError(
            f"backend 'cupy' needs a CUDA GPU, but {gpu_status()[1]}. Install cupy-cuda12x "
            "(or cupy-cuda13x) on a machine with an NVIDIA GPU, or use backend='cpu'.")
    return backend


def backend_info(backend: str | None = None) -> str:
    """A sentence for notebooks: which backend is active and why."""
    backend = resolve_backend(backend)
    if backend == "cupy":
        return f"GPU backend: {gpu_status()[1]}."
    reason = gpu_status()[1]
    forced = os.environ.get("PMPP_BACKEND", "").lower() == "cpu"
    why = "PMPP_BACKEND=cpu is set" if forced else f"no GPU found: {reason}"
    return (f"CPU engine ({why}). Kernels run on the CPU with CUDA's execution model: results are "
            "real, timings are CPU timings, not GPU ones. For a GPU: install cupy-cuda12x on a machine "
            "with an NVIDIA GPU, or on Colab choose Runtime > Change runtime type > GPU.")
