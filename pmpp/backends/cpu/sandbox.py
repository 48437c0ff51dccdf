"""Containment for graded kernels: a CPU-engine worker that cannot write files, start processes
or use the network, with limits on memory, CPU time and output.

::

    from pmpp.backends.cpu import sandbox
    with sandbox.sandboxed() as box:      # this thread's CPU-engine launches run in a contained worker
        ...                               # pmpp.load / pmpp.runner.verify / CpuModule, as usual
    box.contained, box.reason             # True, "seccomp filter ..." or False, why not

The worker (worker.py) sets the limits and installs the filter once its runtime library is
loaded, before any kernel module is: kernel modules are loaded afterwards, which needs only
read-only opens. The filter is a seccomp program built with libseccomp (through pyseccomp): the
system calls that write files, start processes, open sockets or reach other processes stop the
worker, and a handler of the trap signal writes which call it was on standard error, so that the
parent can say what was refused (:class:`SandboxViolation`). Reading files is not prevented.
Where seccomp is not available (not Linux, pyseccomp or libseccomp missing) the worker runs with
the limits alone and reports that it is not contained.
"""

import contextlib
import errno
import functools
import hashlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass, replace

from pmpp.errors import KernelCrashError, KernelTimeoutError, PmppError

REFUSED_STATUS = 159   # the worker's exit status after a refused system call (128 + SIGSYS)
REFUSED_LINE = "pmpp-sandbox: refused system call"
SHOWN_OUTPUT = 16 << 10   # of a contained kernel's printf output, printed per launch


class SandboxViolation(KernelCrashError):
    """A graded kernel did what the sandbox forbids (write a file, start a process, use the
    network) or went past one of its limits (memory, output); the worker was stopped."""


@dataclass(frozen=True)
class Limits:
    """What a contained worker may use. ``memory``: bytes of memory the kernels may allocate, and
    the size of the array arena; ``cpu_seconds``: CPU time over the worker's life (every launch
    of one grading, all threads); ``output_bytes``: printf output per launch."""
    memory: int = 2 << 30
    cpu_seconds: int = 300
    output_bytes: int = 4 << 20

    def describe(self):
        return (f"at most {_size(self.memory)} of memory, {self.cpu_seconds} s of CPU time and "
                f"{_size(self.output_bytes)} of output")


def _size(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):g} {unit}"
    return f"{nbytes} bytes"


# ---- what is refused -------------------------------------------------------------------------
# (what the kernel tried, what graded kernels may not do), by system call

_PROCESS = ("start a process", "start processes")
_WRITE = ("open a file for writing", "touch files")
_FILES = ("create, delete, rename or change a file", "touch files")
_NETWORK = ("use the network", "use the network")
_OTHERS = ("signal, trace or change another process", "touch other processes")
_SYSTEM = ("change the system (mounts, namespaces, shared memory, keys, kernel facilities)",
           "change the system")

REFUSED = {  # whatever their arguments
    **dict.fromkeys(("execve", "execveat", "fork", "vfork"), _PROCESS),
    **dict.fromkeys(("creat", "open_by_handle_at", "truncate", "ftruncate", "fallocate", "unlink",
                     "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir",
                     "link", "linkat", "symlink", "symlinkat", "mknod", "mknodat", "chmod", "fchmod",
                     "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
                     "utimes", "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr",
                     "removexattr", "lremovexattr", "fremovexattr", "io_uring_setup",
                     "io_uring_enter", "io_uring_register"), _FILES),
    **dict.fromkeys(("socket", "connect", "bind", "listen", "accept", "accept4"), _NETWORK),
    **dict.fromkeys(("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open",
                     "pidfd_getfd", "pidfd_send_signal", "process_madvise", "tkill"), _OTHERS),
    **dict.fromkeys(("mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen",
                     "fsmount", "fsconfig", "move_mount", "open_tree", "mount_setattr", "shmget",
                     "shmat", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
                     "semtimedop", "semctl", "mq_open", "mq_unlink", "add_key", "request_key",
                     "keyctl", "bpf", "perf_event_open", "userfaultfd", "acct", "quotactl",
                     "swapon", "swapoff", "init_module", "finit_module", "delete_module",
                     "kexec_load", "kexec_file_load", "reboot", "sethostname", "setdomainname",
                     "settimeofday", "clock_settime", "clock_adjtime", "adjtimex"), _SYSTEM),
}
WRITE_OPENS = {"open": 1, "openat": 2}   # system call: index of its flags argument
WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)
CLONE_THREAD = 0x10000
OTHER_PROCESS_ARG0 = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")   # arg 0: a pid
# Unavailable (ENOSYS), so that glibc falls back to calls whose arguments a filter can read:
# clone3 and openat2 pass their flags in memory.
NOT_AVAILABLE = ("clone3", "openat2")
UNKNOWN_CALLS = range(1024)   # numbers libseccomp does not know (newer calls) are unavailable too
GUARDED_SIGNALS = (signal.SIGSYS, signal.SIGXCPU, signal.SIGXFSZ)
PR_SET_PDEATHSIG = 1


