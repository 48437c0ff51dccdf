"""The parent side of the worker process (worker.py): one per Python process, started lazily and
shared by every CpuModule; restarted after a crash or a timeout. Inside ``dedicated(worker)``
(sandbox.sandboxed uses it) the current thread uses a worker of its own instead."""

import atexit
import contextlib
import contextvars
import fcntl
import io
import itertools
import mmap
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from pmpp.errors import KernelCrashError, KernelTimeoutError

import pmpp.backends.cpu.sandbox as sandbox
import pmpp.backends.cpu.diagnostics as diagnostics
import pmpp.backends.cpu.toolchain as toolchain

_SIGNALS = {
    signal.SIGSEGV: "SIGSEGV (segmentation fault: an access to memory the kernel does not own, "
                    "e.g. an index past the end of an array, or a fiber stack overflow from deep "
                    "recursion or large local arrays: PMPP_CPU_STACK_KB raises the 256 KB)",
    signal.SIGBUS: "SIGBUS (bus error: a misaligned or invalid memory access)",
    signal.SIGFPE: "SIGFPE (arithmetic exception, e.g. an integer division by zero)",
    signal.SIGILL: "SIGILL (illegal instruction)",
    signal.SIGABRT: "SIGABRT (abort)",
    signal.SIGKILL: "SIGKILL (killed, perhaps for using too much memory)",
}


class WorkerTimedOut(Exception):
    """A request took longer than its timeout; the worker was killed."""


class WorkerDied(Exception):
    """The worker process ended while a request was in flight. ``code``: its exit status
    (negative: the signal that ended it), None if unknown; ``limits``: a contained worker's."""

    def __init__(self, how, stderr, code=None, limits=None):
        super().__init__(how)
        self.how, self.stderr, self.code, self.limits = how, stderr, code, limits


