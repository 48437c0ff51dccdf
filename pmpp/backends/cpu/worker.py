"""The CPU engine's worker process:
``python -m pmpp.backends.cpu.worker IN_FD OUT_FD ARENA_FD ARENA_SIZE``.

It loads compiled kernel modules and runs launches, so a kernel that crashes or never ends
takes down this process, not the notebook (client.py restarts it). Requests and replies are
pickled tuples on two pipes (multiprocessing.connection). Array arguments live in an arena both
processes map (a memfd passed at start): the parent copies them in before a launch and the
writable ones out after it. File descriptor 1 is left to the kernels' printf: the parent points
it at a file and forwards what appears.

Requests:
  ("init", runtime_path, nthreads, private_dir, sandbox) -> ("ok", pid, containment)
  ("load", module_id, library_path, constants)         -> ("ok", {kernel: [param sizes]})
  ("symbol", module_id, name, data)                    -> ("ok",) | ("missing",) | ("too_big", size)
  ("launch", module_id, kernel, grid, block, shared_mem, check, specs, sample, limits)
                                                       -> ("ok", counts) | ("error", kind, message)
  constants: ((name, element size, element type), ...) of the module's __constant__ variables
  specs: ("array", arena_offset, nbytes, itemsize, dtype, name, writable, view_offset) |
         ("alias", arg_index, view_offset): an allocation copied at arena_offset (an "alias": the
         allocation of argument arg_index), the argument pointing view_offset bytes into it
         | ("scalar", bytes)
  sample: None, or (block, warp[, serial]) for a count build: counters are collected, every access
  of that warp is kept, and counts is {"summary": {...}, "rows": [{...}], "samples": [{...}]} (else
  None); serial: the blocks run on one OS thread, one after another
  limits: None (the engine's own), or (threads, shared bytes, name) per block of a target GPU
  sandbox: None, or the settings of a contained worker (sandbox.init_settings): once the runtime
  is loaded it works in private_dir under limits and a seccomp filter (see sandbox.py), and
  containment is (contained, how or why not); else containment is None
Replies carry plain values only (the parent refuses anything else), and error messages keep the
runtime's {{pc:...}} markers, which the parent turns into source lines (lines.py reads the
module's debug information there, outside a contained worker's limits).
"""

import ctypes
import mmap
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection

import numpy as np

import pmpp.backends.cpu.sandbox as sandbox


class RegionDesc(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("size", ctypes.c_uint64), ("elem_size", ctypes.c_uint32),
                ("is_const", ctypes.c_uint32), ("name", ctypes.c_char_p), ("type_name", ctypes.c_char_p),
                ("view_offset", ctypes.c_int64)]


REGION_CONSTANT = 2   # pmpp_region_desc.is_const of a __constant__ variable


class LaunchDesc(ctypes.Structure):
    _fields_ = [("thunk", ctypes.c_void_p), ("args", ctypes.c_void_p),
                ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3),
                ("shared_mem", ctypes.c_uint64), ("check", ctypes.c_int32), ("nthreads", ctypes.c_int32),
                ("kernel_name", ctypes.c_char_p), ("nregions", ctypes.c_int32),
                ("regions", ctypes.c_void_p), ("count", ctypes.c_int32), ("sample_warp", ctypes.c_uint32),
                ("sample_block", ctypes.c_uint64), ("max_shared_per_block", ctypes.c_uint64),
                ("max_threads_per_block", ctypes.c_uint32), ("target", ctypes.c_char_p),
                ("error_kind", ctypes.c_int32),
                ("error_msg", ctypes.c_char * 4096)]


class CountRow(ctypes.Structure):
    _fields_ = [("pc", ctypes.c_uint64), ("space", ctypes.c_int32), ("op", ctypes.c_int32),
                ("width", ctypes.c_uint32), ("pad", ctypes.c_uint32)] + [
        (name, ctypes.c_uint64) for name in ("executed", "threads", "partial", "diverged_warps", "sectors",
                                             "wavefronts", "ideal_wavefronts", "addresses", "max_same_address")]


class CountSample(ctypes.Structure):
    _fields_ = [("pc", ctypes.c_uint64), ("space", ctypes.c_int32), ("op", ctypes.c_int32),
                ("k", ctypes.c_uint32), ("mask", ctypes.c_uint32), ("width", ctypes.c_uint32),
                ("region", ctypes.c_int32), ("offset", ctypes.c_int64 * 32), ("array_offset", ctypes.c_int64),
                ("array", ctypes.c_char * 48)]


