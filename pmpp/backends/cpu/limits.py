"""Kernel code compiled under limits (:class:`CompileLimits`): the compiler runs in a process
group of its own with standard input from /dev/null, limits on CPU time, memory and file size,
and a wall-clock timeout that stops the whole group.
"""

import functools
import os
import re
import resource
import select
import signal
import subprocess
import tempfile
from dataclasses import dataclass

from pmpp.errors import CompileError

from pmpp.backends.cpu.toolchain import cxx

@dataclass(frozen=True)
class CompileLimits:
    """What one g++ run on kernel code may use: ``wall_seconds`` before it is stopped,
    ``cpu_seconds`` of CPU per process, ``memory`` (bytes of address space per process) and
    ``file_size`` (bytes of the largest file it may write, its log included)."""
    wall_seconds: float = 120
    cpu_seconds: int = 60
    memory: int = 4 << 30
    file_size: int = 1 << 30

    @classmethod
    def from_environment(cls):
        """The defaults, overridden by $PMPP_COMPILE_TIMEOUT and $PMPP_COMPILE_CPU (seconds),
        $PMPP_COMPILE_MEMORY_MB and $PMPP_COMPILE_FILE_MB."""
        return cls(wall_seconds=_setting("PMPP_COMPILE_TIMEOUT", cls.wall_seconds),
                   cpu_seconds=max(1, round(_setting("PMPP_COMPILE_CPU", cls.cpu_seconds))),
                   memory=int(_setting("PMPP_COMPILE_MEMORY_MB", cls.memory >> 20)) << 20,
                   file_size=int(_setting("PMPP_COMPILE_FILE_MB", cls.file_size >> 20)) << 20)


def _setting(name, default):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"${name} must be a positive number, not {text!r}: set it to one or unset it")
    return value


_LOG_READ = 4 << 20   # of g++'s output, read back for the message


def run_limited(cmd, cwd, filename, limits=None, tool=None):
    """(exit status, output) of g++ command ``cmd`` run on kernel code under ``limits`` (default:
    from the environment), in a process group of its own with standard input from /dev/null.
    Raises CompileError, naming ``filename``, when it is stopped by the timeout or a limit."""
    limits = limits or CompileLimits.from_environment()
    # The output goes to a file, not a pipe, so that RLIMIT_FSIZE bounds it as well.
    with tempfile.TemporaryFile(dir=cwd) as out:
        status = _run_group(cmd, cwd, out, limits)
        out.seek(0)
        log = out.read(_LOG_READ).decode(errors="replace")
    stopped = _limit_reached(status, log, limits, filename, tool)
    if stopped:
        raise CompileError(stopped, filename=filename, log=log)
    return status, log


def _run_group(cmd, cwd, out, limits):
    """Exit status of ``cmd``, run as a process group of its own under ``limits`` with its output
    to file ``out``, or None when it ran out of time. No process of the group outlives the call."""
    # The child writes its pid (the group's id) to ``alive`` before g++ starts, and every process
    # of the group inherits the write end: it reads end-of-file once all of them have exited.
    alive, alive_w = os.pipe()
    try:
        return subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              pass_fds=(alive_w,), start_new_session=True, timeout=limits.wall_seconds,
                              preexec_fn=functools.partial(_enter_limits, limits, alive_w)).returncode
    except subprocess.TimeoutExpired:
        return None   # the driver is killed; its cc1plus and as are not
    finally:
        os.close(alive_w)
        _stop_group(alive)


def _enter_limits(limits, alive_w):
    """In the child, before g++ starts (its cc1plus and as inherit the limits). The CPU limit's
    soft part sends SIGXCPU, which g++ reports by name; the hard one a second later kills."""
    os.write(alive_w, os.getpid().to_bytes(8, "little"))
    for which, soft, hard in ((resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1),
                              (resource.RLIMIT_AS, limits.memory, limits.memory),
                              (resource.RLIMIT_FSIZE, limits.file_size, limits.file_size),
                              (resource.RLIMIT_CORE, 0, 0)):
        try:
            outer = resource.getrlimit(which)[1]
            if outer != resource.RLIM_INFINITY:   # a lower hard limit set from outside stays
                soft, hard = min(soft, outer), min(hard, outer)
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            pass   # e.g. RLIMIT_AS on macOS: the other limits still hold


def _stop_group(alive, wait_s=5):
    """Kill what is left of the process group whose pid and liveness ``alive`` carries, and wait
    (at most ``wait_s``) until every process of it has exited; close ``alive``."""
    try:
        group = int.from_bytes(os.read(alive, 8), "little")
        still_running = not select.select([alive], [], [], 0)[0]   # then the group id is still taken
        if group and still_running:
            os.killpg(group, signal.SIGKILL)
            select.select([alive], [], [], wait_s)
    except (ProcessLookupError, PermissionError):
        pass   # the group ended meanwhile
    finally:
        os.close(alive)


def _size(nbytes):
    return f"{nbytes / (1 << 30):g} GiB" if nbytes >= 1 << 30 else f"{nbytes >> 20} MiB"


# g++'s own lines (never a quote of the student's code, which starts with a line number and "|")
_OUT_OF_MEMORY = re.compile(r"^(?:[\w+.-]+: )?(?:out of memory allocating|virtual memory exhausted)"
                            r"|^terminate called after throwing an instance of 'std::bad_alloc'", re.M)
_TOOL_KILLED = re.compile(r"^[\w+.-]+: (?:fatal error|internal compiler error): .*?"
                          r"(?P<why>CPU time limit exceeded|File size limit exceeded|Killed)", re.M)


def _limit_reached(status, log, limits, filename, tool=None):
    """What stopped the compiler (``tool``, default the C++ compiler), in words for the student, or
    None when it ran to its end."""
    if status == 0:
        return None
    cc = tool or cxx().name
    killed = _TOOL_KILLED.search(log)
    why = killed.group("why") if killed else None
    if status is None:
        return (f"{cc} did not finish compiling {filename} within {limits.wall_seconds:g} s (an #include "
                f"of a device file such as /dev/zero, or a template or constexpr that never ends?) "
                f"and was stopped. Look for such code; if the code is right and only slow to compile, "
                f"raise $PMPP_COMPILE_TIMEOUT (seconds).")
    if _OUT_OF_MEMORY.search(log):
        return (f"{cc} ran out of memory compiling {filename} (limit {_size(limits.memory)}: an #include of "
                f"a device file such as /dev/zero, or templates or constexpr values that grow without "
                f"end?) and was stopped. Look for such code; if the code is right, raise "
                f"$PMPP_COMPILE_MEMORY_MB.")
    if why == "CPU time limit exceeded" or status == -signal.SIGXCPU:
        return (f"{cc} used more than {limits.cpu_seconds} s of CPU time compiling {filename} (a template "
                f"or constexpr that never ends?) and was stopped. Look for such code; if the code is "
                f"right and only slow to compile, raise $PMPP_COMPILE_CPU (seconds).")
    if why == "File size limit exceeded" or status == -signal.SIGXFSZ:
        return (f"{cc} would write a file larger than {_size(limits.file_size)} compiling {filename} (a "
                f"huge initialized array, or an endless stream of error messages?) and was stopped. "
                f"Make the array smaller or fix the first errors; if the code is right, raise "
                f"$PMPP_COMPILE_FILE_MB.")
    if why == "Killed" or status == -signal.SIGKILL:
        return (f"{cc} was killed compiling {filename} (out of CPU time or memory: a template or constexpr "
                f"that never ends?). Look for such code; the limits are $PMPP_COMPILE_CPU and "
                f"$PMPP_COMPILE_MEMORY_MB.")
    return None
