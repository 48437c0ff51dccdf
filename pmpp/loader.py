"""``pmpp.load``: compile a ``.cu`` file for the active backend and launch its kernels the way
CuPy does — ``mod.get_function(name)``, ``kernel(grid, block, args, shared_mem=0)`` — with every
launch checked first."""
from __future__ import annotations

import copy
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import pmpp.args as launch_args
from .backends import resolve_backend
from .conditionals import macros_of
from .errors import BackendUnavailableError
from .source import (define_options, display_name, expand_includes, find_kernels, include_dirs,
                     resolve, signature_for, with_line_directive)

_compiled: dict = {}     # the backend's module per source, options and build mode
_loaded: dict = {}       # the Module presenting it, strict or not


def load(path=None, *, source=None, backend="auto", options=(), defines=None,
         name_expressions=(), check=False, timeout=None, count=False, filename=None, strict=False,
         directory=None) -> "Module":
    """Compile a kernel file (relative to ``kernels/``) or a source string.

    ``defines`` sets macros (``{"BLOCK_DIM": 256}``); ``name_expressions`` names template
    instances to compile (``("reduce5<256>",)``), as in CuPy. ``check=True`` runs on the CPU
    engine with race, out-of-bounds and barrier checks; ``count=True`` runs on the CPU engine and
    counts (every launch leaves its :class:`pmpp.Counters` in ``module.last_counters``; see
    :func:`pmpp.counters`); ``timeout`` (seconds) limits a CPU-engine launch. ``filename`` names a
    source string in messages and counters. ``#include "header"`` is looked up beside the file that
    includes it (a source string's: ``directory``, by default the current one), then in the ``-I`` directories of
    ``options``, as nvcc does. Compiled modules are reused when the same source, headers and
    options are loaded again. ``strict=True`` is for a module whose launches are written in the
    chapter's code (:func:`pmpp.runner.load_variant`): arguments that do not fit the kernel's
    parameters then mean the kernel's signature was changed, and the error names the one to keep.
    """
    if (path is None) == (source is None):
        raise TypeError("pass exactly one of path (a .cu file under kernels/) or source (a string)")
    if check and count:
        raise ValueError("a module either checks (check=True) or counts (count=True): load it twice")
    if path is not None:
        file = resolve(path)
        filename, text, directory = display_name(file), file.read_text(), file.parent
    else:
        filename, text, directory = filename or "<source>", source, Path(directory or Path.cwd()).resolve()
    if (check or count) and backend in (None, "auto"):
        backend = "cpu"
    backend = resolve_backend(backend)
    if (check or count) and backend != "cpu":
        raise ValueError(f"{'check' if check else 'count'}=True runs on the CPU engine: use backend='cpu' "
                         "(on the GPU, NVIDIA's compute-sanitizer and Nsight Compute do these jobs)")
    user_options = tuple(options)
    options = user_options + tuple(define_options(defines))
    name_expressions = tuple(name_expressions)
    compiled = expand_includes(text, filename, directory, include_dirs(user_options))
    key = (backend, filename, compiled, options, name_expressions, bool(check), bool(count), timeout)
    if key not in _compiled:
        _compiled[key] = _compile(backend, compiled, filename, options, name_expressions, check, timeout, count)
    if key + (bool(strict),) not in _loaded:
        _loaded[key + (bool(strict),)] = Module(_compiled[key], filename, text, name_expressions, dict(defines or {}),
                                                user_options, compiled=compiled, strict=strict,
                                                counting=CountSession() if count else None, directory=directory)
    return _loaded[key + (bool(strict),)]


def _compile(backend, text, filename, options, name_expressions, check, timeout, count=False):
    full = with_line_directive(text, filename)
    if backend == "cupy":
        from .backends.gpu import CupyModule
        return CupyModule(full, filename=filename, options=options, name_expressions=name_expressions)
    try:
        from .backends.cpu import CpuModule
    except ImportError as exc:
        raise BackendUnavailableError(f"the CPU engine is not available: {exc}") from None
    kernel_names = tuple(n for n, sig in find_kernels(text, macros_of(options)).items() if not sig.template_params)
    extra = {} if timeout is None else {"timeout": timeout}
    impl = CpuModule(full, filename=filename, options=options, kernel_names=kernel_names,
                     name_expressions=name_expressions, check=check, count=count, **extra)
    for attribute, value in _CPU_DEFAULTS.items():
        if not hasattr(impl, attribute):
            setattr(impl, attribute, value)
    return impl


# What the CPU engine presents as its "device": NumPy arrays, one SM per core, and H100's
# opt-in shared memory per block so that kernels written for a big GPU run unchanged.
_CPU_DEFAULTS = {"backend": "cpu", "array_type": np.ndarray, "sm_count": os.cpu_count() or 1,
                 "max_shared": 227 * 1024}


@dataclass(frozen=True)
class CountSession:
    """How a count build's launches are counted: as on ``gpu`` (the counters' name for it),
    keeping every access of the warp ``sample_warp`` = (block, warp), and whether counters are
    collected at all (``collect=False`` runs the instrumented code with hooks that only return:
    what the instrumentation alone costs, :mod:`pmpp.profiling.count_cost`)."""
    gpu: str = "H100"
    sample_warp: tuple = (0, 0)
    collect: bool = True
    # the blocks one after another on one OS thread: a block that waits for an earlier one (a
    # look-back) finds it done, and polls as often on every run (pmpp.predict counts so)
    serial: bool = False


