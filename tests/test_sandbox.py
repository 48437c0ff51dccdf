"""The contained CPU-engine worker that grading runs submissions in (pmpp.backends.cpu.sandbox):
hostile kernels (tests/cpu_kernels/hostile/) each get a verdict, and nothing outside changes;
well-behaved kernels run as they do anywhere else."""

import socket
import time
from pathlib import Path

import numpy as np
import pytest

from pmpp.backends.cpu import CpuModule, client, sandbox
from pmpp.errors import OutOfBoundsError

KERNELS = Path(__file__).parent / "cpu_kernels"

needs_sandbox = pytest.mark.skipif(not sandbox.available()[0],
                                   reason=f"no sandbox here: {sandbox.available()[1]}")


@pytest.fixture(autouse=True)
def without_the_device_code_check(monkeypatch):
    """The sandbox is tested on kernels that get past the compile: the device-code check
    (tests/test_device_check.py) refuses most of these host calls before they could run."""
    monkeypatch.setenv("PMPP_DEVICE_CHECK", "0")


def module(name, kernel, *defines, check=False, timeout=30):
    text = f'#line 1 "cpu_kernels/{name}"\n' + (KERNELS / name).read_text()
    return CpuModule(text, filename=f"cpu_kernels/{name}", kernel_names=[kernel],
                     options=[f"-D{d}" for d in defines], check=check, timeout=timeout)


def run(mod, kernel):
    """Launch one thread of ``kernel(int *done)``; return done[0]."""
    done = np.zeros(1, np.int32)
    mod.launch(kernel, (1, 1, 1), (1, 1, 1), 0, [done], ["done"], [True])
    return int(done[0])


def refused(mod, kernel, box):
    """The error a contained launch of ``kernel`` raised; the worker is contained throughout."""
    with pytest.raises(sandbox.SandboxViolation) as err:
        run(mod, kernel)
    assert box.contained, box.reason
    return str(err.value)


# ---- hostile kernels -------------------------------------------------------------------------

@needs_sandbox
def test_writing_a_file_is_refused_and_the_file_never_appears(tmp_path):
    target = tmp_path / "written-by-kernel.txt"
    mod = module("hostile/files.cu", "write_file", f'TARGET="{target}"')
    with sandbox.sandboxed() as box:
        message = refused(mod, "write_file", box)
    assert "tried to open a file for writing (system call openat); graded kernels may not touch files" in message
    assert "kernel 'write_file' (cpu_kernels/hostile/files.cu)" in message
    assert not target.exists()


@needs_sandbox
def test_deleting_a_file_is_refused_and_the_file_stays(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("the grader's")
    mod = module("hostile/files.cu", "delete_file", f'TARGET="{target}"')
    with sandbox.sandboxed() as box:
        message = refused(mod, "delete_file", box)
    assert "tried to create, delete, rename or change a file (system call unlink)" in message
    assert target.read_text() == "the grader's"


@needs_sandbox
@pytest.mark.parametrize("kernel, said", [
    ("exec_shell", "tried to start a process (system call execve); graded kernels may not start processes"),
    ("run_shell", "with signals blocked, as system(), popen() and posix_spawn() do to start a process"),
])
def test_starting_a_process_is_refused_and_it_never_runs(tmp_path, kernel, said):
    target = tmp_path / "touched-by-shell"
    mod = module("hostile/processes.cu", kernel, f'TARGET="{target}"')
    with sandbox.sandboxed() as box:
        message = refused(mod, kernel, box)
    assert said in message
    assert not target.exists()


@needs_sandbox
def test_a_fork_bomb_is_stopped_at_its_first_fork():
    mod = module("hostile/processes.cu", "fork_loop")
    with sandbox.sandboxed() as box:
        message = refused(mod, "fork_loop", box)
    assert "tried to start a process (system call clone)" in message


@needs_sandbox
def test_network_connections_are_refused_and_nothing_arrives():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.5)
        mod = module("hostile/network.cu", "phone_home", f"PORT={server.getsockname()[1]}")
        with sandbox.sandboxed() as box:
            message = refused(mod, "phone_home", box)
        assert "tried to use the network (system call socket); graded kernels may not use the network" in message
        with pytest.raises(socket.timeout):
            server.accept()


@needs_sandbox
def test_allocating_100_gb_ends_at_the_memory_limit():
    mod = module("hostile/resources.cu", "allocate_100gb")
    with sandbox.sandboxed(memory=1 << 30) as box:
        message = refused(mod, "allocate_100gb", box)
    assert "tried to allocate more than the 1 GiB of memory a graded kernel may use" in message


