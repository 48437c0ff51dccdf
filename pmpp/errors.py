"""Exceptions raised by pmpp. Each message says what went wrong and what to do next."""


class PmppError(Exception):
    """Base class of every pmpp error."""


class BackendUnavailableError(PmppError, RuntimeError):
    """The requested backend cannot run on this machine (no GPU, no CuPy, no C++ compiler)."""


class CompileError(PmppError):
    """A kernel failed to compile. The message names the .cu file and line and carries the log."""

    def __init__(self, message, *, filename=None, line=None, log=""):
        super().__init__(message)
        self.filename = filename
        self.line = line
        self.log = log


class KernelCheckError(PmppError):
    """A checked launch (``check=True`` on the CPU engine) found a bug in the kernel."""


class OutOfBoundsError(KernelCheckError):
    """A read or write outside a kernel-argument array or a ``__shared__`` array."""


class RaceError(KernelCheckError):
    """Two threads of a block touched the same shared address between barriers, one writing."""


class BarrierDivergenceError(KernelCheckError):
    """Some threads of a block reached a barrier that others skipped or exited before."""


class KernelCrashError(PmppError):
    """The kernel crashed (segfault, abort, device-side assert)."""


class KernelTimeoutError(PmppError):
    """The kernel did not finish within its time limit."""


class ExerciseNotImplemented(PmppError):
    """A variant that is an exercise still holds its stub (a student release): there is nothing to
    run yet. The message names the file to write and the ``pmpp grade`` command."""

    def __init__(self, exercise: str, path):
        super().__init__(f"exercise: implement {path}, then run `pmpp grade {exercise}`")
        self.exercise = exercise
        self.path = path