class CountSummary(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "nrows", "nsamples", "blocks", "warps", "barriers", "atom_global_addresses", "atom_global_max_updates",
        "atom_shared_addresses", "atom_shared_max_updates")]


class KernelEntry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("thunk", ctypes.c_void_p), ("nparams", ctypes.c_int32),
                ("param_sizes", ctypes.POINTER(ctypes.c_uint32))]


class Worker:
    def __init__(self, rx, tx, arena_fd, arena_size):
        self.rx, self.tx = rx, tx
        self.arena = mmap.mmap(arena_fd, arena_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.arena_base = ctypes.addressof(ctypes.c_char.from_buffer(self.arena))
        self.runtime = None
        self.nthreads = 1
        self.modules = {}  # id -> (CDLL, {name: (thunk, sizes)}, [(address, size, elem, type, name)])

    def serve(self):
        while True:
            try:
                request = self.rx.recv()
            except EOFError:
                return
            try:
                reply = getattr(self, "do_" + request[0])(*request[1:])
            except Exception:  # report, keep serving
                reply = ("error", "RuntimeError", traceback.format_exc())
            self.tx.send(reply)

    def do_init(self, runtime_path, nthreads, private_dir, sandbox_settings=None):
        self.runtime = ctypes.CDLL(runtime_path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        self.runtime.pmpp_launch.argtypes = [ctypes.POINTER(LaunchDesc)]
        self.runtime.pmpp_symbol.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                             ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint64)]
        self.runtime.pmpp_count_result.argtypes = [ctypes.POINTER(CountSummary), ctypes.c_void_p, ctypes.c_uint64,
                                                    ctypes.c_void_p, ctypes.c_uint64]
        self.nthreads = max(1, int(nthreads))
        containment = None
        if sandbox_settings is not None:
            containment = sandbox.contain(sandbox_settings, private_dir, self.nthreads)
        return ("ok", os.getpid(), containment)

    def do_load(self, module_id, path, constants=()):
        # (a library loaded twice comes as a private copy the parent made: see client.py)
        lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        count = ctypes.c_int.in_dll(lib, "pmpp_module_kernel_count").value
        table = (KernelEntry * (count + 1)).in_dll(lib, "pmpp_module_kernels")
        kernels = {}
        for entry in table[:count]:
            sizes = [entry.param_sizes[k] for k in range(entry.nparams)]
            kernels[entry.name.decode()] = (entry.thunk, sizes)
        self.modules[module_id] = (lib, kernels, self._constant_regions(lib, constants))
        return ("ok", {name: sizes for name, (_, sizes) in kernels.items()})

    def _constant_regions(self, lib, constants):
        """Where each __constant__ variable lives, for the bounds checks and the counters (a
        static one the symbol table does not export is left to the module's segments)."""
        found = []
        for name, elem, type_name in constants:
            addr, size = ctypes.c_void_p(), ctypes.c_uint64()
            if self.runtime.pmpp_symbol(lib._handle, name.encode(), ctypes.byref(addr), ctypes.byref(size)) \
                    and size.value:
                found.append((addr.value, size.value, elem, type_name.encode(), name.encode()))
        return found

    def do_symbol(self, module_id, name, data):
        lib = self.modules[module_id][0]
        addr, size = ctypes.c_void_p(), ctypes.c_uint64()
        if not self.runtime.pmpp_symbol(lib._handle, name.encode(), ctypes.byref(addr), ctypes.byref(size)):
            return ("missing",)
        if size.value and len(data) > size.value:
            return ("too_big", size.value)
        ctypes.memmove(addr.value, data, len(data))
        return ("ok",)

    def do_launch(self, module_id, kernel, grid, block, shared_mem, check, specs, sample=None, limits=None):
        _, kernels, constants = self.modules[module_id]
        thunk, sizes = kernels[kernel]
        n = len(specs)
        slots = np.zeros(max(n, 1) * 64 + 64, np.uint8)  # one 64-byte-aligned slot per parameter
        base = slots.ctypes.data + (-slots.ctypes.data) % 64
        pointers = (ctypes.c_void_p * max(n, 1))()
        regions = (RegionDesc * max(n + len(constants), 1))()
        names = []
        nregions = 0
        for i, spec in enumerate(specs):
            slot = base + 64 * i
            if spec[0] == "array":
                _, offset, nbytes, itemsize, dtype, name, writable, view_offset = spec
                address = self.arena_base + offset
                ctypes.c_void_p.from_address(slot).value = address + view_offset
                names += [name.encode(), dtype.encode()]
                regions[nregions] = RegionDesc(address, nbytes, itemsize, int(not writable),
                                               names[-2], names[-1], view_offset)
                nregions += 1
            elif spec[0] == "alias":
                ctypes.c_void_p.from_address(slot).value = self.arena_base + specs[spec[1]][1] + spec[2]
            else:
                data = spec[1]
                if len(data) > 64:
                    big = np.frombuffer(data, np.uint8).copy()
                    names.append(big)
                    ctypes.c_void_p.from_address(slot).value = None
                    pointers[i] = big.ctypes.data
                    continue
                ctypes.memmove(slot, data, len(data))
            pointers[i] = slot
        for address, size, elem, type_name, name in constants:
            regions[nregions] = RegionDesc(address, size, elem, REGION_CONSTANT, name, type_name)
            nregions += 1
        desc = LaunchDesc()
        desc.thunk = thunk
        desc.args = ctypes.cast(pointers, ctypes.c_void_p)
        desc.grid[:] = list(grid)
        desc.block[:] = list(block)
        desc.shared_mem = shared_mem
        desc.check = int(bool(check))
        desc.nthreads = self.nthreads
        desc.kernel_name = kernel.encode()
        desc.nregions = nregions
        desc.regions = ctypes.cast(regions, ctypes.c_void_p)
        if limits is not None:
            desc.max_threads_per_block, desc.max_shared_per_block = int(limits[0]), int(limits[1])
            desc.target = limits[2].encode()
        if sample is not None:
            desc.count = 1
            desc.sample_block, desc.sample_warp = int(sample[0]), int(sample[1])
            if len(sample) > 2 and sample[2]:
                desc.nthreads = 1
        kind = self.runtime.pmpp_launch(ctypes.byref(desc))
        sys.stdout.flush()
        if kind:
            return ("error", kind, desc.error_msg.decode(errors="replace"))
        return ("ok", self._counts() if sample is not None else None)

    def _counts(self):
        """The counters of the launch just made (see pmpp_count_result in pmpp_abi.h)."""
        summary = CountSummary()
        self.runtime.pmpp_count_result(ctypes.byref(summary), None, 0, None, 0)
        rows = (CountRow * max(summary.nrows, 1))()
        samples = (CountSample * max(summary.nsamples, 1))()
        self.runtime.pmpp_count_result(ctypes.byref(summary), ctypes.cast(rows, ctypes.c_void_p), summary.nrows,
                                       ctypes.cast(samples, ctypes.c_void_p), summary.nsamples)
        as_dict = lambda s: {name: getattr(s, name) for name, _ in s._fields_ if name != "pad"}
        # The samples go as the engine's array, in bytes: pmpp.counters reads them when asked
        # (making ~1,000 dicts of 32 offsets each would cost more than a small launch).
        packed = ctypes.string_at(samples, ctypes.sizeof(CountSample) * summary.nsamples)
        return {"summary": as_dict(summary), "rows": [as_dict(r) for r in rows[:summary.nrows]],
                "samples": packed}


def _die_with_parent():
    """A kernel stuck in a loop must not outlive the notebook that launched it: Linux sends this
    process SIGKILL when its parent dies (PR_SET_PDEATHSIG); elsewhere (macOS has no such
    setting) a thread watches for the parent to go, since a stuck launch never reads the pipe."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(1, 9) == 0:  # PR_SET_PDEATHSIG, SIGKILL
                return
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_kill_when_orphaned, args=(os.getppid(),), daemon=True,
                     name="pmpp-parent-watch").start()


def _kill_when_orphaned(parent, interval=0.5):
    """SIGKILL this process once its parent is gone (it is then re-parented, to launchd or init)."""
    while os.getppid() == parent:
        time.sleep(interval)
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv):
    _die_with_parent()
    rx = Connection(int(argv[1]), writable=False)
    tx = Connection(int(argv[2]), readable=False)
    worker = Worker(rx, tx, int(argv[3]), int(argv[4]))
    worker.serve()


if __name__ == "__main__":
    main(sys.argv)
