"""The GPU backend: CuPy's RawModule, compiled by NVRTC. Works with CuPy 13 and 14, CUDA 12 and 13."""
from __future__ import annotations

import numpy as np

from ..errors import KernelCrashError
from ..source import compile_error

_DEFAULT_SHARED = 48 * 1024   # beyond this a kernel must opt in to more dynamic shared memory


def allow_dynamic_shared(function, name: str, shared_mem: int, max_shared: int) -> None:
    """Let ``function`` take ``shared_mem`` bytes of dynamic shared memory on top of its static
    ``__shared__`` arrays. Past 48 KB in all a kernel must opt in (cudaFuncSetAttribute); past the
    device's limit no launch can succeed, so say so before the driver answers "invalid argument"."""
    static = function.shared_size_bytes
    if static + shared_mem > max_shared:
        raise ValueError(f"{name} declares {static} bytes of static __shared__ memory; with "
                         f"shared_mem={shared_mem} that is {static + shared_mem} bytes, more than "
                         f"this device's {max_shared} per block: ask for at most "
                         f"{max(max_shared - static, 0)} bytes, or use smaller tiles")
    if static + shared_mem > _DEFAULT_SHARED and function.max_dynamic_shared_size_bytes < shared_mem:
        function.max_dynamic_shared_size_bytes = shared_mem


class CupyModule:
    backend = "cupy"

    def __init__(self, source: str, *, filename: str, options=(), name_expressions=()):
        import cupy
        self._cupy = cupy
        self.filename = filename
        self.array_type = cupy.ndarray
        self._raw = cupy.RawModule(code=source, options=tuple(options),
                                   name_expressions=tuple(name_expressions) or None)
        try:
            self._raw.compile()
        except cupy.cuda.compiler.CompileException as exc:
            raise compile_error(exc.get_message() if hasattr(exc, "get_message") else str(exc),
                                filename) from None
        self._functions = {}
        attributes = cupy.cuda.Device().attributes
        self.sm_count = attributes["MultiProcessorCount"]
        self.max_shared = attributes.get("MaxSharedMemoryPerBlockOptin", _DEFAULT_SHARED)

    def launch(self, name, grid, block, shared_mem, args, arg_names=(), writable=()):
        function = self._function(name)
        if shared_mem:
            allow_dynamic_shared(function, name, shared_mem, self.max_shared)
        try:
            function(grid, block, tuple(args), shared_mem=shared_mem)
        except self._cupy.cuda.driver.CUDADriverError as exc:
            raise KernelCrashError(
                f"launching {name} from {self.filename} failed: {exc}. If this is "
                "CUDA_ERROR_ILLEGAL_ADDRESS the GPU context is unusable: restart the Python kernel, "
                "then find the out-of-bounds access with pmpp.load(..., backend='cpu', check=True) "
                "or compute-sanitizer.") from None

    def _function(self, name):
        if name not in self._functions:
            self._functions[name] = self._raw.get_function(name)
        return self._functions[name]

    def copy_to_symbol(self, name: str, array) -> None:
        cupy = self._cupy
        try:
            pointer = self._raw.get_global(name)
        except cupy.cuda.driver.CUDADriverError:
            raise ValueError(f"{self.filename} has no __constant__ or __device__ variable {name!r}") from None
        data = cupy.ascontiguousarray(cupy.asarray(array))
        size = pointer.mem.size   # CuPy reports 0 where the driver did not say; then trust the caller
        if size and data.nbytes > size:
            raise ValueError(f"{name} holds {size} bytes but the array has {data.nbytes}")
        pointer.copy_from_device(data.data, data.nbytes)

    @staticmethod
    def asnumpy(array) -> np.ndarray:
        return array.get()