# ---- availability ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def available():
    """``(True, how)`` where graded kernels can be contained here, else ``(False, why not)``."""
    if not sys.platform.startswith("linux"):
        return False, f"seccomp filters are Linux-only (this is {sys.platform})"
    try:
        import pyseccomp
    except ImportError:
        return False, "pyseccomp is not installed (pip install pyseccomp)"
    except (RuntimeError, OSError) as exc:
        return False, f"libseccomp cannot be loaded ({exc}; Debian/Ubuntu: apt install libseccomp2)"
    if _seccomp_mode() is None:
        return False, "this kernel has no seccomp filters"
    arch = pyseccomp.system_arch()
    if arch in (pyseccomp.Arch.S390, pyseccomp.Arch.S390X):
        return False, "the clone flags are not where the filter looks on s390"
    return True, _how(Limits())


def _how(limits):
    return f"a seccomp filter refuses file writes, processes and the network; {limits.describe()}"


def _seccomp_mode():
    try:
        with open("/proc/self/status") as status:
            found = re.search(r"^Seccomp:\s*(\d+)", status.read(), re.M)
    except OSError:
        return None
    return int(found.group(1)) if found else None


# ---- the parent's side -----------------------------------------------------------------------

class Containment:
    """What :func:`sandboxed` yields: whether the worker was contained, and how or why not."""

    def __init__(self, worker):
        self._worker = worker

    @property
    def limits(self):
        return self._worker.limits

    @property
    def contained(self):
        return self._status()[0]

    @property
    def reason(self):
        return self._status()[1]

    def _status(self):
        """The workers' own reports (every restart's); before any started, what this machine offers."""
        if self._worker.containment is not None:
            return self._worker.containment
        ok, why_not = available()
        return ok, _how(self.limits) if ok else why_not

    def __str__(self):
        ok, reason = self._status()
        return ("contained: " if ok else "not contained: ") + reason


@contextlib.contextmanager
def sandboxed(limits=None, **overrides):
    """Run the CPU-engine launches of the current thread in a fresh contained worker until the
    block ends (then it is stopped): enter it in the thread that grades (threads started inside
    the block use the process's own, uncontained worker). ``limits``: a :class:`Limits`, whose
    fields keywords override."""
    import pmpp.backends.cpu.client as client
    limits = replace(limits or Limits(), **overrides)
    worker = client.WorkerClient(limits)
    with client.dedicated(worker):
        yield Containment(worker)


def init_settings(limits):
    """What the worker's init request carries: the limits, and whether and how to filter."""
    ok, why_not = available()
    return {**asdict(limits), "seccomp": ok, "reason": _how(limits) if ok else why_not,
            "trap_library": trap_library() if ok else None}


