"""The parent side of the worker process (worker.py): one per Python process, started lazily and
shared by every CpuModule; restarted after a crash or a timeout."""

import atexit
import fcntl
import mmap
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from pmpp.errors import KernelCrashError, KernelTimeoutError

from . import toolchain

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
    """The worker process ended while a request was in flight."""

    def __init__(self, how, stderr):
        super().__init__(how)
        self.how, self.stderr = how, stderr


def default_threads():
    env = os.environ.get("PMPP_CPU_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _arena_size():
    """Virtual size of the array arena: all of physical memory (pages are used only when touched)."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        phys = 16 << 30
    return max(1 << 30, min(phys, 1 << 40))


class Arena:
    """Memory shared with the worker (a memfd both processes map): kernel argument arrays are
    copied in before a launch and the writable ones copied out after it, with no pipe traffic."""

    def __init__(self):
        self.size = _arena_size()
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


class WorkerClient:
    def __init__(self):
        self.lock = threading.RLock()
        self.arena = None
        self.proc = None
        self.owner_pid = None
        self.generation = 0
        self.tx = self.rx = None
        self.private_dir = None
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
            self.arena = Arena()
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        self.out = tempfile.TemporaryFile(prefix="pmpp-cpu-stdout-")
        flags = fcntl.fcntl(self.out.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(self.out.fileno(), fcntl.F_SETFL, flags | os.O_APPEND)
        self.err = tempfile.TemporaryFile(prefix="pmpp-cpu-stderr-")
        self.out_pos = self.err_pos = 0
        self.private_dir = tempfile.mkdtemp(prefix="pmpp-cpu-worker-")
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
        self.generation += 1
        try:
            self.request(("init", str(runtime), default_threads(), self.private_dir), timeout=120)
        except WorkerDied as died:
            self._discard()
            raise KernelCrashError(f"pmpp's CPU worker process failed to start: {died.how}\n{died.stderr}") from None

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

    # ---- requests --------------------------------------------------------------------------
    def request(self, message, *, timeout=None):
        """Send ``message``; return the reply. Raises WorkerDied, or WorkerTimedOut (after
        killing the worker)."""
        try:
            self.tx.send(message)
            if not self.rx.poll(timeout):
                timed_out = True
            else:
                timed_out = False
                reply = self.rx.recv()
        except (EOFError, OSError) as exc:
            raise self._died() from exc
        except KeyboardInterrupt:
            self._discard()
            raise
        if timed_out:
            self.forward_stdout()
            self._discard()
            raise WorkerTimedOut
        return reply

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
        return WorkerDied(how, stderr)

    # ---- output ----------------------------------------------------------------------------
    def forward_stdout(self):
        """Print what kernels wrote with printf since the last call (so Jupyter shows it)."""
        if self.out is None:
            return
        data = os.pread(self.out.fileno(), 1 << 30, self.out_pos)
        if data:
            self.out_pos += len(data)
            print(data.decode(errors="replace"), end="", flush=True)
        if self.out_pos > (16 << 20):
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


def client():
    """The process's worker client."""
    global _client
    with _client_lock:
        if _client is None:
            _client = WorkerClient()
            atexit.register(_client.shutdown)
        return _client


def crash_error(what, died):
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
