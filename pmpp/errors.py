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
    """Two threads of a block touched the same shared address between barriers (for two lanes of one
    warp: with no ``__syncwarp()`` or other warp primitive of both between them), one writing; or two
    blocks of a launch touched the same element of an argument array with plain loads and stores,
    one writing (``*sum += partial`` where an ``atomicAdd`` is needed)."""


class BarrierDivergenceError(KernelCheckError):
    """Some threads of a block reached a barrier that others skipped or exited before."""


class KernelCrashError(PmppError):
    """The kernel crashed (segfault, abort, device-side assert)."""


class KernelTimeoutError(PmppError):
    """The kernel did not finish within its time limit."""


class ExerciseNotImplemented(PmppError):
    """A variant's kernel file still holds a stub (a student release): there is nothing to run yet.
    Either the variant is an exercise, or it builds on one: a later variant that repeats part of
    an exercise's answer holds that part as a stub until the answer is released. The message
    names the file to write and the ``pmpp grade`` command.

    ``own``: whether the file holds its own exercise's stub; ``builds_on``: the exercises whose
    answers it holds as stubs besides its own (see :func:`pmpp.exercises.require_implemented`)."""

    def __init__(self, exercise: str, path, builds_on=(), own=True):
        others = [name for name in builds_on if name != exercise]
        parts = " and ".join(others)
        if own or not others:
            message = f"exercise: implement {path}, then run `pmpp grade {exercise}`"
            if others:
                message += f" (it also holds part of {parts}'s answer, stubbed until released)"
        else:
            message = (f"skipped {exercise}: it builds on exercise {parts}, whose answer it holds as a "
                       f"stub until released (or put your own answer in {path}); implement "
                       + " and ".join(f"kernels/{name}.cu" for name in others) + ", then run "
                       + " and ".join(f"`pmpp grade {name}`" for name in others))
        super().__init__(message)
        self.exercise = exercise
        self.path = path
        self.builds_on = others
        self.is_exercise = own or not others     # False: a variant that builds on exercises
