"""What the CPU engine tells a student: races between blocks on global memory (under check=True),
out-of-bounds accesses named by array and index, compile errors in CUDA's names, and kernels
whose parameters no longer match what the chapter passes.

Kernels live in tests/cpu_kernels/engine_messages.cu; chapter kernels are copied and broken in
tmp_path, as a student's submission would be.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pmpp
from pmpp import runner
from pmpp.backends.cpu import CpuModule
from pmpp.chapters import reduction, scan
from pmpp.errors import CompileError, OutOfBoundsError, RaceError
from pmpp.source import resolve

KERNELS = Path(__file__).parent / "cpu_kernels"
MESSAGES = KERNELS / "engine_messages.cu"
REDUCTION = reduction.CHAPTER
COARSENED = REDUCTION.variant("05_coarsened")
ATOMIC_LINE = "        atomicAdd(output, input_s[0]);"
MANY_BLOCKS = 1 << 20    # 05_coarsened: 512 blocks of 2048 elements


def kernel(name, check=True):
    return pmpp.load(MESSAGES, check=check).get_function(name)


def broken_copy(tmp_path, variant_path, old, new, name="submission.cu"):
    text = resolve(variant_path).read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def verify_coarsened(path, n=MANY_BLOCKS, seed=None):
    return runner.verify(REDUCTION, COARSENED, {**REDUCTION.problems["cpu"], "n": n}, backend="cpu",
                         check=True, path=path, seed=seed)


def forgotten_atomic(tmp_path):
    """05_coarsened with its last step written `*output += input_s[0];`."""
    return broken_copy(tmp_path, REDUCTION.kernel_path(COARSENED), ATOMIC_LINE, "        *output += input_s[0];")


# ---- races between blocks ----------------------------------------------------------------------

def test_forgotten_atomic_add_fails_every_run_naming_the_race(tmp_path):
    path = forgotten_atomic(tmp_path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "*output +=" in text)
    messages = set()
    for seed in range(10):
        with pytest.raises(RaceError) as err:
            verify_coarsened(path, seed=seed)
        messages.add(str(err.value))
    assert len(messages) == 1, messages
    message = messages.pop()
    assert message.startswith("race between blocks in kernel 'CoarsenedSumReductionKernel': blocks (0,0,0) "
                              "and (1,0,0) both access output[0] (argument 'output', 1 float32 element) "
                              "without synchronization (a plain read-modify-write: read at ")
    assert f"{path}:{line}" in message
    assert message.endswith("when several blocks update one location, use atomicAdd (or another atomic "
                            "operation)")


def test_forgotten_atomic_add_fails_its_grading(tmp_path):
    report = pmpp.exercises.grade("reduction/05", forgotten_atomic(tmp_path))
    assert not report.passed
    assert "race between blocks" in str(report) and "use atomicAdd" in str(report)


def test_one_block_alone_does_not_race(tmp_path):
    """At n <= 2048, 05_coarsened runs one block: nothing to race with."""
    assert verify_coarsened(forgotten_atomic(tmp_path), n=1000)


@pytest.mark.parametrize("threads", [1, 3])
def test_race_message_does_not_depend_on_how_many_os_threads_run_the_blocks(threads):
    """A fresh process per thread count (the worker reads PMPP_CPU_THREADS when it starts); the
    message must be the one a single thread gives, blocks (0,0,0) and (1,0,0)."""
    code = ("import numpy as np, pmpp\n"
            f"k = pmpp.load({str(MESSAGES)!r}, check=True).get_function('sum_without_atomic')\n"
            "try:\n"
            "    k(64, 64, (np.ones(4096, np.float32), np.zeros(1, np.float32), 4096))\n"
            "except pmpp.RaceError as e:\n"
            "    print(e)\n")
    env = {**os.environ, "PMPP_CPU_THREADS": str(threads)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("race between blocks in kernel 'sum_without_atomic': blocks (0,0,0) and "
                                  "(1,0,0) both access total[0]")
    assert "engine_messages.cu:10" in done.stdout


def test_atomic_add_fixes_the_race():
    x = np.ones(4096, np.float32)
    total = np.zeros(1, np.float32)
    kernel("sum_with_atomic")(64, 64, (x, total, x.size))
    assert total[0] == x.size


def test_blocks_writing_one_element_race():
    with pytest.raises(RaceError) as err:
        kernel("last_block_wins")(8, 32, (np.zeros(1, np.int32),))
    message = str(err.value)
    assert "blocks (0,0,0) and (1,0,0) both access out[0] (argument 'out', 1 int32 element)" in message
    assert re.search(r"\(both write it: written at \S*engine_messages\.cu:25\)", message)
    assert "let each block write elements of its own" in message


def test_block_reading_what_another_block_writes_races():
    with pytest.raises(RaceError) as err:
        kernel("read_next_blocks_element")(4, 32, (np.ones(128, np.float32),))
    message = str(err.value)
    assert "blocks (0,0,0) and (3,0,0) both access x[0] (argument 'x', 128 float32 elements)" in message
    assert re.search(r"one writes it, the other reads it: written at \S*engine_messages\.cu:31, "
                     r"read at \S*engine_messages\.cu:30", message)


def test_blocks_with_elements_of_their_own_do_not_race(rng):
    x = rng.random(256, dtype=np.float32)
    partials = np.zeros(8, np.float32)
    expected = 2 * x
    kernel("per_block_partials")(8, 32, (x, partials))
    assert np.array_equal(x, expected) and np.array_equal(partials, expected[::32])


@pytest.mark.parametrize("name", ["chain_through_flags", "chain_through_cache_hints"])
def test_values_passed_on_through_atomic_flags_and_volatile_reads_do_not_race(name, rng):
    x = rng.integers(0, 10, 64).astype(np.float32)
    running = np.zeros(64, np.float32)
    kernel(name)(64, 32, (x, running, np.zeros(64, np.uint32)))
    assert np.array_equal(running, np.cumsum(x))


def test_the_same_element_in_two_launches_does_not_race():
    out = np.zeros(1, np.int32)
    k = kernel("last_block_wins")
    k(1, 32, (out,))
    k(1, 32, (out,))
    assert out[0] == 0


@pytest.mark.parametrize("name", ["07_stream_based", "08_decoupled_lookback", "09_vectorized_lookback",
                                  "10_pipelined_lookback"])
def test_single_pass_scans_pass_their_flags_without_a_race(name):
    """Blocks read what earlier blocks published, through volatile loads after atomic flags."""
    variant = scan.CHAPTER.variant(name)
    assert runner.verify(scan.CHAPTER, variant, {**scan.CHAPTER.problems["cpu"], "n": 1 << 17}, backend="cpu",
                         check=True)


def test_one_pass_reduction_reads_the_partials_without_a_race():
    variant = REDUCTION.variant("16_one_pass")
    assert runner.verify(REDUCTION, variant, {**REDUCTION.problems["cpu"], "n": MANY_BLOCKS}, backend="cpu",
                         check=True)


# ---- out-of-bounds accesses, by array and index ------------------------------------------------

def oob_message(name, *extra):
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    with pytest.raises(OutOfBoundsError) as err:
        kernel(name)(1, 64, (x, y, *extra))
    return str(err.value)


def test_shared_read_below_zero_with_an_unsigned_index_is_named_by_index():
    message = oob_message("shared_index_below_zero")
    assert re.search(r"engine_messages\.cu:63, block \(0,0,0\) thread \(0,0,0\): read of 4 bytes at "
                     r"element \[-1\] of __shared__ 's' \(64 float elements\) is out of bounds", message)
    assert "wrapping around to 4294967295" in message


def test_global_read_below_zero_is_named_by_index():
    message = oob_message("global_index_below_zero")
    assert "read of 4 bytes at element [-1] of argument 'x' (64 float32 elements) is out of bounds" in message
    assert "wrapping" not in message


def test_global_read_below_zero_with_an_unsigned_index_is_named_by_index():
    message = oob_message("global_unsigned_index_below_zero")
    assert "at element [-1] of argument 'x' (64 float32 elements) is out of bounds" in message
    assert "its index is unsigned and went below 0, wrapping around to 4294967295" in message


@pytest.mark.parametrize("offset", [1, 20000])
def test_global_read_past_the_end_is_named_by_index_of_that_array(offset):
    """20000 floats past x lies nearer to the start of y than to the end of x: still x[20000]."""
    message = oob_message("global_index_far_past_end", offset)
    thread = 63 if offset == 1 else 0
    assert (f"thread ({thread},0,0): read of 4 bytes at element [{thread + offset}] of argument 'x' "
            "(64 float32 elements) is out of bounds") in message


# ---- compile errors ----------------------------------------------------------------------------

def compile_error(body, name="bad.cu"):
    src = f'#line 1 "{name}"\nextern "C" __global__ void k(float* x) {{\n    {body}\n}}\n'
    with pytest.raises(CompileError) as err:
        CpuModule(src, filename=name, kernel_names=["k"], check=True)
    return err.value


def test_misspelt_syncthreads_suggests_the_cuda_name():
    error = compile_error("__syncthread();")
    message = str(error)
    undeclared = r"(.__syncthread. was not declared in this scope|use of undeclared identifier .__syncthread.)"
    assert re.match(rf"bad\.cu:2: {undeclared}; did you mean .__syncthreads.\?", message)   # g++ | clang
    assert "pmpp" not in message.lower()
    assert message.splitlines()[1] == "    2 |     __syncthread();"
    assert re.fullmatch(r"      \|     \^~*", message.splitlines()[2])


def test_misspelt_syncthreads_in_a_submission_quotes_the_students_file(tmp_path):
    path = broken_copy(tmp_path, REDUCTION.kernel_path(COARSENED), "__syncthreads();", "__syncthread();")
    with pytest.raises(CompileError) as err:
        runner.load_variant(REDUCTION, COARSENED, backend="cpu", check=True, path=path)
    first, quoted = str(err.value).splitlines()[:2]
    assert first.startswith(f"{path}:") and re.search(r"did you mean .__syncthreads.\?$", first)
    assert quoted.endswith("|         __syncthread();")
    assert "pmpp_syncthreads" not in str(err.value)


def test_error_in_a_prelude_call_keeps_its_notes_without_engine_headers():
    message = str(compile_error("double d = 1; atomicAdd(x, d, 3);"))
    lines = message.splitlines()
    assert re.match(r"bad\.cu:2: no matching function for call to .atomicAdd(\(float\*&, double&, int\))?.$", lines[0])
    assert lines[1] == "    2 |     double d = 1; atomicAdd(x, d, 3);"
    candidate = (r"note: candidate: .float atomicAdd\(float\*, float\)."                                 # g++
                 r"|note: candidate function not viable: requires 2 arguments, but 3 were provided")  # clang
    assert any(re.fullmatch(candidate, line) for line in lines)
    assert "pmpp_cuda.h" not in message and "PMPP_" not in message


def test_more_errors_are_counted_after_the_first():
    error = compile_error("x[0] = y; x[1] = z;")
    assert str(error).splitlines()[-1] == "(and 1 more error after this one)"
    assert "‘z’" in error.log or "'z'" in error.log


# ---- parameters that no longer match the chapter ----------------------------------------------

def test_changed_parameter_type_names_the_signature_to_keep(tmp_path):
    path = broken_copy(tmp_path, REDUCTION.kernel_path(COARSENED), "float* output, unsigned int n)",
                       "float* output, int n)")
    with pytest.raises(TypeError) as err:
        verify_coarsened(path, n=1000)
    assert str(err.value) == (
        "the kernel's parameters do not match what the chapter passes: parameter 3 is `int n`, where the "
        "chapter passes an unsigned int (numpy.uint32); keep the signature "
        "`CoarsenedSumReductionKernel(const float* input, float* output, unsigned int n)`")


def test_removed_parameter_names_the_signature_to_keep(tmp_path):
    path = broken_copy(tmp_path, REDUCTION.kernel_path(COARSENED), "float* output, unsigned int n)",
                       "float* output)")
    path.write_text(path.read_text().replace("< n", "< 1000"))
    with pytest.raises(TypeError) as err:
        verify_coarsened(path, n=1000)
    assert str(err.value) == (
        "the kernel's parameters do not match what the chapter passes: CoarsenedSumReductionKernel has 2 "
        "parameters, the chapter passes 3 arguments; keep the signature "
        "`CoarsenedSumReductionKernel(const float* input, float* output, unsigned int n)`")


def test_changed_template_kernel_names_its_instance_signature(tmp_path):
    variant = scan.CHAPTER.variant("07_stream_based")
    path = broken_copy(tmp_path, scan.CHAPTER.kernel_path(variant), "unsigned int* blockCounter, unsigned int n,",
                       "unsigned int* blockCounter, int n,")
    with pytest.raises(TypeError, match=r"parameter 6 is `int n`, where the chapter passes an unsigned int "
                                        r"\(numpy\.uint32\); keep the signature `StreamBasedScan<float>\(const "
                                        r"float\* X, float\* Y, unsigned int\* flags, float\* scanValue, "
                                        r"unsigned int\* blockCounter, unsigned int n, int exclusive\)`"):
        runner.verify(scan.CHAPTER, variant, {**scan.CHAPTER.problems["cpu"], "n": 1000}, backend="cpu",
                      check=True, path=path)


def test_a_direct_launch_with_a_wrong_scalar_keeps_the_advice_for_the_caller():
    k = kernel("sum_with_atomic", check=False)
    with pytest.raises(TypeError, match=r"got a numpy.uint32 scalar but the parameter is int \(numpy.int32\); "
                                        r"pass numpy.int32\(value\)"):
        k(1, 64, (np.ones(64, np.float32), np.zeros(1, np.float32), np.uint32(64)))


def test_a_file_cut_short_names_the_brace_it_never_closes():
    cut = ('extern "C" __global__ void k(float* out, int n) {\n'
           "    char c = '{';   // a brace in a character, and { in a comment, are none\n"
           "    if (threadIdx.x < n) {\n"
           "        out[threadIdx.x] = 1.0f;\n"
           "    }\n")
    with pytest.raises(CompileError) as err:
        pmpp.load(source=cut, filename="cut.cu", backend="cpu")
    assert str(err.value) == "cut.cu:1: this '{' is never closed: the file ends inside it (a missing '}'?)"
    assert (err.value.filename, err.value.line) == ("cut.cu", 1)