@needs_sandbox
def test_printing_forever_ends_at_the_output_limit_in_seconds(capsys):
    mod = module("hostile/resources.cu", "print_forever", timeout=20)
    start = time.monotonic()
    with sandbox.sandboxed(output_bytes=1 << 20) as box:
        message = refused(mod, "print_forever", box)
    assert time.monotonic() - start < 10
    assert "printed more than 1 MiB, the most a graded kernel may print in one launch" in message
    shown = capsys.readouterr().out
    assert shown.startswith("line 0 of a kernel that prints forever\n")
    assert len(shown) < sandbox.SHOWN_OUTPUT + 200
    assert shown.rstrip().endswith("more bytes of the kernel's output not shown]")


@needs_sandbox
def test_after_a_refusal_the_next_launch_runs_in_a_new_contained_worker(tmp_path):
    hostile = module("hostile/files.cu", "write_file", f'TARGET="{tmp_path / "x"}"')
    benign = module("indexing.cu", "vec_add")
    a, b, c = np.arange(300, dtype=np.float32), np.ones(300, np.float32), np.zeros(300, np.float32)
    with sandbox.sandboxed() as box:
        refused(hostile, "write_file", box)
        benign.launch("vec_add", (3, 1, 1), (128, 1, 1), 0, [a, b, c, np.int32(300)],
                      ["a", "b", "c", "n"], [False, False, True, False])
        assert box.contained
    np.testing.assert_array_equal(c, a + b)
    assert not (tmp_path / "x").exists()


# ---- well-behaved kernels --------------------------------------------------------------------

@needs_sandbox
def test_contained_launches_keep_threads_checks_and_messages():
    """Blocks on several OS threads, modules loaded after the filter (one library twice: its
    second copy is made by the parent), a checked build whose error names the source line."""
    n = 1000
    x = np.random.default_rng().random(n, np.float32)
    plain = module("indexing.cu", "vec_add")
    again = module("indexing.cu", "vec_add")
    checked = module("bugs.cu", "read_past_end", check=True)
    with sandbox.sandboxed() as box:
        for mod in (plain, again):
            out = np.zeros(n, np.float32)
            mod.launch("vec_add", (8, 1, 1), (128, 1, 1), 0, [x, x, out, np.int32(n)],
                       ["a", "b", "c", "n"], [False, False, True, False])
            np.testing.assert_array_equal(out, x + x)
        with pytest.raises(OutOfBoundsError, match=r"^kernel 'read_past_end' at cpu_kernels/bugs.cu:4, block"):
            checked.launch("read_past_end", (4, 1, 1), (256, 1, 1), 0, [x, np.zeros(n, np.float32), np.int32(n)],
                           ["input", "output", "n"], [False, True, False])
        worker = client.client()
        assert worker.limits is not None and worker.proc.poll() is None
    assert box.contained, box.reason
    assert str(box).startswith("contained: a seccomp filter refuses file writes, processes and the network")
    assert client.client() is not worker   # outside the block: the process's own worker again


def test_where_no_sandbox_is_available_the_worker_runs_and_says_so(monkeypatch):
    monkeypatch.setattr(sandbox, "available", lambda: (False, "pyseccomp is not installed (pip install pyseccomp)"))
    mod = module("indexing.cu", "vec_add")
    a = np.arange(10, dtype=np.float32)
    c = np.zeros(10, np.float32)
    with sandbox.sandboxed() as box:
        mod.launch("vec_add", (1, 1, 1), (32, 1, 1), 0, [a, a, c, np.int32(10)],
                   ["a", "b", "c", "n"], [False, False, True, False])
    np.testing.assert_array_equal(c, 2 * a)
    assert (box.contained, box.reason) == (False, "pyseccomp is not installed (pip install pyseccomp)")
    assert str(box) == "not contained: pyseccomp is not installed (pip install pyseccomp)"


class RunsCode:
    def __reduce__(self):
        return (print, ("ran in the grader",))


def test_a_forged_reply_cannot_run_code_in_the_grader():
    """A kernel can write to the reply pipe; what it writes is read as plain values or not at all."""
    import io
    import pickle
    with pytest.raises(pickle.UnpicklingError, match="the worker sent an object of builtins.print"):
        client._PlainValues(io.BytesIO(pickle.dumps(("ok", RunsCode())))).load()


@pytest.mark.parametrize("request_kind, reply, ok", [
    ("load", ("ok", {"k": [8, 4]}), True),
    ("load", ("ok", None), False),
    ("launch", ("ok", None), True),
    ("launch", ("error", 2, "a race"), True),
    ("launch", ("ok",), False),
    ("symbol", ("too_big", 16), True),
    ("init", 5, False),
])
def test_replies_of_the_wrong_shape_are_refused(request_kind, reply, ok):
    assert client._well_formed(request_kind, reply) is ok