def verdict(what, code, stderr, limits):
    """The error for a contained worker that ended with ``code`` (negative: a signal), or None
    where the sandbox had no part in it."""
    if code == REFUSED_STATUS:
        name = _refused_call(stderr)
        action, rule = _purpose(name)
        return SandboxViolation(f"{what} was stopped: it tried to {action} (system call {name}); graded "
                                f"kernels may not {rule}. Remove that code and grade again.")
    if code == -signal.SIGSYS:
        # The handler that names the call runs unless the signal is blocked, which is how glibc
        # starts a process for system(), popen() and posix_spawn().
        return SandboxViolation(f"{what} was stopped: it made a system call the sandbox refuses with "
                                "signals blocked, as system(), popen() and posix_spawn() do to start a "
                                "process; graded kernels may not start processes, touch files or use "
                                "the network. Remove that code and grade again.")
    if code == -signal.SIGXFSZ:
        return SandboxViolation(f"{what} was stopped: it printed more than {_size(limits.output_bytes)}, "
                                "the most a graded kernel may print in one launch (a printf in a loop "
                                "that never ends?)")
    if code == -signal.SIGXCPU:
        return KernelTimeoutError(f"{what} was stopped: the grading used up its {limits.cpu_seconds} s "
                                  "of CPU time. Look for a loop that never ends.")
    if code == -signal.SIGABRT and "std::bad_alloc" in stderr:
        return SandboxViolation(f"{what} was stopped: it tried to allocate more than the "
                                f"{_size(limits.memory)} of memory a graded kernel may use.")
    return None


def _purpose(name):
    """(what a kernel making system call ``name`` tried, what graded kernels may not do)."""
    if name in REFUSED:
        return REFUSED[name]
    if name in WRITE_OPENS:
        return _WRITE
    if name == "clone":
        return _PROCESS
    if name in OTHER_PROCESS_ARG0 + ("prlimit64", "setpriority"):
        return _OTHERS
    return "make a system call the sandbox refuses", "make it"


def _refused_call(stderr):
    found = re.findall(REFUSED_LINE + r" (\d+)", stderr)
    if not found:
        return "unknown: its report is missing"
    try:
        import pyseccomp
        return pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, int(found[-1])).decode()
    except (ImportError, RuntimeError, OSError, ValueError):
        return f"number {found[-1]}"


_TRAP_SOURCE = r"""
#include <signal.h>
#include <string.h>
#include <unistd.h>

// On a refused system call (seccomp's SIGSYS): say which on the report fd, and end the process.
namespace {
int g_report_fd = 2;

void on_refused(int, siginfo_t *info, void *) {
    char line[96] = "%(line)s ";
    size_t n = strlen(line);
    char digits[12];
    int k = 0;
    unsigned v = unsigned(info->si_syscall);
    do { digits[k++] = char('0' + v %% 10); v /= 10; } while (v && k < 12);
    while (k) line[n++] = digits[--k];
    line[n++] = '\n';
    ssize_t written = write(g_report_fd, line, n);
    (void)written;
    _exit(%(status)d);
}
}  // namespace

extern "C" int pmpp_sandbox_trap(int report_fd) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_refused;
    sa.sa_flags = SA_SIGINFO;
    sigfillset(&sa.sa_mask);
    g_report_fd = report_fd;
    return sigaction(SIGSYS, &sa, nullptr);
}
""" % {"line": REFUSED_LINE, "status": REFUSED_STATUS}


@functools.lru_cache(maxsize=None)
def trap_library():
    """Path of the handler that names a refused system call (built once, cached beside the
    engine's modules), or None if it cannot be built: refusals then end the worker unnamed."""
    import pmpp.backends.cpu.toolchain as toolchain
    try:
        cc = toolchain.cxx()
    except PmppError:
        return None
    key = hashlib.sha256((_TRAP_SOURCE + repr(cc.identity)).encode()).hexdigest()[:16]
    out = toolchain.cache_dir() / f"libpmpp_sandbox-{key}.so"
    if not out.exists():
        tmp = out.with_name(f".{out.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        proc = subprocess.run([*cc.command, "-O2", "-fPIC", "-shared", "-x", "c++", "-", "-o", str(tmp)],
                              input=_TRAP_SOURCE, capture_output=True, text=True)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            return None
        os.replace(tmp, out)
    return str(out)


# ---- the worker's side -----------------------------------------------------------------------

