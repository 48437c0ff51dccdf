"""CpuModule: a CUDA source compiled for the CPU engine, and its launches."""

import itertools
import os

import numpy as np

import pmpp.targets as _targets
from pmpp.errors import (BarrierDivergenceError, KernelCrashError, OutOfBoundsError, RaceError)

import pmpp.backends.cpu.client as _client
import pmpp.backends.cpu.source as _source
import pmpp.backends.cpu.build as build

_ERRORS = {1: OutOfBoundsError, 2: RaceError, 3: BarrierDivergenceError, 4: KernelCrashError,
           5: ValueError, 6: BarrierDivergenceError}
_ids = itertools.count(1)
CHECK_PAD = 64 * 1024  # red zone before and after each argument array in checked launches
ALIGN = 256
DEFAULT_TIMEOUT = 60.0


def default_timeout():
    env = os.environ.get("PMPP_CPU_TIMEOUT")
    return float(env) if env else DEFAULT_TIMEOUT


class CpuModule:
    """A CUDA source compiled with the host g++ and run with CUDA's execution model.

    ``source`` starts with ``#line 1 "<filename>"``; ``options`` are NVRTC-style (-D, -U, -I,
    -std pass to g++; GPU-only ones are ignored); ``kernel_names`` name non-template
    ``__global__`` functions, ``name_expressions`` template instances such as ``"reduce<256>"``.
    ``check=True`` compiles an instrumented build whose launches raise OutOfBoundsError,
    RaceError or BarrierDivergenceError. ``count=True`` compiles a count build: every launch
    collects the counters of :mod:`pmpp.counters` into ``last_counts`` (out-of-bounds accesses
    are reported there too, races are not looked for). A launch running longer than ``timeout``
    seconds (default 60, or $PMPP_CPU_TIMEOUT) raises KernelTimeoutError.

    ``target`` (``"sm_75"``, ``"T4"``, ... see :mod:`pmpp.targets`; default ``$PMPP_TARGET``, read at
    each launch) makes launches fit that GPU's threads and shared memory per block: one over
    its limit raises ValueError naming the limit. Without one the limits are the H100's.
    """

    def __init__(self, source, *, filename, options=(), kernel_names=(), name_expressions=(),
                 check=False, timeout=None, count=False, target=None):
        if check and count:
            raise ValueError("a CpuModule is built either to check (check=True) or to count (count=True)")
        self.filename = filename
        self.check = bool(check)
        self.count = bool(count)
        self.last_counts = None   # count builds: the counters of the last launch, as the worker sent them
        self.timeout = default_timeout() if timeout is None else float(timeout)
        self.target = None if target is None else _targets.target(target)
        self._names = list(dict.fromkeys([*kernel_names, *name_expressions]))
        built = build.build_module(
            source, filename=filename, options=tuple(options), names=self._names,
            n_kernel_names=len(list(dict.fromkeys(kernel_names))), check=self.check, count=self.count)
        self.library_path = built.path
        self.device_check = built.device_check   # what NVRTC and the device-code checks said
        self._constants = _source.constant_symbols(source)
        self._constant_elements = tuple(_source.constant_elements(source))
        self._id = next(_ids)
        self._generation = None  # worker generation this module is loaded in
        self._param_sizes = None
        self._symbol_writes = []  # (name, bytes), replayed into a restarted worker

    def __repr__(self):
        return (f"CpuModule({self.filename!r}, kernels={self._names}"
                f"{', check=True' if self.check else ''}{', count=True' if self.count else ''})")

    @property
    def kernel_names(self):
        return list(self._names)

    def param_sizes(self, name):
        """sizeof of each parameter of kernel ``name``, from C++."""
        self._check_name(name)
        with _client.client().lock:
            self._ensure_loaded()
            return list(self._param_sizes[name])

    def _check_name(self, name):
        if name not in self._names:
            raise ValueError(f"{self.filename} has no launchable kernel {name!r}; available: "
                             f"{', '.join(self._names) or '(none)'}")

    def _ensure_loaded(self):
        """Load the module into the (possibly restarted) worker; replay __constant__ writes."""
        worker = _client.client()
        worker.ensure_started()
        if self._generation == worker.generation:
            return
        what = f"loading {self.filename}"
        reply = self._request(worker, ("load", self._id, str(self.library_path), self._constant_elements), what)
        self._param_sizes = reply[1]
        for name, data in self._symbol_writes:
            self._request(worker, ("symbol", self._id, name, data), what)
        self._generation = worker.generation

    def _request(self, worker, message, what, timeout=120.0):
        try:
            reply = worker.request(message, timeout=timeout)
        except _client.WorkerDied as died:
            raise _client.crash_error(what, died) from None
        except _client.WorkerTimedOut:
            raise _client.timeout_error(what, timeout) from None
        if reply[0] == "error" and reply[1] == "RuntimeError":
            raise RuntimeError(f"pmpp's CPU worker failed while {what}:\n{reply[2]}")
        return reply

    def copy_to_symbol(self, name, array):
        """Copy ``array`` into the module's ``__constant__`` (or other global) variable ``name``,
        like cudaMemcpyToSymbol. The value persists across launches."""
        data = np.ascontiguousarray(array).tobytes()
        worker = _client.client()
        with worker.lock:
            self._ensure_loaded()
            reply = self._request(worker, ("symbol", self._id, name, data), f"copying to {name!r}")
        if reply[0] == "missing":
            listed = ", ".join(self._constants) or "(none)"
            raise ValueError(f"{self.filename} has no __constant__ (or global) variable {name!r}; "
                             f"its __constant__ variables: {listed}")
        if reply[0] == "too_big":
            raise ValueError(f"cannot copy {len(data)} bytes into {name!r} of {self.filename}, "
                             f"which has {reply[1]} bytes")
        self._symbol_writes = [(n, d) for n, d in self._symbol_writes
                               if not (n == name and len(d) <= len(data))]
        self._symbol_writes.append((name, data))

    def launch(self, name, grid, block, shared_mem, args, arg_names, writable, sample=None):
        """Run kernel ``name`` on ``grid`` x ``block`` threads. Arrays in ``args`` are passed as
        pointers to their data; those marked ``writable`` get the kernel's writes back in place.
        A count build collects counters where ``sample`` names the (block, warp) whose every access
        is kept, and returns them as the worker sent them (None where it does not collect)."""
        self._check_name(name)
        limits = self._limits()
        worker = _client.client()
        with worker.lock:
            self._ensure_loaded()
            sizes = self._param_sizes[name]
            specs, copy_in, copy_out = self._marshal(name, sizes, args, arg_names, writable)
            arena = worker.arena
            end = max((off + len(view) for off, view in copy_in), default=0) + CHECK_PAD
            if end > arena.size:
                raise ValueError(f"the arguments of kernel {name!r} need {end} bytes, more than "
                                 f"this machine's memory ({arena.size} bytes)")
            arena.used = max(arena.used, end)
            for offset, view in copy_in:
                arena.view(offset, len(view))[:] = view
            message = ("launch", self._id, name, tuple(int(g) for g in grid),
                       tuple(int(b) for b in block), int(shared_mem), self.check, specs,
                       sample if self.count else None, limits)
            what = f"kernel {name!r} ({self.filename})"
            try:
                reply = self._request(worker, message, what, timeout=self.timeout)
                if reply[0] == "ok":
                    for offset, view in copy_out:
                        view[:] = arena.view(offset, len(view))
                    self.last_counts = reply[1]
            finally:
                worker.forward_stdout()
                if worker.arena is not None:
                    worker.arena.release()
        if reply[0] == "error":
            raise _ERRORS.get(reply[1], RuntimeError)(reply[2])
        return self.last_counts if self.count else None

    def _limits(self):
        """The target's limits for the engine (see pmpp_launch_desc), or None for its own."""
        spec = self.target or _targets.target_from_env()
        return None if spec is None else _targets.engine_limits(spec)

    def _marshal(self, name, sizes, args, arg_names, writable):
        if len(args) != len(sizes):
            raise TypeError(f"kernel {name!r} takes {len(sizes)} arguments, {len(args)} given")
        specs, seen, roots = [], {}, {}
        pad = CHECK_PAD if self.check or self.count else 0
        offset = 0
        for i, arg in enumerate(args):
            pname = arg_names[i] if i < len(arg_names) else f"argument {i}"
            wants_back = bool(writable[i]) if i < len(writable) else True
            if isinstance(arg, np.ndarray):
                if sizes[i] != 8:
                    raise TypeError(f"argument {pname!r} of kernel {name!r} is an array, but that "
                                    f"parameter is a {sizes[i]}-byte value")
                if not arg.flags.c_contiguous:
                    raise ValueError(f"argument {pname!r} of kernel {name!r} must be C-contiguous: "
                                     "pass np.ascontiguousarray(...)")
                if arg.dtype.hasobject:
                    raise TypeError(f"argument {pname!r} of kernel {name!r} has dtype object")
                if wants_back and not arg.flags.writeable:
                    raise ValueError(f"argument {pname!r} of kernel {name!r} is read-only but marked writable")
                root, start = _allocation(arg)
                key = (root.__array_interface__["data"][0], root.nbytes)
                if key in seen:  # another pointer into an allocation already passed: one copy, as on a GPU
                    j = seen[key]
                    specs.append(("alias", j, start))
                    specs[j][6] = specs[j][6] or wants_back
                    continue
                for j in seen.values():
                    if np.may_share_memory(root, roots[j]):
                        other = arg_names[j] if j < len(arg_names) else f"argument {j}"
                        raise ValueError(f"arguments {pname!r} and {other!r} of kernel {name!r} "
                                         "overlap: pass the whole array once")
                seen[key], roots[i] = i, root
                offset = -(-(offset + pad) // ALIGN) * ALIGN
                specs.append(["array", offset, root.nbytes, arg.itemsize, arg.dtype.name, pname, wants_back, start])
                offset += root.nbytes + pad
            elif isinstance(arg, np.generic):
                data = arg.tobytes()
                if len(data) != sizes[i]:
                    kind = "structured value" if arg.dtype.fields else arg.dtype.name
                    raise TypeError(f"argument {pname!r} of kernel {name!r} is a {len(data)}-byte "
                                    f"{kind}, but that parameter has {sizes[i]} bytes: "
                                    + _scalar_hint(arg.dtype))
                specs.append(("scalar", data))
            else:
                raise TypeError(f"argument {pname!r} of kernel {name!r} must be a numpy array or a "
                                f"numpy scalar (np.float32(...), np.int32(...)), not "
                                f"{type(arg).__name__}")
        arrays = [i for i in range(len(specs)) if specs[i][0] == "array"]
        copy_in = [(specs[i][1], _bytes_view(roots[i])) for i in arrays]
        copy_out = [(specs[i][1], _bytes_view(roots[i])) for i in arrays if specs[i][6]]
        return [tuple(s) for s in specs], copy_in, copy_out


def _scalar_hint(dtype):
    if dtype.fields is None:
        return "pass a numpy scalar of the parameter's type (np.float32, np.int32, ...)"
    return ("give the structured dtype the struct's fields in order, with align=True "
            "(np.dtype([...], align=True)) so that it is padded as C pads the struct")


def _allocation(arr):
    """(the array that owns ``arr``'s memory, where ``arr`` starts in it, in bytes). A view passed
    as a pointer keeps its whole allocation reachable, as a GPU's pointer into the middle of an
    allocation does (``in[-1]`` of ``a[1:]`` is ``a[0]``). A view of a strided array is only itself."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    if root is arr or not root.flags.c_contiguous or not 0 <= start <= root.nbytes - arr.nbytes:
        return arr, 0
    return root, start


def _bytes_view(arr):
    return memoryview(arr.reshape(-1).view(np.uint8))
