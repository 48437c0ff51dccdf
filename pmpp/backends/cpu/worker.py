"""The CPU engine's worker process:
``python -m pmpp.backends.cpu.worker IN_FD OUT_FD ARENA_FD ARENA_SIZE``.

It loads compiled kernel modules and runs launches, so a kernel that crashes or never ends
takes down this process, not the notebook (client.py restarts it). Requests and replies are
pickled tuples on two pipes (multiprocessing.connection). Array arguments live in an arena both
processes map (a memfd passed at start): the parent copies them in before a launch and the
writable ones out after it. File descriptor 1 is left to the kernels' printf: the parent points
it at a file and forwards what appears.

Requests:
  ("init", runtime_path, nthreads, private_dir)        -> ("ok", pid)
  ("load", module_id, library_path)                    -> ("ok", {kernel: [param sizes]})
  ("symbol", module_id, name, data)                    -> ("ok",) | ("missing",) | ("too_big", size)
  ("launch", module_id, kernel, grid, block, shared_mem, check, specs) -> ("ok",) | ("error", kind, message)
  specs: ("array", arena_offset, nbytes, itemsize, dtype, name, writable) | ("alias", arg_index)
         | ("scalar", bytes)
"""

import ctypes
import mmap
import os
import shutil
import sys
import traceback
from multiprocessing.connection import Connection

import numpy as np

class RegionDesc(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("size", ctypes.c_uint64), ("elem_size", ctypes.c_uint32),
                ("is_const", ctypes.c_uint32), ("name", ctypes.c_char_p), ("type_name", ctypes.c_char_p)]


class LaunchDesc(ctypes.Structure):
    _fields_ = [("thunk", ctypes.c_void_p), ("args", ctypes.c_void_p),
                ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3),
                ("shared_mem", ctypes.c_uint64), ("check", ctypes.c_int32), ("nthreads", ctypes.c_int32),
                ("kernel_name", ctypes.c_char_p), ("nregions", ctypes.c_int32),
                ("regions", ctypes.c_void_p), ("error_kind", ctypes.c_int32),
                ("error_msg", ctypes.c_char * 4096)]


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
        self.modules = {}  # id -> (CDLL, {name: (thunk, sizes)})
        self.loaded_paths = set()
        self.private_dir = None

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

    def do_init(self, runtime_path, nthreads, private_dir):
        self.private_dir = private_dir  # the parent's, removed by the parent
        self.runtime = ctypes.CDLL(runtime_path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        self.runtime.pmpp_launch.argtypes = [ctypes.POINTER(LaunchDesc)]
        self.runtime.pmpp_symbol.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                             ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint64)]
        self.nthreads = max(1, int(nthreads))
        return ("ok", os.getpid())

    def do_load(self, module_id, path):
        if path in self.loaded_paths:
            # A second module from the same cached library gets its own copy, so that its
            # globals (__constant__ memory) are its own, as for separately loaded CUDA modules.
            copy = os.path.join(self.private_dir, f"{module_id}-{os.path.basename(path)}")
            shutil.copyfile(path, copy)
            path = copy
        lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self.loaded_paths.add(path)
        count = ctypes.c_int.in_dll(lib, "pmpp_module_kernel_count").value
        table = (KernelEntry * (count + 1)).in_dll(lib, "pmpp_module_kernels")
        kernels = {}
        for entry in table[:count]:
            sizes = [entry.param_sizes[k] for k in range(entry.nparams)]
            kernels[entry.name.decode()] = (entry.thunk, sizes)
        self.modules[module_id] = (lib, kernels)
        return ("ok", {name: sizes for name, (_, sizes) in kernels.items()})

    def do_symbol(self, module_id, name, data):
        lib, _ = self.modules[module_id]
        addr, size = ctypes.c_void_p(), ctypes.c_uint64()
        if not self.runtime.pmpp_symbol(lib._handle, name.encode(), ctypes.byref(addr), ctypes.byref(size)):
            return ("missing",)
        if size.value and len(data) > size.value:
            return ("too_big", size.value)
        ctypes.memmove(addr.value, data, len(data))
        return ("ok",)

    def do_launch(self, module_id, kernel, grid, block, shared_mem, check, specs):
        _, kernels = self.modules[module_id]
        thunk, sizes = kernels[kernel]
        n = len(specs)
        slots = np.zeros(max(n, 1) * 64 + 64, np.uint8)  # one 64-byte-aligned slot per parameter
        base = slots.ctypes.data + (-slots.ctypes.data) % 64
        pointers = (ctypes.c_void_p * max(n, 1))()
        regions = (RegionDesc * max(n, 1))()
        names = []
        nregions = 0
        for i, spec in enumerate(specs):
            slot = base + 64 * i
            if spec[0] == "array":
                _, offset, nbytes, itemsize, dtype, name, writable = spec
                address = self.arena_base + offset
                ctypes.c_void_p.from_address(slot).value = address
                names += [name.encode(), dtype.encode()]
                regions[nregions] = RegionDesc(address, nbytes, itemsize, int(not writable),
                                               names[-2], names[-1])
                nregions += 1
            elif spec[0] == "alias":
                ctypes.memmove(slot, base + 64 * spec[1], 8)
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
        kind = self.runtime.pmpp_launch(ctypes.byref(desc))
        sys.stdout.flush()
        if kind:
            from .toolchain import symbolize
            return ("error", kind, symbolize(desc.error_msg.decode(errors="replace")))
        return ("ok",)


def _die_with_parent():
    """A kernel stuck in a loop must not outlive the notebook that launched it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def main(argv):
    _die_with_parent()
    rx = Connection(int(argv[1]), writable=False)
    tx = Connection(int(argv[2]), readable=False)
    worker = Worker(rx, tx, int(argv[3]), int(argv[4]))
    worker.serve()


if __name__ == "__main__":
    main(sys.argv)