def contain(settings, private_dir, nthreads):
    """In the worker, once its runtime library is loaded: work in ``private_dir``, set the
    limits, install the filter. Returns ``(contained, how or why not)``."""
    sys.dont_write_bytecode = True
    os.chdir(private_dir)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)   # Python ignores it; output past the limit must end the launch
    limits = Limits(**{k: settings[k] for k in ("memory", "cpu_seconds", "output_bytes")})
    _set_limits(limits, nthreads)
    if not settings["seccomp"]:
        return False, settings["reason"]
    try:
        _build_filter(_refusal_action(settings["trap_library"]), os.getpid()).load()
    except OSError as exc:
        return False, f"the seccomp filter could not be installed ({exc})"
    return True, settings["reason"]


def _set_limits(limits, nthreads):
    import resource
    address_space = _mapped_bytes() + nthreads * _thread_reserve() + limits.memory
    for name, soft, hard in (("RLIMIT_AS", address_space, address_space),
                             ("RLIMIT_CPU", limits.cpu_seconds, limits.cpu_seconds + 5),
                             ("RLIMIT_FSIZE", limits.output_bytes, limits.output_bytes),
                             ("RLIMIT_CORE", 0, 0),
                             ("RLIMIT_NOFILE", 64, 64)):
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            pass   # e.g. RLIMIT_AS on macOS; the other limits still hold


def _mapped_bytes():
    """The worker's address space now: the interpreter, its libraries, the runtime, the arena."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 1 << 30


def _thread_reserve():
    """Address space one of the engine's OS threads maps: 1024 fiber stacks, its shared-memory
    arena and shadow, its own stack and a malloc arena."""
    stack = int(os.environ.get("PMPP_CPU_STACK_KB", "256")) * 1024
    return 1024 * (stack + 8192) + (160 << 20)


def _refusal_action(trap_library):
    """Trap, with the handler that names the call; else kill (the refusal is then unnamed)."""
    import ctypes

    import pyseccomp
    if trap_library:
        try:
            if ctypes.CDLL(trap_library).pmpp_sandbox_trap(2) == 0:
                return pyseccomp.TRAP
        except (OSError, AttributeError):
            pass
    return pyseccomp.KILL_PROCESS


def _build_filter(refuse, pid):
    import pyseccomp
    from pyseccomp import EQ, MASKED_EQ, NE, Arg
    flt = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    flt.set_attr(pyseccomp.Attr.CTL_TSYNC, 1)
    flt.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
    with contextlib.suppress(OSError):
        flt.set_attr(pyseccomp.Attr.CTL_OPTIMIZE, 2)   # a binary tree: the unknown-number rules are many

    def rule(action, call, *args):
        number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, call) if isinstance(call, str) else call
        if number >= 0:   # a call this architecture does not have needs no rule
            flt.add_rule(action, number, *args)

    for call in REFUSED:
        rule(refuse, call)
    for call, flags in WRITE_OPENS.items():
        for bit in WRITE_FLAGS:
            rule(refuse, call, Arg(flags, MASKED_EQ, bit, bit))
    rule(refuse, "clone", Arg(0, MASKED_EQ, CLONE_THREAD, 0))   # a thread is fine, a process is not
    for call in OTHER_PROCESS_ARG0:
        rule(refuse, call, Arg(0, NE, pid))
    rule(refuse, "prlimit64", Arg(0, NE, 0))
    rule(refuse, "setpriority", Arg(1, NE, 0))
    for call in NOT_AVAILABLE:
        rule(pyseccomp.ERRNO(errno.ENOSYS), call)
    for number in UNKNOWN_CALLS:
        try:
            pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, number)
        except ValueError:
            rule(pyseccomp.ERRNO(errno.ENOSYS), number)
    for sig in GUARDED_SIGNALS:   # the handlers the limits and the refusals rely on stay
        rule(pyseccomp.ERRNO(errno.EPERM), "rt_sigaction", Arg(0, EQ, sig), Arg(1, NE, 0))
    rule(pyseccomp.ERRNO(errno.EPERM), "prctl", Arg(0, EQ, PR_SET_PDEATHSIG))   # the worker dies with its parent
    return flt