class _PlainValues(pickle.Unpickler):
    """Replies hold tuples, lists, dicts, strings and numbers. A kernel can write to the reply
    pipe, and unpickling a class or a function would run its code in this process."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"the worker sent an object of {module}.{name}")


REPLY_LIMIT = 1 << 30   # bytes; a longer reply is not read


def _well_formed(request, reply):
    """Whether ``reply`` has the shape worker.py gives replies to ``request`` (a kernel could
    write anything to the reply pipe)."""
    if not isinstance(reply, tuple) or not reply or not isinstance(reply[0], str):
        return False
    if reply[0] == "error":
        return len(reply) == 3 and isinstance(reply[1], (int, str)) and isinstance(reply[2], str)
    shapes = {"init": lambda r: len(r) == 3 and isinstance(r[1], int) and (r[2] is None or len(r[2]) == 2),
              "load": lambda r: len(r) == 2 and isinstance(r[1], dict),
              "symbol": lambda r: r in (("ok",), ("missing",)) or (len(r) == 2 and r[0] == "too_big"),
              "launch": lambda r: len(r) == 2 and (r[1] is None or isinstance(r[1], dict))}
    return (reply[0] == "ok" or request == "symbol") and shapes[request](reply)
_generations = itertools.count(1)   # unique across clients: a module knows which worker loaded it


def default_threads():
    env = os.environ.get("PMPP_CPU_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _arena_size():
    """Virtual size of the array arena: all of physical memory (pages are used only when touched;
    a contained worker's is its memory limit)."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        phys = 16 << 30
    return max(1 << 30, min(phys, 1 << 40))


class Arena:
    """Memory shared with the worker (a memfd both processes map): kernel argument arrays are
    copied in before a launch and the writable ones copied out after it, with no pipe traffic."""

    def __init__(self, size=None):
        self.size = size or _arena_size()
        if hasattr(os, "memfd_create"):
            self.fd = os.memfd_create("pmpp-cpu-arena")
            self._file = None
        else:
            self._file = tempfile.TemporaryFile(prefix="pmpp-cpu-arena-")
            self.fd = self._file.fileno()
        os.ftruncate(self.fd, self.size)
        self.map = mmap.mmap(self.fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.used = 0

    def view(self, offset, nbytes):
        return memoryview(self.map)[offset:offset + nbytes]

    def release(self):
        """Give back the memory of a large launch (the next one touches fresh zero pages)."""
        if self.used > (256 << 20) and hasattr(mmap, "MADV_REMOVE"):
            try:
                self.map.madvise(mmap.MADV_REMOVE, 0, self.used)
            except OSError:
                pass
        self.used = 0

    def close(self):
        self.map.close()
        if self._file is not None:
            self._file.close()
        else:
            os.close(self.fd)


class WorkerClient:
    """``limits``: a sandbox.Limits for a contained worker (sandbox.py), or None."""

    def __init__(self, limits=None):
        self.lock = threading.RLock()
        self.limits = limits
        self.containment = None   # contained workers: (contained, how or why not), over every start
        self.arena = None
        self.proc = None
        self.owner_pid = None
        self.generation = 0
        self.tx = self.rx = None
        self.private_dir = None
        self.loaded_paths = set()
        self.out = self.err = None
        self.out_pos = self.err_pos = 0

    # ---- lifetime --------------------------------------------------------------------------
    def ensure_started(self):
        if self.proc is not None and self.owner_pid == os.getpid() and self.proc.poll() is None:
            return
        self._start()

    def _start(self):
        self._discard()
        runtime = toolchain.runtime_library()
        if self.arena is None or self.owner_pid != os.getpid():
            self.arena = Arena(self.limits.memory if self.limits else None)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        self.out = tempfile.TemporaryFile(prefix="pmpp-cpu-stdout-")
        flags = fcntl.fcntl(self.out.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(self.out.fileno(), fcntl.F_SETFL, flags | os.O_APPEND)
        self.err = tempfile.TemporaryFile(prefix="pmpp-cpu-stderr-")
        self.out_pos = self.err_pos = 0
        self.private_dir = tempfile.mkdtemp(prefix="pmpp-cpu-worker-")
        self.loaded_paths = set()
        package_root = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = "1"  # numpy's BLAS threads would compete with the kernel's blocks
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pmpp.backends.cpu.worker", str(to_worker_r), str(from_worker_w),
             str(self.arena.fd), str(self.arena.size)],
            pass_fds=(to_worker_r, from_worker_w, self.arena.fd), stdin=subprocess.DEVNULL, stdout=self.out,
            stderr=self.err, env=env, start_new_session=True)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.tx = Connection(to_worker_w, readable=False)
        self.rx = Connection(from_worker_r, writable=False)
        self.owner_pid = os.getpid()
        self.generation = next(_generations)
        settings = sandbox.init_settings(self.limits) if self.limits else None
        try:
            reply = self.request(("init", str(runtime), default_threads(), self.private_dir, settings),
                                 timeout=120)
        except WorkerDied as died:
            self._discard()
            raise KernelCrashError(f"pmpp's CPU worker process failed to start: {died.how}\n{died.stderr}") from None
        if reply[0] != "ok":
            self._discard()
            raise KernelCrashError(f"pmpp's CPU worker process failed to start:\n{reply[-1]}")
        if settings is not None:
            self._record_containment(*reply[2])

    def _record_containment(self, contained, how):
        if self.containment is None or self.containment[0]:
            self.containment = (bool(contained), how)

    def _discard(self):
        """Forget the current worker (killing it if it still runs)."""
        if self.proc is not None and self.owner_pid == os.getpid():
            if self.proc.poll() is None:
                self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for conn in (self.tx, self.rx):
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass
        self.proc = self.tx = self.rx = None
        if self.private_dir and self.owner_pid == os.getpid():
            shutil.rmtree(self.private_dir, ignore_errors=True)
        self.private_dir = None

    def shutdown(self):
        with self.lock:
            self._discard()

    def close(self):
        """Stop the worker and give back the arena's memory (a client that is not used again)."""
        with self.lock:
            self._discard()
            if self.arena is not None and self.owner_pid == os.getpid():
                self.arena.close()
            self.arena = None
            for file in (self.out, self.err):
                if file is not None:
                    file.close()
            self.out = self.err = None

    # ---- requests --------------------------------------------------------------------------
    def request(self, message, *, timeout=None):
        """Send ``message``; return the reply. Raises WorkerDied, or WorkerTimedOut (after
        killing the worker)."""
        message = self._library_to_load(message)
        try:
            self.tx.send(message)
            if not self.rx.poll(timeout):
                timed_out = True
            else:
                timed_out = False
                data = self.rx.recv_bytes(REPLY_LIMIT)
        except (EOFError, OSError) as exc:
            raise self._died() from exc
        except KeyboardInterrupt:
            self._discard()
            raise
        if timed_out:
            self.forward_stdout()
            self._discard()
            raise WorkerTimedOut
        try:
            reply = _PlainValues(io.BytesIO(data)).load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
            reply = exc
        if not _well_formed(message[0], reply):
            self._discard()
            raise WorkerDied("a reply that is not pmpp's (did the kernel write to the worker's pipes?)",
                             "", limits=self.limits)
        if reply[0] == "error" and isinstance(reply[-1], str):
            reply = (*reply[:-1], diagnostics.symbolize(reply[-1]))
        return reply

    def _library_to_load(self, message):
        """A load names its library by absolute path (a contained worker works in its private
        directory); a library loaded a second time is loaded from a private copy, so that its
        globals (__constant__ memory) are its own, as for separately loaded CUDA modules."""
        if message[0] != "load":
            return message
        _, module_id, path, *rest = message
        path = os.path.abspath(path)
        if path in self.loaded_paths:
            copy = os.path.join(self.private_dir, f"{module_id}-{os.path.basename(path)}")
            shutil.copyfile(path, copy)
            return ("load", module_id, copy, *rest)
        self.loaded_paths.add(path)
        return ("load", module_id, path, *rest)

    def _died(self):
        proc = self.proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        if code is None:
            how = "the worker process vanished"
        elif code < 0:
            how = _SIGNALS.get(-code, f"signal {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"signal {-code}")
        else:
            how = f"exit status {code}"
        stderr = self.read_stderr()
        self.forward_stdout()
        self._discard()
        return WorkerDied(how, stderr, code, self.limits)

    # ---- output ----------------------------------------------------------------------------
    def forward_stdout(self):
        """Print what kernels wrote with printf since the last call (so Jupyter shows it); of a
        contained worker, the first sandbox.SHOWN_OUTPUT bytes."""
        if self.out is None:
            return
        data = os.pread(self.out.fileno(), 1 << 30, self.out_pos)
        if data:
            self.out_pos += len(data)
            shown = data if self.limits is None else data[:sandbox.SHOWN_OUTPUT]
            print(shown.decode(errors="replace"), end="", flush=True)
            if len(shown) < len(data):
                print(f"\n[{len(data) - len(shown)} more bytes of the kernel's output not shown]", flush=True)
        if self.out_pos > (0 if self.limits else 16 << 20):   # a contained worker's limit is per launch
            os.ftruncate(self.out.fileno(), 0)  # the worker appends (O_APPEND), and is idle now
            self.out_pos = 0

    def read_stderr(self, limit=4000):
        if self.err is None:
            return ""
        data = os.pread(self.err.fileno(), 1 << 24, self.err_pos)
        self.err_pos += len(data)
        return data.decode(errors="replace")[-limit:].strip()


_client = None
_client_lock = threading.Lock()
_dedicated = contextvars.ContextVar("pmpp_cpu_dedicated_worker", default=None)


def client():
    """The worker client of the current thread: its dedicated one if any, else the process's."""
    global _client
    own = _dedicated.get()
    if own is not None:
        return own
    with _client_lock:
        if _client is None:
            _client = WorkerClient()
            atexit.register(_client.shutdown)
        return _client


@contextlib.contextmanager
def dedicated(worker):
    """Use ``worker`` (a WorkerClient) for this thread's launches in the block; stop it after."""
    token = _dedicated.set(worker)
    try:
        yield worker
    finally:
        _dedicated.reset(token)
        worker.close()


def crash_error(what, died):
    if died.limits is not None:
        error = sandbox.verdict(what, died.code, died.stderr, died.limits)
        if error is not None:
            return error
    message = (f"{what} crashed pmpp's CPU worker process with {died.how}. The worker was "
               "restarted, so the next launch runs normally; launch with check=True "
               "(CpuModule(..., check=True)) to find out-of-bounds accesses.")
    if died.stderr:
        message += f"\nWorker stderr:\n{died.stderr}"
    return KernelCrashError(message)


def timeout_error(what, timeout):
    return KernelTimeoutError(
        f"{what} did not finish within {timeout:g} s, so pmpp's CPU worker process was killed (it "
        "restarts on the next launch). Look for a loop that never ends: a spin-wait on a flag no "
        "thread sets, or a loop bound that does not change. If the kernel is merely slow, pass a "
        "larger timeout= (or set PMPP_CPU_TIMEOUT).")