class Module:
    """A compiled kernel file. Mirrors ``cupy.RawModule``."""

    def __init__(self, impl, filename: str, text: str, name_expressions=(), defines=None, options=(),
                 compiled=None, strict=False, counting: CountSession | None = None, directory=None):
        self._impl = impl
        self.directory = directory                    # where its #include "x" were looked up first
        self.strict = bool(strict)                    # launched by the chapter's code: see load()
        self.counting = counting                      # count builds: how launches are counted
        self._sm_count = None                         # SMs the launch code sizes grids for, if not the backend's
        self.filename = filename
        self.source = text
        self.defines = dict(defines or {})            # as given to load(), for launch code
        self.options = tuple(options)                 # as given to load(), defines apart
        self.name_expressions = tuple(name_expressions)
        self.launches = []                            # count builds: the Counters of every launch
        self._signatures = find_kernels(text if compiled is None else compiled,   # headers' kernels too
                                        macros_of((*self.options, *define_options(self.defines))))
        self.kernel_names = [n for n, s in self._signatures.items() if not s.template_params] \
            + list(name_expressions)
        self._functions = {}

    @property
    def backend(self) -> str:
        return self._impl.backend

    @property
    def device_sm_count(self) -> int:
        return self._sm_count or self._impl.sm_count

    def view(self, *, counting: CountSession | None = None, sm_count: int | None = None) -> "Module":
        """The same compiled module with launches of its own: counted as ``counting`` says, grids
        sized for ``sm_count`` SMs (a counted GPU's). Other views of it are not affected."""
        twin = copy.copy(self)
        twin._functions, twin.launches = {}, []
        twin.counting = counting if counting is not None else self.counting
        twin._sm_count = sm_count if sm_count is not None else self._sm_count
        return twin

    @property
    def last_counters(self):
        """Count builds (``load(..., count=True)``): the :class:`pmpp.Counters` of the last launch."""
        if self.counting is None:
            raise ValueError(f"{self.filename} was not loaded to count: pmpp.load(..., count=True), "
                             "or pmpp.counters(kernel, grid, block, args)")
        if not self.launches:
            raise ValueError(f"no kernel of {self.filename} has been launched yet")
        return self.launches[-1]

    def get_function(self, name: str) -> "Function":
        if name not in self._functions:
            if name not in self.kernel_names:
                raise ValueError(f"{self.filename} has no kernel {name!r}; it has: "
                                 f"{', '.join(self.kernel_names) or 'none'}"
                                 + ("" if "<" not in name else
                                    ". Template instances must be listed in name_expressions= at load"))
            self._functions[name] = Function(self, name, signature_for(self._signatures, name))
        return self._functions[name]

    def copy_to_symbol(self, name: str, array) -> None:
        """Copy an array into a ``__constant__`` variable (the book's ``cudaMemcpyToSymbol``)."""
        self._impl.copy_to_symbol(name, array)

    def __repr__(self) -> str:
        return f"<pmpp.Module {self.filename} on {self.backend}: {', '.join(self.kernel_names)}>"


class Function:
    """A kernel. Call it like ``cupy.RawKernel``: ``k(grid, block, args, shared_mem=0)``."""

    def __init__(self, module: Module, name: str, signature):
        self.module = module
        self.name = name
        self.signature = signature

    def __call__(self, grid, block, args, shared_mem=0) -> None:
        impl = self.module._impl
        grid, block, shared_mem = launch_args.check_launch(grid, block, shared_mem, impl.max_shared)
        if self.signature is None:
            converted = self._unchecked(args)
            names, writable = [f"arg{i}" for i in range(len(converted))], [True] * len(converted)
        else:
            converted = launch_args.convert_args(self.signature, args, impl.array_type, impl.backend,
                                                 strict=self.module.strict)
            names = [p.name for p in self.signature.params]
            writable = [p.pointer and not p.const for p in self.signature.params]
        session = self.module.counting
        if session is None:
            impl.launch(self.name, grid, block, shared_mem, converted, names, writable)
            return
        counts = impl.launch(self.name, grid, block, shared_mem, converted, names, writable,
                             sample=(*session.sample_warp, session.serial) if session.collect else None)
        if session.collect:
            from .counters import from_engine
            self.module.launches.append(from_engine(
                counts, impl.library_path, kernel=(self.name, grid, block, shared_mem),
                source={self.module.filename: self.module.source}, gpu=session.gpu,
                footprint=sum(a.nbytes for a in converted if isinstance(a, impl.array_type))))

    def _unchecked(self, args):
        warnings.warn(f"pmpp could not read the parameter list of {self.name}; its arguments are "
                      "not checked", stacklevel=3)
        for a in args:
            if not isinstance(a, (self.module._impl.array_type, np.generic)):
                raise TypeError(f"{self.name}: pass arrays or NumPy scalars of the exact C type")
        return list(args)

    def __repr__(self) -> str:
        return f"<pmpp.Function {self.signature or self.name} from {self.module.filename}>"
